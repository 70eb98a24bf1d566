package store_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/testkit/etcdtest"
)

type counter struct{ N int }

// A watch that starts at "current revision + 1" (as every list-then-watch
// does in a quiet store) holds back etcd's progress notifications for its
// whole gRPC stream. A cache must still reach a revision written outside
// its prefix, so each cache watches on a stream of its own.
func TestWaitForRevWithFutureWatcherOnClient(t *testing.T) {
	cli := etcdtest.Client(t, etcdtest.Embedded(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := store.New(cli, "/p/")
	a := store.NewCollection(s, "a/", store.JSON[counter]())
	b := store.NewCollection(s, "b/", store.JSON[counter]())
	if _, err := a.Put(ctx, "x", &counter{1}); err != nil {
		t.Fatal(err)
	}
	cache := store.NewCache(a)
	go func() { _ = cache.Run(ctx) }()
	<-cache.Synced()

	rev, err := b.Put(ctx, "y", &counter{1})
	if err != nil {
		t.Fatal(err)
	}
	// Someone else on the same client watches from the future, on the
	// stream plain RequireLeader watches share.
	future := cli.Watch(clientv3.WithRequireLeader(ctx), "/elsewhere", clientv3.WithRev(rev+1))
	_ = future

	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	if err := cache.WaitForRev(wctx, rev); err != nil {
		t.Fatalf("WaitForRev(%d): got %v (cache at %d); want the cache to reach it", rev, err, cache.Rev())
	}
}
