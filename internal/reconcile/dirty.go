// Package reconcile holds what Strata's level-based controllers share:
// the set of keys that need another look, coalesced between passes, with
// a wake-up signal for the loop that takes them.
package reconcile

import (
	"container/heap"
	"sync"
	"time"
)

// Dirty is a set of keys to reconcile. Marking a key many times before
// the next pass costs one reconcile; marking everything (a resync, a
// change that can affect any key) defers listing the keys to Take. A key
// can also be marked for a moment to come (MarkAt: a deadline, the end of
// a back-off): it joins the set once that moment has passed.
type Dirty struct {
	mu   sync.Mutex
	keys map[string]struct{}
	all  bool
	wake chan struct{}
	// due is when each key marked for later is due (the earliest asked);
	// timers orders those moments, with stale entries (a key since marked
	// earlier, or already taken) skipped when they reach the top.
	due    map[string]time.Time
	timers timerHeap
}

// NewDirty returns an empty set.
func NewDirty() *Dirty {
	return &Dirty{keys: map[string]struct{}{}, wake: make(chan struct{}, 1), due: map[string]time.Time{}}
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

// MarkAt marks keys for the moment at (wall clock, as time.Now): they
// join the set once it has passed. A key already marked for an earlier
// moment keeps it. The loop is woken when the earliest moment it waits
// for moves closer, so that it re-arms its timer.
func (d *Dirty) MarkAt(at time.Time, keys ...string) {
	d.mu.Lock()
	first, waiting := d.nextLocked()
	for _, k := range keys {
		if cur, ok := d.due[k]; ok && !at.Before(cur) {
			continue
		}
		d.due[k] = at
		heap.Push(&d.timers, timer{at: at, key: k})
	}
	next, _ := d.nextLocked()
	d.mu.Unlock()
	if !waiting || next.Before(first) {
		d.poke()
	}
}

// MarkAll asks for every key to be looked at.
func (d *Dirty) MarkAll() {
	d.mu.Lock()
	d.all = true
	d.mu.Unlock()
	d.poke()
}

// Wake receives a value after a Mark or MarkAll since the last receive,
// and after a MarkAt that moved the earliest moment closer.
func (d *Dirty) Wake() <-chan struct{} { return d.wake }

// Next returns the earliest moment a key is marked for, false for none.
func (d *Dirty) Next() (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.nextLocked()
}

// nextLocked drops stale timers from the top and returns the earliest
// live one.
func (d *Dirty) nextLocked() (time.Time, bool) {
	for len(d.timers) > 0 {
		t := d.timers[0]
		if at, ok := d.due[t.key]; ok && at.Equal(t.at) {
			return t.at, true
		}
		heap.Pop(&d.timers)
	}
	return time.Time{}, false
}

func (d *Dirty) poke() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// takeDueLocked moves the keys whose moment has passed into the set.
func (d *Dirty) takeDueLocked(now time.Time) {
	for {
		at, ok := d.nextLocked()
		if !ok || at.After(now) {
			return
		}
		t := heap.Pop(&d.timers).(timer)
		delete(d.due, t.key)
		d.keys[t.key] = struct{}{}
	}
}

// Take returns the marked keys, without duplicates, and clears the set;
// keys marked for a moment that has passed are included. When everything
// was marked, the keys every() lists are included. every runs without the
// set's lock: it may take locks of its own whose holders mark keys (a
// lock held across it would order the set's lock before theirs while they
// order theirs before the set's: a deadlock). A key marked meanwhile is
// in this Take or the next.
func (d *Dirty) Take(every func() []string) []string {
	d.mu.Lock()
	d.takeDueLocked(time.Now())
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

// timer is a key due at a moment.
type timer struct {
	at  time.Time
	key string
}

// timerHeap is a min-heap of timers by moment (container/heap).
type timerHeap []timer

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(timer)) }
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}
