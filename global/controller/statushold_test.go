package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/etcdserver/etcdtest"
	"github.com/stratahq/strata/internal/store"
)

func TestProgressOnly(t *testing.T) {
	base := func() *api.ResourceStatus {
		return &api.ResourceStatus{UID: "u", Phase: api.PhaseProvision, Reason: "0/2 ready", ObservedGeneration: 1, Revision: 1, Replicas: 2,
			Regions: map[string]api.RegionShare{"r1": {Phase: api.PhaseProvision, Replicas: 2}}}
	}
	with := func(fn func(*api.ResourceStatus)) *api.ResourceStatus {
		st := base()
		fn(st)
		return st
	}
	for _, tc := range []struct {
		name         string
		stored, next *api.ResourceStatus
		want         bool
	}{
		{"ready count and reason", base(), with(func(s *api.ResourceStatus) {
			s.Ready, s.Reason = 1, "1/2 ready"
			s.Regions["r1"] = api.RegionShare{Phase: api.PhaseProvision, Replicas: 2, Ready: 1}
		}), true},
		{"the first generation observed", with(func(s *api.ResourceStatus) { s.ObservedGeneration, s.Revision, s.Regions = 0, 0, nil }), base(), true},
		{"nothing stored", nil, base(), false},
		{"another resource", base(), with(func(s *api.ResourceStatus) { s.UID = "v" }), false},
		{"phase", base(), with(func(s *api.ResourceStatus) { s.Phase = api.PhaseReady }), false},
		{"replicas", base(), with(func(s *api.ResourceStatus) { s.Replicas = 3 }), false},
		{"a new generation", base(), with(func(s *api.ResourceStatus) { s.ObservedGeneration = 2 }), false},
		{"a new revision", base(), with(func(s *api.ResourceStatus) { s.Revision = 2 }), false},
		{"rollout", base(), with(func(s *api.ResourceStatus) {
			s.Rollout = &api.RolloutStatus{Revision: 2, State: api.RolloutProgressing}
		}), false},
		{"a failover", base(), with(func(s *api.ResourceStatus) {
			s.Regions["r2"] = api.RegionShare{Phase: api.PhaseProvision, FailoverFrom: "r1"}
		}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := progressOnly(tc.stored, tc.next); got != tc.want {
				t.Errorf("progressOnly: got %v; want %v", got, tc.want)
			}
		})
	}
}

// holdEnv is a master (not leading: its passes are called directly) over
// an embedded etcd, linked to one region r1 whose shares the test sets.
type holdEnv struct {
	st     *state.State
	caches *state.Caches
	c      *Controller
	link   *link
	guard  testGuard
	key    string
	uid    string
}

func newHoldEnv(t *testing.T, hold time.Duration) *holdEnv {
	ctx := t.Context()
	cli := etcdtest.Client(t, etcdtest.Embedded(t))
	st := state.New(store.New(cli, "/strata/global/"))
	caches := state.NewCaches(st)
	cctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = caches.Run(cctx); close(done) }()
	t.Cleanup(func() { stop(); <-done })

	e := &holdEnv{st: st, caches: caches, key: state.ResourceName("t", "app"), uid: "uid-1"}
	if _, err := st.Regions.Create(ctx, "r1", &api.Region{Name: "r1", Endpoint: "127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	// The resource and its status as the API creates them.
	r := &api.Resource{Name: "app", Tenant: "t", UID: e.uid, Kind: api.KindCompute, Replicas: 2, Revision: 1, Generation: 1,
		Spec: api.ResourceSpec{Compute: &api.ComputeSpec{Image: "busybox"}}}
	now := time.Now()
	txn := st.Store.Txn()
	_ = st.Resources.TxnCreate(txn, e.key, r)
	_ = st.Statuses.TxnPut(txn, e.key, &api.ResourceStatus{UID: e.uid, Phase: api.PhaseCreated, Since: now, Replicas: 2, UpdatedAt: now})
	if _, err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Put(ctx, "/test/master", "me")
	if err != nil {
		t.Fatal(err)
	}
	e.guard = testGuard{key: "/test/master", rev: resp.Header.Revision}
	if err := caches.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	if err := store.WaitForRev(ctx, resp.Header.Revision, caches.Resources, caches.Statuses, caches.Regions); err != nil {
		t.Fatal(err)
	}
	e.c = New(Options{State: st, Caches: caches, StatusHold: hold})
	// A link that is not run: the test plays the region's share stream.
	e.link = newLink(e.c, "r1", e.guard.rev)
	e.link.synced = true
	e.c.links["r1"] = e.link
	return e
}

// share sets what r1 reports of the resource.
func (e *holdEnv) share(phase api.Phase, ready int) {
	e.link.mu.Lock()
	defer e.link.mu.Unlock()
	e.link.shares[e.key] = &share{UID: e.uid, RegionShare: api.RegionShare{
		Phase: phase, Replicas: 2, Ready: ready, Updated: 2, Revision: 1, ObservedGeneration: 1}}
}

// pass runs one pass over the resource and returns its stored status.
func (e *holdEnv) pass(t *testing.T) *api.ResourceStatus {
	t.Helper()
	if err := e.c.pass(t.Context(), e.guard, []string{e.key}); err != nil {
		t.Fatal(err)
	}
	it, err := e.st.Statuses.Get(t.Context(), e.key)
	if err != nil {
		t.Fatal(err)
	}
	return it.Value
}

// TestStatusProgressIsHeldAndPhasesAreNot walks a resource through what
// its region reports: a status that only says how far a phase got waits
// for the hold (and is written then, with what the region says by then),
// while every phase change is written by the pass that sees it.
func TestStatusProgressIsHeldAndPhasesAreNot(t *testing.T) {
	e := newHoldEnv(t, time.Hour)
	clock := time.Now()
	e.c.holds.clock = func() time.Time { return clock }

	// Placed, not reported yet: "waiting for r1" is progress of created.
	if st := e.pass(t); st.Phase != api.PhaseCreated || st.Reason != "" || st.Regions != nil {
		t.Fatalf("after the first pass: got %+v; want the API's status, the region's silence held", st)
	}
	e.share(api.PhaseProvision, 0)
	if st := e.pass(t); st.Phase != api.PhaseProvision || st.ObservedGeneration != 1 || st.Regions["r1"].Phase != api.PhaseProvision {
		t.Fatalf("after the region's first share: got %+v; want provision at once", st)
	}
	e.share(api.PhaseProvision, 1)
	if st := e.pass(t); st.Ready != 0 {
		t.Fatalf("one replica ready, within the hold: got ready %d; want the write held (0)", st.Ready)
	}
	clock = clock.Add(time.Hour)
	if st := e.pass(t); st.Ready != 1 || st.Reason != "1/2 ready" {
		t.Fatalf("once the hold passed: got ready %d (%q); want 1 (\"1/2 ready\")", st.Ready, st.Reason)
	}
	e.share(api.PhaseProvision, 0) // a replica lost again: held
	if st := e.pass(t); st.Ready != 1 {
		t.Fatalf("progress back within the hold: got ready %d; want the write held (1)", st.Ready)
	}
	e.share(api.PhaseReady, 2)
	if st := e.pass(t); st.Phase != api.PhaseReady || st.Ready != 2 {
		t.Fatalf("all ready: got %s, ready %d; want ready, 2, at once, over what was held", st.Phase, st.Ready)
	}
	if _, ok := e.c.holds.since[e.key]; ok {
		t.Error("a hold is left after the phase change wrote the status")
	}
}

// TestHeldStatusIsLookedAtAgain: once its hold has passed, a held
// resource is marked for the next pass, which writes it.
func TestHeldStatusIsLookedAtAgain(t *testing.T) {
	e := newHoldEnv(t, 10*time.Millisecond)
	e.share(api.PhaseProvision, 0)
	e.pass(t)
	e.share(api.PhaseProvision, 1)
	if st := e.pass(t); st.Ready != 0 {
		t.Fatalf("within the hold: got ready %d; want 0", st.Ready)
	}
	deadline := time.After(10 * time.Second)
	for marked := false; !marked; {
		select {
		case <-e.c.dirty.Wake():
			marked = slices.Contains(e.c.dirty.Take(func() []string { return nil }), e.key)
		case <-deadline:
			t.Fatal("the held resource was not marked again after its hold")
		}
	}
	if st := e.pass(t); st.Ready != 1 {
		t.Fatalf("the pass after the hold: got ready %d; want 1", st.Ready)
	}
}
