package placement

import (
	"cmp"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// status aggregates the regions' shares into the resource's status and
// returns it, or nil when the stored status says the same. phase and
// reason, when set, override the computed ones (deletion); reason alone
// explains a placement problem. The split's note, and the reserve
// weighed on it, go with it.
func (v *view) status(s split, phase api.Phase, reason string, ro *api.RolloutStatus) *api.ResourceStatus {
	desired := s.replicas
	st := &api.ResourceStatus{
		UID:                v.r.UID,
		Replicas:           v.r.Replicas,
		Revision:           v.r.Revision,
		ObservedGeneration: v.r.Generation,
		Regions:            map[string]api.RegionShare{},
		Split:              s.note,
		Autoscale:          v.in.Autoscale,
	}
	if phase == "" {
		st.Reserve = v.reserve(desired)
	}
	t := tally{allReady: len(desired) > 0}
	for _, name := range v.statusRegions(desired) {
		want, isDesired := desired[name]
		v.count(st, &t, name, want, isDesired)
	}
	st.Phase, st.Reason = t.verdict(st, len(desired) > 0, phase, reason)
	if len(st.Regions) == 0 {
		st.Regions = nil
	}
	st.Rollout = ro
	if st.Job != nil && st.Phase == api.PhaseProvision && len(st.Job.Runs) > 0 {
		r := st.Job.Runs[0]
		st.Reason = fmt.Sprintf("run %d: %d active, %d succeeded, %d failed", r.Number, r.Active, r.Succeeded, r.Failed)
	}
	if ro != nil && ro.State == api.RolloutProgressing && st.Phase == api.PhaseProvision && ro.Region != "" {
		st.Reason = fmt.Sprintf("rolling out revision %d: %s", ro.Revision, ro.Region)
	}
	return v.changed(st)
}

// statusRegions are the regions a status speaks of, by name: the desired
// ones and every linked one that reports the resource.
func (v *view) statusRegions(desired map[string]int) []string {
	regions := make(map[string]bool, len(desired))
	for name := range desired {
		regions[name] = true
	}
	for _, name := range v.names {
		if v.share(name) != nil {
			regions[name] = true
		}
	}
	return slices.Sorted(maps.Keys(regions))
}

// tally is what the regions' shares add up to, beyond the counts.
type tally struct {
	allReady bool
	// The first region (by name) in error, in created with a reason, and
	// not reported yet.
	errRegion, createdRegion, missing string
}

// count adds one region's share to st and t.
func (v *view) count(st *api.ResourceStatus, t *tally, name string, want int, isDesired bool) {
	sh := v.share(name)
	reg := v.regions[name]
	live := reg != nil && reg.Linked && reg.Live
	switch {
	case !isDesired && !live && sh != nil:
		// What an unreachable region last said of a share it no longer
		// has (failed over): shown, but not counted.
		rs := sh.RegionShare
		rs.Job = nil
		rs.Reason = "region unreachable; last known state"
		st.Regions[name] = rs
		return
	case sh == nil:
		if isDesired {
			st.Regions[name] = api.RegionShare{Phase: api.PhaseCreated, Replicas: want, Reason: "not yet reported by the region"}
			t.allReady = false
			t.missing = cmp.Or(t.missing, name)
		}
		return
	}
	rs := takeJob(st, sh.RegionShare, want)
	st.Regions[name] = rs
	st.Ready += rs.Ready
	st.Updated += rs.Updated
	st.Backends = append(st.Backends, sh.Backends...)
	if !isDesired {
		t.allReady = false
		return
	}
	if !v.readyAsAsked(rs, want) {
		t.allReady = false
	}
	switch {
	case rs.Phase == api.PhaseError:
		t.errRegion = cmp.Or(t.errRegion, name)
	case rs.Phase == api.PhaseCreated && rs.Reason != "":
		t.createdRegion = cmp.Or(t.createdRegion, name)
	}
}

// readyAsAsked reports whether a region's share is ready as the resource
// asks now: its generation, its revision, want replicas.
func (v *view) readyAsAsked(rs api.RegionShare, want int) bool {
	return rs.Phase == api.PhaseReady && rs.ObservedGeneration == v.r.Generation && rs.Revision == v.r.Revision && rs.Replicas == want
}

// takeJob moves a Job's state from a region's share to the status: a
// Job runs in one region (the one that wants replicas), and its state is
// the resource's, shown once.
func takeJob(st *api.ResourceStatus, rs api.RegionShare, want int) api.RegionShare {
	if rs.Job != nil {
		if want > 0 || st.Job == nil {
			st.Job = rs.Job
		}
		rs.Job = nil
	}
	return rs
}

// verdict is the resource's phase and reason: an override first, then
// what stops it (no region, an error), then how far it got.
func (t *tally) verdict(st *api.ResourceStatus, anyDesired bool, phase api.Phase, reason string) (api.Phase, string) {
	switch {
	case phase != "":
		return phase, reason
	case reason != "" && !anyDesired:
		return api.PhaseError, reason
	case t.allReady && reason == "":
		return api.PhaseReady, ""
	case t.errRegion != "":
		return api.PhaseError, t.errRegion + ": " + st.Regions[t.errRegion].Reason
	case reason != "":
		return api.PhaseProvision, reason
	case t.createdRegion != "":
		return api.PhaseCreated, t.createdRegion + ": " + st.Regions[t.createdRegion].Reason
	case t.missing != "" && st.Ready == 0:
		return api.PhaseCreated, "waiting for " + t.missing
	default:
		return api.PhaseProvision, fmt.Sprintf("%d/%d ready", st.Ready, st.Replicas)
	}
}

// changed stamps st against the stored status: since carries over while
// the phase stays, and nil means nothing but the time would change.
func (v *view) changed(st *api.ResourceStatus) *api.ResourceStatus {
	cur := v.in.Status
	st.Since = v.in.Now
	if cur != nil && cur.Phase == st.Phase && !cur.Since.IsZero() {
		st.Since = cur.Since
	}
	if cur != nil {
		old := *cur
		old.UpdatedAt = time.Time{}
		if reflect.DeepEqual(&old, st) {
			return nil
		}
	}
	st.UpdatedAt = v.in.Now
	return st
}
