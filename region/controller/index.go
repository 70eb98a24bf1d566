package controller

import (
	"sync"
	"unique"

	"github.com/stratahq/strata/internal/api"
)

// index finds a resource's and a node's assignments without scanning the
// cache. It is fed by the assignment cache's feed.
type index struct {
	mu         sync.RWMutex
	byResource map[string]map[string]struct{}
	byNode     map[string]map[string]struct{}
	// ids holds, for each assignment, what it is indexed under and what
	// it adds to its node's usage: one entry per replica, 20,000 in a
	// region at production shape, so one map rather than one per field.
	ids map[string]entry
	// usage is what each node's assignment records take, kept as the
	// records change so that a pass need not sum 20,000 replicas: a
	// replica counts until its record is deleted, destroy included
	// (conservative: it holds its resources until it is gone).
	usage map[string]*nodeUsage
}

type nodeUsage struct {
	allocated api.Capacity
	// running counts running replicas per resource key.
	running map[string]int
	// addresses counts the records holding an address (a Port record,
	// which goes with the assignment's record).
	addresses int
}

// entry is what the index knows of one assignment: its resource key
// (one shared copy per resource), its node ("" while unplaced) and what
// it takes there.
type entry struct {
	resource string
	node     string
	need     api.Capacity
	running  bool
	address  bool
}

func newIndex() *index {
	return &index{
		byResource: map[string]map[string]struct{}{},
		byNode:     map[string]map[string]struct{}{},
		ids:        map[string]entry{},
		usage:      map[string]*nodeUsage{},
	}
}

// unaccount takes what e added off its node's usage.
func (x *index) unaccount(e entry) {
	if e.node == "" {
		return
	}
	u := x.usage[e.node]
	u.allocated = u.allocated.Sub(e.need)
	if e.address {
		u.addresses--
	}
	if e.running {
		if u.running[e.resource]--; u.running[e.resource] <= 0 {
			delete(u.running, e.resource)
		}
	}
}

// account adds what e takes to its node's usage.
func (x *index) account(e entry) {
	if e.node == "" {
		return
	}
	u := x.usage[e.node]
	if u == nil {
		u = &nodeUsage{running: map[string]int{}}
		x.usage[e.node] = u
	}
	u.allocated = u.allocated.Add(e.need)
	if e.address {
		u.addresses++
	}
	if e.running {
		u.running[e.resource]++
	}
}

func (x *index) put(a *api.Assignment) {
	x.mu.Lock()
	defer x.mu.Unlock()
	old, had := x.ids[a.ID]
	e := entry{resource: old.resource, node: a.Node, need: a.Flavor.Capacity(), running: a.Desired == api.DesiredRunning,
		address: a.Network != nil && a.Network.Address != ""}
	if key := a.ResourceKey(); !had || key != old.resource {
		if had {
			del(x.byResource, old.resource, a.ID)
		}
		e.resource = unique.Make(key).Value()
		add(x.byResource, e.resource, a.ID)
	}
	if !a.ExitedAt.IsZero() {
		// A Job's exited attempt runs no more: only its address stays
		// taken until its record goes.
		e.need, e.running = api.Capacity{}, false
	}
	if had && old.node != "" && old.node != e.node {
		del(x.byNode, old.node, a.ID)
	}
	if e.node != "" {
		add(x.byNode, e.node, a.ID)
	}
	x.unaccount(old)
	x.account(e)
	x.ids[a.ID] = e
}

func (x *index) remove(a *api.Assignment) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e, ok := x.ids[a.ID]
	if !ok {
		return
	}
	del(x.byResource, e.resource, a.ID)
	if e.node != "" {
		del(x.byNode, e.node, a.ID)
	}
	x.unaccount(e)
	delete(x.ids, a.ID)
}

// nodeUsage returns a copy of what a node's replicas take.
func (x *index) nodeUsage(node string) (api.Capacity, map[string]int) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	u := x.usage[node]
	if u == nil {
		return api.Capacity{}, map[string]int{}
	}
	running := make(map[string]int, len(u.running))
	for k, v := range u.running {
		running[k] = v
	}
	return u.allocated, running
}

// addresses returns how many of a node's records hold an address.
func (x *index) addresses(node string) int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if u := x.usage[node]; u != nil {
		return u.addresses
	}
	return 0
}

func (x *index) resourceOf(id string) (string, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	e, ok := x.ids[id]
	return e.resource, ok
}

func (x *index) ofResource(key string) []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return keys(x.byResource[key])
}

func (x *index) onNode(node string) []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return keys(x.byNode[node])
}

func (x *index) resources() []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return keys(x.byResource)
}

func add(m map[string]map[string]struct{}, k, id string) {
	s := m[k]
	if s == nil {
		s = map[string]struct{}{}
		m[k] = s
	}
	s[id] = struct{}{}
}

func del(m map[string]map[string]struct{}, k, id string) {
	if s := m[k]; s != nil {
		delete(s, id)
		if len(s) == 0 {
			delete(m, k)
		}
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
