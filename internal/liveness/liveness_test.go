package liveness

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
)

var (
	t0         = time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	th         = Thresholds{SuspectAfter: 6 * time.Second, DownAfter: 10 * time.Second}
	errRefused = errors.New("connection refused")
)

func ago(d time.Duration) time.Time { return t0.Add(-d) }

func TestJudge(t *testing.T) {
	registered18mAgo := ago(18*time.Minute + 14*time.Second)
	cases := []struct {
		name       string
		e          Evidence
		probe      Probe
		wantProbe  bool
		want       api.Health
		wantReason string // a substring; "" wants no reason
	}{
		{"fresh beat", Evidence{Beat: ago(time.Second), Registered: registered18mAgo, Current: api.HealthUp},
			Probe{}, false, api.HealthUp, ""},
		{"fresh beat lifts Down", Evidence{Beat: ago(time.Second), Current: api.HealthDown},
			Probe{}, false, api.HealthUp, ""},
		{"quiet, probe fails: suspect", Evidence{Beat: ago(7 * time.Second), Current: api.HealthUp},
			Failed(errRefused), true, api.HealthSuspect, "no heartbeat for 7s; probe failed: connection refused"},
		{"quiet, probe answers: up", Evidence{Beat: ago(7 * time.Second), Current: api.HealthSuspect},
			Answered, true, api.HealthUp, "no heartbeat for 7s, but it answered its probe"},
		{"long quiet, probe fails: down", Evidence{Beat: ago(11 * time.Second), Current: api.HealthSuspect},
			Failed(errRefused), true, api.HealthDown, "no heartbeat for 11s and its probe failed: connection refused"},
		{"long quiet, probe answers: up", Evidence{Beat: ago(11 * time.Second), Current: api.HealthDown},
			Answered, true, api.HealthUp, "answered its probe"},
		{"a needed probe not made counts as failed", Evidence{Beat: ago(11 * time.Second)},
			Probe{}, true, api.HealthDown, "probe failed: not probed"},
		{"no evidence at all: down without a probe answer", Evidence{Missing: true},
			Failed(errRefused), true, api.HealthDown, "none in the heartbeat store"},

		// The bug of the fault run: Redis flushed, a node measured from
		// its registration 18 minutes ago went Down on one failed probe.
		{"redis flushed: missing since just now, grace runs, no probe",
			Evidence{Missing: true, MissingSince: ago(time.Second), Registered: registered18mAgo, Current: api.HealthUp},
			Probe{}, false, api.HealthUp, ""},
		{"redis flushed: still missing after suspectAfter, probe fails: suspect first",
			Evidence{Missing: true, MissingSince: ago(7 * time.Second), Registered: registered18mAgo, Current: api.HealthUp},
			Failed(errRefused), true, api.HealthSuspect, "no heartbeat for 7s (none in the heartbeat store); probe failed"},
		{"redis flushed: down only after downAfter from when it went missing",
			Evidence{Missing: true, MissingSince: ago(10 * time.Second), Registered: registered18mAgo, Current: api.HealthSuspect},
			Failed(errRefused), true, api.HealthDown, "no heartbeat for 10s (none in the heartbeat store) and its probe failed"},
		{"redis flushed: the monitor saw a beat before, the clock still starts at the loss",
			Evidence{Beat: ago(3 * time.Second), Missing: true, MissingSince: ago(time.Second), Current: api.HealthUp},
			Probe{}, false, api.HealthUp, ""},
		{"redis flushed: a recorded beat newer than the loss counts",
			Evidence{Missing: true, MissingSince: ago(9 * time.Second), Recorded: ago(2 * time.Second), Current: api.HealthUp},
			Probe{}, false, api.HealthUp, ""},

		{"re-registered: fresh, whatever the heartbeat store says",
			Evidence{Missing: true, MissingSince: ago(time.Hour), Registered: ago(time.Second), Current: api.HealthDown},
			Probe{}, false, api.HealthUp, ""},
		{"re-registered after an old beat: fresh",
			Evidence{Beat: ago(time.Hour), Registered: ago(2 * time.Second), Current: api.HealthDown},
			Probe{}, false, api.HealthUp, ""},

		// A new leader starts missing clocks at its own start: nobody is
		// judged on evidence it never had a chance to see.
		{"new leader, beat missing: grace from its start keeps an Up node Up",
			Evidence{Missing: true, MissingSince: ago(500 * time.Millisecond), Registered: registered18mAgo, Current: api.HealthUp},
			Probe{}, false, api.HealthUp, ""},
		{"new leader, beat missing: grace does not lift a Down node",
			Evidence{Missing: true, MissingSince: ago(500 * time.Millisecond), Registered: registered18mAgo, Current: api.HealthDown},
			Probe{}, false, api.HealthDown, ""},
		{"grace does not lift a Suspect node",
			Evidence{Missing: true, MissingSince: ago(2 * time.Second), Recorded: ago(8 * time.Second), Current: api.HealthSuspect},
			Probe{}, false, api.HealthSuspect, ""},
		{"a Down node whose probe fails before downAfter stays Down",
			Evidence{Missing: true, MissingSince: ago(7 * time.Second), Registered: registered18mAgo, Current: api.HealthDown},
			Failed(errRefused), true, api.HealthDown, "probe failed"},
		{"a Down node that answers its probe during the grace is Up",
			Evidence{Missing: true, MissingSince: ago(time.Second), Registered: registered18mAgo, Current: api.HealthDown},
			Answered, false, api.HealthUp, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := NeedsProbe(t0, c.e, th); got != c.wantProbe {
				t.Errorf("NeedsProbe: got %v; want %v", got, c.wantProbe)
			}
			v := Judge(t0, c.e, th, c.probe)
			if v.Health != c.want {
				t.Errorf("health: got %s (%s); want %s", v.Health, v.Reason, c.want)
			}
			if c.wantReason == "" && v.Reason != "" || !strings.Contains(v.Reason, c.wantReason) {
				t.Errorf("reason: got %q; want %q", v.Reason, c.wantReason)
			}
			if want := c.e.LastAlive(); !v.LastAlive.Equal(want) {
				t.Errorf("last alive: got %v; want %v", v.LastAlive, want)
			}
		})
	}
}

func TestLastAliveIsTheNewestEvidence(t *testing.T) {
	e := Evidence{Beat: ago(5 * time.Second), Recorded: ago(3 * time.Second), Registered: ago(time.Hour)}
	if got := e.LastAlive(); !got.Equal(ago(3 * time.Second)) {
		t.Errorf("LastAlive: got %v; want the recorded beat %v", got, ago(3*time.Second))
	}
	if got := (Evidence{}).LastAlive(); !got.IsZero() {
		t.Errorf("LastAlive of nothing: got %v; want zero", got)
	}
}

// TestRedisFlushTimeline walks one node through a heartbeat store that
// loses its beat and stays empty: Up through the grace, Suspect (never
// Down first), Down only once downAfter has passed since the loss, and
// Up again with the first beat.
func TestRedisFlushTimeline(t *testing.T) {
	tr := NewTracker()
	registered := ago(20 * time.Minute)
	health := api.HealthUp
	step := func(at time.Duration, beat time.Time, ok bool) (Verdict, bool) {
		now := t0.Add(at)
		e := Evidence{Registered: registered, Current: health}
		tr.Observe("n1", beat, ok, now, &e)
		probed := NeedsProbe(now, e, th)
		p := Probe{}
		if probed {
			p = Failed(errRefused)
		}
		v := Judge(now, e, th, p)
		health = v.Health
		return v, probed
	}
	if v, _ := step(0, ago(time.Second), true); v.Health != api.HealthUp {
		t.Fatalf("beating: got %s; want Up", v.Health)
	}
	// The store is flushed at t0+1s; the node cannot beat (it is gone too,
	// so probes fail).
	timeline := []struct {
		at        time.Duration
		want      api.Health
		wantProbe bool
	}{
		{2 * time.Second, api.HealthUp, false},
		{6 * time.Second, api.HealthUp, false},
		{8 * time.Second, api.HealthSuspect, true}, // 6 s since the loss was seen at 2 s
		{11 * time.Second, api.HealthSuspect, true},
		{12 * time.Second, api.HealthDown, true}, // 10 s since 2 s
		{13 * time.Second, api.HealthDown, true},
	}
	for _, s := range timeline {
		v, probed := step(s.at, time.Time{}, false)
		if v.Health != s.want || probed != s.wantProbe {
			t.Errorf("t0+%v: got %s (probed %v, %q); want %s (probed %v)", s.at, v.Health, probed, v.Reason, s.want, s.wantProbe)
		}
	}
	if v, _ := step(14*time.Second, t0.Add(14*time.Second), true); v.Health != api.HealthUp {
		t.Errorf("beating again: got %s; want Up", v.Health)
	}
}

func TestTracker(t *testing.T) {
	tr := NewTracker()
	var e Evidence
	tr.Observe("n1", ago(2*time.Second), true, t0, &e)
	if !e.Beat.Equal(ago(2*time.Second)) || e.Missing || !e.MissingSince.IsZero() {
		t.Errorf("present: got %+v; want the beat, not missing", e)
	}
	// A store restored from an old snapshot: the newer beat seen counts.
	tr.Observe("n1", ago(time.Hour), true, t0, &e)
	if !e.Beat.Equal(ago(2 * time.Second)) {
		t.Errorf("older beat: got %v; want the newest seen %v", e.Beat, ago(2*time.Second))
	}
	tr.Observe("n1", time.Time{}, false, t0, &e)
	tr.Observe("n1", time.Time{}, false, t0.Add(5*time.Second), &e)
	if !e.Missing || !e.MissingSince.Equal(t0) || !e.Beat.Equal(ago(2*time.Second)) {
		t.Errorf("missing twice: got %+v; want missing since the first time, %v", e, t0)
	}
	tr.Observe("n1", t0.Add(6*time.Second), true, t0.Add(6*time.Second), &e)
	tr.Observe("n1", time.Time{}, false, t0.Add(9*time.Second), &e)
	if !e.MissingSince.Equal(t0.Add(9 * time.Second)) {
		t.Errorf("missing again after a beat: since %v; want %v", e.MissingSince, t0.Add(9*time.Second))
	}
	tr.Retain(func(id string) bool { return id != "n1" })
	var fresh Evidence
	tr.Observe("n1", time.Time{}, false, t0.Add(20*time.Second), &fresh)
	if !fresh.Beat.IsZero() || !fresh.MissingSince.Equal(t0.Add(20*time.Second)) {
		t.Errorf("after Retain dropped it: got %+v; want nothing remembered", fresh)
	}
}

// spell is a blind spell from ago(from) to ago(to).
func spell(from, to time.Duration) Spell { return Spell{From: ago(from), To: ago(to)} }

// everySecond is a monitor late by late on each look, one a second, for
// the last d.
func everySecond(d, late time.Duration) []Spell {
	var out []Spell
	for at := d; at > 0; at -= time.Second {
		out = append(out, spell(at, at-late))
	}
	return out
}

// TestJudgeLeavesOutBlindTime: the monitor's blind spells within a
// sender's quiet period do not count as quiet, up to MaxBlind (5s here):
// a dead sender is still Down once its real quiet time less the blind
// time reaches DownAfter, and never later than DownAfter plus MaxBlind.
func TestJudgeLeavesOutBlindTime(t *testing.T) {
	up := api.HealthUp
	cases := []struct {
		name      string
		e         Evidence
		wantProbe bool
		want      api.Health
		wantQuiet time.Duration
	}{
		{"stall shorter than suspectAfter after a beat", Evidence{Beat: ago(8 * time.Second), Current: up, Blind: []Spell{spell(7*time.Second, 2*time.Second)}},
			false, api.HealthUp, 3 * time.Second},
		{"same quiet, no stall", Evidence{Beat: ago(8 * time.Second), Current: up},
			true, api.HealthSuspect, 8 * time.Second},
		{"stall before the quiet period", Evidence{Beat: ago(8 * time.Second), Current: up, Blind: []Spell{spell(20*time.Second, 9*time.Second)}},
			true, api.HealthSuspect, 8 * time.Second},
		{"stall overlapping the last beat", Evidence{Beat: ago(8 * time.Second), Current: up, Blind: []Spell{spell(9*time.Second, 5*time.Second)}},
			false, api.HealthUp, 5 * time.Second},
		{"stall longer than the cap", Evidence{Beat: ago(12 * time.Second), Current: up, Blind: []Spell{spell(11*time.Second, time.Second)}},
			true, api.HealthSuspect, 7 * time.Second},
		{"dead with stalls: not yet", Evidence{Beat: ago(12 * time.Second), Current: api.HealthSuspect, Blind: []Spell{spell(11*time.Second, 8*time.Second)}},
			true, api.HealthSuspect, 9 * time.Second},
		{"dead with stalls: quiet less blind reaches downAfter", Evidence{Beat: ago(13 * time.Second), Current: api.HealthSuspect, Blind: []Spell{spell(11*time.Second, 8*time.Second)}},
			true, api.HealthDown, 10 * time.Second},
		{"dead, blind most of the time: Down at downAfter plus the cap", Evidence{Beat: ago(15 * time.Second), Current: api.HealthSuspect, Blind: []Spell{spell(14*time.Second, 7*time.Second), spell(6*time.Second, 0)}},
			true, api.HealthDown, 10 * time.Second},
		{"dead, a little late on every look", Evidence{Beat: ago(15 * time.Second), Current: api.HealthSuspect, Blind: everySecond(15*time.Second, 600*time.Millisecond)},
			true, api.HealthDown, 10 * time.Second},
		{"missing beat: blind time after the monitor found it missing", Evidence{Beat: ago(time.Hour), Missing: true, MissingSince: ago(9 * time.Second), Current: up, Blind: []Spell{spell(8*time.Second, 4*time.Second)}},
			false, api.HealthUp, 5 * time.Second},
	}
	for _, c := range cases {
		if got := NeedsProbe(t0, c.e, th); got != c.wantProbe {
			t.Errorf("%s: NeedsProbe = %v; want %v", c.name, got, c.wantProbe)
		}
		v := Judge(t0, c.e, th, Failed(errRefused))
		if v.Health != c.want || v.Quiet != c.wantQuiet {
			t.Errorf("%s: got %s quiet %v (%q); want %s quiet %v", c.name, v.Health, v.Quiet, v.Reason, c.want, c.wantQuiet)
		}
		if v.Health != api.HealthUp && v.Blind > 0 && !strings.Contains(v.Reason, "blind left out") {
			t.Errorf("%s: reason %q does not say blind time was left out", c.name, v.Reason)
		}
	}
}

// TestTrackerLooks: a look later than the interval after the previous one
// (and what that pass was excused for waiting on probes) is blind time;
// reads of the store that fail in between are too.
func TestTrackerLooks(t *testing.T) {
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	tr := NewTracker()
	look := func(d time.Duration) { tr.Look(at(d), time.Second, th) }
	look(0)
	look(time.Second)
	look(1500 * time.Millisecond) // early (a deadline pass)
	tr.Excuse(2 * time.Second)    // that pass waited 2s on probes
	look(4 * time.Second)         // due at 4.5s
	if b := tr.blind; len(b) != 0 {
		t.Fatalf("looks on time: blind %v; want none", b)
	}
	// The store does not answer from 5s to 7s: the next look, at 7s, was
	// due at 5s.
	look(7 * time.Second)
	want := []Spell{{at(5 * time.Second), at(7 * time.Second)}}
	if b := tr.blind; !slices.Equal(b, want) {
		t.Fatalf("after failed reads: blind %v; want %v", b, want)
	}
	var e Evidence
	tr.Observe("n1", at(4*time.Second), true, at(7*time.Second), &e)
	if v := Judge(at(11*time.Second), e, th, Failed(errRefused)); v.Health != api.HealthUp || v.Quiet != 5*time.Second {
		t.Errorf("beat at 4s, blind 5s-7s, judged at 11s: %s quiet %v; want Up quiet 5s", v.Health, v.Quiet)
	}
	// A stall of 16s: the old spell (ended at 7s) is past DownAfter plus
	// MaxBlind and forgotten.
	look(23 * time.Second)
	want = []Spell{{at(8 * time.Second), at(23 * time.Second)}}
	if b := tr.blind; !slices.Equal(b, want) {
		t.Errorf("after a long stall: blind %v; want %v", b, want)
	}
}

// TestLateBeatAfterLossIsNoNewerThanTheLoss: a beat stamped before the
// heartbeat store lost everything, and written only after (its write
// retried across a Redis restart), does not move the quiet clock back
// before the moment the monitor found the beat missing; a newer beat
// ends the missing clock.
func TestLateBeatAfterLossIsNoNewerThanTheLoss(t *testing.T) {
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	tr := NewTracker()
	var e Evidence
	tr.Observe("n1", at(-time.Second), true, t0, &e)
	tr.Observe("n1", time.Time{}, false, at(3*time.Second), &e) // the store restarted empty
	// The beat stamped at 0.5s, before the restart, lands at 4s.
	tr.Observe("n1", at(500*time.Millisecond), true, at(4*time.Second), &e)
	if !e.MissingSince.Equal(at(3 * time.Second)) {
		t.Fatalf("late old beat: missing since %v; want %v (kept)", e.MissingSince, at(3*time.Second))
	}
	if NeedsProbe(at(4*time.Second), e, th) {
		t.Errorf("late old beat: probe needed; want none (quiet since the loss, 1s)")
	}
	if v := Judge(at(4*time.Second), e, th, Probe{}); v.Health != api.HealthUp || v.Quiet != time.Second {
		t.Errorf("late old beat: %s quiet %v (%q); want Up quiet 1s", v.Health, v.Quiet, v.Reason)
	}
	tr.Observe("n1", at(4200*time.Millisecond), true, at(4300*time.Millisecond), &e)
	if !e.MissingSince.IsZero() || !e.Beat.Equal(at(4200*time.Millisecond)) {
		t.Errorf("a beat newer than the loss: got %+v; want the beat, no missing clock", e)
	}
}
