package api

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
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
func (s *nodes) register(ctx context.Context, n api.Node) (api.Node, error) {
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
func (s *nodes) canRegister(n api.Node) error {
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
func (s *nodes) tellRegistered(n api.Node, reg registration) {
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
func (s *nodes) lostBlock(err error, reg registration) bool {
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
func (s *nodes) registerOnce(ctx context.Context, n api.Node, now time.Time, lost map[string]bool) (registration, error) {
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
func (s *nodes) pickBlock(nw *api.Network, node string, lost map[string]bool) (block string, recorded bool, err error) {
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
func (s *nodes) ensureNodeStatus(ctx context.Context, name string, now time.Time) error {
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
