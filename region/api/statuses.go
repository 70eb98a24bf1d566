package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/events"
	"github.com/stratahq/strata/internal/flush"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/region/state"
)

// writeTimeout bounds one transaction of the status writer, so that a
// hung etcd fails the waiting RPCs (agents retry) instead of stalling
// forever.
const writeTimeout = 10 * time.Second

// statuses owns the replica statuses the agents report: report checks a
// report against the caches and queues what changed, and run, the status
// writer, commits the reports of all agents in few transactions.
type statuses struct {
	core
	window time.Duration // agents' reports per transaction
	queue  statusQueue
}

// report records what a node's agent observed. A status of an
// assignment that is not (or no longer) on the node is dropped: the agent
// is behind, and its report must not overwrite the new node's. Unchanged
// statuses are not written. The call returns once the rest is committed,
// so that the agent can retry on error.
func (s *statuses) report(ctx context.Context, node string, reported []api.AssignmentStatus) error {
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
		evs = append(evs, s.containerEvents(a.Value, old, &st)...)
	}
	if len(writes) == 0 {
		return nil
	}
	if err := s.queue.write(ctx, writes); err != nil {
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
func (s *statuses) phaseEvent(a *api.Assignment, old, cur *api.AssignmentStatus) (events.Event, bool) {
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

// containerEvents are the events of what changed in a replica's
// containers between two reports:
//   - Restarted: a container's restarts grew (its last exit's reason and
//     code);
//   - Unhealthy: it was restarted because its liveness (or startup)
//     probe failed;
//   - ProbeFailed: it runs but turned unready (its readiness probe
//     failed), with the probe's message;
//   - BackOff: it entered CrashLoopBackOff, with the back-off's message.
//
// Kubernetes says Unhealthy for any failed probe; here ProbeFailed is the
// readiness probe (the replica leaves its load balancers) and Unhealthy
// the liveness restart, so that alert rules can tell the two apart.
func (s *statuses) containerEvents(a *api.Assignment, old, cur *api.AssignmentStatus) []events.Event {
	var was []api.ContainerStatus
	if old != nil {
		was = old.Containers
	}
	var out []events.Event
	emit := func(reason, container, msg string, extra ...string) {
		ev := events.Event{
			Type: events.TypeWarning, Reason: reason, Message: msg,
			Object: "replica/" + a.ID, Tenant: a.Tenant, Region: s.region,
			Fields: map[string]string{"resource": a.ResourceKey(), "node": a.Node, "container": container},
		}
		for i := 0; i+1 < len(extra); i += 2 {
			ev.Fields[extra[i]] = extra[i+1]
		}
		out = append(out, ev)
	}
	for _, c := range cur.Containers {
		var o api.ContainerStatus
		for _, w := range was {
			if w.Name == c.Name {
				o = w
				break
			}
		}
		if c.Restarts > o.Restarts {
			emit("Restarted", c.Name, fmt.Sprintf("container %s restarted (%d restarts): %s", c.Name, c.Restarts, exitOf(c)),
				"reason", c.Reason, "restarts", fmt.Sprint(c.Restarts))
			if c.Reason == api.ReasonUnhealthy {
				emit("Unhealthy", c.Name, fmt.Sprintf("container %s failed its liveness probe and was restarted%s", c.Name, suffix(c.Message)))
			}
		}
		if c.Reason == api.ReasonCrashLoopBackOff && o.Reason != api.ReasonCrashLoopBackOff {
			msg := fmt.Sprintf("container %s: %s", c.Name, cmp.Or(c.Message, "back-off restarting failed container"))
			if !c.NextStartAt.IsZero() {
				msg += ", next start at " + c.NextStartAt.UTC().Format("15:04:05Z")
			}
			emit("BackOff", c.Name, msg)
		}
		if o.Ready && !c.Ready && c.State == api.ContainerRunning && c.Restarts == o.Restarts {
			emit("ProbeFailed", c.Name, fmt.Sprintf("container %s is not ready: readiness probe failed%s", c.Name, suffix(c.Message)))
		}
	}
	return out
}

// exitOf says how a container last exited: "OOMKilled (exit code 137)".
func exitOf(c api.ContainerStatus) string {
	r := cmp.Or(c.Reason, "exited")
	if c.ExitCode != nil {
		r += fmt.Sprintf(" (exit code %d)", *c.ExitCode)
	}
	return r
}

// statusQueue collects agents' status reports for the status writer.
type statusQueue struct {
	kick chan struct{} // capacity 1: "something is queued"

	mu     sync.Mutex
	writes []*statusWrite
	closed error // set when the writer stopped
}

// statusWrite is one ReportStatus call's statuses and where its result
// goes: done receives exactly one value, after the transactions holding
// the statuses committed or failed.
type statusWrite struct {
	statuses []reportedStatus
	done     chan error
}

// reportedStatus is a replica's status with the assignment it is about,
// as the report was checked against: the status is written only while
// that assignment still exists.
type reportedStatus struct {
	status api.AssignmentStatus
	// assignment is the assignment's CreateRevision.
	assignment int64
}

// write queues statuses and waits until they are committed.
func (q *statusQueue) write(ctx context.Context, statuses []reportedStatus) error {
	w := &statusWrite{statuses: statuses, done: make(chan error, 1)}
	q.mu.Lock()
	if q.closed != nil {
		q.mu.Unlock()
		return q.closed
	}
	q.writes = append(q.writes, w)
	q.mu.Unlock()
	select {
	case q.kick <- struct{}{}:
	default: // the writer is already due
	}
	select {
	case err := <-w.done:
		return err
	case <-ctx.Done():
		// The writer still writes them; the agent reports again anyway.
		return ctx.Err()
	}
}

func (q *statusQueue) take() []*statusWrite {
	q.mu.Lock()
	defer q.mu.Unlock()
	ws := q.writes
	q.writes = nil
	return ws
}

// close fails every queued write and refuses new ones with err.
func (q *statusQueue) close(err error) {
	q.mu.Lock()
	q.closed = err
	ws := q.writes
	q.writes = nil
	q.mu.Unlock()
	for _, w := range ws {
		w.done <- err
	}
}

// run writes queued statuses until ctx is done. A report that
// finds the writer idle (its last batch ended window ago or more)
// is written at once; one that follows a batch closely waits for the
// rest of the window, so that reports of many agents share transactions.
// While it writes, new reports queue up, so a slower etcd makes for
// bigger batches rather than a longer queue of small ones.
func (s *statuses) run(ctx context.Context) {
	defer s.queue.close(fmt.Errorf("region api is shutting down: %w", api.ErrUnavailable))
	win := flush.Window{D: s.window}
	for {
		select {
		case <-s.queue.kick:
		case <-ctx.Done():
			return
		}
		if win.Hold(ctx, nil) != nil {
			return
		}
		s.write(ctx, s.queue.take())
		win.Flushed(time.Now())
	}
}

// statusPut is one status to write and the reports that asked for it.
type statusPut struct {
	reportedStatus
	from []*statusWrite
}

// mergeReports makes one put per replica of ws, the latest report's.
func mergeReports(ws []*statusWrite) []statusPut {
	var puts []statusPut
	index := make(map[string]int)
	for _, w := range ws {
		for _, st := range w.statuses {
			if i, ok := index[st.status.ID]; ok {
				puts[i].reportedStatus = st
				puts[i].from = append(puts[i].from, w)
				continue
			}
			index[st.status.ID] = len(puts)
			puts = append(puts, statusPut{reportedStatus: st, from: []*statusWrite{w}})
		}
	}
	return puts
}

// statusFailures tells, from a batch's result and error, each report that
// failed its error, and counts the puts dropped because their assignment
// is gone.
func statusFailures(puts []statusPut, res store.BatchResult, err error) (failed map[*statusWrite]error, dropped int) {
	failed = make(map[*statusWrite]error)
	if err == nil {
		return failed, 0
	}
	err = fmt.Errorf("write %d replica statuses: %w", len(puts), err)
	for i, p := range puts {
		if res.Applied[i] {
			continue
		}
		if gerr, ok := res.Failed[p.status.ID]; ok && errors.Is(gerr, store.ErrNotFound) {
			dropped++ // its assignment is gone
			continue
		}
		for _, w := range p.from {
			if failed[w] == nil {
				failed[w] = err
			}
		}
	}
	return failed, dropped
}

// write commits ws in one batch, in transactions that each fit
// under etcd.maxTxnOps, and tells each write its outcome. Two reports of
// one replica in a batch are one put of the later; both callers learn that
// put's outcome.
//
// Each status is written only if its assignment still exists: the
// controller may remove an assignment, and its status with it, between
// the report's check against the cache and this write, and an
// unconditional put would bring back a status nothing ever removes. Such
// a status is dropped, as the report's check would have dropped it.
func (s *statuses) write(ctx context.Context, ws []*statusWrite) {
	if len(ws) == 0 {
		return
	}
	puts := mergeReports(ws)

	b := s.st.Store.Batch()
	for i := range puts {
		id := puts[i].status.ID
		step := b.Step(id)
		s.st.Assignments.TxnRequire(step, id, puts[i].assignment)
		_ = s.st.Statuses.TxnPut(step, id, &puts[i].status)
	}
	cctx, cancel := context.WithTimeout(ctx, writeTimeout)
	res, err := b.Commit(cctx)
	cancel()
	rev, txns := res.Revision, res.Txns
	failed, dropped := statusFailures(puts, res, err)
	s.log.Debug("wrote replica statuses", "statuses", len(puts), "reports", len(ws), "txns", txns, "failed", len(failed), "dropped", dropped)
	if rev > 0 {
		// Agents compare their next report with the cache: let it see
		// this one first, or an unchanged report would be written again.
		wctx, cancel := context.WithTimeout(ctx, writeTimeout)
		if err := s.caches.Statuses.WaitForRev(wctx, rev); err != nil {
			s.log.Debug("status cache is behind", "rev", rev, "err", err)
		}
		cancel()
	}
	for _, w := range ws {
		w.done <- failed[w]
	}
}
