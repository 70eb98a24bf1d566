package store

import (
	"context"
	"testing"
	"time"

	"github.com/stratahq/strata/testkit/etcdtest"
)

type counter struct{ N int }

// catchUp is the wait of a reader that acts on one cache's newest change
// and must see the others at least as new (the region controller's pass:
// placements, then nodes). Fed by one shared watch, the quiet cache is there
// without a single progress request; each on a watch of its own, it must
// ask etcd every time.
func TestSharedWatchCatchUpWithoutProgressRequests(t *testing.T) {
	cli := etcdtest.Client(t, etcdtest.Embedded(t))
	for _, tc := range []struct {
		name     string
		shared   bool
		requests func(n int64) bool
		want     string
	}{
		{"one shared watch", true, func(n int64) bool { return n == 0 }, "none"},
		{"a watch each", false, func(n int64) bool { return n > 0 }, "some"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s := New(cli, "/catchup/"+tc.name+"/")
			busy := NewCollection(s, "busy/", JSON[counter]())
			quiet := NewCollection(s, "quiet/", JSON[counter]())
			if _, err := quiet.Put(ctx, "x", &counter{1}); err != nil {
				t.Fatal(err)
			}
			var opts []CacheOption
			st := NewSharedWatch(s, "")
			if tc.shared {
				opts = append(opts, WithSharedWatch(st))
			}
			b, q := NewCache(busy, opts...), NewCache(quiet, opts...)
			go func() {
				if tc.shared {
					_ = st.Run(ctx)
					return
				}
				_ = RunAll(ctx, b, q)
			}()
			if err := WaitSynced(ctx, b, q); err != nil {
				t.Fatal(err)
			}
			// Only the catch-up waits count: the busy cache's wait for
			// its own write asks etcd too if the event is slow to come.
			var asked int64
			for i := range 20 {
				rev, err := busy.Put(ctx, "y", &counter{i})
				if err != nil {
					t.Fatal(err)
				}
				// As the pass does: take the busy cache's revision
				// once it has the change, then wait for the quiet one.
				if err := b.WaitForRev(ctx, rev); err != nil {
					t.Fatal(err)
				}
				before := s.progressAsked.Load()
				if err := WaitForRev(ctx, b.Rev(), q); err != nil {
					t.Fatalf("quiet cache at %d, busy at %d: %v", q.Rev(), b.Rev(), err)
				}
				asked += s.progressAsked.Load() - before
			}
			if n := asked; !tc.requests(n) {
				t.Errorf("progress requests while catching up = %d; want %s", n, tc.want)
			}
		})
	}
}
