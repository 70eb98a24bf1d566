package controller

import (
	"fmt"
	"reflect"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/events"
	"github.com/stratahq/strata/internal/store"
)

// sameWorkload reports whether replica a runs exactly what pl asks for.
func sameWorkload(a *api.Assignment, pl *api.Placement) bool {
	var flavor api.FlavorSpec
	if pl.Flavor != nil {
		flavor = pl.Flavor.Spec
	}
	return a.Flavor == flavor && reflect.DeepEqual(a.Spec, pl.Resource.Spec) && reflect.DeepEqual(a.Image, pl.Image)
}

// reconciler owns bringing one resource's replicas towards its
// placement: it keeps the healthy ones, rolls out new revisions and
// scales, and hands placing, drains, Jobs, load balancers' backends and
// the share to the parts that own them.
type reconciler struct {
	o         *Options
	w         *assignmentWriter
	retries   *retries
	drains    *drainer
	endpoints *endpoints
	placer    *placer
	jobs      *jobs
	shares    *shares
}

// reconcile brings one resource's replicas towards its placement. It reads
// the view, and records writes and events in the plan.
func (rc *reconciler) reconcile(v *view, p *plan, key string) {
	pl, havePlacement := rc.o.Caches.Placements.Get(key)
	var live []*replica
	// dying are replicas asked to go that their agent has not confirmed
	// gone; stopping the ones on reachable nodes still run there.
	dying, stopping := 0, 0
	for _, r := range v.replicas(key) {
		if r.a.Desired == api.DesiredDestroyed {
			if !rc.w.finishDestroy(v, p, key, r) {
				dying++
				if lost, _ := v.lost(r.a.Node); !lost {
					stopping++
				}
			}
			continue
		}
		live = append(live, r)
	}
	if !havePlacement || pl.Value.Resource.Deleting() {
		var placed *store.Item[api.Placement]
		if havePlacement {
			placed = &pl
		}
		rc.tearDown(v, p, key, placed, live, dying)
		return
	}

	pr := &pl.Value.Resource
	// Replicas of an earlier incarnation (deleted and re-created under
	// the same name) are not this resource's.
	live = keep(live, func(r *replica) bool {
		if r.a.ResourceUID == pr.UID {
			return true
		}
		rc.w.destroy(v, p, key, r, "belongs to an earlier incarnation of the resource")
		return false
	})
	if pr.Kind == api.KindImage {
		rc.shares.write(v, p, key, pl.Value, nil, api.PhaseReady, "")
		return
	}
	if pr.Kind == api.KindJob {
		rc.jobs.reconcile(v, p, key, pl.Value, live)
		return
	}
	live = keep(live, func(r *replica) bool { return rc.healthy(v, p, key, r) })
	live = rc.drains.moveOff(v, p, key, pl.Value, live)
	live = rc.rollout(v, p, key, pl.Value, live, stopping)
	rc.endpoints.update(p, key, pl.Value, live)
	unplaced := rc.placer.schedule(v, p, key, pl.Value, live)
	rc.shares.write(v, p, key, pl.Value, live, "", unplaced)
}

// tearDown destroys the live replicas of a resource the region no longer
// runs: removed from the region (pl nil) or deleted. Once none is left,
// its placement and share go; until then its share says how many are.
func (rc *reconciler) tearDown(v *view, p *plan, key string, pl *store.Item[api.Placement], live []*replica, dying int) {
	why := "resource removed from the region"
	if pl != nil {
		why = "resource deleted"
	}
	for _, r := range live {
		rc.w.destroy(v, p, key, r, why)
	}
	remaining := dying + len(live)
	switch {
	case remaining > 0 && pl != nil:
		rc.shares.write(v, p, key, pl.Value, nil, api.PhaseDestroy, fmt.Sprintf("%d replicas left to destroy", remaining))
	case remaining > 0:
	default:
		if pl != nil {
			p.deletePlacement(key, pl.ModRevision)
			p.event(key, rc.w.event(events.TypeNormal, "ResourceDestroyed", "resource/"+key, "every replica is gone"))
		}
		if _, ok := rc.o.Caches.Shares.Get(key); ok {
			p.deleteShare(key)
		}
	}
}

// healthy reports whether replica r is kept; one that is lost, failed
// (when a retry is allowed) or stuck past its deadline is destroyed, to
// be replaced.
func (rc *reconciler) healthy(v *view, p *plan, key string, r *replica) bool {
	if lost, why := v.lost(r.a.Node); lost {
		rc.w.destroy(v, p, key, r, why)
		p.event(key, rc.w.event(events.TypeWarning, "ReplicaLost", "replica/"+r.a.ID, why+"; replacing it"))
		return false
	}
	if r.phase == api.PhaseError {
		if !rc.retries.allow(key, v.now) {
			v.changesAt(key, rc.retries.next(key))
			return true
		}
		why := "failed: " + reasonOf(r)
		rc.w.destroy(v, p, key, r, why)
		p.event(key, rc.w.event(events.TypeWarning, "ReplicaReplaced", "replica/"+r.a.ID, why))
		return false
	}
	if late, why := rc.w.overdue(v, r); late {
		rc.retries.allow(key, v.now)
		rc.w.destroy(v, p, key, r, why)
		p.event(key, rc.w.event(events.TypeWarning, "DeadlineExceeded", "replica/"+r.a.ID, why+"; replacing it"))
		return false
	}
	return true
}

// rollout creates and destroys replicas so that the resource converges to
// its replica count at its current revision, replacing replicas of older
// revisions make-before-break: at most MaxSurge extra replicas exist, and
// the ready ones never drop below Replicas - MaxUnavailable. A replica
// asked to go exists until its agent confirms it gone (stopping of them,
// on nodes not lost): a replacement started before would run beside it,
// more than asked (found by e2e/chaos, TestChaosRegressionRolloutSurge).
func (rc *reconciler) rollout(v *view, p *plan, key string, pl *api.Placement, live []*replica, stopping int) []*replica {
	pr := &pl.Resource
	slots := slotsOf(live)
	cur, old := rc.byRevision(p, key, pl, slots)
	if len(old) > 0 && !pr.Rollout.Paused {
		return rc.replace(v, p, key, pl, live, slots, cur, old, stopping)
	}
	n, total := pr.Replicas, len(slots)
	for total+stopping < n {
		r := rc.w.create(v, p, key, pl, "")
		live = append(live, r)
		total++
	}
	if total > n {
		extra := slotsOf(alive(live))
		sortForRemoval(v, extra)
		for _, r := range extra[:total-n] {
			rc.w.destroy(v, p, key, r, fmt.Sprintf("scaled down to %d", n))
		}
	}
	return alive(live)
}

// byRevision splits slots into the replicas of the current revision and
// the old ones. An old replica whose spec is the current one's (a
// rollback, a revert) is relabelled in place instead of replaced: its
// generation stays, the agent has nothing to do.
func (rc *reconciler) byRevision(p *plan, key string, pl *api.Placement, slots []*replica) (cur, old []*replica) {
	pr := &pl.Resource
	for _, r := range slots {
		if r.a.Revision != pr.Revision && r.modRev != 0 && sameWorkload(r.a, pl) {
			a := *r.a
			a.Revision = pr.Revision
			a.Labels = pr.Labels
			p.updateAssignment(key, &a, r.modRev)
			r.a = &a
		}
		if r.a.Revision == pr.Revision {
			cur = append(cur, r)
		} else {
			old = append(old, r)
		}
	}
	return cur, old
}

// replace makes before it breaks: replicas of the current revision are
// created while at most maxSurge extra exist, and old ones destroyed only
// while the ready count stays at or above max(replicas - maxUnavailable,
// minHealthy). Stopping replicas still run (see rollout): they count
// against the surge.
func (rc *reconciler) replace(v *view, p *plan, key string, pl *api.Placement, live, slots, cur, old []*replica, stopping int) []*replica {
	pr := &pl.Resource
	n := pr.Replicas
	surge, unavailable := pr.Rollout.MaxSurge, pr.Rollout.MaxUnavailable
	if surge == 0 && unavailable == 0 {
		surge = 1
	}
	total := len(slots)
	for len(cur) < n && total+stopping < n+surge {
		r := rc.w.create(v, p, key, pl, "")
		live, cur = append(live, r), append(cur, r)
		total++
	}
	ready := 0
	for _, r := range slots {
		if r.phase == api.PhaseReady {
			ready++
		}
	}
	minReady := max(n-unavailable, pr.Rollout.MinHealthy, 0)
	// Old replicas that are not ready hold nothing up: go first.
	sortForRemoval(v, old)
	for _, r := range old {
		if r.phase == api.PhaseReady && ready-1 < minReady {
			continue
		}
		rc.w.destroy(v, p, key, r, fmt.Sprintf("replaced by revision %d", pr.Revision))
		if r.phase == api.PhaseReady {
			ready--
		}
	}
	return alive(live)
}
