package api

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/events"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/region/state"
)

// cordonedByOperator marks cordons made through the API.
const cordonedByOperator = "operator"

// nodes owns the region's nodes as the operator and the agents see them:
// registration (registration.go), the node views with their status and
// usage, deletion, cordons and drains (drains.go). Heartbeats are beats'.
type nodes struct {
	core
	beats *beats
	// drainDeadline is the deadline of drains that name none.
	drainDeadline time.Duration
}

// waitNodes waits until the node caches have seen rev: the next heartbeat
// and the next operator read then see what was just written.
func (s *nodes) waitNodes(ctx context.Context, rev int64) error {
	if err := s.caches.Nodes.WaitForRev(ctx, rev); err != nil {
		return fmt.Errorf("node cache: %w", err)
	}
	if err := s.caches.NodeStatus.WaitForRev(ctx, rev); err != nil {
		return fmt.Errorf("node status cache: %w", err)
	}
	return nil
}

// list returns the nodes whose labels match selector, by name: those
// whose names come after after, at most limit of them (0: all).
func (s *nodes) list(selector, after string, limit int) ([]api.Node, error) {
	if err := api.ValidateSelector("selector", selector); err != nil {
		return nil, err
	}
	sel, err := api.ParseSelector(selector)
	if err != nil {
		return nil, err
	}
	items := s.caches.Nodes.Range("", after, limit, func(it store.Item[api.Node]) bool { return sel.Matches(it.Value.Labels) })
	usage := s.nodeUsage()
	out := make([]api.Node, 0, len(items))
	for _, it := range items {
		out = append(out, s.nodeView(it, usage))
	}
	return out, nil
}

func (s *nodes) get(name string) (api.Node, error) {
	it, ok := s.caches.Nodes.Get(name)
	if !ok {
		return api.Node{}, api.NotFound("node", name)
	}
	return s.nodeView(it, s.nodeUsage()), nil
}

type usage struct {
	allocated api.Capacity
	replicas  int
}

// nodeUsage sums what the running replicas take on each node, in one
// pass over the assignments.
func (s *nodes) nodeUsage() map[string]usage {
	out := map[string]usage{}
	for _, it := range s.caches.Assignments.List() {
		a := it.Value
		if a.Node == "" || a.Desired != api.DesiredRunning {
			continue
		}
		u := out[a.Node]
		u.allocated = u.allocated.Add(a.Flavor.Capacity())
		u.replicas++
		out[a.Node] = u
	}
	return out
}

// nodeView joins a cached node with its status, drain and usage. It
// copies what it changes: cache values are shared.
func (s *nodes) nodeView(it store.Item[api.Node], use map[string]usage) api.Node {
	n := *it.Value
	n.ResourceVersion = it.ModRevision
	status := api.NodeStatus{Health: api.HealthUnknown}
	if st, ok := s.caches.NodeStatus.Get(n.Name); ok {
		status = *st.Value
	}
	if d, ok := s.caches.Drains.Get(n.Name); ok {
		drain := *d.Value
		status.Drain = &drain
	}
	status.Allocated = use[n.Name].allocated
	status.Replicas = use[n.Name].replicas
	n.Status = &status
	return n
}

// delete removes a node and its status, and forgets its heartbeat. Its
// assignments stay: rescheduling them is the controller's job.
func (s *nodes) delete(ctx context.Context, name string) error {
	it, err := s.st.Nodes.Get(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return api.NotFound("node", name)
	}
	if err != nil {
		return fmt.Errorf("delete node %s: %w", name, err)
	}
	txn := s.st.Store.Txn()
	s.st.Nodes.TxnDelete(txn, name, it.ModRevision)
	s.st.NodeStatus.TxnDelete(txn, name, 0)
	// The node's block goes with it: another node may have it, skipping
	// the addresses the deleted node's replicas still hold until they
	// are rescheduled.
	if b := nodeBlock(it.Value); b != "" {
		if nw, ok := s.caches.DefaultNetwork(); ok {
			s.st.Blocks.TxnDelete(txn, state.BlockName(nw.Name, b), 0)
		}
	}
	rev, err := txn.Commit(ctx)
	if err != nil {
		return fmt.Errorf("delete node %s: %w", name, err)
	}
	s.beats.forget(ctx, name)
	s.log.Info("node deleted", "node", name)
	s.emit(events.TypeNormal, "NodeDeleted", "node/"+name, "node deleted by an operator", nil)
	return s.waitNodes(ctx, rev)
}

// cordon makes a node unschedulable. Cordoning a node the operator already
// cordoned for the same reason writes nothing.
func (s *nodes) cordon(ctx context.Context, name, reason string) (api.Node, error) {
	now := time.Now()
	changed := false
	it, err := s.st.Nodes.Modify(ctx, name, func(n *api.Node) error {
		changed = false
		if !n.Schedulable && n.CordonedBy == cordonedByOperator && n.CordonReason == reason {
			return store.ErrNoChange
		}
		if n.Schedulable {
			n.CordonedAt = now
		}
		n.Schedulable, n.CordonReason, n.CordonedBy = false, reason, cordonedByOperator
		changed = true
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return api.Node{}, api.NotFound("node", name)
	}
	if err != nil {
		return api.Node{}, fmt.Errorf("cordon node %s: %w", name, err)
	}
	if err := s.waitNodes(ctx, it.ModRevision); err != nil {
		return api.Node{}, err
	}
	if changed {
		s.log.Info("node cordoned", "node", name, "reason", reason)
		s.emit(events.TypeNormal, "Cordoned", "node/"+name, "node cordoned by an operator"+suffix(reason),
			map[string]string{"reason": reason, "by": cordonedByOperator})
	}
	return s.nodeView(it, s.nodeUsage()), nil
}

// uncordon makes a node schedulable again, unless a drain of it is running:
// the drain needs the node empty, and lifting its cordon would let the
// scheduler refill it.
func (s *nodes) uncordon(ctx context.Context, name string) (api.Node, error) {
	changed := false
	it, err := s.st.Nodes.Modify(ctx, name, func(n *api.Node) error {
		changed = false
		// Checked on every attempt, against etcd: a drain started since
		// the last attempt moved the node too, which is why we retried.
		d, err := s.st.Drains.Get(ctx, name)
		switch {
		case err == nil && !d.Value.Done():
			return fmt.Errorf("node %s is being drained (since %s); it stays cordoned until the drain finishes: %w",
				name, d.Value.StartedAt.UTC().Format(time.RFC3339), api.ErrConflict)
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return fmt.Errorf("read drain of node %s: %w", name, err)
		}
		if n.Schedulable {
			return store.ErrNoChange
		}
		n.Schedulable, n.CordonReason, n.CordonedBy, n.CordonedAt = true, "", "", time.Time{}
		changed = true
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return api.Node{}, api.NotFound("node", name)
	}
	if err != nil {
		return api.Node{}, fmt.Errorf("uncordon node %s: %w", name, err)
	}
	if err := s.waitNodes(ctx, it.ModRevision); err != nil {
		return api.Node{}, err
	}
	if changed {
		s.log.Info("node uncordoned", "node", name)
		s.emit(events.TypeNormal, "Uncordoned", "node/"+name, "node uncordoned by an operator", nil)
	}
	return s.nodeView(it, s.nodeUsage()), nil
}

// nodeBlock is a node's block, "" when it has none.
func nodeBlock(n *api.Node) string {
	if n.Network == nil {
		return ""
	}
	return n.Network.Block
}
