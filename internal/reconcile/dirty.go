// Package reconcile holds what Strata's level-based controllers share:
// the set of keys that need another look, coalesced between passes, with
// a wake-up signal for the loop that takes them.
package reconcile

import "sync"

// Dirty is a set of keys to reconcile. Marking a key many times before
// the next pass costs one reconcile; marking everything (a resync, a
// change that can affect any key) defers listing the keys to Take.
type Dirty struct {
	mu   sync.Mutex
	keys map[string]struct{}
	all  bool
	wake chan struct{}
}

// NewDirty returns an empty set.
func NewDirty() *Dirty {
	return &Dirty{keys: map[string]struct{}{}, wake: make(chan struct{}, 1)}
}

// Mark adds keys and wakes the loop.
func (d *Dirty) Mark(keys ...string) {
	d.mu.Lock()
	for _, k := range keys {
		d.keys[k] = struct{}{}
	}
	d.mu.Unlock()
	d.poke()
}

// MarkAll asks for every key to be looked at.
func (d *Dirty) MarkAll() {
	d.mu.Lock()
	d.all = true
	d.mu.Unlock()
	d.poke()
}

// Wake receives a value after a Mark or MarkAll since the last receive.
func (d *Dirty) Wake() <-chan struct{} { return d.wake }

func (d *Dirty) poke() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Take returns the marked keys, without duplicates, and clears the set.
// When everything was marked, the keys every() lists are included; it is
// called with the set's lock held, so it must not mark.
func (d *Dirty) Take(every func() []string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.all {
		for _, k := range every() {
			d.keys[k] = struct{}{}
		}
		d.all = false
	}
	out := make([]string, 0, len(d.keys))
	for k := range d.keys {
		out = append(out, k)
	}
	clear(d.keys)
	return out
}
