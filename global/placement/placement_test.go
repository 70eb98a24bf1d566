package placement

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
)

var t0 = time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)

// world builds inputs for tests.
type world struct {
	in Input
}

func newWorld(r *api.Resource) *world {
	return &world{in: Input{Now: t0, Resource: r, Catalog: testCatalog{}}}
}

// region adds a registered, linked, live, Up region.
func (w *world) region(name string, opts ...func(*Region)) *world {
	reg := Region{Name: name, Registered: true, Health: api.HealthUp, HealthSince: t0.Add(-time.Hour), Linked: true, Live: true, Settled: true}
	for _, o := range opts {
		o(&reg)
	}
	w.in.Regions = append(w.in.Regions, reg)
	return w
}

func down(since time.Duration) func(*Region) {
	return func(r *Region) { r.Health, r.HealthSince = api.HealthDown, t0.Add(-since) }
}

func health(h api.Health) func(*Region) { return func(r *Region) { r.Health = h } }

func unregistered(r *Region) { r.Registered = false }

// reports makes the region report a share of the resource.
func reports(uid string, phase api.Phase, replicas int, revision, generation int64, from string) func(*Region) {
	return func(r *Region) {
		ready := 0
		if phase == api.PhaseReady {
			ready = replicas
		}
		r.Share = &Share{UID: uid, RegionShare: api.RegionShare{
			Phase: phase, Replicas: replicas, Ready: ready, Revision: revision, ObservedGeneration: generation, FailoverFrom: from,
		}}
		r.Settled = false
	}
}

// unhealthyFor makes the region's share report fewer ready replicas than
// minHealthy for d.
func unhealthyFor(d time.Duration) func(*Region) {
	return func(r *Region) { r.Share.Ready, r.Share.UnhealthySince = 0, t0.Add(-d) }
}

func (w *world) status(st *api.ResourceStatus) *world {
	w.in.Status = st
	return w
}

type testCatalog struct{}

func (testCatalog) Flavor(name string) (*api.Flavor, bool) {
	if name == "missing" {
		return nil, false
	}
	return &api.Flavor{Name: name, ResourceVersion: 7}, true
}

// Revision has revisions 1 and 2 of u1, each with its own image
// (busybox:N), so that a placement shows which revision it was built from.
func (testCatalog) Revision(tenant, name, uid string, number int64) (*api.Revision, bool) {
	if uid != "u1" || number < 1 || number > 2 {
		return nil, false
	}
	return &api.Revision{
		Resource: name, Tenant: tenant, UID: uid, Number: number,
		Spec: api.ResourceSpec{Flavor: "small", Compute: &api.ComputeSpec{Image: fmt.Sprintf("busybox:%d", number)}},
	}, true
}

func (testCatalog) Image(tenant, name string) (*api.ImageSpec, bool) {
	if name != "img" {
		return nil, false
	}
	return &api.ImageSpec{Ref: tenant + "/busybox:latest"}, true
}

func resource(replicas int, regions ...api.RegionTarget) *api.Resource {
	return &api.Resource{
		Name: "web", Tenant: "t", UID: "u1", Kind: api.KindCompute, Replicas: replicas, Revision: 1, Generation: 1,
		Spec:     api.ResourceSpec{Flavor: "small", Compute: &api.ComputeSpec{Image: "busybox"}},
		Schedule: api.ScheduleRule{Regions: regions},
	}
}

func rt(name string, weight int) api.RegionTarget {
	return api.RegionTarget{Name: name, Weight: weight}
}

// replicasOf is the decision's split, region → replicas.
func replicasOf(d Decision) map[string]int {
	out := map[string]int{}
	for _, t := range d.Targets {
		out[t.Region] = t.Replicas
	}
	return out
}

func TestWeighted(t *testing.T) {
	r := func(w ...int) []api.RegionTarget {
		out := make([]api.RegionTarget, len(w))
		for i, x := range w {
			out[i] = api.RegionTarget{Name: fmt.Sprintf("r%d", i+1), Weight: x}
		}
		return out
	}
	cases := []struct {
		name    string
		total   int
		targets []api.RegionTarget
		want    map[string]int
	}{
		{"one region", 3, r(1), map[string]int{"r1": 3}},
		{"2:1 of 3", 3, r(2, 1), map[string]int{"r1": 2, "r2": 1}},
		{"equal, remainder to the first listed", 5, r(1, 1), map[string]int{"r1": 3, "r2": 2}},
		{"largest remainder", 10, r(1, 1, 1), map[string]int{"r1": 4, "r2": 3, "r3": 3}},
		{"largest remainder beats order", 5, r(1, 3), map[string]int{"r1": 1, "r2": 4}},
		{"zero weight gets none", 4, r(1, 0), map[string]int{"r1": 4, "r2": 0}},
		{"zero replicas", 0, r(2, 1), map[string]int{"r1": 0, "r2": 0}},
		{"fewer replicas than regions", 1, r(1, 1, 1), map[string]int{"r1": 1, "r2": 0, "r3": 0}},
		{"weights 3:1 of 8", 8, r(3, 1), map[string]int{"r1": 6, "r2": 2}},
		{"no positive weight", 4, r(0, 0), map[string]int{"r1": 0, "r2": 0}},
		{"a name listed twice adds up", 3, []api.RegionTarget{rt("a", 1), rt("a", 1)}, map[string]int{"a": 3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := weighted(c.total, c.targets); !maps.Equal(got, c.want) {
				t.Errorf("weighted(%d, %v): got %v; want %v", c.total, c.targets, got, c.want)
			}
		})
	}
}

func TestSplit(t *testing.T) {
	cases := []struct {
		name       string
		w          *world
		want       map[string]int
		wantReason string
	}{
		{"weights", newWorld(resource(3, rt("a", 2), rt("b", 1))).region("a").region("b"), map[string]int{"a": 2, "b": 1}, ""},
		{"no regions listed: every registered one", newWorld(resource(4)).region("b").region("a").region("c", unregistered),
			map[string]int{"a": 2, "b": 2}, ""},
		{"an unregistered region is named", newWorld(resource(4, rt("a", 1), rt("x", 1))).region("a"),
			map[string]int{"a": 4}, `region "x" is not registered`},
		{"spread prefers regions that are not down", func() *world {
			r := resource(4, rt("a", 1), rt("b", 1), rt("c", 1))
			r.Schedule.SpreadRegions = 2
			return newWorld(r).region("a", down(time.Hour)).region("b").region("c", health(api.HealthSuspect))
		}(), map[string]int{"b": 2, "c": 2}, ""},
		{"spread fills up with down regions", func() *world {
			r := resource(3, rt("a", 5), rt("b", 1))
			r.Schedule.SpreadRegions = 2
			return newWorld(r).region("a", down(time.Hour)).region("b")
		}(), map[string]int{"a": 1, "b": 2}, ""},
		{"images go everywhere, without replicas", func() *world {
			r := resource(0)
			r.Kind, r.Spec = api.KindImage, api.ResourceSpec{Image: &api.ImageSpec{Ref: "busybox"}}
			return newWorld(r).region("a").region("b")
		}(), map[string]int{"a": 0, "b": 0}, ""},
		{"nothing registered", newWorld(resource(2, rt("a", 1))), map[string]int{}, `region "a" is not registered`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Decide(c.w.in)
			if got := replicasOf(d); !maps.Equal(got, c.want) {
				t.Errorf("split: got %v; want %v", got, c.want)
			}
			if d.Reason != c.wantReason {
				t.Errorf("reason: got %q; want %q", d.Reason, c.wantReason)
			}
		})
	}
}

func TestFailover(t *testing.T) {
	policy := func(r *api.Resource, f api.FailoverPolicy) *api.Resource {
		f.Enabled = true
		r.Failover = &f
		return r
	}
	// A status in which region b's share stands in for a.
	stoodIn := &api.ResourceStatus{UID: "u1", Revision: 1, Regions: map[string]api.RegionShare{"b": {FailoverFrom: "a"}}}
	cases := []struct {
		name       string
		w          *world
		want       map[string]int
		wantFrom   map[string]string
		wantReason string
	}{
		{"down long enough: the share moves",
			newWorld(policy(resource(4, rt("a", 1), rt("b", 1)), api.FailoverPolicy{After: api.D(time.Minute)})).
				region("a", down(2*time.Minute)).region("b"),
			map[string]int{"b": 4}, map[string]string{"b": "a"}, ""},
		{"down, not long enough: it stays",
			newWorld(policy(resource(4, rt("a", 1), rt("b", 1)), api.FailoverPolicy{After: api.D(time.Minute)})).
				region("a", down(30*time.Second)).region("b"),
			map[string]int{"a": 2, "b": 2}, map[string]string{}, ""},
		{"suspect is not down",
			newWorld(policy(resource(4, rt("a", 1), rt("b", 1)), api.FailoverPolicy{})).
				region("a", health(api.HealthSuspect)).region("b"),
			map[string]int{"a": 2, "b": 2}, map[string]string{}, ""},
		// Bug fixed: a region listed twice in toRegions lost replicas
		// (4 of 6 placed).
		{"toRegions, never a down one, a duplicate once",
			newWorld(policy(resource(6, rt("a", 1)), api.FailoverPolicy{ToRegions: []string{"c", "b", "c", "d"}})).
				region("a", down(time.Hour)).region("b").region("c").region("d", down(time.Hour)),
			map[string]int{"b": 3, "c": 3}, map[string]string{"b": "a", "c": "a"}, ""},
		{"no stand-in up: the share stays, with a reason",
			newWorld(policy(resource(2, rt("a", 1), rt("b", 1)), api.FailoverPolicy{})).
				region("a", down(time.Hour)).region("b", down(time.Hour)),
			map[string]int{"a": 1, "b": 1}, map[string]string{}, "region b is down and no failover region is up"},
		{"no failover policy: nothing moves",
			newWorld(resource(2, rt("a", 1), rt("b", 1))).region("a", down(time.Hour)).region("b"),
			map[string]int{"a": 1, "b": 1}, map[string]string{}, ""},
		{"back without failBack: the stand-ins keep it",
			newWorld(policy(resource(4, rt("a", 1), rt("b", 1)), api.FailoverPolicy{})).
				region("a", reports("u1", api.PhaseReady, 2, 1, 1, "")).region("b").status(stoodIn),
			map[string]int{"b": 4}, map[string]string{"b": "a"}, ""},
		{"back with failBack, not ready: both run it",
			newWorld(policy(resource(4, rt("a", 1), rt("b", 1)), api.FailoverPolicy{FailBack: true})).
				region("a", reports("u1", api.PhaseProvision, 2, 1, 1, "")).region("b").status(stoodIn),
			map[string]int{"a": 2, "b": 4}, map[string]string{"b": "a"}, ""},
		{"back with failBack and ready: home again",
			newWorld(policy(resource(4, rt("a", 1), rt("b", 1)), api.FailoverPolicy{FailBack: true})).
				region("a", reports("u1", api.PhaseReady, 2, 1, 1, "")).region("b").status(stoodIn),
			map[string]int{"a": 2, "b": 2}, map[string]string{}, ""},
		// Bug fixed: a region that came back lent (or moved) its share
		// as it stood after it had received another region's as a
		// stand-in: failing back, the stand-ins got a copy of that too
		// (9 replicas where 8 were due).
		{"failing back lends only the region's own share",
			newWorld(policy(resource(6, rt("a", 1), rt("b", 1), rt("c", 1)), api.FailoverPolicy{ToRegions: []string{"b", "c"}, FailBack: true})).
				region("a", down(time.Hour)).region("b", reports("u1", api.PhaseProvision, 2, 1, 1, "")).region("c").
				status(&api.ResourceStatus{UID: "u1", Revision: 1, Regions: map[string]api.RegionShare{"c": {FailoverFrom: "b"}}}),
			map[string]int{"b": 3, "c": 5}, map[string]string{"b": "a", "c": "b"}, ""},
		{"a region that came back keeps what it stands in for",
			newWorld(policy(resource(6, rt("a", 1), rt("b", 1), rt("c", 1)), api.FailoverPolicy{ToRegions: []string{"b", "c"}})).
				region("a", down(time.Hour)).region("b").region("c").
				status(&api.ResourceStatus{UID: "u1", Revision: 1, Regions: map[string]api.RegionShare{"c": {FailoverFrom: "b"}}}),
			map[string]int{"b": 1, "c": 5}, map[string]string{"b": "a", "c": "b"}, ""},
		{"unhealthy long enough with onUnhealthy: the share moves",
			newWorld(policy(resource(4, rt("a", 1), rt("b", 1)), api.FailoverPolicy{After: api.D(time.Minute), OnUnhealthy: true})).
				region("a", reports("u1", api.PhaseProvision, 2, 1, 1, ""), unhealthyFor(2*time.Minute)).region("b", reports("u1", api.PhaseReady, 2, 1, 1, "")),
			map[string]int{"b": 4}, map[string]string{"b": "a"}, ""},
		{"unhealthy, not long enough: it stays",
			newWorld(policy(resource(4, rt("a", 1), rt("b", 1)), api.FailoverPolicy{After: api.D(time.Minute), OnUnhealthy: true})).
				region("a", reports("u1", api.PhaseProvision, 2, 1, 1, ""), unhealthyFor(30*time.Second)).region("b", reports("u1", api.PhaseReady, 2, 1, 1, "")),
			map[string]int{"a": 2, "b": 2}, map[string]string{}, ""},
		{"unhealthy without onUnhealthy: it stays",
			newWorld(policy(resource(4, rt("a", 1), rt("b", 1)), api.FailoverPolicy{After: api.D(time.Minute)})).
				region("a", reports("u1", api.PhaseProvision, 2, 1, 1, ""), unhealthyFor(time.Hour)).region("b", reports("u1", api.PhaseReady, 2, 1, 1, "")),
			map[string]int{"a": 2, "b": 2}, map[string]string{}, ""},
		{"unhealthy, its share not live: it stays",
			newWorld(policy(resource(4, rt("a", 1), rt("b", 1)), api.FailoverPolicy{OnUnhealthy: true})).
				region("a", reports("u1", api.PhaseProvision, 2, 1, 1, ""), unhealthyFor(time.Hour), func(r *Region) { r.Live = false }).region("b"),
			map[string]int{"a": 2, "b": 2}, map[string]string{}, ""},
		// An unhealthy region that is up still stands in for a Down one.
		{"unhealthy, no stand-in up: the share stays, with a reason",
			newWorld(policy(resource(4, rt("a", 1), rt("b", 1)), api.FailoverPolicy{OnUnhealthy: true})).
				region("a", reports("u1", api.PhaseProvision, 2, 1, 1, ""), unhealthyFor(time.Hour)).region("b", down(time.Hour)),
			map[string]int{"a": 4}, map[string]string{"a": "b"}, "region a is unhealthy for the resource and no failover region is up"},
		// Bug fixed: a region that came back (no failBack) while every
		// stand-in was down said it was down itself, and the resource
		// never showed ready.
		{"back, no stand-in up: it runs its share without complaint",
			newWorld(policy(resource(4, rt("a", 1)), api.FailoverPolicy{ToRegions: []string{"b"}})).
				region("a", reports("u1", api.PhaseReady, 4, 1, 1, "")).region("b", down(time.Hour)).status(stoodIn),
			map[string]int{"a": 4}, map[string]string{}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Decide(c.w.in)
			from := map[string]string{}
			for _, tg := range d.Targets {
				if tg.FailoverFrom != "" {
					from[tg.Region] = tg.FailoverFrom
				}
				if tg.Placement != nil && tg.Placement.FailoverFrom != tg.FailoverFrom {
					t.Errorf("%s: placement failoverFrom %q; want %q", tg.Region, tg.Placement.FailoverFrom, tg.FailoverFrom)
				}
			}
			if got := replicasOf(d); !maps.Equal(got, c.want) {
				t.Errorf("split: got %v; want %v", got, c.want)
			}
			if !maps.Equal(from, c.wantFrom) {
				t.Errorf("failoverFrom: got %v; want %v", from, c.wantFrom)
			}
			if d.Reason != c.wantReason {
				t.Errorf("reason: got %q; want %q", d.Reason, c.wantReason)
			}
		})
	}
}

func TestPlacementContent(t *testing.T) {
	r := resource(3, rt("a", 2), rt("b", 1))
	r.Spec.Compute.Env = map[string]string{"A": "1"}
	r.Overrides = map[string]api.SpecOverride{"b": {Flavor: "large", Image: "img", Env: map[string]string{"B": "2"}}}
	d := Decide(newWorld(r).region("a").region("b").in)
	cases := []struct {
		region   string
		replicas int
		flavor   string
		image    string
		env      map[string]string
		resolved string // the image spec's ref, "" for none
	}{
		{"a", 2, "small", "busybox", map[string]string{"A": "1"}, ""},
		{"b", 1, "large", "img", map[string]string{"A": "1", "B": "2"}, "t/busybox:latest"},
	}
	for _, c := range cases {
		tg, _ := d.Target(c.region)
		p := tg.Placement
		if p == nil {
			t.Fatalf("%s: no placement", c.region)
		}
		if got := p.Resource; got.Replicas != c.replicas || got.Spec.Flavor != c.flavor || got.Spec.Compute.Image != c.image || !maps.Equal(got.Spec.Compute.Env, c.env) {
			t.Errorf("%s: got %d of %s %s %v; want %d of %s %s %v", c.region, got.Replicas, got.Spec.Flavor, got.Spec.Compute.Image, got.Spec.Compute.Env,
				c.replicas, c.flavor, c.image, c.env)
		}
		if p.Flavor == nil || p.Flavor.Name != c.flavor || p.Flavor.ResourceVersion != 0 {
			t.Errorf("%s flavor: got %+v; want %s without a store revision", c.region, p.Flavor, c.flavor)
		}
		if got := imageRef(p); got != c.resolved {
			t.Errorf("%s image: got %q; want %q", c.region, got, c.resolved)
		}
	}
	if r.Spec.Compute.Image != "busybox" || len(r.Spec.Compute.Env) != 1 {
		t.Errorf("the resource changed under the decision: %+v", r.Spec.Compute)
	}
}

func imageRef(p *api.Placement) string {
	if p.Image == nil {
		return ""
	}
	return p.Image.Ref
}

func TestPlacementMissingFlavor(t *testing.T) {
	r := resource(3, rt("a", 2), rt("b", 1))
	r.Overrides = map[string]api.SpecOverride{"b": {Flavor: "missing"}}
	d := Decide(newWorld(r).region("a").region("b").in)
	if b, _ := d.Target("b"); b.Placement != nil || d.Reason != `flavor "missing" not found (region b)` {
		t.Errorf("missing flavor: placement %v, reason %q; want none and the reason", b.Placement, d.Reason)
	}
	if a, _ := d.Target("a"); a.Placement == nil {
		t.Errorf("missing flavor in b: a got no placement; want one")
	}
	if d.Status == nil || d.Status.Phase != api.PhaseProvision || d.Status.Reason != d.Reason {
		t.Errorf("missing flavor: status %+v; want provision with the reason", d.Status)
	}
}

func TestRemovals(t *testing.T) {
	r := resource(2, rt("a", 1))
	d := Decide(newWorld(r).
		region("a").
		region("b", reports("old-uid", api.PhaseReady, 1, 1, 1, "")).
		region("c", reports("u1", api.PhaseReady, 1, 1, 1, ""), func(r *Region) { r.Linked = false }).
		in)
	if want := []Removal{{Region: "b", UID: "old-uid"}}; !slices.Equal(d.Remove, want) {
		t.Errorf("removals: got %v; want %v (any uid, linked regions only)", d.Remove, want)
	}
}

func TestDeletion(t *testing.T) {
	deleting := func() *api.Resource {
		r := resource(2, rt("a", 1))
		at := t0.Add(-time.Minute)
		r.DeletionRequestedAt = &at
		return r
	}
	cases := []struct {
		name       string
		w          *world
		wantRemove []Removal
		finalize   bool
		reason     string
	}{
		{"every region settled: finalize", newWorld(deleting()).region("a").region("b"), nil, true, ""},
		{"a share left: remove it and wait",
			newWorld(deleting()).region("a", reports("u1", api.PhaseReady, 2, 1, 1, "")).region("b"),
			[]Removal{{"a", "u1"}}, false, "waiting for a to destroy it"},
		{"unsettled without a share: remove by the resource's uid",
			newWorld(deleting()).region("a", func(r *Region) { r.Settled = false }).region("b", func(r *Region) { r.Settled = false }),
			[]Removal{{"a", "u1"}, {"b", "u1"}}, false, "waiting for a, b to destroy it"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Decide(c.w.in)
			if !slices.Equal(d.Remove, c.wantRemove) || d.Finalize != c.finalize {
				t.Errorf("got remove %v finalize %v; want %v %v", d.Remove, d.Finalize, c.wantRemove, c.finalize)
			}
			if len(d.Targets) != 0 {
				t.Errorf("targets: got %v; want none for a deleted resource", d.Targets)
			}
			if c.finalize {
				if d.Status != nil {
					t.Errorf("status: got %+v; want none written when finalizing", d.Status)
				}
				return
			}
			if d.Status == nil || d.Status.Phase != api.PhaseDestroy || d.Status.Reason != c.reason {
				t.Errorf("status: got %+v; want destroy, %q", d.Status, c.reason)
			}
		})
	}
}

func TestStatus(t *testing.T) {
	cases := []struct {
		name       string
		w          *world
		wantPhase  api.Phase
		wantReason string
		wantReady  int
	}{
		{"every region ready", newWorld(resource(3, rt("a", 2), rt("b", 1))).
			region("a", reports("u1", api.PhaseReady, 2, 1, 1, "")).region("b", reports("u1", api.PhaseReady, 1, 1, 1, "")),
			api.PhaseReady, "", 3},
		{"a region not reported yet", newWorld(resource(3, rt("a", 2), rt("b", 1))).
			region("a").region("b"), api.PhaseCreated, "waiting for a", 0},
		{"a region reports ready with an old generation", newWorld(resource(3, rt("a", 2), rt("b", 1))).
			region("a", reports("u1", api.PhaseReady, 2, 1, 0, "")).region("b", reports("u1", api.PhaseReady, 1, 1, 1, "")),
			api.PhaseProvision, "3/3 ready", 3},
		{"an error names its region", newWorld(resource(3, rt("a", 2), rt("b", 1))).
			region("a", reports("u1", api.PhaseReady, 2, 1, 1, "")).
			region("b", reports("u1", api.PhaseError, 1, 1, 1, ""), func(r *Region) { r.Share.Reason = "replica x on n: boom" }),
			api.PhaseError, "b: replica x on n: boom", 2},
		{"a share of another uid is not counted", newWorld(resource(1, rt("a", 1))).
			region("a", reports("old", api.PhaseReady, 1, 1, 1, "")), api.PhaseCreated, "waiting for a", 0},
		{"no region to run it", newWorld(resource(1, rt("x", 1))), api.PhaseError, `region "x" is not registered`, 0},
		{"an unreachable region that failed over: shown, not counted", newWorld(resource(2, rt("b", 1))).
			region("a", reports("u1", api.PhaseReady, 2, 1, 1, ""), func(r *Region) { r.Live = false }).
			region("b", reports("u1", api.PhaseReady, 2, 1, 1, "a")),
			api.PhaseReady, "", 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := Decide(c.w.in).Status
			if st == nil {
				t.Fatal("status: got none; want one (nothing stored)")
			}
			if st.Phase != c.wantPhase || st.Reason != c.wantReason || st.Ready != c.wantReady {
				t.Errorf("status: got %s %q ready %d; want %s %q ready %d", st.Phase, st.Reason, st.Ready, c.wantPhase, c.wantReason, c.wantReady)
			}
			if !st.Since.Equal(t0) || !st.UpdatedAt.Equal(t0) {
				t.Errorf("since %v updated %v; want both %v", st.Since, st.UpdatedAt, t0)
			}
		})
	}
}

func TestStatusUnchangedIsNotWritten(t *testing.T) {
	w := newWorld(resource(3, rt("a", 2), rt("b", 1))).
		region("a", reports("u1", api.PhaseReady, 2, 1, 1, "")).region("b", reports("u1", api.PhaseProvision, 1, 1, 1, ""))
	first := Decide(w.in).Status
	if first == nil {
		t.Fatal("first status: got none")
	}
	w.in.Status = first
	w.in.Now = t0.Add(time.Minute)
	if st := Decide(w.in).Status; st != nil {
		t.Errorf("same shares a minute later: got a status %+v; want none written", st)
	}
	w.in.Regions[1].Share.Ready = 1
	w.in.Regions[1].Share.Phase = api.PhaseReady
	st := Decide(w.in).Status
	if st == nil || st.Phase != api.PhaseReady || !st.Since.Equal(w.in.Now) || !st.UpdatedAt.Equal(w.in.Now) {
		t.Fatalf("b ready: got %+v; want ready since now", st)
	}
	w.in.Status = st
	w.in.Regions[1].Share.Ready, w.in.Regions[1].Share.Phase = 0, api.PhaseProvision
	w.in.Regions[1].Share.UpdatedAt = t0.Add(2 * time.Minute)
	w.in.Now = t0.Add(3 * time.Minute)
	st = Decide(w.in).Status
	if st == nil || st.Phase != api.PhaseProvision || !st.Since.Equal(w.in.Now) {
		t.Fatalf("b not ready again: got %+v; want provision since now", st)
	}
	w.in.Status = st
	w.in.Regions[1].Share.Reason = "something else"
	w.in.Now = t0.Add(4 * time.Minute)
	if st2 := Decide(w.in).Status; st2 == nil || !st2.Since.Equal(st.Since) {
		t.Errorf("same phase, other reason: got %+v; want written with since %v kept", st2, st.Since)
	}
}

// rollingWorld is a resource at revision 2 (generation 2) over a, b, c
// in that order, whose stored status is still at revision 1, with the
// regions' shares at the given revisions and phases.
func rollingWorld(policy api.RolloutPolicy, shares map[string]struct {
	rev   int64
	phase api.Phase
}, stored *api.RolloutStatus) *world {
	r := resource(6, rt("c", 1), rt("a", 1), rt("b", 1))
	r.Revision, r.Generation, r.Rollout = 2, 2, policy
	w := newWorld(r)
	for _, name := range []string{"a", "b", "c"} {
		s := shares[name]
		gen := int64(1)
		if s.rev == 2 {
			gen = 2
		}
		w.region(name, reports("u1", s.phase, 2, s.rev, gen, ""))
	}
	st := &api.ResourceStatus{UID: "u1", Revision: 1, ObservedGeneration: 1, Phase: api.PhaseReady}
	if stored != nil {
		st.Revision, st.Rollout = 2, stored
	}
	return w.status(st)
}

type shareAt = struct {
	rev   int64
	phase api.Phase
}

func TestRollout(t *testing.T) {
	rolling := &api.RolloutStatus{Revision: 2, FromRevision: 1, State: api.RolloutProgressing, StartedAt: t0.Add(-time.Minute)}
	cases := []struct {
		name      string
		policy    api.RolloutPolicy
		shares    map[string]shareAt
		stored    *api.RolloutStatus
		wantSent  []string
		wantState string
		wantAt    string
		wantMsg   string
		revert    bool
	}{
		{"a new revision starts in the first region of the schedule", api.RolloutPolicy{},
			map[string]shareAt{"a": {1, api.PhaseReady}, "b": {1, api.PhaseReady}, "c": {1, api.PhaseReady}}, nil,
			[]string{"c"}, api.RolloutProgressing, "c", "", false},
		{"the next region once the previous one is ready", api.RolloutPolicy{},
			map[string]shareAt{"a": {1, api.PhaseReady}, "b": {1, api.PhaseReady}, "c": {2, api.PhaseReady}}, rolling,
			[]string{"a", "c"}, api.RolloutProgressing, "a", "", false},
		{"not while the previous one provisions", api.RolloutPolicy{},
			map[string]shareAt{"a": {1, api.PhaseReady}, "b": {1, api.PhaseReady}, "c": {2, api.PhaseProvision}}, rolling,
			[]string{"c"}, api.RolloutProgressing, "c", "", false},
		{"every region ready: succeeded", api.RolloutPolicy{},
			map[string]shareAt{"a": {2, api.PhaseReady}, "b": {2, api.PhaseReady}, "c": {2, api.PhaseReady}}, rolling,
			[]string{"a", "b", "c"}, api.RolloutSucceeded, "", "", false},
		{"paused where it is: the rolling region gets the pause", api.RolloutPolicy{Paused: true},
			map[string]shareAt{"a": {1, api.PhaseReady}, "b": {1, api.PhaseReady}, "c": {2, api.PhaseProvision}}, rolling,
			[]string{"c"}, api.RolloutPaused, "c", "paused in c", false},
		// Bug fixed: a region finishing while paused let the next one
		// start the new revision.
		{"paused: the next region does not start", api.RolloutPolicy{Paused: true},
			map[string]shareAt{"a": {1, api.PhaseReady}, "b": {1, api.PhaseReady}, "c": {2, api.PhaseReady}}, rolling,
			[]string{"c"}, api.RolloutPaused, "a", "paused in a", false},
		{"paused before it started: no region gets it", api.RolloutPolicy{Paused: true},
			map[string]shareAt{"a": {1, api.PhaseReady}, "b": {1, api.PhaseReady}, "c": {1, api.PhaseReady}}, nil,
			nil, api.RolloutPaused, "c", "paused in c", false},
		{"a failure stops it", api.RolloutPolicy{},
			map[string]shareAt{"a": {1, api.PhaseReady}, "b": {1, api.PhaseReady}, "c": {2, api.PhaseError}}, rolling,
			[]string{"c"}, api.RolloutFailed, "c", "revision 2 failed in c: boom", false},
		{"a failure with autoRevert asks for the revert", api.RolloutPolicy{AutoRevert: true},
			map[string]shareAt{"a": {1, api.PhaseReady}, "b": {1, api.PhaseReady}, "c": {2, api.PhaseError}}, rolling,
			[]string{"c"}, api.RolloutFailed, "c", "revision 2 failed in c: boom", true},
		{"an undo is never reverted", api.RolloutPolicy{AutoRevert: true},
			map[string]shareAt{"a": {1, api.PhaseReady}, "b": {1, api.PhaseReady}, "c": {2, api.PhaseError}},
			&api.RolloutStatus{Revision: 2, FromRevision: 1, State: api.RolloutProgressing, Revert: true},
			[]string{"c"}, api.RolloutFailed, "c", "revision 2 failed in c: boom", false},
		{"an old-revision error is not the rollout's", api.RolloutPolicy{AutoRevert: true},
			map[string]shareAt{"a": {1, api.PhaseReady}, "b": {1, api.PhaseReady}, "c": {1, api.PhaseError}}, rolling,
			[]string{"c"}, api.RolloutProgressing, "c", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := rollingWorld(c.policy, c.shares, c.stored)
			for i := range w.in.Regions {
				if s := w.in.Regions[i].Share; s.Phase == api.PhaseError {
					s.Reason = "boom"
				}
			}
			d := Decide(w.in)
			checkRolloutCase(t, d, c.shares, c.wantSent)
			ro := d.Rollout
			if ro == nil || ro.State != c.wantState || ro.Region != c.wantAt || ro.Message != c.wantMsg {
				t.Fatalf("rollout: got %+v; want %s at %q %q", ro, c.wantState, c.wantAt, c.wantMsg)
			}
			if ro.Revision != 2 || ro.FromRevision != 1 {
				t.Errorf("rollout: revision %d from %d; want 2 from 1", ro.Revision, ro.FromRevision)
			}
			if c.stored == nil && !ro.StartedAt.Equal(t0) {
				t.Errorf("new rollout started at %v; want now", ro.StartedAt)
			}
			var want *Revert
			if c.revert {
				want = &Revert{Tenant: "t", Name: "web", UID: "u1", Failed: 2, To: 1, Why: "auto-revert: revision 2 failed in c: boom"}
			}
			if !reflect.DeepEqual(d.Revert, want) {
				t.Errorf("revert: got %+v; want %+v", d.Revert, want)
			}
		})
	}
}

// checkRolloutCase checks what was sent (at revision 2) and what was
// held (at the revision it runs), and that the status names the rollout.
func checkRolloutCase(t *testing.T, d Decision, shares map[string]shareAt, wantSent []string) {
	t.Helper()
	var sent []string
	for _, tg := range d.Targets {
		p := tg.Placement
		switch {
		case p == nil:
			t.Errorf("%s: no placement; want one at revision 2 or at the one it runs", tg.Region)
		case tg.Revision == 2:
			sent = append(sent, tg.Region)
			if p.Resource.Revision != 2 {
				t.Errorf("%s: sent revision %d; want 2", tg.Region, p.Resource.Revision)
			}
		case tg.Revision != shares[tg.Region].rev || p.Resource.Revision != tg.Revision:
			t.Errorf("%s held at revision %d (placement %d); want the one it runs, %d", tg.Region, tg.Revision, p.Resource.Revision, shares[tg.Region].rev)
		case p.Resource.Spec.Compute.Image != fmt.Sprintf("busybox:%d", tg.Revision) || p.Resource.Generation != 2:
			t.Errorf("%s held: placement image %q generation %d; want revision %d's spec at generation 2",
				tg.Region, p.Resource.Spec.Compute.Image, p.Resource.Generation, tg.Revision)
		}
	}
	if !slices.Equal(sent, wantSent) {
		t.Errorf("sent to %v; want %v", sent, wantSent)
	}
	ro := d.Rollout
	if d.Status != nil && ro != nil && ro.State == api.RolloutProgressing && d.Status.Phase == api.PhaseProvision &&
		!strings.HasPrefix(d.Status.Reason, "rolling out revision 2: ") {
		t.Errorf("status reason %q; want it to name the rollout", d.Status.Reason)
	}
}

// Scaling reaches the regions that wait for their turn, at the revision
// they run, whether the rollout progresses, is paused or failed. Bug
// fixed: a waiting region got no placement, so a scale-down reached it
// only at its turn (never, with the rollout paused or failed).
func TestRolloutScalesWaitingRegions(t *testing.T) {
	cases := []struct {
		name   string
		policy api.RolloutPolicy
		c      api.Phase
	}{
		{"progressing", api.RolloutPolicy{}, api.PhaseProvision},
		{"paused", api.RolloutPolicy{Paused: true}, api.PhaseProvision},
		{"failed", api.RolloutPolicy{}, api.PhaseError},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rolling := &api.RolloutStatus{Revision: 2, FromRevision: 1, State: api.RolloutProgressing, StartedAt: t0.Add(-time.Minute)}
			w := rollingWorld(tc.policy, map[string]shareAt{"a": {1, api.PhaseReady}, "b": {1, api.PhaseReady}, "c": {2, tc.c}}, rolling)
			w.in.Resource.Replicas, w.in.Resource.Generation = 3, 3 // scaled 6 → 3
			d := Decide(w.in)
			for _, name := range []string{"a", "b", "c"} {
				tg, ok := d.Target(name)
				if !ok || tg.Placement == nil {
					t.Fatalf("%s: target %+v; want a placement", name, tg)
				}
				wantRev := int64(1)
				if name == "c" {
					wantRev = 2
				}
				p := &tg.Placement.Resource
				if p.Replicas != 1 || p.Revision != wantRev || p.Generation != 3 {
					t.Errorf("%s: placement of %d replicas at revision %d, generation %d; want 1 at revision %d, generation 3",
						name, p.Replicas, p.Revision, p.Generation, wantRev)
				}
			}
			if tc.c == api.PhaseProvision {
				if ro := d.Rollout; ro == nil || ro.Region != "c" {
					t.Errorf("rollout: got %+v; want it still at c", ro)
				}
			}
		})
	}
}

// A held region whose revision is no longer stored keeps what it has.
func TestRolloutHeldRegionWithoutItsRevision(t *testing.T) {
	w := rollingWorld(api.RolloutPolicy{}, map[string]shareAt{"a": {1, api.PhaseReady}, "b": {1, api.PhaseReady}, "c": {2, api.PhaseProvision}}, nil)
	w.in.Resource.UID = "u2" // testCatalog stores revisions of u1 only
	for i := range w.in.Regions {
		w.in.Regions[i].Share.UID = "u2"
	}
	w.in.Status.UID = "u2"
	d := Decide(w.in)
	for _, name := range []string{"a", "b"} {
		if tg, _ := d.Target(name); tg.Placement != nil || tg.Revision != 1 {
			t.Errorf("%s: got placement %v at revision %d; want none, held at 1", name, tg.Placement != nil, tg.Revision)
		}
	}
}

// A region that observed the current generation at an older revision is
// not ready at the resource's revision: the status does not say Ready
// while the rollout holds regions back.
func TestStatusNotReadyWhileRegionsRunAnOlderRevision(t *testing.T) {
	rolling := &api.RolloutStatus{Revision: 2, FromRevision: 1, State: api.RolloutProgressing, StartedAt: t0.Add(-time.Minute)}
	w := rollingWorld(api.RolloutPolicy{Paused: true}, map[string]shareAt{"a": {1, api.PhaseReady}, "b": {1, api.PhaseReady}, "c": {2, api.PhaseReady}}, rolling)
	for i := range w.in.Regions {
		w.in.Regions[i].Share.ObservedGeneration = 2
	}
	st := Decide(w.in).Status
	if st == nil || st.Phase == api.PhaseReady {
		t.Errorf("status: got %+v; want not Ready while a and b run revision 1", st)
	}
}

func TestRolloutAfterFailureIsAnUndo(t *testing.T) {
	w := rollingWorld(api.RolloutPolicy{AutoRevert: true}, map[string]shareAt{"a": {1, api.PhaseReady}, "b": {1, api.PhaseReady}, "c": {1, api.PhaseReady}}, nil)
	w.in.Status.Rollout = &api.RolloutStatus{Revision: 1, State: api.RolloutFailed}
	ro := Decide(w.in).Rollout
	if ro == nil || !ro.Revert || ro.State != api.RolloutProgressing {
		t.Errorf("rollout after a failed one: got %+v; want a progressing undo", ro)
	}
}

func TestOrderOf(t *testing.T) {
	r := &api.Resource{Schedule: api.ScheduleRule{Regions: []api.RegionTarget{{Name: "b"}, {Name: "a"}}}}
	got := orderOf(r, map[string]int{"a": 1, "b": 1, "z": 1, "c": 1})
	if !slices.Equal(got, []string{"b", "a", "c", "z"}) {
		t.Errorf("orderOf: got %v; want the schedule's order, then stand-ins by name: [b a c z]", got)
	}
}
