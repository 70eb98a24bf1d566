package main

import (
	"strings"
	"testing"
)

func TestServerTimesQuantileBound(t *testing.T) {
	was := serverTimes{"count": 10, "sum": 1, "0.01": 10, "0.05": 10, "0.1": 10, "+Inf": 10}
	now := serverTimes{"count": 110, "sum": 4, "0.01": 60, "0.05": 108, "0.1": 109, "+Inf": 110}
	d := now.since(was)
	if got := d.quantileBound(0.5); got != "≤ 10 ms" {
		t.Errorf("p50 bound = %q; want ≤ 10 ms (50 of 100 in the 10 ms bucket)", got)
	}
	if got := d.quantileBound(0.99); got != "≤ 100 ms" {
		t.Errorf("p99 bound = %q; want ≤ 100 ms (98 of 100 within 50 ms)", got)
	}
	if got := (serverTimes{"count": 2, "+Inf": 2}).quantileBound(0.99); got != "> 10 s" {
		t.Errorf("all past the last bound: %q; want > 10 s", got)
	}
	if got := (serverTimes{}).note(); got != "" {
		t.Errorf("nothing timed: note %q; want none", got)
	}
}

func TestServerTimesNote(t *testing.T) {
	d := serverTimes{"count": 100, "sum": 2, "0.01": 50, "0.05": 100, "+Inf": 100, "etcd count": 100, "etcd sum": 1.5}
	n := d.note()
	for _, want := range []string{"100 requests, mean 20.0 ms, p50 ≤ 10 ms, p99 ≤ 50 ms", "100 calls): mean 15.0 ms"} {
		if !strings.Contains(n, want) {
			t.Errorf("note %q lacks %q", n, want)
		}
	}
}

// TestServerTimesAddsRuns: the runs' windows add up, and what fell
// between them (the cleanup's DELETEs) is not in the sum.
func TestServerTimesAddsRuns(t *testing.T) {
	sum := serverTimes{}
	run1 := serverTimes{"count": 10, "etcd count": 10}.since(serverTimes{})
	between := serverTimes{"count": 10, "etcd count": 2010} // 2,000 DELETEs read
	run2 := serverTimes{"count": 25, "etcd count": 2025}.since(between)
	sum.add(run1)
	sum.add(run2)
	if sum["count"] != 25 || sum["etcd count"] != 25 {
		t.Fatalf("sum of two runs = %v; want 25 requests and 25 etcd reads", sum)
	}
}
