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
// When everything was marked, the keys every() lists are included. every
// runs without the set's lock: it may take locks of its own whose holders
// mark keys (a lock held across it would order the set's lock before
// theirs while they order theirs before the set's: a deadlock). A key
// marked meanwhile is in this Take or the next.
func (d *Dirty) Take(every func() []string) []string {
	d.mu.Lock()
	all := d.all
	d.all = false
	out := make([]string, 0, len(d.keys))
	for k := range d.keys {
		out = append(out, k)
	}
	clear(d.keys)
	d.mu.Unlock()
	if !all {
		return out
	}
	seen := make(map[string]struct{}, len(out))
	for _, k := range out {
		seen[k] = struct{}{}
	}
	for _, k := range every() {
		if _, dup := seen[k]; !dup {
			seen[k] = struct{}{}
			out = append(out, k)
		}
	}
	return out
}
