package placement

import (
	"fmt"
	"slices"

	"github.com/stratahq/strata/internal/api"
)

// rollout decides which regions get the resource's current revision. A
// new revision goes region by region, in the schedule's order (then
// stand-ins by name): the next region gets it only once the previous one
// runs it ready; regions after the one rolling keep what they have.
// Within a region the region's controller rolls in batches (maxSurge,
// maxUnavailable). A paused rollout stays where it is: no region that
// does not run the new revision yet gets it, and the ones that do get the
// pause. A region whose new replicas fail stops the rollout; with
// autoRevert the master asks for a new revision with the spec the
// rollout started from. It returns, per desired region, whether to send
// it the placement.
func (v *view) rollout(desired map[string]int) (map[string]bool, *api.RolloutStatus, *Revert) {
	send := make(map[string]bool, len(desired))
	for region := range desired {
		send[region] = true
	}
	ro, active := v.rolloutState()
	if !active {
		return send, ro, nil
	}
	var revert *Revert
	current := ""
	for _, region := range orderOf(v.r, desired) {
		sh := v.share(region)
		if sh == nil || v.rolledOut(sh) {
			continue // a region new to the resource starts at the new revision
		}
		if v.r.Rollout.Paused && sh.Revision != v.r.Revision {
			send[region] = false // paused before it reached this region
		}
		if current != "" {
			send[region] = false // waits for the region rolling now
			continue
		}
		current = region
		if sh.Revision == v.r.Revision && sh.Phase == api.PhaseError {
			ro.State = api.RolloutFailed
			ro.Message = fmt.Sprintf("revision %d failed in %s: %s", v.r.Revision, region, sh.Reason)
			revert = v.revert(ro)
		}
	}
	ro.Region = current
	switch {
	case ro.State == api.RolloutFailed:
	case current == "":
		ro.State, ro.Message = api.RolloutSucceeded, ""
	case v.r.Rollout.Paused:
		ro.State, ro.Message = api.RolloutPaused, "paused in "+current
	default:
		ro.State, ro.Message = api.RolloutProgressing, ""
	}
	return send, ro, revert
}

// rolloutState is the rollout of the resource's revision: the stored one
// (a copy), or a new one when the revision moved on since the stored
// status. active is false when there is nothing to roll.
func (v *view) rolloutState() (ro *api.RolloutStatus, active bool) {
	st := v.stored()
	if st == nil {
		return nil, false // a new resource: nothing to roll from
	}
	if st.Rollout != nil {
		cp := *st.Rollout
		ro = &cp
	}
	switch {
	case ro != nil && ro.Revision == v.r.Revision:
	case st.Revision != 0 && st.Revision < v.r.Revision:
		// A rollout that follows a failed one undoes it: it is never
		// reverted in turn.
		undo := ro != nil && ro.State == api.RolloutFailed
		ro = &api.RolloutStatus{
			Revision: v.r.Revision, FromRevision: st.Revision, State: api.RolloutProgressing,
			StartedAt: v.in.Now, Revert: undo,
		}
	default:
		return ro, false
	}
	return ro, ro.State != api.RolloutSucceeded
}

// rolledOut reports whether a region runs the resource's current revision
// ready at its current generation.
func (v *view) rolledOut(sh *Share) bool {
	return sh.Revision == v.r.Revision && sh.Phase == api.PhaseReady && sh.ObservedGeneration == v.r.Generation
}

// revert is the auto-revert a failure asks for, if the policy wants one
// and the rollout is not itself an undo. Its why carries the failure
// (ro.Message: the revision, the region, the region's reason): the
// failed state lasts one pass of the master, the revert follows at once,
// and the revision's cause and the event are what stays of it.
func (v *view) revert(ro *api.RolloutStatus) *Revert {
	if !v.r.Rollout.AutoRevert || ro.FromRevision <= 0 || ro.Revert {
		return nil
	}
	return &Revert{
		Tenant: v.r.Tenant, Name: v.r.Name, UID: v.r.UID, Failed: v.r.Revision, To: ro.FromRevision,
		Why: "auto-revert: " + ro.Message,
	}
}

// orderOf is the order regions get a new revision: the schedule's order,
// then any other region (failover stand-ins) by name.
func orderOf(r *api.Resource, desired map[string]int) []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range r.Schedule.Regions {
		if _, ok := desired[t.Name]; ok && !seen[t.Name] {
			out = append(out, t.Name)
			seen[t.Name] = true
		}
	}
	var rest []string
	for name := range desired {
		if !seen[name] {
			rest = append(rest, name)
		}
	}
	slices.Sort(rest)
	return append(out, rest...)
}
