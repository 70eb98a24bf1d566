package controller

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/heartbeat"
	"github.com/stratahq/strata/internal/store"
)

// scaleCall is one AutoScale the master asked for.
type scaleCall struct {
	key      string
	from, to int
	why      string
}

type recordingScaler struct {
	mu    sync.Mutex
	calls []scaleCall
}

func (s *recordingScaler) AutoScale(_ context.Context, tenant, name, _ string, from, to int, why string, _ store.Guard) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, scaleCall{key: tenant + "/" + name, from: from, to: to, why: why})
	return nil
}

func (s *recordingScaler) take() []scaleCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.calls
	s.calls = nil
	return out
}

// loadBeat is a region's beat carrying loads.
func loadBeat(t *testing.T, region string, at time.Time, loads ...api.ResourceLoad) heartbeat.Beat {
	t.Helper()
	v, err := state.EncodeLoad(loads)
	if err != nil {
		t.Fatal(err)
	}
	return heartbeat.Beat{ID: region, At: at, Attrs: map[string]string{state.LoadAttr: v}}
}

// TestAutoscalePass: the master reads the regions' loads from their
// beats, asks for the count the targets want, says why in the event
// message (inputs and each region's change), shows its reading in the
// status it hands placement, and leaves alone what has no readings, is
// not autoscaled, or whose region's beat is stale.
func TestAutoscalePass(t *testing.T) {
	ctx, _, st, caches := newStateEnv(t)

	b := st.Store.Batch()
	_ = st.Flavors.TxnCreate(b.Step("small"), "small", &api.Flavor{Name: "small", Kind: api.ProviderContainer, Spec: api.FlavorSpec{VCPUs: 1, MemoryMiB: 256}})
	_ = st.Regions.TxnCreate(b.Step("r1"), "r1", &api.Region{Name: "r1"})
	_ = st.Regions.TxnCreate(b.Step("r2"), "r2", &api.Region{Name: "r2"})
	compute := api.ResourceSpec{Flavor: "small", Compute: &api.ComputeSpec{Image: "busybox"}}
	for _, r := range []*api.Resource{
		{Name: "web", Tenant: "t", UID: "u-web", Kind: api.KindCompute, Replicas: 2, Revision: 1, Generation: 1, Spec: compute,
			Autoscale: &api.AutoscalePolicy{MinReplicas: 1, MaxReplicas: 10, CPUPercent: 50}},
		{Name: "quiet", Tenant: "t", UID: "u-quiet", Kind: api.KindCompute, Replicas: 3, Revision: 1, Generation: 1, Spec: compute,
			Autoscale: &api.AutoscalePolicy{MinReplicas: 1, MaxReplicas: 10, CPUPercent: 50}},
		{Name: "byhand", Tenant: "t", UID: "u-byhand", Kind: api.KindCompute, Replicas: 2, Revision: 1, Generation: 1, Spec: compute},
	} {
		_ = st.Resources.TxnCreate(b.Step(r.Key()), r.Key(), r)
	}
	res, err := b.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rev := res.Revision
	if err := caches.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	// Every cache the pass reads: the flavor's too, without which the
	// CPU reading has no size to be a share of.
	if err := store.WaitForRev(ctx, rev, caches.Resources, caches.Regions, caches.Flavors); err != nil {
		t.Fatal(err)
	}
	sc := &recordingScaler{}
	now := time.Unix(10_000, 0)
	c := New(Options{State: st, Caches: caches, Scaler: sc, Clock: func() time.Time { return now }})

	// web: 2 replicas in r1 at 90 % of a CPU (target 50 %): ask
	// ceil(2 × 90/50) = 4. byhand is loaded too but not autoscaled; a
	// stale beat of r2 says web is idle there, and is ignored.
	c.keepLoad([]heartbeat.Beat{
		loadBeat(t, "r1", now, api.ResourceLoad{Tenant: "t", Resource: "web", Replicas: 2, MilliCPU: 1800},
			api.ResourceLoad{Tenant: "t", Resource: "byhand", Replicas: 2, MilliCPU: 2000}),
		loadBeat(t, "r2", now.Add(-time.Minute), api.ResourceLoad{Tenant: "t", Resource: "web", Replicas: 8}),
	})
	c.autoscalePass(ctx, testGuard{}, now)
	calls := sc.take()
	if len(calls) != 1 || calls[0].key != "t/web" || calls[0].from != 2 || calls[0].to != 4 {
		t.Fatalf("scales: %+v; want t/web from 2 to 4 only", calls)
	}
	// The split of 4 over the schedule's regions (every registered one,
	// r1 and r2, 1 each now) gains one each.
	if why := calls[0].why; !strings.HasPrefix(why, "2 → 4, cpu 90 % of 50 %") || !strings.Contains(why, "r1 +1, r2 +1") {
		t.Errorf("event message %q; want the inputs and each region's change", why)
	}
	if a := c.autoscaleStatus("t/web"); a == nil || a.Desired != 4 || a.LastScaleAt != now || a.Message != "" {
		t.Errorf("web's autoscale status %+v; want desired 4, scaled now", a)
	}
	if a := c.autoscaleStatus("t/quiet"); a == nil || !strings.HasPrefix(a.Message, "no readings yet") || a.Desired != 3 {
		t.Errorf("quiet's autoscale status %+v; want no readings yet, desired its count", a)
	}
	if a := c.autoscaleStatus("t/byhand"); a != nil {
		t.Errorf("byhand is not autoscaled, yet has status %+v", a)
	}
	in := c.input(now, catalog{caches: caches, revisions: c.revisions, ctx: ctx}, mustResource(t, caches, "t/web"))
	if in.Autoscale == nil || in.Autoscale.Desired != 4 {
		t.Errorf("placement's input carries autoscale %+v; want the reading", in.Autoscale)
	}

	// Within the period nothing is decided again.
	c.autoscalePass(ctx, testGuard{}, now.Add(5*time.Second))
	if calls := sc.take(); len(calls) != 0 {
		t.Errorf("within the period: %+v; want nothing", calls)
	}
}

func mustResource(t *testing.T, caches *state.Caches, key string) *api.Resource {
	t.Helper()
	it, ok := caches.Resources.Get(key)
	if !ok {
		t.Fatalf("no resource %s", key)
	}
	return it.Value
}
