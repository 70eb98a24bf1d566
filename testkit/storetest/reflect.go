package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/store"
)

// reflect runs s.Reflect(prefix) into a new Recorder for the rest of the
// test and waits for the initial list.
func reflect(t *testing.T, s *store.Store, prefix string) (*Recorder, func() error) {
	t.Helper()
	rec := NewRecorder()
	stop := Go(t, func(ctx context.Context) error { return s.Reflect(ctx, prefix, rec) })
	Eventually(t, waitTimeout, func() error {
		if n := len(rec.Replaces()); n != 1 {
			return fmt.Errorf("Replace calls = %d; want 1", n)
		}
		return nil
	})
	t.Cleanup(func() { rec.Check(t) })
	return rec, stop
}

func testReflectListAndWatch(t *testing.T, s *store.Store) {
	ctx := testCtx(t)
	mustPut(t, s, "r/a", "1")
	mustPut(t, s, "r/b", "1")
	mustPut(t, s, "rx", "outside")
	rec, _ := reflect(t, s, "r/")
	if err := rec.WantState(map[string]string{"r/a": "1", "r/b": "1"})(); err != nil {
		t.Errorf("after the initial list: %v", err)
	}

	mustPut(t, s, "r/a", "2")
	if _, err := s.Delete(ctx, "r/b", 0); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, "rx", "outside again")
	txnRev := mustCommit(t, s.Txn().Create("r/c", []byte("1")).Put("r/d", []byte("1")))
	Eventually(t, waitTimeout, rec.WantState(map[string]string{"r/a": "2", "r/c": "1", "r/d": "1"}))

	type ev struct {
		typ      store.EventType
		key, val string
		atTxnRev bool
	}
	want := []ev{
		{store.EventPut, "r/a", "2", false},
		{store.EventDelete, "r/b", "", false},
		{store.EventPut, "r/c", "1", true},
		{store.EventPut, "r/d", "1", true},
	}
	events := rec.Events()
	if len(events) != len(want) {
		t.Fatalf("got %d events %+v; want %d", len(events), events, len(want))
	}
	for i, w := range want {
		e := events[i]
		if e.Type != w.typ || e.KV.Key != w.key || string(e.KV.Value) != w.val ||
			(w.atTxnRev && e.KV.ModRevision != txnRev) {
			t.Errorf("event %d = %s %s=%q at %d; want %s %s=%q",
				i, e.Type, e.KV.Key, e.KV.Value, e.KV.ModRevision, w.typ, w.key, w.val)
		}
	}
	if n := len(rec.Replaces()); n != 1 {
		t.Errorf("Replace calls = %d; want 1 (no relist)", n)
	}
}

// testReflectResume cuts the reflector's connection while writes happen:
// after reconnecting it must deliver them from where it stopped, without a
// relist and without repeats.
func testReflectResume(t *testing.T, s *store.Store) {
	ps, px := throughProxy(t, s)
	mustPut(t, s, "r/a", "1")
	rec, _ := reflect(t, ps, "r/")
	mustPut(t, s, "r/b", "1")
	Eventually(t, waitTimeout, rec.WantState(map[string]string{"r/a": "1", "r/b": "1"}))

	cut(t, px, ps)
	mustPut(t, s, "r/a", "2")
	if _, err := s.Delete(testCtx(t), "r/b", 0); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, "r/c", "1")
	px.Restore()

	Eventually(t, waitTimeout, rec.WantState(map[string]string{"r/a": "2", "r/c": "1"}))
	if got := len(rec.Replaces()); got != 1 {
		t.Errorf("Replace calls = %d; want 1 (resumed, not relisted)", got)
	}
	if got := len(rec.Events()); got != 4 {
		t.Errorf("events = %d; want 4 (one per write)", got)
	}
	// And it keeps watching.
	mustPut(t, s, "r/d", "1")
	Eventually(t, waitTimeout, rec.WantState(map[string]string{"r/a": "2", "r/c": "1", "r/d": "1"}))
}

// testReflectRelist makes the reflector miss revisions that are then
// compacted: it must list again and replace its view.
func testReflectRelist(t *testing.T, s *store.Store) {
	ps, px := throughProxy(t, s)
	for _, k := range []string{"r/a", "r/b", "r/c"} {
		mustPut(t, s, k, "1")
	}
	rec, _ := reflect(t, ps, "r/")

	cut(t, px, ps)
	mustPut(t, s, "r/a", "2")
	if _, err := s.Delete(testCtx(t), "r/b", 0); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, "r/d", "1")
	compacted := compact(t, s)
	px.Restore()

	want := map[string]string{"r/a": "2", "r/c": "1", "r/d": "1"}
	Eventually(t, waitTimeout, func() error {
		if reps := rec.Replaces(); len(reps) != 2 {
			return fmt.Errorf("Replace calls = %d (at %v); want 2", len(reps), reps)
		}
		return rec.WantState(want)()
	})
	if reps := rec.Replaces(); reps[1] < compacted {
		t.Errorf("relist at revision %d; want >= the compaction at %d", reps[1], compacted)
	}
	if n := len(rec.Events()); n != 0 {
		t.Errorf("events = %d; want 0 (the missed writes come with the relist)", n)
	}
	// It watches again after the relist.
	mustPut(t, s, "r/e", "1")
	want["r/e"] = "1"
	Eventually(t, waitTimeout, rec.WantState(want))
}

func testReflectCancel(t *testing.T, s *store.Store) {
	rec := NewRecorder()
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan error, 1)
	go func() { done <- s.Reflect(ctx, "r/", rec) }()
	Eventually(t, waitTimeout, func() error {
		if len(rec.Replaces()) == 0 {
			return errors.New("no Replace yet; want the initial list")
		}
		return nil
	})
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Reflect returned %v; want context.Canceled", err)
		}
	case <-time.After(waitTimeout):
		t.Fatalf("Reflect still running %s after cancellation", waitTimeout)
	}
	// Cancelled before it starts: returns at once.
	if err := s.Reflect(ctx, "r/", rec); !errors.Is(err, context.Canceled) {
		t.Errorf("Reflect with a cancelled context returned %v; want context.Canceled", err)
	}
	if n := len(rec.Replaces()); n != 1 {
		t.Errorf("Replace calls = %d; want 1", n)
	}
}
