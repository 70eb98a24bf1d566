package store_test

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/testkit/etcdtest"
	"github.com/stratahq/strata/testkit/storetest"
)

func TestConformance(t *testing.T) {
	for _, b := range etcdtest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel() // each backend is its own etcd
			cli := etcdtest.Client(t, b.Endpoints(t))
			var n atomic.Int64
			storetest.Run(t, func(t *testing.T) *store.Store {
				return store.New(cli, fmt.Sprintf("/storetest/%d/", n.Add(1)), store.WithLogger(storetest.Logger(t)))
			})
		})
	}
}

// TestReflectAcrossProcessRestart restarts a real etcd server under a
// running Reflect and Cache: both must pick up writes made afterwards.
func TestReflectAcrossProcessRestart(t *testing.T) {
	p := etcdtest.StartProcess(t)
	cli := etcdtest.Client(t, p.Endpoints())
	s := store.New(cli, "/restart/", store.WithLogger(storetest.Logger(t)))
	type obj struct{ N int }
	coll := store.NewCollection(s, "objs/", store.JSON[obj]())

	rec := storetest.NewRecorder()
	storetest.Go(t, func(ctx context.Context) error { return s.Reflect(ctx, "objs/", rec) })
	cache := store.NewCache(coll)
	storetest.Go(t, cache.Run)

	if _, err := coll.Create(t.Context(), "a", &obj{N: 1}); err != nil {
		t.Fatal(err)
	}
	storetest.Eventually(t, 20*time.Second, rec.WantState(map[string]string{"objs/a": `{"N":1}`}))

	if err := p.Restart(); err != nil {
		t.Fatalf("restart etcd: %v", err)
	}

	// The client reconnects on its own; retry the write until it does.
	var rev int64
	storetest.Eventually(t, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		var err error
		rev, err = coll.Put(ctx, "b", &obj{N: 2})
		return err
	})
	storetest.Eventually(t, 30*time.Second, rec.WantState(map[string]string{"objs/a": `{"N":1}`, "objs/b": `{"N":2}`}))
	rec.Check(t)

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := cache.WaitForRev(ctx, rev); err != nil {
		t.Fatalf("cache WaitForRev(%d) after restart: %v", rev, err)
	}
	if it, ok := cache.Get("b"); !ok || it.Value.N != 2 {
		t.Errorf("cache Get(b) = %+v, %v; want N=2", it, ok)
	}
}

// BenchmarkTxn measures transactions of n puts of 512-byte values against
// embedded etcd.
func BenchmarkTxn(b *testing.B) {
	cli := etcdtest.Client(b, etcdtest.Embedded(b))
	s := store.New(cli, "/bench/")
	val := bytes.Repeat([]byte("x"), 512)
	for _, n := range []int{1, 16, 128, 512} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			keys := make([]string, n)
			for i := range keys {
				keys[i] = fmt.Sprintf("batch%d/%04d", n, i)
			}
			ctx := b.Context()
			txns := 0
			for b.Loop() {
				txn := s.Txn()
				for _, k := range keys {
					txn.Put(k, val)
				}
				if _, err := txn.Commit(ctx); err != nil {
					b.Fatal(err)
				}
				txns++
			}
			b.ReportMetric(float64(txns*n)/b.Elapsed().Seconds(), "ops/s")
		})
	}
}
