package controller

import (
	"fmt"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/region/ipam"
	"github.com/stratahq/strata/region/scheduler"
	"github.com/stratahq/strata/region/state"
)

// view is what one pass decides against: the caches at the start of the
// pass plus the pass's own decisions (the scheduler snapshot books every
// placement it makes).
type view struct {
	c     *Controller
	now   time.Time
	nodes map[string]nodeView
	snap  *scheduler.Snapshot
	// drainRuns are the running drains, built on first use.
	drainRuns map[string]*drainRun
	// pools are the IPAM pools of the networks this pass allocates on.
	pools map[string]*ipam.Pool
}

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

func (c *Controller) newView(now time.Time) *view {
	v := &view{c: c, now: now, nodes: map[string]nodeView{}}
	for _, it := range c.o.Caches.Nodes.List() {
		nv := nodeView{node: it.Value}
		if st, ok := c.o.Caches.NodeStatus.Get(it.Name); ok {
			nv.status = st.Value
		}
		v.nodes[it.Name] = nv
	}
	return v
}

// node returns a node and whether it exists.
func (v *view) node(name string) (nodeView, bool) {
	nv, ok := v.nodes[name]
	return nv, ok
}

// lost reports whether a replica on node can no longer run there: the
// node is gone or Down.
func (v *view) lost(node string) (bool, string) {
	if node == "" {
		return false, ""
	}
	nv, ok := v.nodes[node]
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
// replicas still being destroyed: they hold their resources until their
// records go.
func (v *view) snapshot() *scheduler.Snapshot {
	if v.snap != nil {
		return v.snap
	}
	list := make([]*scheduler.NodeInfo, 0, len(v.nodes))
	for name, nv := range v.nodes {
		allocated, running := v.c.index.nodeUsage(name)
		ni := &scheduler.NodeInfo{Node: nv.node, Health: nv.health(), Allocated: allocated, Placed: running}
		if nv.status != nil {
			ni.Errored = api.WorstCondition(nv.status.Conditions) == api.ConditionError
		}
		list = append(list, ni)
	}
	v.snap = scheduler.NewSnapshot(list)
	return v.snap
}

// pool returns the IPAM pool of a network ("" is the default network),
// built on first use from the network's ports.
func (v *view) pool(name string) (*ipam.Pool, error) {
	if name == "" {
		for _, it := range v.c.o.Caches.Networks.List() {
			if it.Value.Default {
				name = it.Name
				break
			}
		}
		if name == "" {
			return nil, nil
		}
	}
	if p, ok := v.pools[name]; ok {
		return p, nil
	}
	it, ok := v.c.o.Caches.Networks.Get(name)
	if !ok {
		return nil, fmt.Errorf("network %q does not exist in this region", name)
	}
	var ports []api.Port
	for _, pt := range v.c.o.Caches.Ports.ListPrefix(name + "/") {
		ports = append(ports, *pt.Value)
	}
	p, err := ipam.NewPool(*it.Value, ports, v.c.ipamNext[name])
	if err != nil {
		return nil, err
	}
	if v.pools == nil {
		v.pools = map[string]*ipam.Pool{}
	}
	v.pools[name] = p
	return p, nil
}

// replica is one assignment with what the pass knows of it.
type replica struct {
	a      *api.Assignment
	modRev int64
	st     *api.AssignmentStatus
	phase  api.Phase
}

func (v *view) replicas(key string) []*replica {
	ids := v.c.index.ofResource(key)
	out := make([]*replica, 0, len(ids))
	for _, id := range ids {
		it, ok := v.c.o.Caches.Assignments.Get(id)
		if !ok {
			continue
		}
		r := &replica{a: it.Value, modRev: it.ModRevision}
		if st, ok := v.c.o.Caches.Statuses.Get(id); ok {
			r.st = st.Value
		}
		r.phase = state.ReplicaPhase(r.a, r.st)
		out = append(out, r)
	}
	return out
}
