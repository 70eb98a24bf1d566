package agent

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/backoff"
	"github.com/stratahq/strata/internal/flush"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	"github.com/stratahq/strata/proto/apiproto"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
)

// reporter owns status reporting to the region: it holds the statuses
// not yet accepted by the region, the latest per id (a status superseded
// before it was sent is never sent), and sends them in batches
// (ReportStatus).
type reporter struct {
	node   string
	client agentv1.AgentServiceClient
	t      *timings
	log    *slog.Logger

	mu      sync.Mutex
	pending map[string]api.AssignmentStatus
	// nonEmpty is signalled when the first status arrives; full when a
	// batch is complete and should not wait for the coalescing delay.
	nonEmpty chan struct{}
	full     chan struct{}
	batch    int
}

func newReporter(node string, client agentv1.AgentServiceClient, t *timings, log *slog.Logger) *reporter {
	return &reporter{
		node:     node,
		client:   client,
		t:        t,
		log:      log,
		pending:  map[string]api.AssignmentStatus{},
		nonEmpty: make(chan struct{}, 1),
		full:     make(chan struct{}, 1),
		batch:    t.flushBatch,
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

// run sends statuses in batches: it waits for the first pending
// status and sends everything pending, at once when the last report ended
// flushDelay ago or more, else when that window has passed (or a batch is
// full). While a report is in flight more statuses gather for the next.
// Failed reports are retried with backoff.
func (r *reporter) run(ctx context.Context, registered <-chan struct{}) {
	select {
	case <-ctx.Done():
		return
	case <-registered:
	}
	b := backoff.Backoff{Min: r.t.flushDelay, Max: r.t.reportMax, Jitter: backoff.Half}
	var warn warnLimiter
	warn.every = r.t.warnEvery
	win := flush.Window{D: r.t.flushDelay}
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.nonEmpty:
		}
		if r.len() < r.t.flushBatch && win.Hold(ctx, r.full) != nil {
			return
		}
		err := r.flush(ctx)
		win.Flushed(time.Now())
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			warn.fail(r.log, "status report failed; will retry", err, "pending", r.len())
			if backoff.Sleep(ctx, b.Next()) != nil {
				return
			}
			signal(r.nonEmpty)
			continue
		}
		warn.ok(r.log, "status reports delivered again")
		b.Reset()
	}
}

// flush sends everything pending in batches; on failure the unsent rest
// stays pending.
func (r *reporter) flush(ctx context.Context) error {
	for {
		sts := r.take(r.t.flushBatch)
		if len(sts) == 0 {
			return nil
		}
		req := &agentv1.ReportStatusRequest{Node: r.node, Statuses: make([]*resourcev1.AssignmentStatus, len(sts))}
		for i := range sts {
			req.Statuses[i] = apiproto.AssignmentStatusToPB(&sts[i])
		}
		cctx, cancel := context.WithTimeout(ctx, r.t.regionCall)
		_, err := r.client.ReportStatus(cctx, req)
		cancel()
		if err != nil {
			r.giveBack(sts)
			return err
		}
		if len(sts) < r.t.flushBatch {
			return nil
		}
	}
}

// flushAll is the best-effort flush at shutdown.
func (r *reporter) flushAll(ctx context.Context) {
	n := r.len()
	if n == 0 {
		return
	}
	if err := r.flush(ctx); err != nil {
		r.log.Warn("statuses not reported before shutdown", "count", r.len(), "err", err)
		return
	}
	r.log.Debug("statuses reported at shutdown", "count", n)
}
