package storetest

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/store"
)

func gadgets(s *store.Store) *store.Collection[widget] {
	return store.NewCollection(s, "gadgets", store.JSON[widget]())
}

// sharedPair returns a shared watch over the whole store fed into a cache of
// widgets and one of gadgets, each with a change log; the shared watch runs for
// the rest of the test.
func sharedPair(t *testing.T, s *store.Store) (w, g *store.Cache[widget], wlog, glog *changeLog) {
	t.Helper()
	wlog, glog = &changeLog{}, &changeLog{}
	st := store.NewSharedWatch(s, "")
	w = store.NewCache(widgets(s), store.WithSharedWatch(st), store.WithOnChange(wlog.record))
	g = store.NewCache(gadgets(s), store.WithSharedWatch(st), store.WithOnChange(glog.record))
	Go(t, st.Run)
	select {
	case <-st.Synced():
	case <-time.After(waitTimeout):
		t.Fatalf("shared watch not synced after %s", waitTimeout)
	}
	waitSynced(t, w)
	waitSynced(t, g)
	return w, g, wlog, glog
}

// testSharedWatchRead: a shared watch lists and watches its members' collections,
// hands each member its own changes only, skips keys no member holds, and
// brings every member to the revision of each batch, also of a batch
// that changed another member or none.
func testSharedWatchRead(t *testing.T, s *store.Store) {
	ctx := testCtx(t)
	ws, gs := widgets(s), gadgets(s)
	if _, err := ws.Create(ctx, "a", &widget{Color: "red"}); err != nil {
		t.Fatal(err)
	}
	if _, err := gs.Create(ctx, "a", &widget{Color: "blue"}); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, "loose", "not a member's")
	w, g, wlog, glog := sharedPair(t, s)
	wlog.waitBatches(t, []string{"a ∅→red"})
	glog.waitBatches(t, []string{"a ∅→blue"})

	if err := w.Run(ctx); err == nil || !strings.Contains(err.Error(), "shared watch") {
		t.Errorf("Run of a cache fed by a shared watch: got %v; want an error naming the shared watch", err)
	}

	rev, err := gs.Put(ctx, "b", &widget{Color: "green"})
	if err != nil {
		t.Fatal(err)
	}
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// The widgets never change: the shared watch alone brings them there.
	if err := w.WaitForRev(wait, rev); err != nil {
		t.Fatalf("widgets WaitForRev(%d) of a gadget's write: %v", rev, err)
	}
	glog.waitBatches(t, []string{"a ∅→blue"}, []string{"b ∅→green"})
	loose := mustPut(t, s, "loose", "again")
	if err := g.WaitForRev(wait, loose); err != nil {
		t.Fatalf("gadgets WaitForRev(%d) of a key no member holds: %v", loose, err)
	}
	if got := names(w.List()); !slices.Equal(got, []string{"a"}) {
		t.Errorf("widgets = %q; want [a]", got)
	}
	if got := names(g.List()); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("gadgets = %q; want [a b]", got)
	}
	wlog.waitBatches(t, []string{"a ∅→red"}) // no empty batches
}

// testSharedWatchWaitOutside waits for a write outside the shared watch's prefix,
// which only a progress notification reports.
func testSharedWatchWaitOutside(t *testing.T, s *store.Store) {
	st := store.NewSharedWatch(s, "in/")
	c := store.NewCache(store.NewCollection(s, "in/widgets", store.JSON[widget]()), store.WithSharedWatch(st))
	Go(t, st.Run)
	waitSynced(t, c)
	rev := mustPut(t, s, "out", "v")
	ctx, cancel := context.WithTimeout(testCtx(t), 10*time.Second)
	defer cancel()
	if err := c.WaitForRev(ctx, rev); err != nil {
		t.Fatalf("WaitForRev(%d) for a write outside the shared watch: %v", rev, err)
	}
}

// testSharedWatchJoin: NewCache refuses a shared watch it cannot join.
func testSharedWatchJoin(t *testing.T, s *store.Store) {
	other := store.New(s.Client(), s.Prefix()+"other/")
	st := store.NewSharedWatch(s, "in/")
	for _, tc := range []struct {
		name string
		coll *store.Collection[widget]
	}{
		{"outside the prefix", widgets(s)},
		{"another store", store.NewCollection(other, "in/widgets", store.JSON[widget]())},
		{"within a member", store.NewCollection(s, "in/a/b", store.JSON[widget]())},
	} {
		if tc.name == "within a member" {
			store.NewCache(store.NewCollection(s, "in/a", store.JSON[widget]()), store.WithSharedWatch(st))
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewCache %s: no panic; want one", tc.name)
				}
			}()
			store.NewCache(tc.coll, store.WithSharedWatch(st))
		}()
	}
}

// testSharedWatchRelist: after compaction the shared watch relists, and each member
// gets the difference of its own collection.
func testSharedWatchRelist(t *testing.T, s *store.Store) {
	ctx := testCtx(t)
	ps, px := throughProxy(t, s)
	ws, gs := widgets(s), gadgets(s)
	if _, err := ws.Create(ctx, "a", &widget{Color: "red"}); err != nil {
		t.Fatal(err)
	}
	w, g, wlog, glog := sharedPair(t, ps)
	wlog.waitBatches(t, []string{"a ∅→red"})

	cut(t, px, ps)
	if _, err := ws.Put(ctx, "a", &widget{Color: "blue"}); err != nil {
		t.Fatal(err)
	}
	if _, err := gs.Create(ctx, "b", &widget{Color: "green"}); err != nil {
		t.Fatal(err)
	}
	rev := compact(t, s)
	px.Restore()

	wlog.waitBatches(t, []string{"a ∅→red"}, []string{"a red→blue"})
	glog.waitBatches(t, []string{"b ∅→green"})
	if err := w.WaitForRev(ctx, rev); err != nil {
		t.Fatal(err)
	}
	if err := g.WaitForRev(ctx, rev); err != nil {
		t.Fatal(err)
	}
}

// testSharedWatchWaitCurrent: once WaitCurrent returns, every member is
// at least at the revision of every write that committed before it was
// called, another client's included, in the members' collections or
// not, and Revision is at least that revision.
func testSharedWatchWaitCurrent(t *testing.T, s *store.Store) {
	st := store.NewSharedWatch(s, "")
	w := store.NewCache(widgets(s), store.WithSharedWatch(st))
	g := store.NewCache(gadgets(s), store.WithSharedWatch(st))
	Go(t, st.Run)
	waitSynced(t, w)
	waitSynced(t, g)
	other := store.New(s.Client(), s.Prefix())
	mustPut(t, other, "widgets/a", `{"color":"red"}`)
	rev := mustPut(t, other, "elsewhere", "v")
	ctx, cancel := context.WithTimeout(testCtx(t), 10*time.Second)
	defer cancel()
	cur, err := s.Revision(ctx)
	if err != nil {
		t.Fatalf("Revision: %v", err)
	}
	if cur < rev {
		t.Errorf("Revision() = %d; want at least %d, the last write's", cur, rev)
	}
	if err := st.WaitCurrent(ctx); err != nil {
		t.Fatalf("WaitCurrent: %v", err)
	}
	for _, c := range []interface{ Rev() int64 }{w, g} {
		if got := c.Rev(); got < rev {
			t.Errorf("a member at revision %d after WaitCurrent; want at least %d", got, rev)
		}
	}
	if _, ok := w.Get("a"); !ok {
		t.Errorf("widgets cache lacks a, written before WaitCurrent")
	}
}
