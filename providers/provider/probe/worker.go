package probe

import (
	"context"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// worker runs one probe of one container in its own goroutine, on one
// timer: no goroutine or timer is made per check.
type worker struct {
	m      *Manager
	c      *container
	kind   api.ProbeKind
	idx    int // in container.results
	prober prober

	initialDelay, period, timeout      time.Duration
	successThreshold, failureThreshold int

	// resetCh wakes the worker after Manager.Reset.
	resetCh chan struct{}

	// The rest belongs to the worker's goroutine.
	gen      uint64    // the container's run that the counts are of
	next     time.Time // when the next check is due
	last     Result    // the last check's result
	streak   int       // how many checks in a row gave last
	reported Result    // the result last reported
	// hold stops checking until a Reset: a liveness or startup probe
	// that failed (the container is to be restarted), a startup probe
	// that passed (its work is done).
	hold bool
}

// run checks until ctx ends. The first check is due after first.
func (w *worker) run(ctx context.Context, first time.Duration) {
	defer w.m.wg.Done()
	if c, ok := w.prober.(interface{ close() }); ok {
		defer c.close()
	}
	w.next = time.Now().Add(first)
	timer := time.NewTimer(first)
	defer timer.Stop()
	for {
		gate, due := w.waitingFor(timer)
		select {
		case <-ctx.Done():
			return
		case <-w.resetCh:
			w.restart(ctx)
			timer.Reset(w.untilStart())
		case <-gate:
			// Started: check as soon as the initial delay allows.
			timer.Reset(w.untilStart())
		case <-due:
			w.check(ctx)
			timer.Reset(w.schedule())
		}
	}
}

// waitingFor is what the worker waits for besides ctx and a reset: the
// startup probe's success (readiness and liveness before the container
// has started), the timer, or nothing (on hold).
func (w *worker) waitingFor(timer *time.Timer) (gate <-chan struct{}, due <-chan time.Time) {
	if w.hold {
		return nil, nil
	}
	if w.kind != api.ProbeStartup {
		w.m.mu.Lock()
		started, ch := w.c.started, w.c.startedCh
		w.m.mu.Unlock()
		if !started {
			return ch, nil
		}
	}
	return nil, timer.C
}

// untilStart is how long until the container's initial delay has passed,
// from its (re)start; it sets the next check then.
func (w *worker) untilStart() time.Duration {
	w.m.mu.Lock()
	at := w.c.start.Add(w.initialDelay)
	w.m.mu.Unlock()
	now := time.Now()
	if at.Before(now) {
		at = now
	}
	w.next = at
	return at.Sub(now)
}

// schedule sets the next check one period after the last one was due,
// so that the checks keep their phase; a check that took longer than a
// period skips the ticks it overran.
func (w *worker) schedule() time.Duration {
	now := time.Now()
	w.next = w.next.Add(w.period)
	if !w.next.After(now) {
		w.next = now.Add(w.period)
	}
	return w.next.Sub(now)
}

// restart forgets the container's previous run, after a Reset.
func (w *worker) restart(ctx context.Context) {
	w.m.mu.Lock()
	w.gen = w.c.gen
	w.m.mu.Unlock()
	w.last, w.streak, w.hold = Unknown, 0, false
	if w.reported != Unknown {
		w.report(ctx, Unknown, "container restarted")
	}
}

// check runs one check and reports when it makes the probe's result
// change.
func (w *worker) check(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, w.timeout)
	res, msg := w.prober.probe(pctx)
	cancel()
	if ctx.Err() != nil {
		return
	}
	w.m.probed.Add(1)
	if res == Unknown {
		w.m.log.Debug("probe could not check", "replica", w.c.key.replica, "container", w.c.key.container, "probe", w.kind, "why", msg)
		return
	}
	if !w.reached(res) || !w.commit(res) {
		return
	}
	if res == Failure && w.kind != api.ProbeReadiness || res == Success && w.kind == api.ProbeStartup {
		w.hold, w.streak = true, 0
	}
	if res != w.reported {
		w.report(ctx, res, msg)
	}
	if res == Success && w.kind == api.ProbeStartup {
		// Only now do the others start: their updates come after this
		// one's.
		w.markStarted()
	}
}

// markStarted lets the container's other probes run.
func (w *worker) markStarted() {
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	if c := w.c; c.gen == w.gen && !c.started {
		c.started = true
		close(c.startedCh)
	}
}

// reached counts a check's result and reports whether it has now come
// in a row as often as its threshold asks.
func (w *worker) reached(res Result) bool {
	if res == w.last {
		w.streak++
	} else {
		w.last, w.streak = res, 1
	}
	if res == Failure {
		return w.streak >= w.failureThreshold
	}
	return w.streak >= w.successThreshold
}

// commit records a result that reached its threshold in the container's
// state; false when the container was Reset since the check began.
func (w *worker) commit(res Result) bool {
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	c := w.c
	if c.gen != w.gen {
		return false
	}
	c.results[w.idx] = res
	return true
}

// report sends a change, unless the worker is stopped first.
func (w *worker) report(ctx context.Context, res Result, msg string) {
	w.reported = res
	u := Update{
		Replica:   w.c.key.replica,
		Container: w.c.key.container,
		Kind:      w.kind,
		Result:    res,
		Message:   msg,
		Time:      time.Now(),
	}
	select {
	case w.m.updates <- u:
	case <-ctx.Done():
	}
}
