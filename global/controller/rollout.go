package controller

import (
	"context"
	"fmt"
	"slices"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
)

// Reverter makes a new revision from an old one on the master's behalf
// (the API service implements it), fenced by the master's leadership.
type Reverter interface {
	AutoRevert(ctx context.Context, tenant, name, uid string, failed, to int64, why string, guard store.Guard) error
}

type revertRequest struct {
	tenant, name, uid string
	failed, to        int64
	why               string
}

// rollout decides which regions get the resource's current revision. A
// new revision goes region by region, in the schedule's order: the next
// region gets it only once the previous one runs it ready; regions after
// the one rolling keep what they have. Within a region the region's
// controller rolls in batches (maxSurge, maxUnavailable). A region whose
// new replicas fail stops the rollout; with autoRevert the master asks for
// a new revision with the spec the rollout started from.
func (c *Controller) rollout(r *api.Resource, desired map[string]int) (map[string]bool, *api.RolloutStatus, *revertRequest) {
	send := make(map[string]bool, len(desired))
	for region := range desired {
		send[region] = true
	}
	st := c.status(r)
	if st == nil {
		return send, nil, nil // a new resource: nothing to roll from
	}
	ro := st.Rollout
	switch {
	case ro != nil && ro.Revision == r.Revision:
		cp := *ro
		ro = &cp
	case st.Revision != 0 && st.Revision < r.Revision:
		undo := ro != nil && ro.State == api.RolloutFailed
		ro = &api.RolloutStatus{Revision: r.Revision, FromRevision: st.Revision, State: api.RolloutProgressing, StartedAt: c.o.Clock(), Revert: undo}
	default:
		return send, ro, nil
	}
	if ro.State == api.RolloutSucceeded || ro.State == api.RolloutReverted {
		return send, ro, nil
	}
	var revert *revertRequest
	current := ""
	for _, region := range orderOf(r, desired) {
		sh := c.regionShare(region, r)
		if sh == nil {
			continue // a region new to the resource starts at the new revision
		}
		done := sh.Revision == r.Revision && sh.Phase == api.PhaseReady && sh.ObservedGeneration == r.Generation
		if done {
			continue
		}
		if current != "" {
			send[region] = false // waits for the region rolling now
			continue
		}
		current = region
		if sh.Revision == r.Revision && sh.Phase == api.PhaseError {
			ro.State = api.RolloutFailed
			ro.Message = fmt.Sprintf("revision %d failed in %s: %s", r.Revision, region, sh.Reason)
			if r.Rollout.AutoRevert && ro.FromRevision > 0 && !ro.Revert {
				revert = &revertRequest{
					tenant: r.Tenant, name: r.Name, uid: r.UID, failed: r.Revision, to: ro.FromRevision,
					why: fmt.Sprintf("auto-revert: revision %d failed in %s", r.Revision, region),
				}
			}
		}
	}
	ro.Region = current
	switch {
	case ro.State == api.RolloutFailed:
	case current == "":
		ro.State, ro.Message = api.RolloutSucceeded, ""
	case r.Rollout.Paused:
		ro.State, ro.Message = api.RolloutPaused, "paused in "+current
	default:
		ro.State, ro.Message = api.RolloutProgressing, ""
	}
	return send, ro, revert
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
