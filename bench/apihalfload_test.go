package main

import (
	"math"
	"strings"
	"testing"
	"time"
)

// Half of B1's replicas/s, in creates of resources of 10 replicas: 911
// replicas/s is 45.55 creates/s, 683 of them in 15 s.
func TestHalfLoadIsHalfOfB1InCreates(t *testing.T) {
	perSec, n, err := halfLoad(911, 10, 15*time.Second, 2000)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(perSec-45.55) > 1e-9 || n != 683 {
		t.Fatalf("halfLoad(911/s, 10 replicas, 15 s) = %.2f/s, %d creates; want 45.55/s, 683", perSec, n)
	}
	if got := perSec * 10; math.Abs(got-911.0/2) > 1e-9 {
		t.Fatalf("offered %.2f replicas/s; want half of 911", got)
	}
}

// A B1 so fast that the window would create more than B1 did is held to
// B1's count (the rate stays half of B1's; the window shrinks), and a
// slow one still offers one create.
func TestHalfLoadBounds(t *testing.T) {
	perSec, n, err := halfLoad(10000, 10, 15*time.Second, 2000)
	if err != nil || perSec != 500 || n != 2000 {
		t.Fatalf("halfLoad(10000/s) = %.0f/s, %d, %v; want 500/s, 2000 (B1's count), nil", perSec, n, err)
	}
	if _, n, err := halfLoad(0.5, 10, 15*time.Second, 2000); err != nil || n != 1 {
		t.Fatalf("halfLoad(0.5/s) = %d creates, %v; want 1, nil", n, err)
	}
}

// Without a B1 rate (B1 did not finish) there is nothing to take half of:
// an error, not a load of zero or infinity.
func TestHalfLoadWithoutB1(t *testing.T) {
	for _, rate := range []float64{0, -1} {
		if _, _, err := halfLoad(rate, 10, 15*time.Second, 2000); err == nil || !strings.Contains(err.Error(), "no B1 rate") {
			t.Errorf("halfLoad(%v) err = %v; want no B1 rate", rate, err)
		}
	}
	if _, _, err := halfLoad(900, 0, 15*time.Second, 2000); err == nil {
		t.Error("halfLoad with resources of 0 replicas: no error")
	}
}

func TestHalfNote(t *testing.T) {
	runs := []halfRun{
		{accepted: 450, catchUp: 500 * time.Millisecond, ours: 1.1, machine: 1.4},
		{accepted: 455, failed: 2, catchUp: 750 * time.Millisecond, ours: 1.2, machine: 1.5},
		{accepted: 440, catchUp: 250 * time.Millisecond, ours: 1.0, machine: 1.3},
	}
	note := halfNote(runs, 911, 45.55, 683, 10)
	for _, want := range []string{
		"An added measurement (the issue's B3 figure is the rows under B1 load)",
		"offered open loop at 45.5/s, 456 replicas/s (half of B1's median 911/s on this cluster), 683 per run over 14.97 s",
		"Achieved: 450/s (440/s–455/s, 3 runs) replicas accepted",
		"2 failed creates",
		"read ready 0.50 s (0.25 s–0.75 s, 3 runs) after the last create was answered",
		"the cluster's processes 1.10 (1.00–1.20, 3 runs)",
		"other work included, 1.40 (1.30–1.50, 3 runs)",
	} {
		if !strings.Contains(note, want) {
			t.Errorf("note %q lacks %q", note, want)
		}
	}
}
