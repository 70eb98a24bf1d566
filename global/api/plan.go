package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/stratahq/strata/global/placement"
	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
)

// Plan answers what req would do, without doing it: every resource in
// the caller's reach (its tenant's; every tenant's for an admin who
// names none) is decided by placement.Decide, the master's own code, as
// the master would decide it now and again with req's actions applied,
// both on what this replica knows: the stored resources and statuses
// (the regions' shares as last aggregated), the regions' health and
// their last beats' headroom. Scales and applies pass the admission of
// a real write (defaults, validation, references, quota) on a
// transaction that is never committed; one the API would refuse for its
// quota is shown blocked, any other refusal fails the plan. A plan
// writes nothing, so reading the tenant's resources is enough to ask
// one; losing regions needs a role that reads regions too.
func (s *Server) Plan(ctx context.Context, tenant string, req PlanRequest) (api.Plan, error) {
	tenant, everyTenant, err := planScope(ctx, tenant, req)
	if err != nil {
		return api.Plan{}, err
	}
	rs := s.resources
	if err := caught(ctx, rs.resources, &rs.wroteResources); err != nil {
		return api.Plan{}, err
	}
	if err := caught(ctx, rs.statuses, &rs.wroteStatuses); err != nil {
		return api.Plan{}, err
	}
	regions, err := s.regions.all(ctx)
	if err != nil {
		return api.Plan{}, err
	}
	w := newPlanWorld(regions)
	if w.lost, err = w.lose(req.LoseRegions); err != nil {
		return api.Plan{}, err
	}
	changed, blocked, err := s.planChanges(ctx, tenant, req)
	if err != nil {
		return api.Plan{}, err
	}
	out := w.planAll(rs, planCatalog{caches: s.caches}, changed, blocked, func(r *api.Resource) bool {
		return (everyTenant || r.Tenant == tenant) && !r.Deleting()
	})
	return out.Plan, nil
}

// planScope checks that the caller may ask req in tenant and returns the
// tenant, or that it plans over every tenant (an admin who names none).
func planScope(ctx context.Context, tenant string, req PlanRequest) (string, bool, error) {
	id, err := authorize(ctx, readResources)
	if err != nil {
		return "", false, err
	}
	everyTenant := tenant == "" && id.allTenants()
	if !everyTenant {
		if tenant, err = tenantScope(ctx, readResources, tenant); err != nil {
			return "", false, err
		}
	}
	if len(req.LoseRegions) > 0 {
		if _, err := authorize(ctx, readRegions); err != nil {
			return "", false, err
		}
	}
	if len(req.LoseRegions)+len(req.Scale)+len(req.Apply) == 0 {
		return "", false, api.Invalid("", "a plan needs an action: loseRegions, scale or apply")
	}
	return tenant, everyTenant, nil
}

// planAll plans every stored resource in reach, then the creations
// (changed resources not stored), then the creations the quota blocks;
// by tenant and name.
func (w *planWorld) planAll(rs *Resources, cat placement.Catalog, changed map[string]*api.Resource, blocked map[string]string, inReach func(*api.Resource) bool) planOut {
	now := time.Now()
	var out planOut
	for _, it := range rs.resources.List() {
		r := it.Value
		if !inReach(r) {
			continue
		}
		next, named := changed[it.Name]
		delete(changed, it.Name)
		if next == nil {
			next = r
		}
		var st *api.ResourceStatus
		if cur, ok := rs.statuses.Get(it.Name); ok && cur.Value.UID == r.UID {
			st = cur.Value
		}
		p := w.plan(now, cat, r, next, st)
		p.Blocked = blocked[it.Name]
		if named || p.Blocked != "" || !maps.Equal(p.Before, p.After) {
			out.add(p)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(changed)) { // creations
		p := w.plan(now, cat, nil, changed[key], nil)
		p.Blocked = blocked[key]
		out.add(p)
	}
	for key, why := range blocked {
		if !out.has(key) { // a creation the quota refuses
			t, n := state.SplitResourceName(key)
			out.add(api.ResourcePlan{Tenant: t, Name: n, Before: map[string]int{}, After: map[string]int{}, Blocked: why})
		}
	}
	slices.SortFunc(out.Resources, func(a, b api.ResourcePlan) int {
		return strings.Compare(a.Tenant+"/"+a.Name, b.Tenant+"/"+b.Name)
	})
	if out.Resources == nil {
		out.Resources = []api.ResourcePlan{}
	}
	return out
}

// PlanRequest is api.PlanRequest with, per resource to apply, whether
// its replicas were left out (an update then keeps the stored count).
type PlanRequest struct {
	LoseRegions []string
	Scale       map[string]int
	Apply       []PlanApply
}

// PlanApply is one resource of PlanRequest.Apply.
type PlanApply struct {
	Resource      api.Resource
	ReplicasUnset bool
}

// planOut gathers a plan's resources and totals.
type planOut struct {
	api.Plan
	keys map[string]bool
}

func (p *planOut) add(rp api.ResourcePlan) {
	if p.keys == nil {
		p.keys = map[string]bool{}
	}
	p.keys[state.ResourceName(rp.Tenant, rp.Name)] = true
	p.Resources = append(p.Resources, rp)
	for _, m := range rp.Moves {
		if m.From != "" && m.To != "" {
			p.Moved += m.Replicas
		}
	}
	p.Unfit += rp.Unfit
	if rp.Blocked != "" {
		p.Blocked++
	}
}

func (p *planOut) has(key string) bool { return p.keys[key] }

// planChanges admits the request's scales and applies as real writes
// would be, without committing them: the resources they would store,
// by key, and per key why the API would refuse one for its quota (its
// change is then left out).
func (s *Server) planChanges(ctx context.Context, tenant string, req PlanRequest) (map[string]*api.Resource, map[string]string, error) {
	changed := map[string]*api.Resource{}
	blocked := map[string]string{}
	admitted := func(key string, r *api.Resource, err error) error {
		switch {
		case errors.Is(err, api.ErrQuotaExceeded):
			blocked[key] = err.Error()
		case err != nil:
			return err
		default:
			changed[key] = r
		}
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(req.Scale)) {
		t, err := resourceScope(ctx, readResources, tenant, name)
		if err != nil {
			return nil, nil, err
		}
		r, err := s.resources.dryScale(ctx, t, name, req.Scale[name])
		if err := admitted(state.ResourceName(t, name), r, err); err != nil {
			return nil, nil, err
		}
	}
	for i := range req.Apply {
		in := req.Apply[i]
		t, err := tenantScope(ctx, readResources, cmp.Or(tenant, in.Resource.Tenant))
		if err != nil {
			return nil, nil, err
		}
		if in.Resource.Tenant != "" && in.Resource.Tenant != t {
			return nil, nil, api.Invalid(fmt.Sprintf("apply[%d].tenant", i), "%q does not match the tenant of the request, %q", in.Resource.Tenant, t)
		}
		key := state.ResourceName(t, in.Resource.Name)
		if _, twice := changed[key]; twice || blocked[key] != "" {
			return nil, nil, api.Invalid(fmt.Sprintf("apply[%d].name", i), "resource %q is changed twice in the plan", in.Resource.Name)
		}
		r, err := s.resources.dryApply(ctx, t, in)
		if err := admitted(key, r, err); err != nil {
			return nil, nil, err
		}
	}
	return changed, blocked, nil
}

// dryScale is Scale admitted on a transaction that is never committed:
// the resource as it would be stored.
func (s *Resources) dryScale(ctx context.Context, tenant, name string, replicas int) (*api.Resource, error) {
	it, ok := s.resources.Get(state.ResourceName(tenant, name))
	if !ok || it.Value.Deleting() {
		return nil, api.NotFound("resource", name)
	}
	if err := api.ValidateReplicas(it.Value.Kind, replicas); err != nil {
		return nil, err
	}
	next := *it.Value
	next.Replicas = replicas
	w := resourceWrite{s: s, tenant: tenant, r: &next, stored: it.Value, txn: s.st.Store.Txn()}
	if err := admit(ctx, resourceAdmission, atCommit, &w); err != nil {
		return nil, err
	}
	return &next, nil
}

// dryApply is the create or update a manifest would make of in, passed
// through the admission of a real one (defaults, validation,
// references, quota) on a transaction that is never committed: the
// resource as it would be stored.
func (s *Resources) dryApply(ctx context.Context, tenant string, in PlanApply) (*api.Resource, error) {
	if err := api.ValidateName("name", in.Resource.Name); err != nil {
		return nil, err
	}
	r := in.Resource
	w := resourceWrite{s: s, op: "create", tenant: tenant, r: &r, o: WriteOptions{ReplicasUnset: in.ReplicasUnset}}
	it, ok := s.resources.Get(state.ResourceName(tenant, r.Name))
	if ok && !it.Value.Deleting() {
		w.op, w.stored = "update", it.Value
	}
	if err := admit(ctx, resourceAdmission, onRequest, &w); err != nil {
		return nil, err
	}
	next := *w.r
	if w.stored != nil {
		// An update applies the settable fields to what is stored, as
		// Resources.Update does.
		if in.ReplicasUnset {
			next.Replicas = w.stored.Replicas
		}
		cur := *w.stored
		newSpec := !api.SameJSON(cur.Spec, next.Spec)
		cur.Labels, cur.Spec, cur.Replicas, cur.Schedule = next.Labels, next.Spec, next.Replicas, next.Schedule
		cur.Overrides, cur.Failover, cur.Rollout = next.Overrides, next.Failover, next.Rollout
		cur.MaxRevisionHistory = next.MaxRevisionHistory
		cur.Generation++
		if newSpec {
			cur.Revision++
		}
		next = cur
	} else {
		next.UID, next.Revision, next.Generation = "planned", 1, 1
	}
	w.r, w.txn = &next, s.st.Store.Txn()
	if err := admit(ctx, resourceAdmission, onStored, &w); err != nil {
		return nil, err
	}
	if err := admit(ctx, resourceAdmission, atCommit, &w); err != nil {
		return nil, err
	}
	return &next, nil
}

// planWorld is what the plan knows of the regions, as placement takes
// it, now and after the loss of some.
type planWorld struct {
	regions []placement.Region
	// lost are the regions the plan loses.
	lost map[string]bool
}

func newPlanWorld(regions []api.Region) *planWorld {
	w := &planWorld{}
	for _, r := range regions {
		reg := placement.Region{Name: r.Name, Registered: true, Linked: true, Live: true}
		if st := r.Status; st != nil {
			reg.Health, reg.HealthSince = st.Health, st.Since
			if st.Headroom != nil {
				reg.Headroom = make(map[string]int, len(st.Headroom))
				for _, h := range st.Headroom {
					reg.Headroom[h.Flavor] = h.Replicas
				}
			}
		}
		w.regions = append(w.regions, reg)
	}
	return w
}

// lose checks that every region named is registered and returns them as
// a set.
func (w *planWorld) lose(names []string) (map[string]bool, error) {
	lost := map[string]bool{}
	for i, name := range names {
		field := fmt.Sprintf("loseRegions[%d]", i)
		if err := api.ValidateName(field, name); err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(w.regions, func(r placement.Region) bool { return r.Name == name }) {
			return nil, api.Invalid(field, "region %q is not registered", name)
		}
		lost[name] = true
	}
	return lost, nil
}

// input is placement's input for r with status st; with lost, those
// regions are Down since long before any failover.after, and no longer
// reachable.
func (w *planWorld) input(now time.Time, cat placement.Catalog, r *api.Resource, st *api.ResourceStatus, lost map[string]bool) placement.Input {
	in := placement.Input{Now: now, Resource: r, Status: st, Catalog: cat, Regions: slices.Clone(w.regions)}
	for i := range in.Regions {
		reg := &in.Regions[i]
		if st != nil {
			if sh, ok := st.Regions[reg.Name]; ok {
				reg.Share = &placement.Share{UID: st.UID, RegionShare: sh}
			}
		}
		if lost[reg.Name] {
			reg.Health, reg.HealthSince, reg.Live = api.HealthDown, time.Time{}, false
		}
	}
	return in
}

// plan decides r (nil for a creation) as it is now, and next after the
// actions.
func (w *planWorld) plan(now time.Time, cat placement.Catalog, r, next *api.Resource, st *api.ResourceStatus) api.ResourcePlan {
	p := api.ResourcePlan{Tenant: next.Tenant, Name: next.Name, Kind: next.Kind, Before: map[string]int{}}
	if r != nil {
		p.Before = splitOf(placement.Decide(w.input(now, cat, r, st, nil)))
	}
	if st != nil && next.UID != st.UID {
		st = nil
	}
	d := placement.Decide(w.input(now, cat, next, st, w.lost))
	p.After = splitOf(d)
	p.Moves = moves(p.Before, p.After)
	p.Unfit, p.Reason = d.Unfit, d.Reason
	if d.Status != nil {
		p.Split, p.Reserve = d.Status.Split, d.Status.Reserve
	} else if st != nil {
		p.Split, p.Reserve = st.Split, st.Reserve // the stored status says it already
	}
	return p
}

// splitOf is a decision's replicas per region (regions with none
// left out).
func splitOf(d placement.Decision) map[string]int {
	out := map[string]int{}
	for _, t := range d.Targets {
		if t.Replicas > 0 {
			out[t.Region] += t.Replicas
		}
	}
	return out
}

// moves pairs the regions that lose replicas with those that gain them,
// by name; what is left over is created ("" from) or removed ("" to).
func moves(before, after map[string]int) []api.ReplicaMove {
	type delta struct {
		region string
		n      int
	}
	var losing, gaining []delta
	for _, name := range slices.Sorted(maps.Keys(union(before, after))) {
		switch d := after[name] - before[name]; {
		case d < 0:
			losing = append(losing, delta{name, -d})
		case d > 0:
			gaining = append(gaining, delta{name, d})
		}
	}
	var out []api.ReplicaMove
	for len(losing) > 0 && len(gaining) > 0 {
		n := min(losing[0].n, gaining[0].n)
		out = append(out, api.ReplicaMove{From: losing[0].region, To: gaining[0].region, Replicas: n})
		if losing[0].n -= n; losing[0].n == 0 {
			losing = losing[1:]
		}
		if gaining[0].n -= n; gaining[0].n == 0 {
			gaining = gaining[1:]
		}
	}
	for _, l := range losing {
		out = append(out, api.ReplicaMove{From: l.region, Replicas: l.n})
	}
	for _, g := range gaining {
		out = append(out, api.ReplicaMove{To: g.region, Replicas: g.n})
	}
	return out
}

func union(a, b map[string]int) map[string]int {
	out := maps.Clone(a)
	for k, v := range b {
		out[k] += v
	}
	return out
}

// planCatalog resolves what placements name from the caches; a plan
// reads no revision (a region a rollout holds back shows its share, not
// its placement).
type planCatalog struct{ caches *state.Caches }

func (k planCatalog) Flavor(name string) (*api.Flavor, bool) {
	it, ok := k.caches.Flavors.Get(name)
	if !ok {
		return nil, false
	}
	return it.Value, true
}

func (k planCatalog) Image(tenant, name string) (*api.ImageSpec, bool) {
	it, ok := k.caches.Resources.Get(state.ResourceName(tenant, name))
	if !ok || it.Value.Kind != api.KindImage || it.Value.Spec.Image == nil {
		return nil, false
	}
	return it.Value.Spec.Image, true
}

func (planCatalog) Revision(string, string, string, int64) (*api.Revision, bool) { return nil, false }
