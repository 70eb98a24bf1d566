package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/events"
	"github.com/stratahq/strata/internal/heartbeat"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/region/ipam"
	"github.com/stratahq/strata/region/state"
)

// register creates or refreshes an agent's node. The agent owns the
// description (labels, capacity, providers, address, its host's network);
// the operator owns the cordon, which a re-registration never lifts; the
// region owns the node's block of the network, which the node keeps for
// its lifetime and gets at its first registration (or at the first after
// blocks ran out). Every registration refreshes registeredAt, one write
// per agent session: it is the node monitor's evidence of life that
// survives a heartbeat store losing its beats (a node that just
// registered is alive, whatever Redis says).
func (s *Server) register(ctx context.Context, n api.Node) (api.Node, error) {
	if n.Region == "" {
		n.Region = s.region
	}
	if err := s.canRegister(n); err != nil {
		return api.Node{}, err
	}
	now := time.Now()
	n.Status, n.ResourceVersion = nil, 0
	if n.Network != nil {
		nn := *n.Network
		nn.Block = "" // the region's, whatever the agent says
		n.Network = &nn
	}

	var (
		reg registration
		err error
		// lost are the blocks this registration found taken by a
		// write its cache has not shown yet: the next attempt skips
		// them rather than pick them again.
		lost = map[string]bool{}
	)
	for attempt := 1; ; {
		reg, err = s.registerOnce(ctx, n, now, lost)
		if err == nil {
			break
		}
		// Another registration took the block this one picked: not a
		// failed attempt but progress, since the next one never picks it
		// again, so it is bounded by the network's blocks however many
		// nodes register at once.
		if s.lostBlock(err, reg) {
			lost[reg.block] = true
			continue
		}
		// The node changed (an operator's cordon) since it was read.
		if retryable(err) && attempt < planAttempts {
			attempt++
			continue
		}
		return api.Node{}, fmt.Errorf("register node %s: %w", n.Name, err)
	}
	if !reg.created {
		if err := s.ensureNodeStatus(ctx, n.Name, now); err != nil {
			return api.Node{}, err
		}
	}
	// A node that was Down stays Down until the monitor sees this beat.
	s.beats.add(heartbeat.Beat{ID: n.Name, At: now})
	if err := s.waitNodes(ctx, reg.it.ModRevision); err != nil {
		return api.Node{}, err
	}
	s.tellRegistered(n, reg)
	out := *reg.it.Value
	out.ResourceVersion = reg.it.ModRevision
	return out, nil
}

// canRegister checks a registration before anything is written.
func (s *Server) canRegister(n api.Node) error {
	if n.Region != s.region {
		return api.Invalid("region", "node %s registers with region %q but this is region %q", n.Name, n.Region, s.region)
	}
	if err := n.Validate(); err != nil {
		return err
	}
	if _, ok := s.caches.DefaultNetwork(); !ok {
		// The region records its network once it has started: a node
		// registered before would go without a block. The agent tries
		// again.
		return fmt.Errorf("the region's network is not recorded yet: %w", api.ErrUnavailable)
	}
	return nil
}

// tellRegistered logs and emits what a registration did: a new node, a
// block assigned, or none to be had.
func (s *Server) tellRegistered(n api.Node, reg registration) {
	if reg.created {
		s.log.Info("node registered", "node", n.Name, "address", n.Address, "block", reg.block)
		msg := fmt.Sprintf("node registered with %d mCPU, %d MiB", n.Capacity.MilliCPU, n.Capacity.MemoryMiB)
		fields := map[string]string{"address": n.Address, "agentVersion": n.AgentVersion}
		if reg.block != "" {
			msg += ", address block " + reg.block
			fields["block"] = reg.block
		}
		s.emit(events.TypeNormal, "NodeRegistered", "node/"+n.Name, msg, fields)
	}
	switch {
	case reg.block != "" && !reg.created:
		s.log.Info("node got its address block", "node", n.Name, "block", reg.block)
		s.emit(events.TypeNormal, "BlockAssigned", "node/"+n.Name, "address block "+reg.block+" assigned",
			map[string]string{"block": reg.block})
	case reg.noBlock != nil:
		s.log.Warn("node registered without an address block: its compute replicas cannot get addresses", "node", n.Name, "err", reg.noBlock)
		s.emit(events.TypeWarning, "NoAddressBlock", "node/"+n.Name, "no address block: "+reg.noBlock.Error(), nil)
	}
}

// registration is the outcome of one registration write.
type registration struct {
	it      store.Item[api.Node]
	created bool
	// block is the block assigned by this write, if any; noBlock why
	// none could be. creates is true when the write creates block's
	// record (false: the record was there already).
	block   string
	creates bool
	noBlock error
}

// lostBlock reports whether err, the failure of a registration's write,
// is the block record it would create being there already: another
// registration took the block first.
func (s *Server) lostBlock(err error, reg registration) bool {
	var terr *store.TxnError
	if !reg.creates || !errors.As(err, &terr) || !errors.Is(err, store.ErrExists) {
		return false
	}
	nw, ok := s.caches.DefaultNetwork()
	return ok && terr.Key == s.st.Blocks.Key(state.BlockName(nw.Name, reg.block))
}

// registerOnce writes one registration: the node, and the block it gets
// if it has none (never one of lost), in one transaction. A conflict (the
// node changed, the block was taken meanwhile) fails it; register tries
// again.
func (s *Server) registerOnce(ctx context.Context, n api.Node, now time.Time, lost map[string]bool) (registration, error) {
	var reg registration
	cur, err := s.st.Nodes.Get(ctx, n.Name)
	exists := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return reg, err
	}
	next := n
	next.RegisteredAt = now
	if exists {
		c := cur.Value
		next.Schedulable, next.CordonReason, next.CordonedBy, next.CordonedAt = c.Schedulable, c.CordonReason, c.CordonedBy, c.CordonedAt
		if b := nodeBlock(c); b != "" {
			next.Network = withBlock(next.Network, b)
		}
	} else {
		next.Schedulable, next.CordonReason, next.CordonedBy, next.CordonedAt = true, "", "", time.Time{}
	}
	txn := s.st.Store.Txn()
	if nodeBlock(&next) == "" {
		if nw, ok := s.caches.DefaultNetwork(); ok { // checked by register
			block, recorded, err := s.pickBlock(nw, n.Name, lost)
			switch {
			case err == nil:
				next.Network = withBlock(next.Network, block)
				reg.block = block
				if !recorded {
					// Conditional: a block another registration (this
					// replica's or another's) took since the cache
					// showed it free fails the transaction.
					s.st.Blocks.TxnCreate(txn, state.BlockName(nw.Name, block), &api.Block{Network: nw.Name, Block: block, Node: n.Name, CreatedAt: now})
					reg.creates = true
				}
			case ipam.IsExhausted(err):
				reg.noBlock = err
			default:
				return reg, err
			}
		}
	}
	if exists {
		s.st.Nodes.TxnUpdate(txn, n.Name, &next, cur.ModRevision)
	} else {
		s.st.Nodes.TxnCreate(txn, n.Name, &next)
		// A status left over from an earlier life of the name is stale.
		s.st.NodeStatus.TxnPut(txn, n.Name, &api.NodeStatus{Health: api.HealthUp, Since: now})
	}
	rev, err := txn.Commit(ctx)
	if err != nil {
		return reg, err
	}
	reg.it, reg.created = store.Item[api.Node]{Name: n.Name, Value: &next, ModRevision: rev}, !exists
	return reg, nil
}

// pickBlock chooses node's block of network nw from the region's cache of
// block records and the addresses replicas hold. recorded is true when a
// block record for the node exists already (a registration whose node
// write failed after). The cache may miss a block taken a moment ago
// (here or by another replica): the write that creates the block's record
// is conditional, and a registration that loses the race tries again
// without the blocks in lost. Looking blocks up one by one in the cache,
// rather than reading every record from etcd, keeps a registration's cost
// flat in the number of nodes: 10,000 nodes registering at once would
// otherwise read 50 million records.
func (s *Server) pickBlock(nw *api.Network, node string, lost map[string]bool) (block string, recorded bool, err error) {
	for _, it := range s.caches.Blocks.ByIndex(state.BlocksByNode, node, nw.Name+"/", "", 1, nil) {
		if b, err := netip.ParsePrefix(it.Value.Block); err == nil {
			return b.String(), true, nil
		}
	}
	taken := func(b netip.Prefix) bool {
		if lost[b.String()] {
			return true
		}
		_, ok := s.caches.Blocks.Get(state.BlockName(nw.Name, b.String()))
		return ok
	}
	var used []ipam.AddressUse
	for _, it := range s.caches.Ports.ListPrefix(nw.Name + "/") {
		a, err := netip.ParseAddr(it.Value.Address)
		if err != nil {
			continue
		}
		holder := ""
		if asg, ok := s.caches.Assignments.Get(it.Value.Assignment); ok {
			holder = asg.Value.Node
		}
		used = append(used, ipam.AddressUse{Addr: a, Node: holder})
	}
	b, err := ipam.PickBlock(*nw, node, taken, used)
	if err != nil {
		return "", false, err
	}
	return b.String(), false, nil
}

// nodeBlock is a node's block, "" when it has none.
func nodeBlock(n *api.Node) string {
	if n.Network == nil {
		return ""
	}
	return n.Network.Block
}

// withBlock returns a copy of nn (nil: an empty one) with block set.
func withBlock(nn *api.NodeNetwork, block string) *api.NodeNetwork {
	out := api.NodeNetwork{}
	if nn != nil {
		out = *nn
	}
	out.Block = block
	return &out
}

// ensureNodeStatus creates a missing node status (Up). An existing one is
// the monitor's and is left alone.
func (s *Server) ensureNodeStatus(ctx context.Context, name string, now time.Time) error {
	if _, ok := s.caches.NodeStatus.Get(name); ok {
		return nil
	}
	rev, err := s.st.NodeStatus.Create(ctx, name, &api.NodeStatus{Health: api.HealthUp, Since: now})
	switch {
	case errors.Is(err, store.ErrExists):
		return nil
	case err != nil:
		return fmt.Errorf("create status of node %s: %w", name, err)
	}
	return s.caches.NodeStatus.WaitForRev(ctx, rev)
}

// waitNodes waits until the node caches have seen rev: the next heartbeat
// and the next operator read then see what was just written.
func (s *Server) waitNodes(ctx context.Context, rev int64) error {
	if err := s.caches.Nodes.WaitForRev(ctx, rev); err != nil {
		return fmt.Errorf("node cache: %w", err)
	}
	if err := s.caches.NodeStatus.WaitForRev(ctx, rev); err != nil {
		return fmt.Errorf("node status cache: %w", err)
	}
	return nil
}

// heartbeat records a beat (through the batcher) and writes the node's
// conditions only when their (type, status, reason) changed: steady beats
// cost no etcd write at all. reregister asks the agent to register again.
func (s *Server) heartbeat(ctx context.Context, node string, seq uint64, conds []api.Condition, metrics map[string]float64) (reregister bool, err error) {
	if _, ok := s.caches.Nodes.Get(node); !ok {
		// Not recorded: the beat would bring a deleted node back into
		// the heartbeat store. Register records one.
		return true, nil
	}
	now := time.Now()
	s.beats.add(heartbeat.Beat{ID: node, At: now, Seq: seq, Metrics: metrics})
	cur, ok := s.caches.NodeStatus.Get(node)
	if !ok {
		return true, nil // Register creates it
	}
	if !conditionsChanged(cur.Value.Conditions, conds) {
		return false, nil
	}

	var changed []api.Condition
	it, err := s.st.NodeStatus.Modify(ctx, node, func(st *api.NodeStatus) error {
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
	if err := s.caches.NodeStatus.WaitForRev(ctx, it.ModRevision); err != nil {
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
		s.emit(typ, "ConditionChanged", "node/"+node, msg,
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

// listNodes returns the nodes whose labels match selector, by name: those
// whose names come after after, at most limit of them (0: all).
func (s *Server) listNodes(selector, after string, limit int) ([]api.Node, error) {
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

func (s *Server) getNode(name string) (api.Node, error) {
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
func (s *Server) nodeUsage() map[string]usage {
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
func (s *Server) nodeView(it store.Item[api.Node], use map[string]usage) api.Node {
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

// deleteNode removes a node and its status, and forgets its heartbeat. Its
// assignments stay: rescheduling them is the controller's job.
func (s *Server) deleteNode(ctx context.Context, name string) error {
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
	s.beats.drop(name)
	if err := s.heartbeats.Forget(ctx, name); err != nil {
		// The monitor filters beats by the node list; a leftover beat
		// is untidy, not wrong.
		s.log.Warn("forgetting the heartbeat of a deleted node failed", "node", name, "err", err)
	}
	s.log.Info("node deleted", "node", name)
	s.emit(events.TypeNormal, "NodeDeleted", "node/"+name, "node deleted by an operator", nil)
	return s.waitNodes(ctx, rev)
}

// cordon makes a node unschedulable. Cordoning a node the operator already
// cordoned for the same reason writes nothing.
func (s *Server) cordon(ctx context.Context, name, reason string) (api.Node, error) {
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
func (s *Server) uncordon(ctx context.Context, name string) (api.Node, error) {
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

// drain cordons a node and starts a drain of it, which the controller
// executes. A running drain is returned unchanged; a finished one is
// replaced.
func (s *Server) drain(ctx context.Context, name string, req api.DrainRequest) (api.DrainStatus, error) {
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
func (s *Server) drainOf(ctx context.Context, name string) (store.Item[api.Node], *store.Item[api.DrainStatus], error) {
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
func (s *Server) newDrain(name string, req api.DrainRequest, now time.Time) api.DrainStatus {
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
func (s *Server) startDrain(ctx context.Context, node store.Item[api.Node], cur *store.Item[api.DrainStatus], d *api.DrainStatus, reason string) (int64, error) {
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

func (s *Server) getDrain(name string) (api.DrainStatus, error) {
	it, ok := s.caches.Drains.Get(name)
	if !ok {
		return api.DrainStatus{}, api.NotFound("drain of node", name)
	}
	return *it.Value, nil
}

func suffix(reason string) string {
	if reason == "" {
		return ""
	}
	return ": " + reason
}
