package controller

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/reconcile"
	"github.com/stratahq/strata/region/ipam"
	"github.com/stratahq/strata/region/scheduler"
	"github.com/stratahq/strata/region/state"
)

// view is what one pass decides against: the caches as the pass first
// reads them plus the pass's own decisions (the scheduler snapshot books
// every placement it makes).
type view struct {
	// caches, index and addrs are what the pass reads; dirty takes the
	// moments changesAt notes.
	caches *state.Caches
	index  *index
	addrs  *addresses
	dirty  *reconcile.Dirty
	now    time.Time
	// wall is the wall clock when the view was made: the timers of
	// changesAt run on it, whatever the controller's Clock says.
	wall time.Time
	// nodes are the nodes the pass has read, read on first use: the
	// first read of a node fixes what the pass sees of it (absent ones
	// included, with a nil node). A pass reads the nodes its replicas
	// are on; only scheduling needs every node (allNodes), so a pass
	// costs what it looks at, not the region's node count.
	nodes map[string]nodeView
	// everyNode is set once allNodes has read every node.
	everyNode bool
	snap      *scheduler.Snapshot
	// drainRuns are the running drains, built on first use.
	drainRuns map[string]*drainRun
	// pools are the IPAM pools of the node blocks this pass allocates
	// on; ports are each network's ports by block, built on first use.
	pools map[blockKey]*ipam.Pool
	ports map[string]map[netip.Prefix][]*api.Port
	// blocks are the nodes' blocks and networks the networks by name
	// ("" the default one, nil when the region has none), parsed and
	// looked up once per pass rather than once per replica.
	blocks   map[string]netip.Prefix
	networks map[string]networkLookup
}

type networkLookup struct {
	nw  *api.Network
	err error
}

// nodeView is a node and its status; node is nil when it does not exist.
type nodeView struct {
	node   *api.Node
	status *api.NodeStatus
}

func (v nodeView) health() api.Health {
	if v.status == nil {
		return api.HealthUnknown
	}
	return v.status.Health
}

// readStatus fills in nv's status from the cache.
func (v *view) readStatus(name string, nv nodeView) nodeView {
	if st, ok := v.caches.NodeStatus.Get(name); ok {
		nv.status = st.Value
	}
	return nv
}

// allNodes returns the names of every node of the view, reading the
// nodes the pass has not read yet (once per pass): what needs every node
// (the scheduler's snapshot) asks for them.
func (v *view) allNodes() []string {
	if !v.everyNode {
		v.everyNode = true
		for _, it := range v.caches.Nodes.List() {
			if _, seen := v.nodes[it.Name]; !seen {
				v.nodes[it.Name] = v.readStatus(it.Name, nodeView{node: it.Value})
			}
		}
	}
	out := make([]string, 0, len(v.nodes))
	for name, nv := range v.nodes {
		if nv.node != nil {
			out = append(out, name)
		}
	}
	return out
}

// changesAt notes that key's reconcile, which this pass decided at v.now,
// would decide otherwise at at with time alone (a deadline passes, a
// back-off ends): the key is looked at again then, without waiting for a
// change or the resync. A moment not after v.now is ignored: the pass
// has decided at it.
func (v *view) changesAt(key string, at time.Time) {
	if at.IsZero() || !at.After(v.now) {
		return
	}
	v.dirty.MarkAt(v.wall.Add(at.Sub(v.now)), key)
}

// justAfter is the first moment a "now after t" decision holds.
func justAfter(t time.Time) time.Time { return t.Add(time.Nanosecond) }

// node returns a node and whether it exists, reading it on the pass's
// first use.
func (v *view) node(name string) (nodeView, bool) {
	nv, seen := v.nodes[name]
	if !seen {
		if v.everyNode {
			// allNodes read every node: one it did not see is absent.
			return nv, false
		}
		if it, ok := v.caches.Nodes.Get(name); ok {
			nv = v.readStatus(name, nodeView{node: it.Value})
		}
		v.nodes[name] = nv
	}
	return nv, nv.node != nil
}

// lost reports whether a replica on node can no longer run there: the
// node is gone or Down.
func (v *view) lost(node string) (bool, string) {
	if node == "" {
		return false, ""
	}
	nv, ok := v.node(node)
	if !ok {
		return true, "node " + node + " was removed"
	}
	if nv.health() == api.HealthDown {
		return true, "node " + node + " is down"
	}
	return false, ""
}

// snapshot builds the scheduler's snapshot on first use in a pass: every
// node with what its replicas take (kept current by the index), counting
// replicas still being destroyed: they hold their resources (and their
// addresses) until their records go.
func (v *view) snapshot() *scheduler.Snapshot {
	if v.snap != nil {
		return v.snap
	}
	nw, hasNetwork := v.caches.DefaultNetwork()
	names := v.allNodes()
	list := make([]*scheduler.NodeInfo, 0, len(names))
	for _, name := range names {
		nv := v.nodes[name]
		allocated, running := v.index.nodeUsage(name)
		ni := &scheduler.NodeInfo{Node: nv.node, Health: nv.health(), Allocated: allocated, Placed: running}
		if nv.status != nil {
			ni.Errored = api.WorstCondition(nv.status.Conditions) == api.ConditionError
		}
		if hasNetwork {
			ni.Addresses = v.addrs.capacity(nw, v.nodeBlock(name)) - v.index.addresses(name)
		}
		list = append(list, ni)
	}
	v.snap = scheduler.NewSnapshot(list)
	return v.snap
}

// nodeBlock is a node's block of the default network, invalid when it has
// none.
func nodeBlock(n *api.Node) netip.Prefix {
	if n == nil || n.Network == nil {
		return netip.Prefix{}
	}
	b, err := netip.ParsePrefix(n.Network.Block)
	if err != nil {
		return netip.Prefix{}
	}
	return b.Masked()
}

// nodeBlock is the block of a node of the view (see nodeBlock), parsed
// once per pass.
func (v *view) nodeBlock(name string) netip.Prefix {
	if b, ok := v.blocks[name]; ok {
		return b
	}
	if v.blocks == nil {
		v.blocks = map[string]netip.Prefix{}
	}
	nv, _ := v.node(name)
	b := nodeBlock(nv.node)
	v.blocks[name] = b
	return b
}

// network returns a network by name ("" is the default network); nil
// when the region has none. The pass looks each name up once: its
// replicas all ask.
func (v *view) network(name string) (*api.Network, error) {
	if l, ok := v.networks[name]; ok {
		return l.nw, l.err
	}
	var l networkLookup
	if name == "" {
		l.nw, _ = v.caches.DefaultNetwork()
	} else if it, ok := v.caches.Networks.Get(name); ok {
		l.nw = it.Value
	} else {
		l.err = fmt.Errorf("network %q does not exist in this region", name)
	}
	if v.networks == nil {
		v.networks = map[string]networkLookup{}
	}
	v.networks[name] = l
	return l.nw, l.err
}

// pool returns the IPAM pool of node's block on network nw, built on first
// use from the network's ports.
func (v *view) pool(nw *api.Network, node string) (*ipam.Pool, error) {
	if _, ok := v.node(node); !ok {
		return nil, fmt.Errorf("node %s: %w", node, ipam.ErrNoBlock)
	}
	if !nw.Default {
		// Nodes get blocks of the default network only.
		return nil, fmt.Errorf("network %s is not the region's default network, the only one with node blocks", nw.Name)
	}
	block := v.nodeBlock(node)
	if !block.IsValid() {
		return nil, fmt.Errorf("node %s: %w", node, ipam.ErrNoBlock)
	}
	key := blockKey{network: nw.Name, block: block}
	if p, ok := v.pools[key]; ok {
		return p, nil
	}
	p, err := ipam.NewPool(*nw, block, v.blockPorts(nw, block), v.addrs.resumeAt(key))
	if err != nil {
		return nil, err
	}
	if v.pools == nil {
		v.pools = map[blockKey]*ipam.Pool{}
	}
	v.pools[key] = p
	return p, nil
}

// blockPorts returns the ports of network nw inside block, sorting the
// network's ports by block once per pass.
func (v *view) blockPorts(nw *api.Network, block netip.Prefix) []*api.Port {
	if v.ports == nil {
		v.ports = map[string]map[netip.Prefix][]*api.Port{}
	}
	byBlock, ok := v.ports[nw.Name]
	if !ok {
		byBlock = map[netip.Prefix][]*api.Port{}
		for _, pt := range v.caches.Ports.ListPrefix(nw.Name + "/") {
			a, err := netip.ParseAddr(pt.Value.Address)
			if err != nil {
				continue
			}
			b, err := a.Prefix(block.Bits())
			if err != nil {
				continue
			}
			byBlock[b] = append(byBlock[b], pt.Value) // cached values are read-only: no copy
		}
		v.ports[nw.Name] = byBlock
	}
	return byBlock[block]
}

func (v *view) replicas(key string) []*replica {
	ids := v.index.ofResource(key)
	out := make([]*replica, 0, len(ids))
	for _, id := range ids {
		it, ok := v.caches.Assignments.Get(id)
		if !ok {
			continue
		}
		r := &replica{a: it.Value, modRev: it.ModRevision}
		if st, ok := v.caches.Statuses.Get(id); ok {
			r.st = st.Value
		}
		r.phase = state.ReplicaPhase(r.a, r.st)
		out = append(out, r)
	}
	return out
}

func (c *Controller) newView(now time.Time) *view {
	return &view{caches: c.o.Caches, index: c.tracker.index, addrs: c.addrs, dirty: c.dirty, now: now, wall: time.Now(), nodes: map[string]nodeView{}}
}
