package controller

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
)

// reconcile decides where one resource should run, tells the regions,
// and aggregates what they report into the resource's status.
func (c *Controller) reconcile(now time.Time, guard Guard, w *writes, key string) {
	links := c.linkList()
	it, ok := c.o.Caches.Resources.Get(key)
	if !ok {
		// Gone from the global store: nothing of it may stay anywhere.
		for _, l := range links {
			if sh := l.share(key); sh != nil {
				l.remove(key, sh.UID)
			}
		}
		if _, ok := c.o.Caches.Statuses.Get(key); ok {
			w.deleteStatus(key)
		}
		return
	}
	r := it.Value

	if r.Deleting() {
		waiting := []string{}
		for _, l := range links {
			if sh := l.share(key); sh != nil || !l.settled(key) {
				uid := r.UID
				if sh != nil {
					uid = sh.UID
				}
				l.remove(key, uid)
			}
			if !l.settled(key) {
				waiting = append(waiting, l.region)
			}
		}
		if len(waiting) == 0 {
			w.finalize(key, it.ModRevision)
			return
		}
		sort.Strings(waiting)
		c.writeStatus(now, w, r, nil, api.PhaseDestroy, "waiting for "+strings.Join(waiting, ", ")+" to destroy it", nil)
		return
	}

	desired, from, reason := c.split(now, r)
	send, ro, revert := c.rollout(r, desired)
	if revert != nil {
		w.revert(*revert)
	}
	for region, n := range desired {
		l := c.link(region)
		if l == nil || !send[region] {
			continue
		}
		p, err := c.placement(r, region, n)
		if err != nil {
			reason = err.Error()
			continue
		}
		p.FailoverFrom = from[region]
		l.want(key, p)
	}
	for _, l := range links {
		if _, ok := desired[l.region]; ok {
			continue
		}
		if sh := l.share(key); sh != nil {
			l.remove(key, sh.UID)
		}
	}
	c.writeStatus(now, w, r, desired, "", reason, ro)
}

// split divides a resource's replicas over regions: the regions its
// schedule lists, weighted (largest remainder, ties to the first listed),
// or, when it lists none, every registered region. Images go to every
// candidate region (they have no replicas). With a failover policy, the
// share of a region that is Down moves to the failover regions (from
// names, per receiving region, the region it stands in for). It also
// returns why a region could not be used.
func (c *Controller) split(now time.Time, r *api.Resource) (map[string]int, map[string]string, string) {
	var targets []api.RegionTarget
	var reason string
	if len(r.Schedule.Regions) > 0 {
		for _, t := range r.Schedule.Regions {
			if _, ok := c.o.Caches.Regions.Get(t.Name); !ok {
				reason = fmt.Sprintf("region %q is not registered", t.Name)
				continue
			}
			targets = append(targets, t)
		}
	} else {
		for _, it := range c.o.Caches.Regions.List() {
			targets = append(targets, api.RegionTarget{Name: it.Name, Weight: 1})
		}
	}
	if n := r.Schedule.SpreadRegions; n > 0 {
		targets = c.spreadOver(targets, n)
	}
	out := make(map[string]int, len(targets))
	from := map[string]string{}
	if r.Kind == api.KindImage {
		for _, t := range targets {
			out[t.Name] = 0
		}
		return out, from, reason
	}
	out = weighted(r.Replicas, targets)
	if f := r.Failover; f != nil && f.Enabled {
		if why := c.failover(now, r, f, out, from); why != "" {
			reason = why
		}
	}
	return out, from, reason
}

// failover moves the share of every region that has been Down for
// f.After to the failover regions that are not Down. When the region
// returns, its share goes back to it if f.FailBack (make-before-break:
// the stand-ins keep their extra replicas until the region is ready
// again), else the stand-ins keep it and the region's stale copies are
// removed.
func (c *Controller) failover(now time.Time, r *api.Resource, f *api.FailoverPolicy, out map[string]int, from map[string]string) string {
	status := c.status(r)
	reason := ""
	for _, region := range slices.Sorted(maps.Keys(out)) {
		n := out[region]
		if n == 0 {
			continue
		}
		health, since := c.regionState(region)
		down := health == api.HealthDown && now.Sub(since) >= f.After.Duration
		movedBefore := failedOverFrom(status, region)
		back := !down && movedBefore
		switch {
		case down:
		case back && !f.FailBack:
			// Stay where the replicas went; the region's copies go.
		case back && f.FailBack:
			if sh := c.regionShare(region, r); sh != nil && sh.Phase == api.PhaseReady && sh.ObservedGeneration == r.Generation {
				continue // home again and ready: the stand-ins give it back
			}
			// Home but not ready yet: keep the stand-ins too.
			stand := c.standIns(r, f, region)
			for t, k := range weighted(n, stand) {
				if k > 0 {
					out[t] += k
					from[t] = region
				}
			}
			continue
		default:
			continue
		}
		stand := c.standIns(r, f, region)
		if len(stand) == 0 {
			reason = fmt.Sprintf("region %s is down and no failover region is up", region)
			continue
		}
		delete(out, region)
		for t, k := range weighted(n, stand) {
			if k > 0 {
				out[t] += k
				from[t] = region
			}
		}
	}
	return reason
}

// standIns are the regions that may take over region's share: the
// policy's toRegions, else the schedule's other regions, else every other
// registered region; never one that is Down.
func (c *Controller) standIns(r *api.Resource, f *api.FailoverPolicy, region string) []api.RegionTarget {
	var names []string
	switch {
	case len(f.ToRegions) > 0:
		names = f.ToRegions
	case len(r.Schedule.Regions) > 1:
		for _, t := range r.Schedule.Regions {
			names = append(names, t.Name)
		}
	default:
		for _, it := range c.o.Caches.Regions.List() {
			names = append(names, it.Name)
		}
	}
	var out []api.RegionTarget
	for _, n := range names {
		if n == region {
			continue
		}
		if _, ok := c.o.Caches.Regions.Get(n); !ok {
			continue
		}
		if h, _ := c.regionState(n); h == api.HealthDown {
			continue
		}
		out = append(out, api.RegionTarget{Name: n, Weight: 1})
	}
	return out
}

func (c *Controller) regionState(region string) (api.Health, time.Time) {
	if it, ok := c.o.Caches.RegionStatus.Get(region); ok {
		return it.Value.Health, it.Value.Since
	}
	return api.HealthUnknown, time.Time{}
}

func (c *Controller) status(r *api.Resource) *api.ResourceStatus {
	if it, ok := c.o.Caches.Statuses.Get(r.Key()); ok && it.Value.UID == r.UID {
		return it.Value
	}
	return nil
}

// regionShare is what region reports of r, if anything.
func (c *Controller) regionShare(region string, r *api.Resource) *share {
	l := c.link(region)
	if l == nil {
		return nil
	}
	if sh := l.share(r.Key()); sh != nil && sh.UID == r.UID {
		return sh
	}
	return nil
}

// failedOverFrom reports whether some region stands in for region.
func failedOverFrom(st *api.ResourceStatus, region string) bool {
	if st == nil {
		return false
	}
	for _, sh := range st.Regions {
		if sh.FailoverFrom == region {
			return true
		}
	}
	return false
}

// spreadOver picks n regions, healthy ones first, in the given order, and
// weighs them equally.
func (c *Controller) spreadOver(targets []api.RegionTarget, n int) []api.RegionTarget {
	var up, rest []api.RegionTarget
	for _, t := range targets {
		if c.regionHealth(t.Name) == api.HealthDown {
			rest = append(rest, t)
		} else {
			up = append(up, t)
		}
	}
	all := append(up, rest...)
	if len(all) > n {
		all = all[:n]
	}
	out := make([]api.RegionTarget, len(all))
	for i, t := range all {
		out[i] = api.RegionTarget{Name: t.Name, Weight: 1}
	}
	return out
}

func (c *Controller) regionHealth(region string) api.Health {
	if it, ok := c.o.Caches.RegionStatus.Get(region); ok {
		return it.Value.Health
	}
	return api.HealthUnknown
}

// weighted splits total by weights with the largest-remainder method;
// every listed region appears in the result (possibly with 0).
func weighted(total int, targets []api.RegionTarget) map[string]int {
	out := make(map[string]int, len(targets))
	sum := 0
	for _, t := range targets {
		sum += max(t.Weight, 0)
		out[t.Name] = 0
	}
	if sum == 0 || total == 0 {
		return out
	}
	type rem struct {
		i    int
		frac int
	}
	rems := make([]rem, len(targets))
	given := 0
	for i, t := range targets {
		share := total * max(t.Weight, 0)
		out[t.Name] = share / sum
		given += share / sum
		rems[i] = rem{i, share % sum}
	}
	sort.SliceStable(rems, func(a, b int) bool { return rems[a].frac > rems[b].frac })
	for k := 0; given < total; k++ {
		out[targets[rems[k%len(rems)].i].Name]++
		given++
	}
	return out
}

// placement builds what region should run of r: the spec with the
// region's overrides, its share of the replicas, the flavor and image
// resolved.
func (c *Controller) placement(r *api.Resource, region string, replicas int) (*api.Placement, error) {
	res := *r
	res.Replicas = replicas
	res.Status = nil
	res.ResourceVersion = 0
	res.Spec = copySpec(r.Spec)
	if o, ok := r.Overrides[region]; ok {
		if o.Flavor != "" {
			res.Spec.Flavor = o.Flavor
		}
		if cs := res.Spec.Compute; cs != nil {
			if o.Image != "" {
				cs.Image = o.Image
			}
			if len(o.Env) > 0 {
				env := maps.Clone(cs.Env)
				if env == nil {
					env = map[string]string{}
				}
				maps.Copy(env, o.Env)
				cs.Env = env
			}
		}
	}
	p := &api.Placement{Region: region, Resource: res}
	if res.Spec.Flavor != "" {
		f, ok := c.o.Caches.Flavors.Get(res.Spec.Flavor)
		if !ok {
			return nil, fmt.Errorf("flavor %q not found (region %s)", res.Spec.Flavor, region)
		}
		fl := *f.Value
		fl.ResourceVersion = 0
		p.Flavor = &fl
	}
	if cs := res.Spec.Compute; cs != nil && cs.Image != "" {
		if img, ok := c.o.Caches.Resources.Get(state.ResourceName(r.Tenant, cs.Image)); ok && img.Value.Kind == api.KindImage && img.Value.Spec.Image != nil {
			spec := *img.Value.Spec.Image
			p.Image = &spec
		}
	}
	return p, nil
}

func copySpec(s api.ResourceSpec) api.ResourceSpec {
	if s.Compute != nil {
		cs := *s.Compute
		s.Compute = &cs
	}
	return s
}

// writeStatus aggregates the regions' shares into the resource's status
// and writes it when it changed. phase and reason, when set, override the
// computed ones (deletion); reason alone explains a placement problem.
func (c *Controller) writeStatus(now time.Time, w *writes, r *api.Resource, desired map[string]int, phase api.Phase, reason string, ro *api.RolloutStatus) {
	st := &api.ResourceStatus{
		UID:                r.UID,
		Replicas:           r.Replicas,
		Revision:           r.Revision,
		ObservedGeneration: r.Generation,
		Regions:            map[string]api.RegionShare{},
	}
	regions := map[string]bool{}
	for name := range desired {
		regions[name] = true
	}
	for _, l := range c.linkList() {
		if sh := l.share(r.Key()); sh != nil && sh.UID == r.UID {
			regions[l.region] = true
		}
	}
	allReady := len(desired) > 0
	var errRegion, createdRegion, missing string
	for _, name := range slices.Sorted(maps.Keys(regions)) {
		var sh *share
		live := false
		if l := c.link(name); l != nil {
			sh = l.share(r.Key())
			live = l.live()
		}
		want, isDesired := desired[name]
		if !isDesired && !live && sh != nil && sh.UID == r.UID {
			// What an unreachable region last said of a share it no
			// longer has (failed over): shown, but not counted.
			rs := sh.RegionShare
			rs.Reason = "region unreachable; last known state"
			st.Regions[name] = rs
			continue
		}
		if sh == nil || sh.UID != r.UID {
			if isDesired {
				st.Regions[name] = api.RegionShare{Phase: api.PhaseCreated, Replicas: want, Reason: "not yet reported by the region"}
				allReady = false
				if missing == "" {
					missing = name
				}
			}
			continue
		}
		rs := sh.RegionShare
		st.Regions[name] = rs
		st.Ready += rs.Ready
		st.Updated += rs.Updated
		st.Backends = append(st.Backends, sh.Backends...)
		if !isDesired {
			allReady = false
			continue
		}
		if rs.Phase != api.PhaseReady || rs.ObservedGeneration != r.Generation || rs.Replicas != want {
			allReady = false
		}
		switch rs.Phase {
		case api.PhaseError:
			if errRegion == "" {
				errRegion = name
			}
		case api.PhaseCreated:
			if createdRegion == "" && rs.Reason != "" {
				createdRegion = name
			}
		}
	}
	switch {
	case phase != "":
		st.Phase, st.Reason = phase, reason
	case reason != "" && len(desired) == 0:
		st.Phase, st.Reason = api.PhaseError, reason
	case allReady && reason == "":
		st.Phase = api.PhaseReady
	case errRegion != "":
		st.Phase, st.Reason = api.PhaseError, errRegion+": "+st.Regions[errRegion].Reason
	case reason != "":
		st.Phase, st.Reason = api.PhaseProvision, reason
	case createdRegion != "":
		st.Phase, st.Reason = api.PhaseCreated, createdRegion+": "+st.Regions[createdRegion].Reason
	case missing != "" && st.Ready == 0:
		st.Phase, st.Reason = api.PhaseCreated, "waiting for "+missing
	default:
		st.Phase = api.PhaseProvision
		st.Reason = fmt.Sprintf("%d/%d ready", st.Ready, st.Replicas)
	}
	if len(st.Regions) == 0 {
		st.Regions = nil
	}
	st.Rollout = ro
	if ro != nil && ro.State == api.RolloutProgressing && st.Phase == api.PhaseProvision && ro.Region != "" {
		st.Reason = fmt.Sprintf("rolling out revision %d: %s", ro.Revision, ro.Region)
	}
	cur, ok := c.o.Caches.Statuses.Get(r.Key())
	st.Since = now
	if ok && cur.Value.Phase == st.Phase && !cur.Value.Since.IsZero() {
		st.Since = cur.Value.Since
	}
	if ok {
		old := *cur.Value
		old.UpdatedAt = time.Time{}
		if reflect.DeepEqual(&old, st) {
			return
		}
	}
	st.UpdatedAt = now
	w.putStatus(r.Key(), st)
}

// writes collects a pass's writes as the steps of a store.Batch, one
// group per resource, so that a pass over any number of resources (a
// failover moving hundreds) commits in fenced transactions that each fit
// under etcd.maxTxnOps, and a resource whose write fails stops alone.
type writes struct {
	st      *state.State
	batch   *store.Batch
	reverts []revertRequest
}

func (w *writes) revert(r revertRequest) { w.reverts = append(w.reverts, r) }

func newWrites(st *state.State) *writes { return &writes{st: st, batch: st.Store.Batch()} }

func (w *writes) putStatus(key string, s *api.ResourceStatus) {
	_ = w.st.Statuses.TxnPut(w.batch.Step(key), key, s) // build errors fail the step
}

func (w *writes) deleteStatus(key string) {
	w.st.Statuses.TxnDelete(w.batch.Step(key), key, 0)
}

// finalize forgets a deleted resource once no region holds anything of
// it: its record, its status and its revisions, in one step.
func (w *writes) finalize(key string, modRev int64) {
	t := w.batch.Step(key)
	tenant, name := state.SplitResourceName(key)
	w.st.Resources.TxnDelete(t, key, modRev)
	w.st.Statuses.TxnDelete(t, key, 0)
	t.DeletePrefix(w.st.Revisions.Key(state.RevisionPrefix(tenant, name)))
}

// ops counts the operations of the pass.
func (w *writes) ops() int { return w.batch.Ops() }

// commit writes every step, fenced by guard. It returns the revision of
// the last transaction that applied, also on error.
func (w *writes) commit(ctx context.Context, guard Guard) (int64, error) {
	res, err := w.batch.Guard(guard).Commit(ctx)
	return res.Revision, err
}
