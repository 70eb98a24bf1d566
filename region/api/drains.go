package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/events"
	"github.com/stratahq/strata/internal/store"
)

// drain cordons a node and starts a drain of it, which the controller
// executes. A running drain is returned unchanged; a finished one is
// replaced.
func (s *nodes) drain(ctx context.Context, name string, req api.DrainRequest) (api.DrainStatus, error) {
	if err := req.Validate(); err != nil {
		return api.DrainStatus{}, err
	}
	for attempt := 1; ; attempt++ {
		node, cur, err := s.drainOf(ctx, name)
		if err != nil {
			return api.DrainStatus{}, err
		}
		if cur != nil && !cur.Value.Done() {
			return *cur.Value, nil
		}
		d := s.newDrain(name, req, time.Now())
		rev, err := s.startDrain(ctx, node, cur, &d, req.Reason)
		if err != nil {
			if retryable(err) && attempt < planAttempts {
				continue
			}
			return api.DrainStatus{}, fmt.Errorf("drain node %s: %w", name, err)
		}
		if err := s.waitNodes(ctx, rev); err != nil {
			return api.DrainStatus{}, err
		}
		if err := s.caches.Drains.WaitForRev(ctx, rev); err != nil {
			return api.DrainStatus{}, fmt.Errorf("drain cache: %w", err)
		}
		s.log.Info("drain started", "node", name, "deadline", d.Deadline, "maxParallel", d.MaxParallel)
		s.emit(events.TypeNormal, "DrainStarted", "node/"+name,
			fmt.Sprintf("drain started: deadline %s, %d at a time", d.Deadline.UTC().Format(time.RFC3339), d.MaxParallel)+suffix(req.Reason),
			map[string]string{"deadline": d.Deadline.UTC().Format(time.RFC3339), "maxParallel": strconv.Itoa(d.MaxParallel)})
		return d, nil
	}
}

// drainOf reads a node and its drain (nil when it has none).
func (s *nodes) drainOf(ctx context.Context, name string) (store.Item[api.Node], *store.Item[api.DrainStatus], error) {
	node, err := s.st.Nodes.Get(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return node, nil, api.NotFound("node", name)
	}
	if err != nil {
		return node, nil, fmt.Errorf("drain node %s: %w", name, err)
	}
	cur, err := s.st.Drains.Get(ctx, name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return node, nil, nil
	case err != nil:
		return node, nil, fmt.Errorf("drain node %s: %w", name, err)
	}
	return node, &cur, nil
}

// newDrain is a drain of node name starting now, with what is to move
// counted now, so that a client polling the drain before the
// controller's first pass does not read "0 remaining" as done.
func (s *nodes) newDrain(name string, req api.DrainRequest, now time.Time) api.DrainStatus {
	d := api.DrainStatus{
		Node:        name,
		State:       api.DrainRunning,
		Reason:      req.Reason,
		StartedAt:   now,
		Deadline:    now.Add(req.Deadline.Or(s.drainDeadline)),
		MaxParallel: cmp.Or(req.MaxParallel, 1),
	}
	for _, it := range s.caches.Assignments.List() {
		if a := it.Value; a.Node == name && a.Desired == api.DesiredRunning {
			d.Total++
		}
	}
	d.Remaining = d.Total
	d.Message = fmt.Sprintf("starting: %d replicas to move", d.Total)
	return d
}

// startDrain writes drain d over cur (nil: none) and cordons the node,
// in one transaction.
func (s *nodes) startDrain(ctx context.Context, node store.Item[api.Node], cur *store.Item[api.DrainStatus], d *api.DrainStatus, reason string) (int64, error) {
	n := *node.Value
	if n.Schedulable {
		n.Schedulable, n.CordonReason, n.CordonedBy, n.CordonedAt = false, cmp.Or(reason, "drain"), cordonedByOperator, d.StartedAt
	}
	txn := s.st.Store.Txn()
	if cur != nil {
		s.st.Drains.TxnUpdate(txn, d.Node, d, cur.ModRevision)
	} else {
		s.st.Drains.TxnCreate(txn, d.Node, d)
	}
	// Written even when already cordoned: an uncordon racing with this
	// drain then conflicts, retries, and sees the drain.
	s.st.Nodes.TxnUpdate(txn, d.Node, &n, node.ModRevision)
	return txn.Commit(ctx)
}

func (s *nodes) getDrain(name string) (api.DrainStatus, error) {
	it, ok := s.caches.Drains.Get(name)
	if !ok {
		return api.DrainStatus{}, api.NotFound("drain of node", name)
	}
	return *it.Value, nil
}
