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
}

func newIndex() *index {
	return &index{
		byResource: map[string]map[string]struct{}{},
		byNode:     map[string]map[string]struct{}{},
		resource:   map[string]string{},
		node:       map[string]string{},
	}
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
