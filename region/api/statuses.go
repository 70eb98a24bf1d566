package api

import (
	"context"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/events"
	"github.com/stratahq/strata/region/state"
)

// reportStatus records what a node's agent observed. A status of an
// assignment that is not (or no longer) on the node is dropped: the agent
// is behind, and its report must not overwrite the new node's. Unchanged
// statuses are not written. The call returns once the rest is committed,
// so that the agent can retry on error.
func (s *Server) reportStatus(ctx context.Context, node string, reported []api.AssignmentStatus) error {
	now := time.Now()
	var (
		writes []reportedStatus
		evs    []events.Event
	)
	for _, st := range reported {
		a, ok := s.caches.Assignments.Get(st.ID)
		if !ok || a.Value.Node != node {
			s.log.Debug("dropping the status of a replica that is not on the reporting node", "node", node, "replica", st.ID)
			continue
		}
		st.Node = node
		var old *api.AssignmentStatus
		if it, ok := s.caches.Statuses.Get(st.ID); ok {
			old = it.Value
		}
		if old != nil && sameStatus(old, &st) {
			continue
		}
		st.UpdatedAt = now
		writes = append(writes, reportedStatus{status: st, assignment: a.CreateRevision})
		if ev, ok := s.phaseEvent(a.Value, old, &st); ok {
			evs = append(evs, ev)
		}
	}
	if len(writes) == 0 {
		return nil
	}
	if err := s.statuses.write(ctx, writes); err != nil {
		return err
	}
	for _, ev := range evs {
		s.events.Emit(ev)
	}
	return nil
}

func sameStatus(a, b *api.AssignmentStatus) bool {
	x, y := *a, *b
	x.UpdatedAt, y.UpdatedAt = time.Time{}, time.Time{}
	return api.SameJSON(&x, &y)
}

// phaseEvent returns the event of a replica becoming ready or failing.
func (s *Server) phaseEvent(a *api.Assignment, old, cur *api.AssignmentStatus) (events.Event, bool) {
	from, to := state.ReplicaPhase(a, old), state.ReplicaPhase(a, cur)
	if from == to {
		return events.Event{}, false
	}
	ev := events.Event{
		Object: "replica/" + a.ID,
		Tenant: a.Tenant,
		Region: s.region,
		Fields: map[string]string{"resource": a.ResourceKey(), "node": a.Node, "from": string(from)},
	}
	switch to {
	case api.PhaseReady:
		ev.Type, ev.Reason, ev.Message = events.TypeNormal, "ReplicaReady", "replica is ready on node "+a.Node
	case api.PhaseError:
		ev.Type, ev.Reason, ev.Message = events.TypeWarning, "ReplicaFailed", "replica failed on node "+a.Node+suffix(cur.Reason)
		ev.Fields["reason"] = cur.Reason
	default:
		return events.Event{}, false
	}
	return ev, true
}
