package controller

import (
	"sync"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
)

// nodeChurnInterval is the shortest time between two of the full marks
// node events ask for (coalesced): a replica left unplaced for want of a
// node gets its place at most this long after one appears, while a fleet
// of thousands of nodes starting (250 registrations a second) costs one
// full pass a second, not one per registration. What a node's change
// decides for the replicas on it (lost, cordoned) is marked at once.
const nodeChurnInterval = time.Second

// coalescer runs fire at once when it last ran at least interval ago,
// else once at the end of the interval, however often it is poked
// meanwhile.
type coalescer struct {
	interval time.Duration
	now      func() time.Time
	// after runs f after d (time.AfterFunc; tests hold the call).
	after func(d time.Duration, f func())
	fire  func()

	mu      sync.Mutex
	last    time.Time
	pending bool
}

func (k *coalescer) poke() {
	k.mu.Lock()
	if k.pending {
		k.mu.Unlock()
		return
	}
	now := k.now()
	if wait := k.last.Add(k.interval).Sub(now); wait > 0 {
		k.pending = true
		k.mu.Unlock()
		k.after(wait, k.run)
		return
	}
	k.last = now
	k.mu.Unlock()
	k.fire()
}

// run is the deferred fire.
func (k *coalescer) run() {
	k.mu.Lock()
	k.pending = false
	k.last = k.now()
	k.mu.Unlock()
	k.fire()
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
// resources: drainKeys); a drain of a node with no replicas left is
// finished by whatever pass comes next, so it asks for the coalesced full
// mark too.
func (c *Controller) watchNodes() {
	c.o.Caches.NodeFeed.Subscribe(func(ch []store.Change[api.Node]) {
		for _, x := range ch {
			c.markOnNode(x.Name)
		}
		c.capacity.poke()
	})
	c.o.Caches.NodeStatusFeed.Subscribe(func(ch []store.Change[api.NodeStatus]) {
		for _, x := range ch {
			c.markOnNode(x.Name)
		}
		c.capacity.poke()
	})
	c.o.Caches.DrainFeed.Subscribe(func(ch []store.Change[api.DrainStatus]) {
		for _, x := range ch {
			if x.New != nil {
				c.markOnNode(x.New.Value.Node)
			} else if x.Old != nil {
				c.markOnNode(x.Old.Value.Node)
			}
		}
		c.capacity.poke()
	})
}

// markOnNode marks the resources with a replica on node.
func (c *Controller) markOnNode(node string) {
	var keys []string
	for _, id := range c.index.onNode(node) {
		if key, ok := c.index.resourceOf(id); ok {
			keys = append(keys, key)
		}
	}
	if len(keys) > 0 {
		c.dirty.Mark(keys...)
	}
}
