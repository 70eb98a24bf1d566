package agent

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/stratahq/strata/internal/backoff"
)

// workQueue is a keyed work queue: an id is queued at most once and handed
// to one worker at a time; an id added while a worker holds it runs again
// after. Ids carry nothing: the worker reads the desired state when it
// runs, so that repeated adds coalesce into one reconcile of the latest
// state (level-based, as the design asks). The queue owns retries: what a
// reconcile returns (a result, an error) decides when its id runs next.
type workQueue struct {
	mu       sync.Mutex
	cond     *sync.Cond
	ready    []string
	queued   map[string]bool
	active   map[string]bool
	dirty    map[string]bool
	delayed  map[string]time.Time
	failures map[string]int
	shutdown bool
	// wake tells the delay loop that an earlier deadline arrived.
	wake chan struct{}

	backoff backoff.Backoff
}

func newWorkQueue(retryMin, retryMax time.Duration) *workQueue {
	q := &workQueue{
		queued:   map[string]bool{},
		active:   map[string]bool{},
		dirty:    map[string]bool{},
		delayed:  map[string]time.Time{},
		failures: map[string]int{},
		wake:     make(chan struct{}, 1),
		backoff:  backoff.Backoff{Min: retryMin, Max: retryMax},
	}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// result is what one reconcile asks of the work queue, as
// controller-runtime's reconcile.Result: by default nothing (the id
// waits for its next change); Requeue runs it again as soon as its
// worker is done; RequeueAfter runs it again after that long. A
// reconcile that returns an error is retried after the id's backoff
// instead (workQueue.finish).
type result struct {
	Requeue      bool
	RequeueAfter time.Duration
}

// reconcileFunc is one reconcile of an id (reconciler.reconcile).
type reconcileFunc func(ctx context.Context, id string) (result, error)

// work is one worker: it reconciles ids, one at a time per id, until the
// queue is shut down.
func (q *workQueue) work(ctx context.Context, reconcile reconcileFunc, log *slog.Logger) {
	for {
		id, ok := q.get()
		if !ok {
			return
		}
		res, err := reconcile(ctx, id)
		q.finish(ctx, id, res, err, log)
		q.done(id)
	}
}

// finish queues id again as its reconcile asked: after its backoff on an
// error (none once ctx is done: the agent is stopping), else as the
// result says, the backoff reset.
func (q *workQueue) finish(ctx context.Context, id string, res result, err error, log *slog.Logger) {
	switch {
	case err != nil:
		if ctx.Err() != nil {
			return
		}
		d := q.retry(id)
		log.Warn("reconcile failed; retrying", "id", id, "err", err, "in", d)
	case res.Requeue:
		q.forget(id)
		q.add(id)
	default:
		q.forget(id)
		if res.RequeueAfter > 0 {
			q.addAfter(id, res.RequeueAfter)
		}
	}
}

// add queues id now; a pending delayed run of id is superseded, so new
// information from the region is acted on at once even while the id
// waits out a retry backoff.
func (q *workQueue) add(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.addLocked(id)
}

func (q *workQueue) addLocked(id string) {
	if q.shutdown {
		return
	}
	delete(q.delayed, id)
	if q.active[id] {
		q.dirty[id] = true
		return
	}
	if q.queued[id] {
		return
	}
	q.queued[id] = true
	q.ready = append(q.ready, id)
	q.cond.Signal()
}

// addAfter queues id after d, unless it is already due sooner.
func (q *workQueue) addAfter(id string, d time.Duration) {
	if d <= 0 {
		q.add(id)
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.addAfterLocked(id, d)
}

func (q *workQueue) addAfterLocked(id string, d time.Duration) {
	if q.shutdown || q.queued[id] || q.dirty[id] {
		return
	}
	at := time.Now().Add(d)
	if cur, ok := q.delayed[id]; ok && !cur.After(at) {
		return
	}
	q.delayed[id] = at
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// retry queues id after its backoff, which doubles with each failure.
func (q *workQueue) retry(id string) time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := q.failures[id]
	q.failures[id] = n + 1
	d := q.backoff.Delay(n + 1)
	q.addAfterLocked(id, d)
	return d
}

// forget resets id's backoff.
func (q *workQueue) forget(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.failures, id)
}

// drop forgets everything about id except a run in progress.
func (q *workQueue) drop(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.failures, id)
	delete(q.delayed, id)
}

// get blocks until an id is ready or the queue is shut down.
func (q *workQueue) get() (string, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.ready) == 0 && !q.shutdown {
		q.cond.Wait()
	}
	if q.shutdown {
		return "", false
	}
	id := q.ready[0]
	q.ready[0] = ""
	q.ready = q.ready[1:]
	delete(q.queued, id)
	q.active[id] = true
	return id, true
}

// done releases id; if it was added meanwhile it is queued again.
func (q *workQueue) done(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.active, id)
	if q.dirty[id] {
		delete(q.dirty, id)
		q.addLocked(id)
	}
}

func (q *workQueue) shutDown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.shutdown = true
	q.cond.Broadcast()
}

// runDelays moves delayed ids to the ready list when they are due, until
// ctx is done.
func (q *workQueue) runDelays(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		q.mu.Lock()
		now := time.Now()
		next := time.Duration(-1)
		for id, at := range q.delayed {
			if !at.After(now) {
				q.addLocked(id)
				continue
			}
			if d := at.Sub(now); next < 0 || d < next {
				next = d
			}
		}
		q.mu.Unlock()
		if next < 0 {
			next = time.Hour
		}
		timer.Reset(next)
		select {
		case <-ctx.Done():
			return
		case <-q.wake:
		case <-timer.C:
		}
	}
}
