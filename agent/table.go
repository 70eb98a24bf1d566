package agent

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/stratahq/strata/internal/api"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	"github.com/stratahq/strata/proto/apiproto"
	"github.com/stratahq/strata/providers/provider"
)

// replicaTable owns the agent's replicas: what the region wants of each
// (the assignment stream's batches, merged) and what the node holds (what
// providers listed, applied, returned from polls and pushed). It owns its
// lock: each method takes it and releases it before it returns, and no
// provider or region call is made under it.
//
// The table is where events meet the queue: an id whose desired or
// observed state changed so that a worker must look at it is queued (the
// reconciler's own requeues are its results), and a status that changed
// goes to the reporter.
type replicaTable struct {
	node     string
	clock    func() time.Time
	t        *timings
	interval time.Duration // the status interval: the slowest fast poll
	provs    *providerSet
	queue    *workQueue
	reporter *reporter
	log      *slog.Logger
	// ready is closed once the first snapshot has been reconciled once.
	ready     chan struct{}
	readyOnce sync.Once

	mu       sync.Mutex
	replicas map[string]*replica
	// snapshotSeen is set by the first snapshot; readyWait holds the ids
	// of that snapshot not yet reconciled once (nil once ready closed).
	snapshotSeen bool
	readyWait    map[string]bool
	// epoch numbers assignment streams; liveEpoch is the stream being
	// read (0: none). snapshotAt is when its last snapshot began and
	// settleFrom when the batches that may continue it last arrived.
	epoch      int64
	liveEpoch  int64
	snapshotAt time.Time
	settleFrom time.Time
}

// recovered adds what provider e listed at start, so that the first
// snapshot can adopt what already runs.
func (t *replicaTable) recovered(e *providerEntry, listed []provider.Listed) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, l := range listed {
		if prev, dup := t.replicas[l.ID]; dup {
			t.log.Warn("replica listed by two providers; keeping the first", "id", l.ID, "provider", prev.prov.name, "ignored", e.name)
			continue
		}
		st := l.Status
		st.ID = l.ID
		st.Node = t.node
		st.ObservedGeneration = l.Generation
		t.replicas[l.ID] = &replica{
			id:         l.ID,
			prov:       e,
			kind:       l.Kind,
			exists:     true,
			appliedGen: l.Generation,
			status:     st,
		}
	}
}

// beginStream numbers a new stream. Orphans found by its snapshots may be
// deleted only while it lives.
func (t *replicaTable) beginStream() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.epoch++
	t.liveEpoch = t.epoch
	return t.epoch
}

func (t *replicaTable) endStream(epoch int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.liveEpoch == epoch {
		t.liveEpoch = 0
	}
}

// applyBatch merges one batch of the assignment stream epoch into the
// table and queues what must be done.
func (t *replicaTable) applyBatch(epoch int64, b *agentv1.AssignmentBatch) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.settleLocked(b.GetSnapshot(), time.Now())
	first := b.GetSnapshot() && !t.snapshotSeen
	var queued []string
	enqueue := func(id string) {
		t.queue.add(id)
		if first {
			queued = append(queued, id)
		}
	}
	if b.GetSnapshot() {
		orphans := t.orphanLocked(epoch, b)
		if first {
			queued = append(queued, orphans...)
		}
	}
	for _, p := range b.GetUpserts() {
		asg := apiproto.AssignmentFromPB(p)
		if asg.ID == "" {
			continue
		}
		if !t.mine(asg.Node) {
			// Placed on another node: here it is a removal. The region
			// sends those as removals; this guards against a replica
			// running twice if it ever does not.
			if t.removeLocked(asg.ID) {
				enqueue(asg.ID)
			}
			continue
		}
		if t.upsertLocked(&asg) {
			enqueue(asg.ID)
		}
	}
	for _, id := range b.GetRemoved() {
		if t.removeLocked(id) {
			enqueue(id)
		}
	}
	if first {
		t.snapshotSeen = true
		t.readyWait = make(map[string]bool, len(queued))
		for _, id := range queued {
			t.readyWait[id] = true
		}
		t.maybeReadyLocked()
	}
}

// settleLocked moves the start of the orphan settle time: a snapshot
// starts it, and a batch soon after (still settling, not past the
// longest settle) starts it again, so that orphans wait until the
// stream is quiet.
func (t *replicaTable) settleLocked(snapshot bool, now time.Time) {
	switch {
	case snapshot:
		t.snapshotAt, t.settleFrom = now, now
	case now.Sub(t.settleFrom) < t.t.orphanSettle && now.Sub(t.snapshotAt) < t.t.orphanSettleMax:
		t.settleFrom = now
	}
}

// orphanLocked handles the replicas snapshot b does not name: forgotten
// when nothing is held locally, else orphans of epoch, deleted once the
// orphan settle time has passed. It returns the replicas it queued.
func (t *replicaTable) orphanLocked(epoch int64, b *agentv1.AssignmentBatch) []string {
	inSet := make(map[string]bool, len(b.GetUpserts()))
	for _, p := range b.GetUpserts() {
		if t.mine(p.GetNode()) {
			inSet[p.GetId()] = true
		}
	}
	var queued []string
	for id, r := range t.replicas {
		if inSet[id] {
			continue
		}
		if !r.exists {
			// Nothing held locally: forget it.
			delete(t.replicas, id)
			t.queue.drop(id)
			continue
		}
		r.asg = nil
		r.orphanEpoch = epoch
		t.queue.addAfter(id, t.t.orphanSettle)
		queued = append(queued, id)
	}
	return queued
}

// removeLocked marks a known replica removed; it reports whether there
// was one (to be queued).
func (t *replicaTable) removeLocked(id string) bool {
	r, ok := t.replicas[id]
	if !ok {
		return false
	}
	r.asg = nil
	r.removed = true
	return true
}

// mine reports whether an assignment placed on node is this node's.
func (t *replicaTable) mine(node string) bool { return node == "" || node == t.node }

// upsertLocked records an assignment and reports whether it needs a
// worker. A running replica the provider already has at this generation,
// not in error, is adopted: reported, not applied again.
func (t *replicaTable) upsertLocked(asg *api.Assignment) bool {
	r, ok := t.replicas[asg.ID]
	if !ok {
		r = &replica{id: asg.ID}
		t.replicas[asg.ID] = r
	}
	r.asg = asg
	r.last = asg
	r.removed = false
	r.orphanEpoch = 0
	r.kind = asg.Kind
	// A replica the provider holds stays with that provider; a new one
	// goes to whoever serves its kind.
	if !r.exists || r.prov == nil {
		r.prov = t.provs.route(asg.Provider)
	}
	switch asg.Desired {
	case api.DesiredRunning:
		if r.adoptable(asg) {
			t.setStatusLocked(r, r.status, asg.Generation, true)
			switch {
			case settling(r.status.Phase):
				// Not known to be ready: watch it closely.
				r.pollDelay = t.t.fastPoll
				t.queue.addAfter(r.id, r.pollDelay)
			case r.recheck:
				t.queue.add(r.id)
			}
			return false
		}
		r.forceApply = true
		return true
	case api.DesiredDestroyed:
		return true
	default:
		t.log.Warn("assignment with unknown desired state ignored", "id", asg.ID, "desired", asg.Desired)
		return false
	}
}

// reconciledOnce counts id towards Ready.
func (t *replicaTable) reconciledOnce(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.readyWait == nil {
		return
	}
	delete(t.readyWait, id)
	t.maybeReadyLocked()
}

func (t *replicaTable) maybeReadyLocked() {
	if t.snapshotSeen && len(t.readyWait) == 0 {
		t.readyWait = nil
		t.readyOnce.Do(func() {
			close(t.ready)
			t.log.Info("first assignment snapshot reconciled")
		})
	}
}

// stepKind is the provider call one reconcile of a replica makes.
type stepKind int

const (
	stepNone   stepKind = iota // no provider call
	stepDelete                 // Delete target with grace
	stepApply                  // Apply asg
	stepStatus                 // Status, while the replica settles
)

// step is what one reconcile needs of a replica to call its provider,
// copied out of the table under its lock (replicaTable.begin) and handed
// back to the table with what the provider said.
type step struct {
	do stepKind
	id string
	// rep is the table's replica, for the table to record the outcome
	// in (under its lock); the reconciler never reads it.
	rep  *replica
	prov *providerEntry
	// asg is the assignment applied or destroyed; target is what a
	// Delete is told, with grace.
	asg    *api.Assignment
	target *api.Assignment
	grace  time.Duration
	// gone: a Delete of a replica the region no longer assigns (removed:
	// explicitly, rather than left out of a snapshot).
	gone, removed bool
	// version is the replica's when a Status step began.
	version int64
	// res is the result of a step without a provider call; postponed:
	// it only waited (an orphan whose snapshot still settles), which
	// does not count towards Ready.
	res       result
	postponed bool
}

// begin decides what one reconcile of id does and copies what it needs
// for that into a step. A step that calls the provider is marked begun
// here, in the same hold of the lock (the replica's version moves, an
// Apply makes it exist), so that a poll that races it is discarded; what
// needs no provider call is done here.
func (t *replicaTable) begin(id string) step {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.replicas[id]
	switch {
	case !ok:
		return step{id: id}
	case r.asg == nil:
		return t.beginGoneLocked(r)
	case r.asg.Desired == api.DesiredDestroyed:
		return t.beginDestroyLocked(r)
	case r.asg.Desired == api.DesiredRunning:
		return t.beginRunningLocked(r)
	}
	return step{id: id}
}

// beginGoneLocked is a replica the region no longer assigns: deleted,
// when it was removed or its snapshot's stream has settled.
func (t *replicaTable) beginGoneLocked(r *replica) step {
	if !r.removed {
		if r.orphanEpoch == 0 || r.orphanEpoch != t.liveEpoch {
			// The stream that found it orphaned ended before it
			// settled: the next snapshot decides.
			return step{id: r.id}
		}
		if wait := time.Until(t.settleFrom.Add(t.t.orphanSettle)); wait > 0 {
			return step{id: r.id, postponed: true, res: result{RequeueAfter: wait}}
		}
	}
	if !r.exists || r.prov == nil {
		delete(t.replicas, r.id)
		t.queue.drop(r.id)
		return step{id: r.id}
	}
	target, grace := r.deleteTarget()
	r.version++
	return step{do: stepDelete, id: r.id, rep: r, prov: r.prov, target: target, grace: grace, gone: true, removed: r.removed}
}

// beginDestroyLocked is a replica the region wants destroyed: deleted,
// or reported destroyed when the node holds nothing.
func (t *replicaTable) beginDestroyLocked(r *replica) step {
	asg := r.asg
	if !r.exists || r.prov == nil {
		r.exists = false
		t.setStatusLocked(r, api.AssignmentStatus{Phase: api.PhaseDestroyed}, asg.Generation, false)
		return step{id: r.id}
	}
	r.version++
	return step{do: stepDelete, id: r.id, rep: r, prov: r.prov, asg: asg, target: asg, grace: gracePeriod(asg)}
}

// beginRunningLocked is a replica the region wants running: applied,
// or asked for its status while it settles.
func (t *replicaTable) beginRunningLocked(r *replica) step {
	asg := r.asg
	if r.prov == nil {
		t.setStatusLocked(r, api.AssignmentStatus{
			Phase:  api.PhaseError,
			Reason: fmt.Sprintf("no provider serves kind %s on this node", asg.Provider),
		}, asg.Generation, false)
		return step{id: r.id}
	}
	if !r.needsApply() {
		if settling(r.status.Phase) || r.recheck {
			r.recheck = false
			return step{do: stepStatus, id: r.id, rep: r, prov: r.prov, version: r.version}
		}
		return step{id: r.id}
	}
	r.exists = true
	r.version++
	return step{do: stepApply, id: r.id, rep: r, prov: r.prov, asg: asg}
}

// abandoned ends a step whose provider call failed because the agent is
// shutting down: nothing is recorded of it.
func (t *replicaTable) abandoned(s step) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s.rep.version++
}

// deleted records the outcome of a step's Delete. An error is the
// step's, to be retried.
func (t *replicaTable) deleted(s step, err error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := s.rep
	r.version++
	switch {
	case err != nil && s.gone:
		return fmt.Errorf("delete orphan from provider %s: %w", s.prov.name, err)
	case err != nil:
		t.setStatusLocked(r, api.AssignmentStatus{Phase: api.PhaseError, Reason: err.Error()}, s.asg.Generation, false)
		return fmt.Errorf("delete from provider %s: %w", s.prov.name, err)
	case s.gone:
		r.exists = false
		if r.asg == nil && t.replicas[r.id] == r {
			delete(t.replicas, r.id)
		}
	case r.asg == s.asg:
		r.exists = false
		t.setStatusLocked(r, api.AssignmentStatus{Phase: api.PhaseDestroyed}, s.asg.Generation, false)
	}
	return nil
}

// applied records the outcome of a step's Apply: the status it returned,
// or an error status and the error, to be retried. A replica still
// settling is polled again soon.
func (t *replicaTable) applied(s step, st api.AssignmentStatus, err error) (result, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, asg := s.rep, s.asg
	r.version++
	if err != nil {
		t.setStatusLocked(r, api.AssignmentStatus{Phase: api.PhaseError, Reason: err.Error()}, asg.Generation, false)
		return result{}, fmt.Errorf("apply generation %d with provider %s: %w", asg.Generation, s.prov.name, err)
	}
	r.appliedGen = asg.Generation
	if r.asg == asg {
		r.forceApply = false
	}
	t.setStatusLocked(r, st, asg.Generation, false)
	switch {
	case st.Phase == api.PhaseProvision || st.Phase == api.PhaseCreated:
		r.pollDelay = t.t.fastPoll
		return result{RequeueAfter: r.pollDelay}, nil
	case r.recheck && r.pollable():
		// Pushed during the Apply: what changed may be newer than st.
		return result{Requeue: true}, nil
	}
	return result{}, nil
}

// polled records the status a step asked for, and asks for the next
// fast poll, backing off to the status interval, while the replica is
// still settling.
func (t *replicaTable) polled(s step, st api.AssignmentStatus, err error) result {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.observeLocked(s.id, s.version, st, err)
	r := s.rep
	if t.replicas[r.id] != r || !r.pollable() || !settling(r.status.Phase) {
		return result{}
	}
	r.pollDelay = min(max(2*r.pollDelay, t.t.fastPoll), t.interval)
	return result{RequeueAfter: r.pollDelay}
}

// polled is a replica to poll and its version when the poll started.
type polled struct {
	id  string
	ver int64
}

// toPoll lists provider e's replicas that a poll may observe.
func (t *replicaTable) toPoll(e *providerEntry) []polled {
	t.mu.Lock()
	defer t.mu.Unlock()
	var todo []polled
	for id, r := range t.replicas {
		if r.prov == e && r.pollable() {
			todo = append(todo, polled{id: id, ver: r.version})
		}
	}
	return todo
}

// recheckUnpollable marks provider e's replicas that a poll may not
// observe now (being applied, not yet adopted) to be looked at once they
// can be.
func (t *replicaTable) recheckUnpollable(e *providerEntry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range t.replicas {
		if r.prov == e && !r.pollable() {
			r.recheck = true
		}
	}
}

// observe records a status a poll returned for id, unless an Apply or
// Delete of id ran meanwhile (version changed).
func (t *replicaTable) observe(id string, ver int64, st api.AssignmentStatus, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.observeLocked(id, ver, st, err)
}

func (t *replicaTable) observeLocked(id string, ver int64, st api.AssignmentStatus, err error) {
	r, ok := t.replicas[id]
	if !ok || r.version != ver || !r.pollable() {
		return
	}
	t.observedLocked(r, st, err)
}

// observePushed records a status a provider pushed. A replica that cannot
// take it now (being applied, recovered but not yet adopted) is looked at
// again once it can: the push says something changed, and no other push
// may follow.
func (t *replicaTable) observePushed(e *providerEntry, st api.AssignmentStatus) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.replicas[st.ID]
	if !ok || r.prov != e {
		return
	}
	if !r.pollable() {
		if r.provisioning(e, st) {
			// How far an Apply in flight is (an image pull): the region
			// shows it; the Apply's answer follows.
			t.setStatusLocked(r, st, st.ObservedGeneration, false)
			return
		}
		r.recheck = true
		return
	}
	if st.ObservedGeneration != 0 && st.ObservedGeneration < r.appliedGen {
		return // about a generation applied over since
	}
	var err error
	if st.Phase == api.PhaseDestroyed {
		// Gone without the agent asking: as lost as a NotFound.
		err = provider.ErrNotFound
	}
	t.observedLocked(r, st, err)
}

// observedLocked records what a poll or a push found. A replica the
// provider lost while it should run is applied again.
func (t *replicaTable) observedLocked(r *replica, st api.AssignmentStatus, err error) {
	id := r.id
	switch {
	case err == nil:
		t.setStatusLocked(r, st, r.appliedGen, false)
	case isNotFound(err) && r.asg != nil && exitedAttempt(r.asg, r.status):
		// A finished attempt is not run again; its status stays.
		t.log.Warn("provider lost a finished job attempt", "id", id, "provider", r.prov.name)
	case isNotFound(err):
		t.log.Warn("provider lost a running replica; applying it again", "id", id, "provider", r.prov.name)
		r.exists = false
		r.forceApply = true
		// Provision, not error: the agent is already on it, and an error
		// would invite the region to reschedule.
		t.setStatusLocked(r, api.AssignmentStatus{Phase: api.PhaseProvision, Reason: "lost by provider " + r.prov.name + "; applying again"}, r.appliedGen, false)
		t.queue.add(id)
	default:
		t.log.Debug("status poll failed", "id", id, "provider", r.prov.name, "err", err)
	}
}

// setStatusLocked merges st into r's status and reports it when it
// changed (or force). gen is the generation st speaks about.
func (t *replicaTable) setStatusLocked(r *replica, st api.AssignmentStatus, gen int64, force bool) {
	now := t.clock()
	st.ID = r.id
	st.Node = t.node
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
		t.reporter.put(st)
	}
}

// load is what the running replicas take of the node: how many, and the
// capacity their flavors ask for.
func (t *replicaTable) load() (replicas int, alloc api.Capacity) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range t.replicas {
		if !r.running() {
			continue
		}
		replicas++
		alloc = alloc.Add(r.asg.Flavor.Capacity())
	}
	return replicas, alloc
}

// owners are the running replicas' resources (tenant/resource), by id.
func (t *replicaTable) owners() map[string]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]string, len(t.replicas))
	for id, r := range t.replicas {
		if r.running() {
			out[id] = r.asg.Tenant + "/" + r.asg.Resource
		}
	}
	return out
}

// statuses are the replicas' latest statuses, those that have one.
func (t *replicaTable) statuses() []api.AssignmentStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]api.AssignmentStatus, 0, len(t.replicas))
	for _, r := range t.replicas {
		if r.status.Phase != "" {
			out = append(out, r.status)
		}
	}
	return out
}

// providerOf is the provider that holds (or is to hold) replica id; nil
// when none does.
func (t *replicaTable) providerOf(id string) *providerEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r, ok := t.replicas[id]; ok {
		return r.prov
	}
	return nil
}
