package api

import "fmt"

// Phase is a step of the lifecycle every resource and replica walks through
// (seed controller-workflow.md):
//
//	created → provision → ready → destroy → destroyed
//	any step → error
//
// ready → provision happens on an update; error → provision is a retry;
// error → ready is a replica that recovered by itself (a restarted
// container); destroyed is terminal.
type Phase string

const (
	PhaseCreated   Phase = "created"
	PhaseProvision Phase = "provision"
	PhaseReady     Phase = "ready"
	PhaseDestroy   Phase = "destroy"
	PhaseDestroyed Phase = "destroyed"
	PhaseError     Phase = "error"
)

// Phases lists every phase in lifecycle order.
var Phases = []Phase{PhaseCreated, PhaseProvision, PhaseReady, PhaseDestroy, PhaseDestroyed, PhaseError}

var transitions = map[Phase][]Phase{
	PhaseCreated:   {PhaseProvision, PhaseReady, PhaseDestroy, PhaseError},
	PhaseProvision: {PhaseReady, PhaseDestroy, PhaseError},
	PhaseReady:     {PhaseProvision, PhaseDestroy, PhaseError},
	PhaseError:     {PhaseProvision, PhaseReady, PhaseDestroy},
	PhaseDestroy:   {PhaseDestroyed, PhaseError},
	PhaseDestroyed: {},
}

// Valid reports whether p is a known phase.
func (p Phase) Valid() bool {
	_, ok := transitions[p]
	return ok
}

// Terminal reports whether nothing follows p.
func (p Phase) Terminal() bool { return p == PhaseDestroyed }

// Deleting reports whether p is on the way out.
func (p Phase) Deleting() bool { return p == PhaseDestroy || p == PhaseDestroyed }

// CanTransition reports whether from → to is allowed. Staying in the same
// phase is always allowed (reconcilers are level-based and repeat
// themselves). created → ready is allowed because a fast provider may
// report ready before anyone saw provision.
func CanTransition(from, to Phase) bool {
	if from == to {
		return from.Valid()
	}
	for _, p := range transitions[from] {
		if p == to {
			return true
		}
	}
	return false
}

// Transition returns an error when from → to is not allowed.
func Transition(from, to Phase) error {
	if !CanTransition(from, to) {
		return fmt.Errorf("phase %s → %s: %w", from, to, ErrConflict)
	}
	return nil
}
