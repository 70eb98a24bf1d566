// Package liveness is the one verdict on a sender's health that both
// monitors give: the region's node monitor (agents) and the global
// master's region monitor (regions).
//
// A sender heartbeats into a heartbeat store (Redis), which may lose
// every beat at once: a restart without persistence, a flush, a failover
// to an empty replica. A missing beat is therefore not taken to mean
// "quiet since the last thing etcd knows" (that may be minutes ago):
// the quiet clock starts at the newest evidence there is, which includes
// the moment this monitor first found the beat missing. So a lost
// heartbeat store costs a sender its grace period again, never its
// Suspect step, and a monitor that just became leader starts that clock
// at its own start rather than judging everyone at once.
//
// The monitor does not count its own blind time against a sender. The
// beats are read, and for the senders connected to it stamped, by the
// monitor's own process through the heartbeat store: while that process
// stalls (CPU starvation, a long GC pause) or cannot reach the store,
// every sender looks quiet. The monitor notices this as a late look
// (Tracker.Look), and the quiet clock leaves out the blind spells within
// the quiet period, up to MaxBlind: a monitor that is often blind still
// finds a dead sender Down within DownAfter plus MaxBlind of real time.
//
// The verdict is pure: the monitor gathers the evidence (Tracker keeps
// the part that lives in its memory), asks NeedsProbe, probes if so, and
// asks Judge.
package liveness

import (
	"errors"
	"fmt"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// Thresholds are a monitor's intervals.
type Thresholds struct {
	// SuspectAfter: a sender quiet this long is probed, and Suspect if
	// the probe fails.
	SuspectAfter time.Duration
	// DownAfter: a sender quiet this long whose probe fails is Down.
	DownAfter time.Duration
}

// MaxBlind is the most blind time left out of one quiet clock: half of
// DownAfter. It bounds how much later than DownAfter a dead sender is
// found Down by a monitor that is blind much of the time, so that
// failover still happens while the monitor's host is overloaded.
func (th Thresholds) MaxBlind() time.Duration { return th.DownAfter / 2 }

// Spell is a time during which the monitor was blind: it could not look
// at the heartbeat store (its process stalled, or the store did not
// answer), so beats were neither seen nor, for the beats it stamps
// itself, recorded.
type Spell struct {
	From, To time.Time
}

// Evidence is what a monitor knows of one sender's life.
type Evidence struct {
	// Beat is the newest beat of the sender the monitor has seen in the
	// heartbeat store (zero: none).
	Beat time.Time
	// Missing: the heartbeat store holds no beat of the sender now.
	Missing bool
	// MissingSince is when the monitor first found the beat missing, in
	// its memory: no earlier than its own start as leader. It stays set
	// once the store holds a beat again, until that beat is newer: a beat
	// stamped before the store lost it and written late (the write
	// retried across a Redis restart) is no sign of life after the loss.
	MissingSince time.Time
	// Recorded is the last beat recorded in etcd with the sender's last
	// health transition.
	Recorded time.Time
	// Registered is the sender's last (re-)registration.
	Registered time.Time
	// Current is the health recorded now (HealthUnknown or "" without a
	// record).
	Current api.Health
	// Blind is the monitor's blind spells, disjoint, in any order; only
	// their overlap with a sender's quiet period counts.
	Blind []Spell
}

// blindSince is the monitor's blind time between from and now, at most
// th.MaxBlind().
func (e Evidence) blindSince(from, now time.Time, th Thresholds) time.Duration {
	var d time.Duration
	for _, s := range e.Blind {
		a, b := newest(s.From, from), s.To
		if now.Before(b) {
			b = now
		}
		if b.After(a) {
			d += b.Sub(a)
		}
	}
	return min(d, th.MaxBlind())
}

// quietFrom is how long the sender has been quiet at now if its quiet
// began at from: the time since, less the monitor's blind time within it
// (blind, at most th.MaxBlind()).
func (e Evidence) quietFrom(from, now time.Time, th Thresholds) (quiet, blind time.Duration) {
	blind = e.blindSince(from, now, th)
	return now.Sub(from) - blind, blind
}

// LastAlive is the newest sign of life: a beat, a recorded beat, a
// registration. Zero when there is none.
func (e Evidence) LastAlive() time.Time {
	return newest(e.Beat, e.Recorded, e.Registered)
}

// quietSince is when the quiet clock started: the last sign of life, or
// the moment the monitor found the beat missing if that is newer.
func (e Evidence) quietSince() time.Time {
	return newest(e.LastAlive(), e.MissingSince)
}

// Probe is the outcome of a probe: Err nil when the sender answered.
type Probe struct {
	Done bool
	Err  error
}

// Answered is a probe the sender answered.
var Answered = Probe{Done: true}

// Failed is a probe that failed with err.
func Failed(err error) Probe { return Probe{Done: true, Err: err} }

// NeedsProbe reports whether the verdict at now depends on a probe: the
// sender has been quiet for SuspectAfter.
func NeedsProbe(now time.Time, e Evidence, th Thresholds) bool {
	quiet, _ := e.quietFrom(e.quietSince(), now, th)
	return quiet >= th.SuspectAfter
}

// Verdict is a monitor's judgement of one sender.
type Verdict struct {
	Health api.Health
	// Reason explains a verdict other than a plain Up.
	Reason string
	// Quiet is how long the sender has been quiet, by the quiet clock.
	Quiet time.Duration
	// Blind is the monitor's blind time left out of Quiet.
	Blind time.Duration
	// LastAlive is the newest sign of life, to record with a transition.
	LastAlive time.Time
}

// Judge gives the verdict at now. Only fresh evidence (a sign of life
// within SuspectAfter, the monitor's blind time left out) or an answered
// probe makes a sender Up; without
// it, health never improves on what is recorded: a Down sender stays Down
// while its grace runs, it is not raised to Suspect or Up by a clock.
// Quiet for SuspectAfter with a failed probe is Suspect, for DownAfter
// Down. A probe that was needed but not made counts as failed.
func Judge(now time.Time, e Evidence, th Thresholds, p Probe) Verdict {
	v := Verdict{Health: api.HealthUp, LastAlive: e.LastAlive()}
	v.Quiet, v.Blind = e.quietFrom(e.quietSince(), now, th)
	if sinceAlive, _ := e.quietFrom(v.LastAlive, now, th); !v.LastAlive.IsZero() && sinceAlive < th.SuspectAfter {
		return v // fresh
	}
	quiet := v.describe(e)
	switch {
	case p.Done && p.Err == nil:
		if v.Quiet >= th.SuspectAfter {
			v.Reason = quiet + ", but it answered its probe"
		}
		return v
	case v.Quiet < th.SuspectAfter:
		v.Health = worst(e.Current, api.HealthUp) // the grace runs: nothing new either way
		return v
	}
	perr := p.Err
	if !p.Done {
		perr = errNotProbed
	}
	if v.Quiet >= th.DownAfter {
		v.Health, v.Reason = api.HealthDown, fmt.Sprintf("%s and its probe failed: %v", quiet, perr)
		return v
	}
	v.Health, v.Reason = worst(e.Current, api.HealthSuspect), fmt.Sprintf("%s; probe failed: %v", quiet, perr)
	return v
}

var errNotProbed = errors.New("not probed")

// describe says how long the sender has been quiet, and whether its beat
// is missing from the heartbeat store (which then may have lost it).
func (v Verdict) describe(e Evidence) string {
	q := v.Quiet.Round(100 * time.Millisecond).String()
	if v.Blind > 0 {
		q += fmt.Sprintf(" (the monitor's %s blind left out)", v.Blind.Round(100*time.Millisecond))
	}
	if !e.Missing {
		return "no heartbeat for " + q
	}
	return fmt.Sprintf("no heartbeat for %s (none in the heartbeat store)", q)
}

// rank orders healths from best to worst.
func rank(h api.Health) int {
	switch h {
	case api.HealthSuspect:
		return 1
	case api.HealthDown:
		return 2
	default:
		return 0
	}
}

// worst is the worse of a recorded health and a new one.
func worst(cur, next api.Health) api.Health {
	if rank(cur) > rank(next) {
		return cur
	}
	return next
}

func newest(ts ...time.Time) time.Time {
	var out time.Time
	for _, t := range ts {
		if t.After(out) {
			out = t
		}
	}
	return out
}
