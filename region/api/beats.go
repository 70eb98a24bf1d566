package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/events"
	"github.com/stratahq/strata/internal/heartbeat"
	"github.com/stratahq/strata/internal/store"
)

// beats owns the heartbeats the agents send: the queue of each node's
// newest unwritten beat, which run writes to the heartbeat store in
// batches, and the conditions a beat reports, which record writes to etcd
// only when they change.
type beats struct {
	core
	store  Heartbeats
	window time.Duration // beats per RecordBatch
	queue  beatQueue
}

// Heartbeats is what the API needs of the heartbeat store
// (heartbeat.Store implements it).
type Heartbeats interface {
	RecordBatch(ctx context.Context, beats []heartbeat.Beat) error
	// Forget drops a deleted node's last beat.
	Forget(ctx context.Context, id string) error
}

// shutdownFlush bounds the last heartbeat flush after Run's ctx ends.
const shutdownFlush = 2 * time.Second

// add queues a beat: a registration is evidence of life too.
func (b *beats) add(beat heartbeat.Beat) { b.queue.add(beat) }

// forget drops a deleted node's queued and stored beat, which would
// otherwise bring it back into the heartbeat store.
func (b *beats) forget(ctx context.Context, node string) {
	b.queue.drop(node)
	if err := b.store.Forget(ctx, node); err != nil {
		// The monitor filters beats by the node list; a leftover beat
		// is untidy, not wrong.
		b.log.Warn("forgetting the heartbeat of a deleted node failed", "node", node, "err", err)
	}
}

// record records a beat (through the batcher) and writes the node's
// conditions only when their (type, status, reason) changed: steady beats
// cost no etcd write at all. reregister asks the agent to register again.
func (b *beats) record(ctx context.Context, node string, seq uint64, conds []api.Condition, metrics map[string]float64) (reregister bool, err error) {
	if _, ok := b.caches.Nodes.Get(node); !ok {
		// Not recorded: the beat would bring a deleted node back into
		// the heartbeat store. Register records one.
		return true, nil
	}
	now := time.Now()
	b.queue.add(heartbeat.Beat{ID: node, At: now, Seq: seq, Metrics: metrics})
	cur, ok := b.caches.NodeStatus.Get(node)
	if !ok {
		return true, nil // Register creates it
	}
	if !conditionsChanged(cur.Value.Conditions, conds) {
		return false, nil
	}

	var changed []api.Condition
	it, err := b.st.NodeStatus.Modify(ctx, node, func(st *api.NodeStatus) error {
		st.Conditions, changed = mergeConditions(st.Conditions, conds, now)
		if len(changed) == 0 {
			return store.ErrNoChange // the cache was behind
		}
		return nil
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("update conditions of node %s: %w", node, err)
	}
	if err := b.caches.NodeStatus.WaitForRev(ctx, it.ModRevision); err != nil {
		return false, fmt.Errorf("node status cache: %w", err)
	}
	for _, c := range changed {
		typ, msg := events.TypeNormal, fmt.Sprintf("condition %s is %s", c.Type, c.Status)
		switch c.Status {
		case api.ConditionError, api.ConditionWarning:
			typ = events.TypeWarning
		case "":
			msg = fmt.Sprintf("condition %s is no longer reported", c.Type)
		}
		if c.Reason != "" {
			msg += ": " + c.Reason
		}
		b.emit(typ, "ConditionChanged", "node/"+node, msg,
			map[string]string{"condition": c.Type, "status": string(c.Status), "reason": c.Reason})
	}
	return false, nil
}

// mergeConditions returns the reported conditions (sorted by type) as they
// should be stored, and the ones whose (status, reason) changed, appeared
// or disappeared (with an empty status). An unchanged condition keeps its
// Since; a changed one starts now. Messages alone do not count as change.
func mergeConditions(stored, reported []api.Condition, now time.Time) (next, changed []api.Condition) {
	old := make(map[string]api.Condition, len(stored))
	for _, c := range stored {
		old[c.Type] = c
	}
	byType := make(map[string]api.Condition, len(reported))
	for _, c := range reported {
		byType[c.Type] = c // the last report of a type wins
	}
	next = make([]api.Condition, 0, len(byType))
	for _, c := range byType {
		if o, ok := old[c.Type]; ok && o.Status == c.Status && o.Reason == c.Reason {
			c.Since = o.Since
		} else {
			c.Since = now
			changed = append(changed, c)
		}
		next = append(next, c)
	}
	for _, o := range stored {
		if _, ok := byType[o.Type]; !ok {
			changed = append(changed, api.Condition{Type: o.Type, Since: now})
		}
	}
	byTypeName := func(a, b api.Condition) int { return cmp.Compare(a.Type, b.Type) }
	slices.SortFunc(next, byTypeName)
	slices.SortFunc(changed, byTypeName)
	if len(next) == 0 {
		next = nil // as stored: omitted
	}
	return next, changed
}

// maxQuickConditions bounds the reports conditionsChanged compares
// pairwise; a longer one (no agent sends one) goes through the merge.
const maxQuickConditions = 16

// conditionsChanged reports whether mergeConditions(stored, reported)
// would change anything, without building the merge: what nearly every
// heartbeat asks, and nearly always of the same few conditions.
func conditionsChanged(stored, reported []api.Condition) bool {
	if len(stored) > maxQuickConditions || len(reported) > maxQuickConditions {
		_, changed := mergeConditions(stored, reported, time.Time{})
		return len(changed) > 0
	}
	for i, c := range reported {
		if lastOfType(reported[i+1:], c.Type) >= 0 {
			continue // a later report of the type wins
		}
		j := lastOfType(stored, c.Type)
		if j < 0 || stored[j].Status != c.Status || stored[j].Reason != c.Reason {
			return true
		}
	}
	for _, o := range stored {
		if lastOfType(reported, o.Type) < 0 {
			return true // no longer reported
		}
	}
	return false
}

// lastOfType is the index of the last condition of type typ in cs, or -1.
func lastOfType(cs []api.Condition, typ string) int {
	for i := len(cs) - 1; i >= 0; i-- {
		if cs[i].Type == typ {
			return i
		}
	}
	return -1
}

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

// run writes queued heartbeats every window: 1,000 agents beating
// every 2 s cost ten RecordBatch calls a second, not 500 Record calls.
func (b *beats) run(ctx context.Context) {
	t := time.NewTicker(b.window)
	defer t.Stop()
	var (
		lost     int
		lastWarn time.Time
	)
	for {
		select {
		case <-t.C:
			n, err := b.flush(ctx)
			lost += n
			if err != nil && time.Since(lastWarn) >= beatWarnEvery {
				b.log.Warn("recording heartbeats failed; beats are lost until the store recovers", "lost", lost, "err", err)
				lost, lastWarn = 0, time.Now()
			}
		case <-ctx.Done():
			// The beats already received are written on the way out, so
			// that a restart of this process does not look like missed
			// beats to the node monitor.
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownFlush)
			if n, err := b.flush(fctx); err != nil {
				b.log.Warn("recording the last heartbeats failed", "lost", n, "err", err)
			}
			cancel()
			return
		}
	}
}

// flush records the queued beats and returns how many were lost. A
// lost beat is not retried: its agent beats again within its interval.
func (b *beats) flush(ctx context.Context) (lost int, err error) {
	for chunk := range slices.Chunk(b.queue.take(), maxBeatBatch) {
		if e := b.store.RecordBatch(ctx, chunk); e != nil {
			lost, err = lost+len(chunk), e
		}
	}
	return lost, err
}
