package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stratahq/strata/internal/store"
)

// widget is the suite's object type.
type widget struct {
	Color string `json:"color"`
	Count int    `json:"count"`
}

func widgets(s *store.Store) *store.Collection[widget] {
	return store.NewCollection(s, "widgets", store.JSON[widget]())
}

func names[T any](items []store.Item[T]) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.Name
	}
	return out
}

func testCollectionCRUD(t *testing.T, s *store.Store) {
	ctx := testCtx(t)
	c := widgets(s)
	if got, want := c.Prefix(), "widgets/"; got != want {
		t.Errorf("Prefix() = %q; want %q", got, want)
	}
	if got, want := c.Key("t1/x"), "widgets/t1/x"; got != want {
		t.Errorf("Key(t1/x) = %q; want %q", got, want)
	}
	if got, want := c.Name(c.Key("t1/x")), "t1/x"; got != want {
		t.Errorf("Name(Key(t1/x)) = %q; want %q", got, want)
	}

	created, err := c.Create(ctx, "t1/x", &widget{Color: "red"})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	_, err = c.Create(ctx, "t1/x", &widget{Color: "blue"})
	wantTxnErr(t, err, store.ErrExists, "widgets/t1/x")

	it, err := c.Get(ctx, "t1/x")
	if err != nil || it.Name != "t1/x" || it.Value.Color != "red" || it.CreateRevision != created || it.ModRevision != created {
		t.Fatalf("Get = %+v (value %+v), %v; want t1/x red created at %d", it, it.Value, err, created)
	}
	if raw := mustGet(t, s, "widgets/t1/x"); string(raw.Value) != `{"color":"red","count":0}` {
		t.Errorf("stored JSON = %s; want %s", raw.Value, `{"color":"red","count":0}`)
	}

	_, err = c.Update(ctx, "t1/x", &widget{Color: "green"}, created-1)
	wantTxnErr(t, err, store.ErrConflict, "widgets/t1/x")
	updated, err := c.Update(ctx, "t1/x", &widget{Color: "green"}, created)
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	put, err := c.Put(ctx, "t1/x", &widget{Color: "blue"})
	if err != nil || put <= updated {
		t.Fatalf("Put = %d, %v; want a revision after %d", put, err, updated)
	}
	_, err = c.Delete(ctx, "t1/x", updated)
	wantTxnErr(t, err, store.ErrConflict, "widgets/t1/x")
	if _, err := c.Delete(ctx, "t1/x", put); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := c.Get(ctx, "t1/x"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get after Delete: err = %v; want ErrNotFound", err)
	}
	_, err = c.Delete(ctx, "t1/x", 0)
	wantTxnErr(t, err, store.ErrNotFound, "widgets/t1/x")

	for name, err := range map[string]error{
		"Create with empty name": func() error { _, err := c.Create(ctx, "", &widget{}); return err }(),
		"Create with nil value":  func() error { _, err := c.Create(ctx, "n", nil); return err }(),
		"Get with empty name":    func() error { _, err := c.Get(ctx, ""); return err }(),
	} {
		if err == nil {
			t.Errorf("%s: no error; want one", name)
		}
	}
}

func testCollectionList(t *testing.T, s *store.Store) {
	ctx := testCtx(t)
	c := widgets(s)
	var want []string
	txn := s.Txn()
	for _, tenant := range []string{"t1", "t2"} {
		for i := range 6 {
			name := fmt.Sprintf("%s/w%02d", tenant, i)
			want = append(want, name)
			if err := c.TxnCreate(txn, name, &widget{Count: i}); err != nil {
				t.Fatal(err)
			}
		}
	}
	rev := mustCommit(t, txn)
	mustPut(t, s, "widgetsx/t1/w99", "{}") // a sibling prefix

	var (
		got   []string
		pages int
		opts  = store.ListOptions{Limit: 5}
	)
	for {
		page, err := c.List(ctx, opts)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		pages++
		got = append(got, names(page.Items)...)
		if page.Continue == "" {
			break
		}
		opts.Continue = page.Continue
	}
	if !slices.Equal(got, want) || pages != 3 {
		t.Errorf("List in pages of 5 = %q in %d pages; want %q in 3", got, pages, want)
	}

	all, allRev, err := c.ListAll(ctx)
	if err != nil || !slices.Equal(names(all), want) || allRev < rev {
		t.Errorf("ListAll = %q at %d, %v; want %q at >= %d", names(all), allRev, err, want, rev)
	}
	t1, _, err := c.ListPrefix(ctx, "t1/")
	if err != nil || !slices.Equal(names(t1), want[:6]) {
		t.Errorf("ListPrefix(t1/) = %q, %v; want %q", names(t1), err, want[:6])
	}
	if len(all) > 3 && all[3].Value.Count != 3 {
		t.Errorf("%s count = %d; want 3", all[3].Name, all[3].Value.Count)
	}
}

// gadget is a second type so that a transaction spans collections.
type gadget struct {
	Size int `json:"size"`
}

// failCodec cannot marshal anything.
type failCodec struct{}

func (failCodec) Marshal(*gadget) ([]byte, error) { return nil, errors.New("marshal failed") }
func (failCodec) Unmarshal([]byte, *gadget) error { return errors.New("unmarshal failed") }

func testCollectionTxn(t *testing.T, s *store.Store) {
	ctx := testCtx(t)
	ws := widgets(s)
	gs := store.NewCollection(s, "gadgets/", store.JSON[gadget]())

	txn := s.Txn()
	if err := ws.TxnCreate(txn, "a", &widget{Color: "red"}); err != nil {
		t.Fatal(err)
	}
	if err := gs.TxnCreate(txn, "a", &gadget{Size: 1}); err != nil {
		t.Fatal(err)
	}
	rev := mustCommit(t, txn)
	w, err1 := ws.Get(ctx, "a")
	g, err2 := gs.Get(ctx, "a")
	if err1 != nil || err2 != nil || w.CreateRevision != rev || g.CreateRevision != rev {
		t.Fatalf("after one txn: widget %+v (%v), gadget %+v (%v); want both created at %d", w, err1, g, err2, rev)
	}

	// A stale widget update fails the gadget write with it.
	txn = s.Txn()
	_ = ws.TxnUpdate(txn, "a", &widget{Color: "blue"}, rev-1)
	_ = gs.TxnPut(txn, "a", &gadget{Size: 2})
	gs.TxnDelete(txn, "b", 0)
	_, err := txn.Commit(ctx)
	wantTxnErr(t, err, store.ErrConflict, ws.Key("a"))
	if g, _ := gs.Get(ctx, "a"); g.Value.Size != 1 {
		t.Errorf("gadget size = %d after the failed txn; want 1", g.Value.Size)
	}

	// A marshal error is returned and also fails the commit, in case the
	// caller ignored it.
	bad := store.NewCollection(s, "bad/", store.Codec[gadget](failCodec{}))
	txn = s.Txn()
	if err := bad.TxnPut(txn, "x", &gadget{}); err == nil {
		t.Errorf("TxnPut with a failing codec: no error; want one")
	}
	_ = gs.TxnPut(txn, "c", &gadget{})
	before := currentRev(t, s)
	if _, err := txn.Commit(ctx); err == nil {
		t.Errorf("Commit after a marshal error: no error; want one")
	}
	wantUnchanged(t, s, before)
}

func testCollectionDecodeError(t *testing.T, s *store.Store) {
	ctx := testCtx(t)
	c := widgets(s)
	mustPut(t, s, c.Key("bad"), "{not json")
	if _, err := c.Put(ctx, "good", &widget{Color: "red"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "bad"); err == nil || errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get(bad) err = %v; want a decode error", err)
	}
	all, _, err := c.ListAll(ctx)
	if err != nil || !slices.Equal(names(all), []string{"good"}) {
		t.Errorf("ListAll = %q, %v; want [good] (bad skipped)", names(all), err)
	}
}

// testModifyConcurrent has 8 writers increment one counter 50 times each.
func testModifyConcurrent(t *testing.T, s *store.Store) {
	const writers, increments = 8, 50
	ctx := testCtx(t)
	c := widgets(s)
	if _, err := c.Create(ctx, "counter", &widget{}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range increments {
				if _, err := c.Modify(ctx, "counter", func(v *widget) error { v.Count++; return nil }); err != nil {
					t.Errorf("writer %d, increment %d: %v", w, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	it, err := c.Get(ctx, "counter")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := it.Value.Count, writers*increments; got != want {
		t.Errorf("counter = %d; want %d", got, want)
	}
}

func testModifyOutcomes(t *testing.T, s *store.Store) {
	ctx := testCtx(t)
	c := widgets(s)
	rev, err := c.Create(ctx, "w", &widget{Color: "red", Count: 1})
	if err != nil {
		t.Fatal(err)
	}

	it, err := c.Modify(ctx, "w", func(v *widget) error { v.Color = "blue"; return nil })
	if err != nil || it.Value.Color != "blue" || it.ModRevision <= rev || it.CreateRevision != rev {
		t.Fatalf("Modify = %+v (value %+v), %v; want blue, modified after %d", it, it.Value, err, rev)
	}
	if stored, _ := c.Get(ctx, "w"); stored.ModRevision != it.ModRevision || stored.Value.Color != "blue" {
		t.Errorf("stored = %+v (value %+v); want what Modify returned", stored, stored.Value)
	}

	before := currentRev(t, s)
	noop, err := c.Modify(ctx, "w", func(v *widget) error {
		v.Color = "scribbled" // changed, then abandoned
		return store.ErrNoChange
	})
	if err != nil || noop.ModRevision != it.ModRevision || noop.Value.Color != "blue" {
		t.Errorf("Modify with ErrNoChange = %+v (value %+v), %v; want the stored blue at %d", noop, noop.Value, err, it.ModRevision)
	}
	wantUnchanged(t, s, before)

	boom := errors.New("boom")
	if _, err := c.Modify(ctx, "w", func(*widget) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("Modify with failing fn: err = %v; want %v", err, boom)
	}
	wantUnchanged(t, s, before)

	if _, err := c.Modify(ctx, "missing", func(*widget) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Modify(missing): err = %v; want ErrNotFound", err)
	}
}
