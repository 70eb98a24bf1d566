package controller

import (
	"sync"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/reconcile"
	"github.com/stratahq/strata/internal/store"
)

// tracker owns what needs a pass: it follows the caches' feeds into the
// index (resource keys and nodes to assignment ids) and marks the
// resources each change affects, the load balancers among them, and
// the coalesced full mark node events ask for.
type tracker struct {
	o     *Options
	dirty *reconcile.Dirty
	index *index
	// balancers are the load balancers' resource keys.
	balancersMu sync.Mutex
	balancers   map[string]struct{}
	// capacity coalesces the full marks node events ask for.
	capacity *coalescer
}

func newTracker(o *Options, dirty *reconcile.Dirty) *tracker {
	t := &tracker{o: o, dirty: dirty, index: newIndex(), balancers: map[string]struct{}{}}
	t.capacity = &coalescer{interval: nodeChurnInterval, now: o.wallClock, after: o.afterFunc, fire: t.markAll}
	return t
}

// follow subscribes to the caches' feeds.
func (t *tracker) follow() {
	t.watchEndpoints()
	t.o.Caches.AssignmentFeed.Subscribe(t.onAssignments)
	t.o.Caches.PlacementFeed.Subscribe(func(ch []store.Change[api.Placement]) {
		for _, x := range ch {
			t.mark(x.Name)
		}
	})
	t.o.Caches.StatusFeed.Subscribe(func(ch []store.Change[api.AssignmentStatus]) {
		for _, x := range ch {
			if key, ok := t.index.resourceOf(x.Name); ok {
				t.mark(key)
			}
		}
	})
	t.watchNodes()
}

func (t *tracker) onAssignments(changes []store.Change[api.Assignment]) {
	for _, ch := range changes {
		var key string
		if ch.New != nil {
			key = ch.New.Value.ResourceKey()
			t.index.put(ch.New.Value)
		} else if ch.Old != nil {
			key = ch.Old.Value.ResourceKey()
			t.index.remove(ch.Old.Value)
		}
		t.mark(key)
	}
}

func (t *tracker) mark(key string) { t.dirty.Mark(key) }

func (t *tracker) markAll() { t.dirty.MarkAll() }

// every lists every resource key the region knows of: placed, with
// replicas, or with a share.
func (t *tracker) every() []string {
	var out []string
	for _, it := range t.o.Caches.Placements.List() {
		out = append(out, it.Name)
	}
	out = append(out, t.index.resources()...)
	for _, it := range t.o.Caches.Shares.List() {
		out = append(out, it.Name)
	}
	return out
}

// watchNodes marks what a node's change affects. The resources with
// replicas on the node are marked at once: the node going Down, being
// removed or cordoned changes what their pass decides (lost replicas,
// the order replicas are removed in). Any node change may also add room
// somewhere (a node registered, Up again, uncordoned, grown), which the
// resources with replicas waiting for a place care about: every resource
// is marked for it, coalesced (nodeChurnInterval). Load balancers read no
// node: their backends follow the replicas' records and statuses, which
// mark them (watchEndpoints).
//
// A drain's start or step marks the resources on its node at once (the
// pass moves them, and every pass adds the other draining nodes'
// resources: drainer.keys); a drain of a node with no replicas left is
// finished by whatever pass comes next, so it asks for the coalesced full
// mark too.
func (t *tracker) watchNodes() {
	t.o.Caches.NodeFeed.Subscribe(func(ch []store.Change[api.Node]) {
		for _, x := range ch {
			t.markOnNode(x.Name)
		}
		t.capacity.poke()
	})
	t.o.Caches.NodeStatusFeed.Subscribe(func(ch []store.Change[api.NodeStatus]) {
		for _, x := range ch {
			t.markOnNode(x.Name)
		}
		t.capacity.poke()
	})
	t.o.Caches.DrainFeed.Subscribe(func(ch []store.Change[api.DrainStatus]) {
		for _, x := range ch {
			if x.New != nil {
				t.markOnNode(x.New.Value.Node)
			} else if x.Old != nil {
				t.markOnNode(x.Old.Value.Node)
			}
		}
		t.capacity.poke()
	})
}

// markOnNode marks the resources with a replica on node.
func (t *tracker) markOnNode(node string) {
	var keys []string
	for _, id := range t.index.onNode(node) {
		if key, ok := t.index.resourceOf(id); ok {
			keys = append(keys, key)
		}
	}
	if len(keys) > 0 {
		t.dirty.Mark(keys...)
	}
}

// watchEndpoints marks every load balancer dirty when a replica's status
// or a placement changes, since that can change some balancer's backends.
func (t *tracker) watchEndpoints() {
	t.o.Caches.StatusFeed.Subscribe(func([]store.Change[api.AssignmentStatus]) { t.markBalancers() })
	t.o.Caches.AssignmentFeed.Subscribe(func([]store.Change[api.Assignment]) { t.markBalancers() })
	t.o.Caches.PlacementFeed.Subscribe(func(changes []store.Change[api.Placement]) {
		t.balancersMu.Lock()
		for _, ch := range changes {
			if ch.New != nil && ch.New.Value.Resource.Kind == api.KindLoadbalancer {
				t.balancers[ch.Name] = struct{}{}
			} else {
				delete(t.balancers, ch.Name)
			}
		}
		t.balancersMu.Unlock()
		t.markBalancers()
	})
}

func (t *tracker) markBalancers() {
	t.balancersMu.Lock()
	keys := make([]string, 0, len(t.balancers))
	for key := range t.balancers {
		keys = append(keys, key)
	}
	t.balancersMu.Unlock()
	if len(keys) > 0 {
		t.dirty.Mark(keys...)
	}
}
