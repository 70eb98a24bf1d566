package main

import (
	"strings"
	"testing"
	"time"
)

// TestB2Steps feeds the writes one create makes, as the watches see them,
// and checks each step's time, the fake start time taken off the agent's.
func TestB2Steps(t *testing.T) {
	s := &b2Steps{at: map[string]map[string]time.Time{}, fake: map[string]time.Duration{}, replica: map[string]string{}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	writes := []struct {
		key, value string
		at         int
	}{
		{"/strata/global/resources/default/lat-0-1", `{"name":"lat-0-1"}`, 3},
		{"/strata/region/placements/default/lat-0-1", `{}`, 10},
		{"/strata/region/placements/default/other", `{}`, 11},
		{"/strata/region/assignments/lat-0-1-abc", `{"resource":"lat-0-1"}`, 30},
		{"/strata/region/astatus/lat-0-1-abc", `{"phase":"provision"}`, 40},
		{"/strata/region/astatus/lat-0-1-abc", `{"phase":"ready"}`, 140},
		{"/strata/region/astatus/lat-0-1-abc", `{"phase":"ready"}`, 150},
		{"/strata/region/shares/default/lat-0-1", `{"phase":"ready"}`, 160},
		{"/strata/global/status/default/lat-0-1", `{"phase":"provision"}`, 165},
		{"/strata/global/status/default/lat-0-1", `{"phase":"ready"}`, 175},
	}
	for _, w := range writes {
		s.saw("lat-", w.key, []byte(w.value), ms(w.at))
	}
	if got := s.summary(); !strings.HasPrefix(got, "no create") {
		t.Fatalf("before the poller's sample: got %q; want no complete create", got)
	}
	s.sample("lat-0-1", ms(0), ms(5), ms(180), 100*time.Millisecond)
	got := s.summary()
	for _, want := range []string{
		"of 1 creates",
		"POST answered 5.0 ms / 5.0 ms",
		"master → placement written by the region 5.0 ms",
		"region controller → assignment 20.0 ms",
		"agent (watch, start less the fake's time, report) → status in the region 10.0 ms",
		"region controller → share 20.0 ms",
		"share to the master → status in the global tier 15.0 ms",
		"poller sees ready 5.0 ms",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("got %q; want it to contain %q", got, want)
		}
	}
}
