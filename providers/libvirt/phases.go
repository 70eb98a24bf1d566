package libvirt

import (
	"log/slog"
	"sync"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// phases owns since when each replica is in its phase other than ready
// (libvirt keeps no time of a domain's state change), and the status of
// an assignment the provider cannot run.
type phases struct {
	node string
	log  *slog.Logger

	mu    sync.Mutex
	since map[string]phaseSince
}

type phaseSince struct {
	phase  api.Phase
	reason string
	since  time.Time
}

func newPhases(node string, log *slog.Logger) *phases {
	return &phases{node: node, log: log, since: map[string]phaseSince{}}
}

// observe sets a phase other than ready, keeping Since while the replica
// stays in it.
func (ph *phases) observe(st api.AssignmentStatus, phase api.Phase, reason string) api.AssignmentStatus {
	st.Phase, st.Reason = phase, reason
	if phase == api.PhaseReady && !st.Since.IsZero() {
		return st
	}
	ph.mu.Lock()
	defer ph.mu.Unlock()
	prev, ok := ph.since[st.ID]
	if !ok || prev.phase != phase || prev.reason != reason {
		prev = phaseSince{phase: phase, reason: reason, since: time.Now()}
		ph.since[st.ID] = prev
	}
	st.Since = prev.since
	return st
}

// forget drops what is known of replica id: it is ready, or gone.
func (ph *phases) forget(id string) {
	ph.mu.Lock()
	delete(ph.since, id)
	ph.mu.Unlock()
}

// rejected is the status of an assignment the provider cannot run.
func (ph *phases) rejected(a *api.Assignment, err error) api.AssignmentStatus {
	ph.log.Warn("assignment rejected", "id", a.ID, "err", err)
	st := api.AssignmentStatus{ID: a.ID, Node: ph.node, ObservedGeneration: a.Generation, UpdatedAt: time.Now()}
	return ph.observe(st, api.PhaseError, err.Error())
}
