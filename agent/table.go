package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/backoff"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	"github.com/stratahq/strata/proto/apiproto"
	"github.com/stratahq/strata/providers/provider"
)

// defaultGrace bounds a graceful stop when the spec names none.
const defaultGrace = 10 * time.Second

// replica is what the agent knows of one assignment id: what the region
// wants (asg) and what the node holds. Guarded by Agent.mu.
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

// recover fills the table from every provider's List, retrying until each
// answers, so that the first snapshot can adopt what already runs.
func (a *Agent) recover(ctx context.Context) error {
	for _, e := range a.provs.list {
		var listed []provider.Listed
		b := a.t.regionBackoff()
		for {
			lctx, cancel := context.WithTimeout(ctx, a.t.providerCall)
			var err error
			listed, err = e.p.List(lctx)
			cancel()
			if err == nil {
				break
			}
			d := b.Next()
			a.log.Warn("list provider replicas failed; retrying", "provider", e.name, "err", err, "in", d)
			if backoff.Sleep(ctx, d) != nil {
				return ctx.Err()
			}
		}
		a.mu.Lock()
		for _, l := range listed {
			if prev, dup := a.replicas[l.ID]; dup {
				a.log.Warn("replica listed by two providers; keeping the first", "id", l.ID, "provider", prev.prov.name, "ignored", e.name)
				continue
			}
			st := l.Status
			st.ID = l.ID
			st.Node = a.cfg.Node.Name
			st.ObservedGeneration = l.Generation
			a.replicas[l.ID] = &replica{
				id:         l.ID,
				prov:       e,
				kind:       l.Kind,
				exists:     true,
				appliedGen: l.Generation,
				status:     st,
			}
		}
		a.mu.Unlock()
		a.log.Info("recovered replicas", "provider", e.name, "count", len(listed))
	}
	return nil
}

// applyBatch merges one batch of the assignment stream epoch into the
// table and queues what must be done.
func (a *Agent) applyBatch(epoch int64, b *agentv1.AssignmentBatch) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.settleLocked(b.GetSnapshot(), time.Now())
	first := b.GetSnapshot() && !a.snapshotSeen
	var queued []string
	enqueue := func(id string) {
		a.queue.add(id)
		if first {
			queued = append(queued, id)
		}
	}
	if b.GetSnapshot() {
		orphans := a.orphanLocked(epoch, b)
		if first {
			queued = append(queued, orphans...)
		}
	}
	for _, p := range b.GetUpserts() {
		asg := apiproto.AssignmentFromPB(p)
		if asg.ID == "" {
			continue
		}
		if !a.mine(asg.Node) {
			// Placed on another node: here it is a removal. The region
			// sends those as removals; this guards against a replica
			// running twice if it ever does not.
			if a.removeLocked(asg.ID) {
				enqueue(asg.ID)
			}
			continue
		}
		if a.upsertLocked(&asg) {
			enqueue(asg.ID)
		}
	}
	for _, id := range b.GetRemoved() {
		if a.removeLocked(id) {
			enqueue(id)
		}
	}
	if first {
		a.snapshotSeen = true
		a.readyWait = make(map[string]bool, len(queued))
		for _, id := range queued {
			a.readyWait[id] = true
		}
		a.maybeReadyLocked()
	}
}

// settleLocked moves the start of the orphan settle time: a snapshot
// starts it, and a batch soon after (still settling, not past the
// longest settle) starts it again, so that orphans wait until the
// stream is quiet.
func (a *Agent) settleLocked(snapshot bool, now time.Time) {
	switch {
	case snapshot:
		a.snapshotAt, a.settleFrom = now, now
	case now.Sub(a.settleFrom) < a.t.orphanSettle && now.Sub(a.snapshotAt) < a.t.orphanSettleMax:
		a.settleFrom = now
	}
}

// orphanLocked handles the replicas snapshot b does not name: forgotten when nothing is held locally, else orphans of epoch,
// deleted once the orphan settle time has passed. It returns the
// replicas it queued.
func (a *Agent) orphanLocked(epoch int64, b *agentv1.AssignmentBatch) []string {
	inSet := make(map[string]bool, len(b.GetUpserts()))
	for _, p := range b.GetUpserts() {
		if a.mine(p.GetNode()) {
			inSet[p.GetId()] = true
		}
	}
	var queued []string
	for id, r := range a.replicas {
		if inSet[id] {
			continue
		}
		if !r.exists {
			// Nothing held locally: forget it.
			delete(a.replicas, id)
			a.queue.drop(id)
			continue
		}
		r.asg = nil
		r.orphanEpoch = epoch
		a.queue.addAfter(id, a.t.orphanSettle)
		queued = append(queued, id)
	}
	return queued
}

// removeLocked marks a known replica removed; it reports whether there
// was one (to be queued).
func (a *Agent) removeLocked(id string) bool {
	r, ok := a.replicas[id]
	if !ok {
		return false
	}
	r.asg = nil
	r.removed = true
	return true
}

// mine reports whether an assignment placed on node is this node's.
func (a *Agent) mine(node string) bool { return node == "" || node == a.cfg.Node.Name }

// exitedAttempt reports whether a Job's attempt has run to its end: its
// process exited. It is never applied again at the same generation (that
// would run it a second time); the region counts it and retries, if at
// all, with a new attempt.
func exitedAttempt(asg *api.Assignment, st api.AssignmentStatus) bool {
	return asg.Spec.Job != nil && st.ExitCode != nil && st.ObservedGeneration == asg.Generation
}

// adoptable reports whether the provider already runs asg as asked: at
// its generation, not in error (an exited Job attempt is as asked), and
// not waiting for a forced Apply.
func (r *replica) adoptable(asg *api.Assignment) bool {
	return r.prov != nil && r.exists && r.appliedGen == asg.Generation && !r.forceApply &&
		(r.status.Phase != api.PhaseError || exitedAttempt(asg, r.status))
}

// upsertLocked records an assignment and reports whether it needs a
// worker. A running replica the provider already has at this generation,
// not in error, is adopted: reported, not applied again.
func (a *Agent) upsertLocked(asg *api.Assignment) bool {
	r, ok := a.replicas[asg.ID]
	if !ok {
		r = &replica{id: asg.ID}
		a.replicas[asg.ID] = r
	}
	r.asg = asg
	r.last = asg
	r.removed = false
	r.orphanEpoch = 0
	r.kind = asg.Kind
	// A replica the provider holds stays with that provider; a new one
	// goes to whoever serves its kind.
	if !r.exists || r.prov == nil {
		r.prov = a.provs.route(asg.Provider)
	}
	switch asg.Desired {
	case api.DesiredRunning:
		if r.adoptable(asg) {
			a.setStatusLocked(r, r.status, asg.Generation, true)
			switch {
			case r.status.Phase == "" || r.status.Phase == api.PhaseProvision || r.status.Phase == api.PhaseCreated:
				// Not known to be ready: watch it closely.
				r.pollDelay = a.t.fastPoll
				a.queue.addAfter(r.id, r.pollDelay)
			case r.recheck:
				a.queue.add(r.id)
			}
			return false
		}
		r.forceApply = true
		return true
	case api.DesiredDestroyed:
		return true
	default:
		a.log.Warn("assignment with unknown desired state ignored", "id", asg.ID, "desired", asg.Desired)
		return false
	}
}

// reconcile makes the provider's replica match what the region wants. It
// returns false when it only postponed the work (an orphan waiting for
// its snapshot to settle), which does not count towards Ready.
func (a *Agent) reconcile(ctx context.Context, id string) bool {
	a.mu.Lock()
	r, ok := a.replicas[id]
	if !ok {
		a.mu.Unlock()
		a.queue.drop(id)
		return true
	}
	switch {
	case r.asg == nil:
		return a.reconcileGone(ctx, r) // unlocks
	case r.asg.Desired == api.DesiredDestroyed:
		a.reconcileDestroyed(ctx, r) // unlocks
	case r.asg.Desired == api.DesiredRunning:
		a.reconcileRunning(ctx, r) // unlocks
	default:
		a.mu.Unlock()
	}
	return true
}

// reconcileGone deletes a replica the region no longer assigns. Called
// with a.mu held; returns with it released.
func (a *Agent) reconcileGone(ctx context.Context, r *replica) bool {
	if !r.removed {
		if r.orphanEpoch == 0 || r.orphanEpoch != a.liveEpoch {
			// The stream that found it orphaned ended before it
			// settled: the next snapshot decides.
			a.mu.Unlock()
			return true
		}
		if wait := time.Until(a.settleFrom.Add(a.t.orphanSettle)); wait > 0 {
			a.mu.Unlock()
			a.queue.addAfter(r.id, wait)
			return false
		}
	}
	if !r.exists || r.prov == nil {
		delete(a.replicas, r.id)
		a.mu.Unlock()
		a.queue.drop(r.id)
		return true
	}
	e, removed := r.prov, r.removed
	target, grace := &api.Assignment{ID: r.id, Kind: r.kind}, defaultGrace
	if r.last != nil {
		target, grace = r.last, gracePeriod(r.last)
	}
	r.version++
	a.mu.Unlock()

	a.log.Info("deleting replica the region no longer assigns", "id", r.id, "provider", e.name, "removed", removed)
	err := a.callDelete(ctx, e, target, grace)

	a.mu.Lock()
	defer a.mu.Unlock()
	r.version++
	if err != nil {
		if ctx.Err() == nil {
			d := a.queue.retry(r.id)
			a.log.Warn("delete orphan failed; retrying", "id", r.id, "provider", e.name, "err", err, "in", d)
		}
		return true
	}
	a.queue.forget(r.id)
	r.exists = false
	if r.asg == nil && a.replicas[r.id] == r {
		delete(a.replicas, r.id)
	}
	return true
}

// reconcileDestroyed deletes a replica the region wants destroyed and
// reports it destroyed. Called with a.mu held; returns with it released.
func (a *Agent) reconcileDestroyed(ctx context.Context, r *replica) {
	asg := r.asg
	if !r.exists || r.prov == nil {
		r.exists = false
		a.setStatusLocked(r, api.AssignmentStatus{Phase: api.PhaseDestroyed}, asg.Generation, false)
		a.mu.Unlock()
		a.queue.forget(r.id)
		return
	}
	e := r.prov
	r.version++
	a.mu.Unlock()

	err := a.callDelete(ctx, e, asg, gracePeriod(asg))

	a.mu.Lock()
	defer a.mu.Unlock()
	r.version++
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		d := a.queue.retry(r.id)
		a.log.Warn("delete failed; retrying", "id", r.id, "provider", e.name, "err", err, "in", d)
		a.setStatusLocked(r, api.AssignmentStatus{Phase: api.PhaseError, Reason: err.Error()}, asg.Generation, false)
		return
	}
	a.queue.forget(r.id)
	if r.asg == asg {
		r.exists = false
		a.setStatusLocked(r, api.AssignmentStatus{Phase: api.PhaseDestroyed}, asg.Generation, false)
	}
}

// reconcileRunning applies a running assignment, or polls it while it
// provisions. Called with a.mu held; returns with it released.
func (a *Agent) reconcileRunning(ctx context.Context, r *replica) {
	asg := r.asg
	e := r.prov
	if e == nil {
		a.setStatusLocked(r, api.AssignmentStatus{
			Phase:  api.PhaseError,
			Reason: fmt.Sprintf("no provider serves kind %s on this node", asg.Provider),
		}, asg.Generation, false)
		a.mu.Unlock()
		return
	}
	if !r.needsApply() {
		if p := r.status.Phase; p == "" || p == api.PhaseCreated || p == api.PhaseProvision || r.recheck {
			r.recheck = false
			a.mu.Unlock()
			a.fastPoll(ctx, r, e)
			return
		}
		a.mu.Unlock()
		return
	}
	r.exists = true
	r.version++
	a.mu.Unlock()

	actx, cancel := context.WithTimeout(ctx, a.t.applyCall)
	st, err := a.apply(actx, e, asg)
	cancel()

	a.mu.Lock()
	defer a.mu.Unlock()
	r.version++
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		d := a.queue.retry(r.id)
		a.log.Warn("apply failed; retrying", "id", r.id, "provider", e.name, "generation", asg.Generation, "err", err, "in", d)
		a.setStatusLocked(r, api.AssignmentStatus{Phase: api.PhaseError, Reason: err.Error()}, asg.Generation, false)
		return
	}
	a.queue.forget(r.id)
	r.appliedGen = asg.Generation
	if r.asg == asg {
		r.forceApply = false
	}
	a.setStatusLocked(r, st, asg.Generation, false)
	switch {
	case st.Phase == api.PhaseProvision || st.Phase == api.PhaseCreated:
		r.pollDelay = a.t.fastPoll
		a.queue.addAfter(r.id, r.pollDelay)
	case r.recheck && r.pollable():
		// Pushed during the Apply: what changed may be newer than st.
		a.queue.add(r.id)
	}
}

// fastPoll asks for the status of a provisioning replica and polls again
// later, backing off to the status interval, until it is ready or failed.
func (a *Agent) fastPoll(ctx context.Context, r *replica, e *providerEntry) {
	a.mu.Lock()
	ver := r.version
	a.mu.Unlock()
	sctx, cancel := context.WithTimeout(ctx, a.t.providerCall)
	st, err := e.p.Status(sctx, r.id)
	cancel()
	if ctx.Err() != nil {
		return
	}
	a.observe(r.id, ver, st, err)

	a.mu.Lock()
	defer a.mu.Unlock()
	if a.replicas[r.id] != r || !r.pollable() {
		return
	}
	if p := r.status.Phase; p == "" || p == api.PhaseCreated || p == api.PhaseProvision {
		r.pollDelay = min(max(2*r.pollDelay, a.t.fastPoll), a.cfg.StatusInterval)
		a.queue.addAfter(r.id, r.pollDelay)
	}
}

// observe records a status a poll returned for id, unless an Apply or
// Delete of id ran meanwhile (version changed). A replica the provider
// lost while it should run is applied again.
func (a *Agent) observe(id string, ver int64, st api.AssignmentStatus, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.replicas[id]
	if !ok || r.version != ver || !r.pollable() {
		return
	}
	a.observedLocked(r, st, err)
}

// observedLocked records what a poll or a push found.
func (a *Agent) observedLocked(r *replica, st api.AssignmentStatus, err error) {
	id := r.id
	switch {
	case err == nil:
		a.setStatusLocked(r, st, r.appliedGen, false)
	case isNotFound(err) && r.asg != nil && exitedAttempt(r.asg, r.status):
		// A finished attempt is not run again; its status stays.
		a.log.Warn("provider lost a finished job attempt", "id", id, "provider", r.prov.name)
	case isNotFound(err):
		a.log.Warn("provider lost a running replica; applying it again", "id", id, "provider", r.prov.name)
		r.exists = false
		r.forceApply = true
		// Provision, not error: the agent is already on it, and an error
		// would invite the region to reschedule.
		a.setStatusLocked(r, api.AssignmentStatus{Phase: api.PhaseProvision, Reason: "lost by provider " + r.prov.name + "; applying again"}, r.appliedGen, false)
		a.queue.add(id)
	default:
		a.log.Debug("status poll failed", "id", id, "provider", r.prov.name, "err", err)
	}
}

// setStatusLocked merges st into r's status and queues a report when it
// changed (or force). gen is the generation st speaks about.
func (a *Agent) setStatusLocked(r *replica, st api.AssignmentStatus, gen int64, force bool) {
	now := a.clock()
	st.ID = r.id
	st.Node = a.cfg.Node.Name
	st.ObservedGeneration = gen
	prev := r.status
	switch {
	case prev.Phase != "" && prev.Phase != st.Phase:
		st.Since = now
	case prev.Phase != "" && !prev.Since.IsZero():
		st.Since = prev.Since
	case st.Since.IsZero():
		// First sight (or a provider that keeps no times): the phase
		// holds since at least now.
		st.Since = now
	}
	if !force && sameStatus(prev, st) {
		return
	}
	st.UpdatedAt = now
	r.status = st
	if r.asg != nil && st.Phase != "" {
		a.reporter.put(st)
	}
}

// sameStatus compares what the region cares about, not the timestamps.
func sameStatus(a, b api.AssignmentStatus) bool {
	return a.Phase == b.Phase && a.Reason == b.Reason &&
		a.ObservedGeneration == b.ObservedGeneration &&
		a.ProviderID == b.ProviderID && a.Address == b.Address &&
		a.Restarts == b.Restarts && equalPtr(a.ExitCode, b.ExitCode) &&
		slices.Equal(a.Backends, b.Backends)
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

func (a *Agent) callDelete(ctx context.Context, e *providerEntry, asg *api.Assignment, grace time.Duration) error {
	dctx, cancel := context.WithTimeout(ctx, grace+a.t.applyCall)
	defer cancel()
	return e.p.Delete(dctx, asg, grace)
}

func isNotFound(err error) bool {
	return errors.Is(err, provider.ErrNotFound) || errors.Is(api.FromGRPC(err), api.ErrNotFound)
}

func grpcUnimplemented(err error) bool {
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.Unimplemented
}
