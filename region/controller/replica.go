package controller

import (
	"sort"

	"github.com/stratahq/strata/internal/api"
)

// replica is one assignment with what the pass knows of it.
type replica struct {
	a      *api.Assignment
	modRev int64
	st     *api.AssignmentStatus
	phase  api.Phase
}

// slotsOf returns the replicas that count towards the replica count: a
// replacement whose original is still running shares its original's slot.
func slotsOf(live []*replica) []*replica {
	running := map[string]bool{}
	for _, r := range live {
		running[r.a.ID] = true
	}
	out := make([]*replica, 0, len(live))
	for _, r := range live {
		if r.a.Replaces != "" && running[r.a.Replaces] {
			continue
		}
		out = append(out, r)
	}
	return out
}

// alive drops replicas this pass has asked to destroy.
func alive(rs []*replica) []*replica {
	out := rs[:0]
	for _, r := range rs {
		if r.a.Desired == api.DesiredRunning {
			out = append(out, r)
		}
	}
	return out
}

// sortForRemoval orders replicas by how little removing them costs:
// unplaced, then not ready, then on cordoned nodes, then newest first.
func sortForRemoval(v *view, rs []*replica) {
	rank := func(r *replica) int {
		switch {
		case r.a.Node == "":
			return 0
		case r.phase != api.PhaseReady:
			return 1
		}
		if nv, ok := v.node(r.a.Node); ok && !nv.node.Schedulable {
			return 2
		}
		return 3
	}
	sort.SliceStable(rs, func(i, j int) bool {
		ri, rj := rank(rs[i]), rank(rs[j])
		if ri != rj {
			return ri < rj
		}
		return rs[i].a.CreatedAt.After(rs[j].a.CreatedAt)
	})
}

// keep returns the replicas of rs fn keeps, in rs's backing array.
func keep(rs []*replica, fn func(*replica) bool) []*replica {
	out := rs[:0]
	for _, r := range rs {
		if fn(r) {
			out = append(out, r)
		}
	}
	return out
}

// reasonOf is why a replica is in its phase: what its agent said, else
// the phase.
func reasonOf(r *replica) string {
	if r.st != nil && r.st.Reason != "" {
		return r.st.Reason
	}
	return string(r.phase)
}
