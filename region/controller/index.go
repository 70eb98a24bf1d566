package controller

import (
	"sync"

	"github.com/stratahq/strata/internal/api"
)

// index finds a resource's and a node's assignments without scanning the
// cache. It is fed by the assignment cache's feed.
type index struct {
	mu         sync.RWMutex
	byResource map[string]map[string]struct{}
	byNode     map[string]map[string]struct{}
	resource   map[string]string // id → resource key
	node       map[string]string // id → node
	// usage is what each node's assignment records take, kept as the
	// records change so that a pass need not sum 20,000 replicas: a
	// replica counts until its record is deleted, destroy included
	// (conservative: it holds its resources until it is gone).
	usage map[string]*nodeUsage
	// counted remembers what each assignment added to usage.
	counted map[string]counted
}

type nodeUsage struct {
	allocated api.Capacity
	// running counts running replicas per resource key.
	running map[string]int
	// addresses counts the records holding an address (a Port record,
	// which goes with the assignment's record).
	addresses int
}

type counted struct {
	node     string
	resource string
	need     api.Capacity
	running  bool
	address  bool
}

func newIndex() *index {
	return &index{
		byResource: map[string]map[string]struct{}{},
		byNode:     map[string]map[string]struct{}{},
		resource:   map[string]string{},
		node:       map[string]string{},
		usage:      map[string]*nodeUsage{},
		counted:    map[string]counted{},
	}
}

// account replaces what assignment id adds to its node's usage.
func (x *index) account(id string, now *counted) {
	if old, ok := x.counted[id]; ok {
		u := x.usage[old.node]
		u.allocated = u.allocated.Sub(old.need)
		if old.address {
			u.addresses--
		}
		if old.running {
			if u.running[old.resource]--; u.running[old.resource] <= 0 {
				delete(u.running, old.resource)
			}
		}
		delete(x.counted, id)
	}
	if now == nil || now.node == "" {
		return
	}
	u := x.usage[now.node]
	if u == nil {
		u = &nodeUsage{running: map[string]int{}}
		x.usage[now.node] = u
	}
	u.allocated = u.allocated.Add(now.need)
	if now.address {
		u.addresses++
	}
	if now.running {
		u.running[now.resource]++
	}
	x.counted[id] = *now
}

func (x *index) put(a *api.Assignment) {
	x.mu.Lock()
	defer x.mu.Unlock()
	key := a.ResourceKey()
	if old, ok := x.node[a.ID]; ok && old != a.Node {
		delete(x.byNode[old], a.ID)
	}
	add(x.byResource, key, a.ID)
	x.resource[a.ID] = key
	if a.Node != "" {
		add(x.byNode, a.Node, a.ID)
		x.node[a.ID] = a.Node
	}
	c := counted{node: a.Node, resource: key, need: a.Flavor.Capacity(), running: a.Desired == api.DesiredRunning,
		address: a.Network != nil && a.Network.Address != ""}
	if !a.ExitedAt.IsZero() {
		// A Job's exited attempt runs no more: only its address stays
		// taken until its record goes.
		c.need, c.running = api.Capacity{}, false
	}
	x.account(a.ID, &c)
}

func (x *index) remove(a *api.Assignment) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if key, ok := x.resource[a.ID]; ok {
		del(x.byResource, key, a.ID)
	}
	if n, ok := x.node[a.ID]; ok {
		del(x.byNode, n, a.ID)
	}
	delete(x.resource, a.ID)
	delete(x.node, a.ID)
	x.account(a.ID, nil)
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
	k, ok := x.resource[id]
	return k, ok
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
