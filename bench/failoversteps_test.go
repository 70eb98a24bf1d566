package main

import (
	"strings"
	"testing"
	"time"
)

// TestB5StepsElection: the lease's expiry is the last election key
// deleted before the successor's announcement, and nothing before the
// kill or after the announcement counts.
func TestB5StepsElection(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	s := &b5Steps{res: &b2Steps{at: map[string]map[string]time.Time{}}}
	s.sawElection(true, at(-100)) // before the kill
	s.kill(t0)
	s.sawElection(true, at(1600))  // a queued candidate's key
	s.sawElection(true, at(2500))  // the dead leader's
	s.sawElection(false, at(2510)) // the successor announces
	s.sawElection(true, at(4000))  // later changes
	s.sawElection(false, at(4100))
	v := s.values()
	if v[b5Gone] != 2500*time.Millisecond || v[b5Elected] != 2510*time.Millisecond {
		t.Fatalf("gone %s, elected %s; want 2.5s and 2.51s", v[b5Gone], v[b5Elected])
	}
	if _, ok := v[b5Agents]; ok {
		t.Errorf("agents back noted without a poll: %v", v)
	}
}

// TestB5BreakdownNotes: each step's median over the runs that saw it,
// and the time from the lease's expiry to the figure.
func TestB5BreakdownNotes(t *testing.T) {
	runs := []map[string]time.Duration{
		{b5Gone: 2 * time.Second, b2Seen: 2200 * time.Millisecond},
		{b5Gone: 3 * time.Second, b2Seen: 3400 * time.Millisecond, b5Agents: time.Second},
		{b5Gone: 2500 * time.Millisecond, b2Seen: 2800 * time.Millisecond},
	}
	got := b5BreakdownNotes(runs)
	for _, want := range []string{
		"the dead leader's election key deleted (lease expired) 2.50 s (2.00 s–3.00 s)",
		"every agent follows its assignments again 1.00 s (1.00 s–1.00 s)",
		"From the lease's expiry to the figure (the part the tiers can cut): 0.30 s (0.20 s–0.40 s)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("notes lack %q:\n%s", want, got)
		}
	}
	if b5BreakdownNotes(nil) != "" {
		t.Error("notes without runs")
	}
}
