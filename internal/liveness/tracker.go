package liveness

import (
	"sync"
	"time"
)

// Tracker is the part of the evidence that lives in a monitor's memory,
// for as long as it leads: the newest beat it has seen of each sender (so
// that a heartbeat store that comes back with older beats, restored from
// an old snapshot, does not make a sender look quieter than it is), and
// when it first found a sender's beat missing. A new leader starts a new
// Tracker: its missing clocks start at its own start. Safe for
// concurrent use.
type Tracker struct {
	mu      sync.Mutex
	seen    map[string]time.Time
	missing map[string]time.Time
}

// NewTracker returns an empty tracker.
func NewTracker() *Tracker {
	return &Tracker{seen: map[string]time.Time{}, missing: map[string]time.Time{}}
}

// Observe records what the heartbeat store holds of id at now (its beat
// at, or none when !ok) and fills the store part of e: Beat, Missing,
// MissingSince.
func (t *Tracker) Observe(id string, at time.Time, ok bool, now time.Time, e *Evidence) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ok {
		delete(t.missing, id)
		if at.After(t.seen[id]) {
			t.seen[id] = at
		}
	} else if _, known := t.missing[id]; !known {
		t.missing[id] = now
	}
	e.Beat = t.seen[id]
	e.Missing = !ok
	e.MissingSince = t.missing[id]
}

// Retain forgets every sender keep rejects (deleted ones).
func (t *Tracker) Retain(keep func(id string) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id := range t.seen {
		if !keep(id) {
			delete(t.seen, id)
		}
	}
	for id := range t.missing {
		if !keep(id) {
			delete(t.missing, id)
		}
	}
}
