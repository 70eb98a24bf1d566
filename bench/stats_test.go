package main

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestSpreadFloats(t *testing.T) {
	tests := []struct {
		name        string
		in          []float64
		med, lo, hi float64
	}{
		{"odd", []float64{3, 1, 2}, 2, 1, 3},
		{"even", []float64{4, 1, 3, 2}, 2.5, 1, 4},
		{"one", []float64{7}, 7, 7, 7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := spreadFloats(tc.in)
			if got.med != tc.med || got.lo != tc.lo || got.hi != tc.hi || got.n != len(tc.in) {
				t.Errorf("spreadFloats(%v): got %+v; want med %v, range %v–%v, n %d", tc.in, got, tc.med, tc.lo, tc.hi, len(tc.in))
			}
		})
	}
}

func TestPct(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 200; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		p    int
		want time.Duration
	}{{50, 100 * time.Millisecond}, {99, 198 * time.Millisecond}, {100, 200 * time.Millisecond}} {
		if got := pct(d, tc.p); got != tc.want {
			t.Errorf("pct(1..200 ms, %d): got %v; want %v", tc.p, got, tc.want)
		}
	}
}

// TestOpenLoop checks that requests are sent by the clock, not after the
// ones before them end (a blocked first request does not hold back the
// next), that each is timed from its scheduled send, and that errors are
// counted apart from samples.
func TestOpenLoop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fifthSent := make(chan struct{})
	var out latencies
	openLoop(ctx, 200, 10, nil, &out, func(ctx context.Context, i int, at time.Time) (time.Time, error) {
		switch i {
		case 0:
			// Closed loop, this would wait forever: request 5 is sent
			// only after this one ends.
			select {
			case <-fifthSent:
			case <-ctx.Done():
				return at, ctx.Err()
			}
		case 5:
			close(fifthSent)
		case 3:
			return at, errors.New("refused")
		}
		return at.Add(time.Duration(i+1) * time.Millisecond), nil
	})
	samples, errs := out.counts()
	if samples != 9 || errs != 1 {
		t.Fatalf("got %d samples and %d errors (last %v); want 9 and 1", samples, errs, out.last)
	}
	if got := out.p(100); got != 10*time.Millisecond {
		t.Errorf("slowest: got %v; want 10ms (measured from the scheduled send)", got)
	}
	if got := out.p(1); got != time.Millisecond {
		t.Errorf("fastest: got %v; want 1ms", got)
	}
}

func TestOverDirect(t *testing.T) {
	ms := func(x float64) string { return fmt.Sprintf("%.1f ms", x) }
	if got := overDirect(1.5, ms); got != "+1.5 ms over direct" {
		t.Errorf("slower: %q", got)
	}
	if got := overDirect(-13.4, ms); got != "13.4 ms under direct" {
		t.Errorf("faster: %q; want no \"+-\"", got)
	}
}
