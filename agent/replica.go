package agent

import (
	"errors"
	"slices"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
)

// defaultGrace bounds a graceful stop when the spec names none.
const defaultGrace = 10 * time.Second

// replica is what the agent knows of one assignment id: what the region
// wants (asg) and what the node holds. Guarded by the lock of the
// replicaTable that holds it.
type replica struct {
	id string
	// asg is the region's latest word; nil for an orphan (held locally,
	// not assigned) or an assignment the region removed.
	asg *api.Assignment
	// prov holds (or will hold) the replica; nil when no provider serves
	// the assignment's kind.
	prov *providerEntry
	// kind is the replica's resource kind, for deleting an orphan found
	// by List.
	kind api.ResourceKind
	// last is the last assignment the region sent, kept after it is
	// withdrawn so that deleting the orphan tells the provider all it
	// knew (volumes, network, grace period).
	last *api.Assignment
	// exists is true when the provider may hold the replica: listed at
	// start, or an Apply was attempted. Conservative on purpose: a
	// replica we are unsure about gets a Delete, not forgotten.
	exists bool
	// appliedGen is the generation the provider last applied
	// successfully (or listed).
	appliedGen int64
	// forceApply asks for an Apply even at the applied generation (the
	// replica is in error, or its Apply failed).
	forceApply bool
	// version changes around every Apply and Delete, so that a poll that
	// raced one is discarded.
	version int64
	// removed: the region deleted the record; delete without a snapshot.
	removed bool
	// orphanEpoch is the stream whose snapshot found the replica
	// unassigned; its deletion waits for that stream to settle and is
	// void if the stream ended.
	orphanEpoch int64
	// pollDelay is the current fast-poll delay while provisioning.
	pollDelay time.Duration
	// recheck: the provider pushed a status the replica could not take
	// (it was being applied, or not yet adopted); its status is asked for
	// once it can take it, since no other push may follow.
	recheck bool
	status  api.AssignmentStatus
}

// needsApply reports whether a running assignment must be applied.
func (r *replica) needsApply() bool {
	return r.forceApply || !r.exists || r.appliedGen != r.asg.Generation
}

func (r *replica) running() bool { return r.asg != nil && r.asg.Desired == api.DesiredRunning }

// provisioning reports whether st, pushed by e, tells how far an Apply of
// the wanted generation is: such a push is news while the Apply runs.
func (r *replica) provisioning(e *providerEntry, st api.AssignmentStatus) bool {
	return r.running() && r.prov == e && r.needsApply() &&
		st.Phase == api.PhaseProvision && st.ObservedGeneration == r.asg.Generation
}

// pollable reports whether pollers may observe the replica: it should run
// and the provider has it at the wanted generation.
func (r *replica) pollable() bool { return r.running() && r.prov != nil && !r.needsApply() }

// adoptable reports whether the provider already runs asg as asked: at
// its generation, not in error (an exited Job attempt is as asked), and
// not waiting for a forced Apply.
func (r *replica) adoptable(asg *api.Assignment) bool {
	return r.prov != nil && r.exists && r.appliedGen == asg.Generation && !r.forceApply &&
		(r.status.Phase != api.PhaseError || exitedAttempt(asg, r.status))
}

// deleteTarget is what a Delete of the replica tells the provider, and
// the grace period it gets: the last assignment the region sent, else
// what List said.
func (r *replica) deleteTarget() (*api.Assignment, time.Duration) {
	if r.last != nil {
		return r.last, gracePeriod(r.last)
	}
	return &api.Assignment{ID: r.id, Kind: r.kind}, defaultGrace
}

// settling reports whether a replica in phase p is on its way and not
// known to be ready: it is watched closely (fast polls).
func settling(p api.Phase) bool {
	return p == "" || p == api.PhaseCreated || p == api.PhaseProvision
}

// exitedAttempt reports whether a Job's attempt has run to its end: its
// process exited. It is never applied again at the same generation (that
// would run it a second time); the region counts it and retries, if at
// all, with a new attempt.
func exitedAttempt(asg *api.Assignment, st api.AssignmentStatus) bool {
	return asg.Spec.Job != nil && st.ExitCode != nil && st.ObservedGeneration == asg.Generation
}

// sameStatus compares what the region cares about, not the timestamps.
func sameStatus(a, b api.AssignmentStatus) bool {
	return a.Phase == b.Phase && a.Reason == b.Reason &&
		a.ObservedGeneration == b.ObservedGeneration &&
		a.ProviderID == b.ProviderID && a.Address == b.Address &&
		a.Restarts == b.Restarts && equalPtr(a.ExitCode, b.ExitCode) &&
		slices.Equal(a.Backends, b.Backends) &&
		slices.EqualFunc(a.Containers, b.Containers, sameContainer)
}

// sameContainer compares what the region shows and makes events of (a
// sidecar's restart leaves the replica's own fields as they were), not
// the message or the start time: a container waiting out its back-off
// says how long is left, which differs at every poll, and a start comes
// with a state or restart count of its own.
func sameContainer(a, b api.ContainerStatus) bool {
	return a.Name == b.Name && a.State == b.State && a.Ready == b.Ready &&
		a.Restarts == b.Restarts && equalPtr(a.ExitCode, b.ExitCode) && a.Reason == b.Reason
}

func equalPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func gracePeriod(asg *api.Assignment) time.Duration {
	if c := asg.Spec.Compute; c != nil && c.StopGracePeriod.Duration > 0 {
		return c.StopGracePeriod.Duration
	}
	return defaultGrace
}

func isNotFound(err error) bool {
	return errors.Is(err, provider.ErrNotFound) || errors.Is(api.FromGRPC(err), api.ErrNotFound)
}
