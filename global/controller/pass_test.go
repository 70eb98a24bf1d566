package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/testkit/etcdtest"
)

type testGuard struct {
	key string
	rev int64
}

func (g testGuard) GuardKey() string { return g.key }
func (g testGuard) GuardRev() int64  { return g.rev }

// newStateEnv is the global state on an embedded etcd with its caches
// running, and a context bounding the test.
func newStateEnv(t *testing.T) (context.Context, *clientv3.Client, *state.State, *state.Caches) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	cli := etcdtest.Client(t, etcdtest.Embedded(t))
	st := state.New(store.New(cli, "/strata/global/"))
	caches := state.NewCaches(st)
	cctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = caches.Run(cctx); close(done) }()
	t.Cleanup(func() { stop(); <-done })
	return ctx, cli, st, caches
}

// TestPassOverManyResources is a new master's first pass (a failover)
// over hundreds of resources on an etcd with stock --max-txn-ops: every
// resource's status is written, in transactions that each fit.
func TestPassOverManyResources(t *testing.T) {
	ctx, cli, st, caches := newStateEnv(t)

	const n = 300
	b := st.Store.Batch()
	keys := make([]string, n)
	for i := range n {
		r := &api.Resource{Name: fmt.Sprintf("app-%03d", i), Tenant: "t", UID: fmt.Sprintf("uid-%d", i), Kind: api.KindCompute,
			Replicas: 1, Revision: 1, Generation: 1, Spec: api.ResourceSpec{Compute: &api.ComputeSpec{Image: "busybox"}}}
		keys[i] = state.ResourceName(r.Tenant, r.Name)
		_ = st.Resources.TxnCreate(b.Step(keys[i]), keys[i], r)
	}
	if _, err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Put(ctx, "/test/master", "me")
	if err != nil {
		t.Fatal(err)
	}
	guard := testGuard{key: "/test/master", rev: resp.Header.Revision}
	if err := caches.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	if err := caches.Resources.WaitForRev(ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}

	c := New(Options{State: st, Caches: caches})
	before := resp.Header.Revision
	if err := c.pass(ctx, guard, keys); err != nil {
		t.Fatalf("pass over %d resources: %v", n, err)
	}
	statuses, rev, err := st.Statuses.ListAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(statuses) != n {
		t.Errorf("statuses written: got %d; want %d", len(statuses), n)
	}
	// 300 puts and the guard: three transactions of at most 128.
	if txns := rev - before; txns != 3 {
		t.Errorf("transactions: got %d; want 3", txns)
	}
}
