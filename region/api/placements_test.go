package api

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/proto/apiproto"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
	"github.com/stratahq/strata/region/state"
)

func TestApplyPlacements(t *testing.T) {
	e := newEnv(t)
	base := testPlacement("acme", "web", "uid-1", 3, 5)
	with := func(f func(p *api.Placement)) api.Placement {
		p := base
		f(&p)
		return p
	}
	// The steps run in order against one region.
	steps := []struct {
		name        string
		p           api.Placement
		wantApplied bool
		wantErr     string // in the per-placement result
		wantWrite   bool   // etcd revision moved
		wantCount   uint64 // AppliedPlacements after the step
		wantEpoch   int64  // meta/epoch after the step
	}{
		{"new placement is written", base, true, "", true, 1, 5},
		{"the same placement again is not", base, false, "", false, 1, 5},
		{"a new UpdatedAt alone is no change", with(func(p *api.Placement) { p.UpdatedAt = time.Now() }), false, "", false, 1, 5},
		{"a change of replicas is written", with(func(p *api.Placement) { p.Resource.Replicas = 4 }), true, "", true, 2, 5},
		{"an older master is refused", with(func(p *api.Placement) { p.Resource.Replicas = 9; p.Epoch = 4 }), false, "stale master epoch 4 < 5", false, 2, 5},
		{"another region's placement is refused", with(func(p *api.Placement) { p.Region = "r2" }), false, `for region "r2"`, false, 2, 5},
		{"a placement without uid is refused", with(func(p *api.Placement) { p.Resource.UID = "" }), false, "uid", false, 2, 5},
		{"a newer master with the same content only raises the epoch", with(func(p *api.Placement) { p.Resource.Replicas = 4; p.Epoch = 6 }), false, "", true, 2, 6},
		{"the previous master is now stale", with(func(p *api.Placement) { p.Resource.Replicas = 4 }), false, "stale master epoch 5 < 6", false, 2, 6},
	}
	for _, step := range steps {
		before := e.rev()
		resp, err := e.region.ApplyPlacements(e.ctx(), &regionv1.ApplyPlacementsRequest{Placements: []*resourcev1.Placement{apiproto.PlacementToPB(&step.p)}})
		if err != nil {
			t.Fatalf("%s: ApplyPlacements: %v", step.name, err)
		}
		res := resp.GetResults()
		if len(res) != 1 {
			t.Fatalf("%s: got %d results; want 1", step.name, len(res))
		}
		if got := res[0]; got.GetApplied() != step.wantApplied || got.GetKey() != "acme/web" ||
			(step.wantErr == "") != (got.GetError() == "") || !strings.Contains(got.GetError(), step.wantErr) {
			t.Errorf("%s: got result %v; want key acme/web, applied %v, error %q", step.name, got, step.wantApplied, step.wantErr)
		}
		if wrote := e.rev() != before; wrote != step.wantWrite {
			t.Errorf("%s: got an etcd write %v; want %v", step.name, wrote, step.wantWrite)
		}
		if got := e.srv.AppliedPlacements(); got != step.wantCount {
			t.Errorf("%s: got AppliedPlacements %d; want %d", step.name, got, step.wantCount)
		}
		ep, err := e.st.Meta.Get(e.ctx(), state.EpochName)
		if err != nil || ep.Value.Epoch != step.wantEpoch {
			t.Errorf("%s: got meta/epoch %+v, %v; want %d", step.name, ep.Value, err, step.wantEpoch)
		}
	}

	got, err := e.st.Placements.Get(e.ctx(), "acme/web")
	if err != nil {
		t.Fatal(err)
	}
	if got.Value.Resource.Replicas != 4 || got.Value.UpdatedAt.IsZero() {
		t.Errorf("got stored placement with %d replicas, updatedAt %v; want 4 and set", got.Value.Resource.Replicas, got.Value.UpdatedAt)
	}
	// Emitted events are flushed in the background.
	eventually(t, func() error {
		if n := e.countEvents("PlacementApplied", "resource/acme/web"); n != 2 {
			return fmt.Errorf("got %d PlacementApplied events; want 2", n)
		}
		return nil
	})
}

// TestApplyPlacementsBatches checks that a big call is written in
// transactions of at most the store's limit (stock etcd's --max-txn-ops),
// the fence on meta/epoch included, after the transaction that raises
// meta/epoch (the region's first master).
func TestApplyPlacementsBatches(t *testing.T) {
	e := newEnv(t)
	const n = 1200
	ps := make([]*resourcev1.Placement, n)
	for i := range ps {
		p := testPlacement("bulk", fmt.Sprintf("app-%04d", i), fmt.Sprintf("uid-%d", i), 1, 1)
		ps[i] = apiproto.PlacementToPB(&p)
	}
	before := e.rev()
	resp, err := e.region.ApplyPlacements(e.ctx(), &regionv1.ApplyPlacementsRequest{Placements: ps})
	if err != nil {
		t.Fatal(err)
	}
	applied := 0
	for _, r := range resp.GetResults() {
		if r.GetApplied() {
			applied++
		}
	}
	limit := e.st.Store.MaxTxnOps()
	wantTxns := 1 + int64((n+limit-2)/(limit-1))
	if got := e.rev() - before; applied != n || got != wantTxns {
		t.Errorf("got %d applied in %d transactions; want %d in %d", applied, got, n, wantTxns)
	}
	if got := e.caches.Placements.Len(); got != n {
		t.Errorf("got %d cached placements right after the call; want %d", got, n)
	}

	// Again: nothing to write.
	before = e.rev()
	if _, err := e.region.ApplyPlacements(e.ctx(), &regionv1.ApplyPlacementsRequest{Placements: ps}); err != nil {
		t.Fatal(err)
	}
	if got := e.rev() - before; got != 0 || e.srv.AppliedPlacements() != n {
		t.Errorf("second call: got %d transactions and %d applied in all; want 0 and %d", got, e.srv.AppliedPlacements(), n)
	}
}

func TestRemovePlacements(t *testing.T) {
	e := newEnv(t)
	web, db := testPlacement("acme", "web", "uid-web", 2, 5), testPlacement("acme", "db", "uid-db", 1, 5)
	if _, err := e.region.ApplyPlacements(e.ctx(), &regionv1.ApplyPlacementsRequest{
		Placements: []*resourcev1.Placement{apiproto.PlacementToPB(&web), apiproto.PlacementToPB(&db)},
	}); err != nil {
		t.Fatal(err)
	}

	steps := []struct {
		name         string
		ref          *regionv1.PlacementRef
		epoch        int64
		wantApplied  bool
		wantErr      string
		wantWrite    bool
		wantDeleting map[string]bool // after the step
	}{
		{"remove marks deleting", &regionv1.PlacementRef{Tenant: "acme", Name: "web", Uid: "uid-web"}, 5, true, "", true,
			map[string]bool{"acme/web": true, "acme/db": false}},
		{"again changes nothing", &regionv1.PlacementRef{Tenant: "acme", Name: "web"}, 5, false, "", false,
			map[string]bool{"acme/web": true, "acme/db": false}},
		{"a missing placement is not an error", &regionv1.PlacementRef{Tenant: "acme", Name: "gone"}, 5, false, "", false,
			map[string]bool{"acme/web": true, "acme/db": false}},
		{"another uid is left alone", &regionv1.PlacementRef{Tenant: "acme", Name: "db", Uid: "uid-older"}, 5, false, "", false,
			map[string]bool{"acme/web": true, "acme/db": false}},
		{"an older master is refused", &regionv1.PlacementRef{Tenant: "acme", Name: "db"}, 4, false, "stale master epoch 4 < 5", false,
			map[string]bool{"acme/web": true, "acme/db": false}},
		{"a newer master removes and raises the epoch", &regionv1.PlacementRef{Tenant: "acme", Name: "db", Uid: "uid-db"}, 7, true, "", true,
			map[string]bool{"acme/web": true, "acme/db": true}},
	}
	for _, step := range steps {
		before := e.rev()
		resp, err := e.region.RemovePlacements(e.ctx(), &regionv1.RemovePlacementsRequest{
			Placements: []*regionv1.PlacementRef{step.ref}, Epoch: step.epoch,
		})
		if err != nil {
			t.Fatalf("%s: RemovePlacements: %v", step.name, err)
		}
		got := resp.GetResults()[0]
		if got.GetApplied() != step.wantApplied || (step.wantErr == "") != (got.GetError() == "") || !strings.Contains(got.GetError(), step.wantErr) {
			t.Errorf("%s: got result %v; want applied %v, error %q", step.name, got, step.wantApplied, step.wantErr)
		}
		if wrote := e.rev() != before; wrote != step.wantWrite {
			t.Errorf("%s: got an etcd write %v; want %v", step.name, wrote, step.wantWrite)
		}
		for key, want := range step.wantDeleting {
			it, err := e.st.Placements.Get(e.ctx(), key)
			if err != nil {
				t.Fatal(err)
			}
			if got := it.Value.Resource.Deleting(); got != want {
				t.Errorf("%s: got %s deleting %v; want %v", step.name, key, got, want)
			}
		}
	}
	if ep, err := e.st.Meta.Get(e.ctx(), state.EpochName); err != nil || ep.Value.Epoch != 7 {
		t.Errorf("got meta/epoch %+v, %v; want 7", ep.Value, err)
	}
	// Removal is not an applied placement.
	if got := e.srv.AppliedPlacements(); got != 2 {
		t.Errorf("got AppliedPlacements %d; want 2", got)
	}
}

// TestApplyPlacementsAfterAnotherWriter: a placement call starts from the
// epoch this process last wrote; when another process (a second region
// API, a newer master through it) moved meta/epoch since, the fence must
// catch it and the call must decide again from a read: a placement of the
// older master is refused, one of the newer is written.
func TestApplyPlacementsAfterAnotherWriter(t *testing.T) {
	e := newEnv(t)
	apply := func(p api.Placement) *regionv1.PlacementResult {
		t.Helper()
		resp, err := e.region.ApplyPlacements(e.ctx(), &regionv1.ApplyPlacementsRequest{Placements: []*resourcev1.Placement{apiproto.PlacementToPB(&p)}})
		if err != nil || len(resp.GetResults()) != 1 {
			t.Fatalf("ApplyPlacements: %v, %v", resp, err)
		}
		return resp.GetResults()[0]
	}
	if r := apply(testPlacement("acme", "web", "uid-1", 3, 5)); !r.GetApplied() {
		t.Fatalf("first placement: got %v; want applied", r)
	}
	// Another process raises the epoch and writes a placement.
	other := testPlacement("acme", "api", "uid-2", 1, 6)
	txn := e.st.Store.Txn()
	_ = e.st.Meta.TxnPut(txn, state.EpochName, &state.Epoch{Epoch: 6})
	_ = e.st.Placements.TxnPut(txn, other.Key(), &other)
	if _, err := txn.Commit(e.ctx()); err != nil {
		t.Fatal(err)
	}

	before := e.rev()
	if r := apply(testPlacement("acme", "web", "uid-1", 4, 5)); r.GetApplied() || !strings.Contains(r.GetError(), "stale master epoch 5 < 6") {
		t.Errorf("older master after the other writer: got %v; want refused as stale", r)
	}
	if e.rev() != before {
		t.Errorf("older master after the other writer: etcd moved from %d to %d; want no write", before, e.rev())
	}
	if r := apply(testPlacement("acme", "web", "uid-1", 4, 6)); !r.GetApplied() || r.GetError() != "" {
		t.Errorf("newer master: got %v; want applied", r)
	}
	got, err := e.st.Placements.Get(e.ctx(), "acme/web")
	if err != nil || got.Value.Resource.Replicas != 4 || got.Value.Epoch != 6 {
		t.Errorf("stored acme/web: got %+v, %v; want 4 replicas at epoch 6", got.Value, err)
	}
	if _, err := e.st.Placements.Get(e.ctx(), "acme/api"); err != nil {
		t.Errorf("the other writer's placement: %v; want it kept", err)
	}
}

// TestPlacementWriteFences: a placement call's write applies only while
// meta/epoch is where the call found it (a newer master raising it in
// between stops the call), and over the placement it planned against (a
// write planned before another writer changed the placement, such as a
// retried call whose first attempt is still in flight, or another region
// API process, does not overwrite the newer one). Either way the write
// fails as a lost race, which the call plans again after.
func TestPlacementWriteFences(t *testing.T) {
	e := newEnv(t)
	apply := func(p api.Placement) {
		t.Helper()
		resp, err := e.region.ApplyPlacements(e.ctx(), &regionv1.ApplyPlacementsRequest{Placements: []*resourcev1.Placement{apiproto.PlacementToPB(&p)}})
		if err != nil || len(resp.GetResults()) != 1 || !resp.GetResults()[0].GetApplied() {
			t.Fatalf("ApplyPlacements: %v, %v; want applied", resp, err)
		}
	}
	// plan plans p as a call of epoch 5 would, now.
	plan := func(p api.Placement) (epochState, []placementWrite) {
		t.Helper()
		ep, err := e.srv.placements.fence.read(e.ctx())
		if err != nil {
			t.Fatal(err)
		}
		_, writes, _ := e.srv.placements.planApply([]api.Placement{p}, ep.Epoch.Epoch)
		if len(writes) != 1 {
			t.Fatalf("plan of %s: got %d writes; want 1", p.Key(), len(writes))
		}
		return ep, writes
	}
	write := func(name string, ep epochState, writes []placementWrite) {
		t.Helper()
		err := e.srv.placements.writePlacements(e.ctx(), ep, writes, func([]placementWrite) {
			t.Errorf("%s: a placement applied; want none", name)
		})
		if !retryable(err) {
			t.Errorf("%s: got %v; want a lost race (conflict)", name, err)
		}
	}
	replicas := func(key string) int {
		t.Helper()
		got, err := e.st.Placements.Get(e.ctx(), key)
		if err != nil {
			t.Fatal(err)
		}
		return got.Value.Resource.Replicas
	}

	apply(testPlacement("acme", "web", "uid-1", 1, 5))

	// Planned over 1 replica; 2 are written meanwhile.
	ep, writes := plan(testPlacement("acme", "web", "uid-1", 3, 5))
	apply(testPlacement("acme", "web", "uid-1", 2, 5))
	write("planned before another write of the placement", ep, writes)
	if got := replicas("acme/web"); got != 2 {
		t.Errorf("after the write planned before: got %d replicas; want the newer 2", got)
	}

	// Planned by master 5; master 6 takes over meanwhile.
	ep, writes = plan(testPlacement("acme", "web", "uid-1", 4, 5))
	apply(testPlacement("acme", "db", "uid-2", 1, 6))
	write("planned before a newer master", ep, writes)
	if got := replicas("acme/web"); got != 2 {
		t.Errorf("after the older master's write: got %d replicas; want 2", got)
	}
}
