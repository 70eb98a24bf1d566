package liveness

import (
	"sync"
	"time"
)

// Tracker is the part of the evidence that lives in a monitor's memory,
// for as long as it leads: the newest beat it has seen of each sender (so
// that a heartbeat store that comes back with older beats, restored from
// an old snapshot, does not make a sender look quieter than it is), when
// it first found a sender's beat missing (until the store holds a newer
// one), and when the monitor itself was blind. A new leader starts a new Tracker: its missing clocks start
// at its own start. Safe for concurrent use.
type Tracker struct {
	mu      sync.Mutex
	seen    map[string]time.Time
	missing map[string]time.Time
	// looked is the last successful look at the store; excused how long
	// the pass after it waited with its process running (on probes).
	looked  time.Time
	excused time.Duration
	// blind is never changed in place: Look replaces it, so Evidence may
	// share it.
	blind []Spell
}

// Look records a successful read of the heartbeat store at now, by a
// monitor that reads it every `every`. A look that comes later than that
// after the previous one (and the wait it was excused) finds the monitor
// was blind in between: its process stalled, or its reads of the store
// failed. The time from when the look was due to now is a blind spell;
// Look returns its length (0: the look was on time). Spells that can no
// longer change a verdict (ended more than DownAfter plus MaxBlind ago)
// are forgotten.
func (t *Tracker) Look(now time.Time, every time.Duration, th Thresholds) (late time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	horizon := now.Add(-(th.DownAfter + th.MaxBlind()))
	keep := make([]Spell, 0, len(t.blind)+1)
	for _, s := range t.blind {
		if s.To.After(horizon) {
			keep = append(keep, s)
		}
	}
	if !t.looked.IsZero() {
		if due := t.looked.Add(every + t.excused); now.After(due) {
			keep = append(keep, Spell{From: due, To: now})
			late = now.Sub(due)
		}
	}
	t.blind, t.looked, t.excused = keep, now, 0
	return late
}

// Excuse records that the pass of the last look waited d with its
// process running (for probes, which may time out): beats were recorded
// meanwhile, so the next look may come that much later without the
// monitor having been blind.
func (t *Tracker) Excuse(d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.excused += d
}

// NewTracker returns an empty tracker.
func NewTracker() *Tracker {
	return &Tracker{seen: map[string]time.Time{}, missing: map[string]time.Time{}}
}

// Observe records what the heartbeat store holds of id at now (its beat
// at, or none when !ok) and fills the part of e that lives in memory:
// Beat, Missing, MissingSince, Blind. A beat found missing stays so, for
// MissingSince, until the store holds one newer than when it was found
// missing.
func (t *Tracker) Observe(id string, at time.Time, ok bool, now time.Time, e *Evidence) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ok {
		if at.After(t.missing[id]) {
			delete(t.missing, id)
		}
		if at.After(t.seen[id]) {
			t.seen[id] = at
		}
	} else if _, known := t.missing[id]; !known {
		t.missing[id] = now
	}
	e.Beat = t.seen[id]
	e.Missing = !ok
	e.MissingSince = t.missing[id]
	e.Blind = t.blind
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
