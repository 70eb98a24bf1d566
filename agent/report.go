package agent

import (
	"context"
	"sync"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/backoff"
	"github.com/stratahq/strata/internal/flush"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	"github.com/stratahq/strata/proto/apiproto"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
)

// reporter holds the statuses not yet accepted by the region, the latest
// per id: a status superseded before it was sent is never sent.
type reporter struct {
	mu      sync.Mutex
	pending map[string]api.AssignmentStatus
	// nonEmpty is signalled when the first status arrives; full when a
	// batch is complete and should not wait for the coalescing delay.
	nonEmpty chan struct{}
	full     chan struct{}
	batch    int
}

func newReporter(batch int) *reporter {
	return &reporter{
		pending:  map[string]api.AssignmentStatus{},
		nonEmpty: make(chan struct{}, 1),
		full:     make(chan struct{}, 1),
		batch:    batch,
	}
}

func (r *reporter) put(st api.AssignmentStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending[st.ID] = st
	switch n := len(r.pending); {
	case n == 1:
		signal(r.nonEmpty)
	case n >= r.batch:
		signal(r.full)
	}
}

// take removes up to n statuses.
func (r *reporter) take(n int) []api.AssignmentStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]api.AssignmentStatus, 0, min(n, len(r.pending)))
	for id, st := range r.pending {
		if len(out) == n {
			break
		}
		out = append(out, st)
		delete(r.pending, id)
	}
	return out
}

// giveBack returns statuses the region did not take, unless a newer one
// arrived meanwhile.
func (r *reporter) giveBack(sts []api.AssignmentStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, st := range sts {
		if _, newer := r.pending[st.ID]; !newer {
			r.pending[st.ID] = st
		}
	}
	if len(r.pending) > 0 {
		signal(r.nonEmpty)
	}
}

func (r *reporter) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pending)
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// runReporter sends statuses in batches: it waits for the first pending
// status and sends everything pending, at once when the last report ended
// flushDelay ago or more, else when that window has passed (or a batch is
// full). While a report is in flight more statuses gather for the next.
// Failed reports are retried with backoff.
func (a *Agent) runReporter(ctx context.Context, client agentv1.AgentServiceClient, registered <-chan struct{}) {
	select {
	case <-ctx.Done():
		return
	case <-registered:
	}
	b := backoff.Backoff{Min: a.t.flushDelay, Max: a.t.reportMax, Jitter: backoff.Half}
	var warn warnLimiter
	warn.every = a.t.warnEvery
	win := flush.Window{D: a.t.flushDelay}
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.reporter.nonEmpty:
		}
		if a.reporter.len() < a.t.flushBatch && win.Hold(ctx, a.reporter.full) != nil {
			return
		}
		err := a.flush(ctx, client)
		win.Flushed(time.Now())
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			warn.fail(a.log, "status report failed; will retry", err, "pending", a.reporter.len())
			if backoff.Sleep(ctx, b.Next()) != nil {
				return
			}
			signal(a.reporter.nonEmpty)
			continue
		}
		warn.ok(a.log, "status reports delivered again")
		b.Reset()
	}
}

// flush sends everything pending in batches; on failure the unsent rest
// stays pending.
func (a *Agent) flush(ctx context.Context, client agentv1.AgentServiceClient) error {
	for {
		sts := a.reporter.take(a.t.flushBatch)
		if len(sts) == 0 {
			return nil
		}
		req := &agentv1.ReportStatusRequest{Node: a.cfg.Node.Name, Statuses: make([]*resourcev1.AssignmentStatus, len(sts))}
		for i := range sts {
			req.Statuses[i] = apiproto.AssignmentStatusToPB(&sts[i])
		}
		cctx, cancel := context.WithTimeout(ctx, a.t.regionCall)
		_, err := client.ReportStatus(cctx, req)
		cancel()
		if err != nil {
			a.reporter.giveBack(sts)
			return err
		}
		if len(sts) < a.t.flushBatch {
			return nil
		}
	}
}

// flushAll is the best-effort flush at shutdown.
func (a *Agent) flushAll(ctx context.Context, client agentv1.AgentServiceClient) {
	n := a.reporter.len()
	if n == 0 {
		return
	}
	if err := a.flush(ctx, client); err != nil {
		a.log.Warn("statuses not reported before shutdown", "count", a.reporter.len(), "err", err)
		return
	}
	a.log.Debug("statuses reported at shutdown", "count", n)
}
