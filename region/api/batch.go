package api

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/flush"
	"github.com/stratahq/strata/internal/heartbeat"
	"github.com/stratahq/strata/internal/store"
)

// maxBeatBatch bounds one RecordBatch (one Redis pipeline).
const maxBeatBatch = 1000

// beatQueue holds the newest unwritten beat of each node. Keeping one per
// node bounds it by the number of nodes however far the store falls behind.
type beatQueue struct {
	mu    sync.Mutex
	beats map[string]heartbeat.Beat
}

func (q *beatQueue) add(b heartbeat.Beat) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.beats == nil {
		q.beats = make(map[string]heartbeat.Beat)
	}
	q.beats[b.ID] = b
}

// drop forgets a queued beat of a deleted node, which would otherwise bring
// it back into the heartbeat store.
func (q *beatQueue) drop(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.beats, id)
}

func (q *beatQueue) take() []heartbeat.Beat {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.beats) == 0 {
		return nil
	}
	out := make([]heartbeat.Beat, 0, len(q.beats))
	for _, b := range q.beats {
		out = append(out, b)
	}
	clear(q.beats)
	return out
}

// beatWarnEvery rate-limits the warning about lost heartbeats: while the
// store is down every flush fails, ten times a second.
const beatWarnEvery = 10 * time.Second

// runBeats writes queued heartbeats every beatWindow: 1,000 agents beating
// every 2 s cost ten RecordBatch calls a second, not 500 Record calls.
func (s *Server) runBeats(ctx context.Context) {
	t := time.NewTicker(s.tune.beatWindow)
	defer t.Stop()
	var (
		lost     int
		lastWarn time.Time
	)
	for {
		select {
		case <-t.C:
			n, err := s.flushBeats(ctx)
			lost += n
			if err != nil && time.Since(lastWarn) >= beatWarnEvery {
				s.log.Warn("recording heartbeats failed; beats are lost until the store recovers", "lost", lost, "err", err)
				lost, lastWarn = 0, time.Now()
			}
		case <-ctx.Done():
			// The beats already received are written on the way out, so
			// that a restart of this process does not look like missed
			// beats to the node monitor.
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownFlush)
			if n, err := s.flushBeats(fctx); err != nil {
				s.log.Warn("recording the last heartbeats failed", "lost", n, "err", err)
			}
			cancel()
			return
		}
	}
}

// flushBeats records the queued beats and returns how many were lost. A
// lost beat is not retried: its agent beats again within its interval.
func (s *Server) flushBeats(ctx context.Context) (lost int, err error) {
	for chunk := range slices.Chunk(s.beats.take(), maxBeatBatch) {
		if e := s.heartbeats.RecordBatch(ctx, chunk); e != nil {
			lost, err = lost+len(chunk), e
		}
	}
	return lost, err
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

// runStatusWriter writes queued statuses until ctx is done. A report that
// finds the writer idle (its last batch ended statusWindow ago or more)
// is written at once; one that follows a batch closely waits for the
// rest of the window, so that reports of many agents share transactions.
// While it writes, new reports queue up, so a slower etcd makes for
// bigger batches rather than a longer queue of small ones.
func (s *Server) runStatusWriter(ctx context.Context) {
	defer s.statuses.close(fmt.Errorf("region api is shutting down: %w", api.ErrUnavailable))
	win := flush.Window{D: s.tune.statusWindow}
	for {
		select {
		case <-s.statuses.kick:
		case <-ctx.Done():
			return
		}
		if win.Hold(ctx, nil) != nil {
			return
		}
		s.writeStatuses(ctx, s.statuses.take())
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

// writeStatuses commits ws in one batch, in transactions that each fit
// under etcd.maxTxnOps, and tells each write its outcome. Two reports of
// one replica in a batch are one put of the later; both callers learn that
// put's outcome.
//
// Each status is written only if its assignment still exists: the
// controller may remove an assignment, and its status with it, between
// the report's check against the cache and this write, and an
// unconditional put would bring back a status nothing ever removes. Such
// a status is dropped, as the report's check would have dropped it.
func (s *Server) writeStatuses(ctx context.Context, ws []*statusWrite) {
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
