package controller

import (
	"sync"
	"time"
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
