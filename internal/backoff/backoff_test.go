package backoff

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"
	"time"
)

func TestDelay(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name string
		b    Backoff
		want []time.Duration // Delay(0), Delay(1), ...
	}{
		{"doubles to the cap", Backoff{Min: 100 * ms, Max: time.Second}, []time.Duration{0, 100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second, time.Second}},
		{"cap not a power of two", Backoff{Min: time.Second, Max: 30 * time.Second}, []time.Duration{0, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}},
		{"max below min", Backoff{Min: time.Second, Max: ms}, []time.Duration{0, time.Second, time.Second}},
		{"no min, no delay", Backoff{Max: time.Second}, []time.Duration{0, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []time.Duration
			for n := range tc.want {
				got = append(got, tc.b.Delay(n))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v; want %v", got, tc.want)
			}
		})
	}
}

func TestDelayHuge(t *testing.T) {
	b := Backoff{Min: time.Second, Max: math.MaxInt64}
	for _, n := range []int{40, 62, 63, 64, 1000, math.MaxInt} {
		if d := b.Delay(n); d < time.Second {
			t.Errorf("Delay(%d) = %v; want at least 1s (no overflow)", n, d)
		}
	}
	if d := b.Delay(1000); d < time.Duration(math.MaxInt64/2) {
		t.Errorf("Delay(1000) = %v; want the cap", d)
	}
}

func TestNextReset(t *testing.T) {
	b := Backoff{Min: 10 * time.Millisecond, Max: 40 * time.Millisecond}
	var got []time.Duration
	for range 4 {
		got = append(got, b.Next())
	}
	b.Reset()
	got = append(got, b.Next())
	want := []time.Duration{10, 20, 40, 40, 10}
	for i := range want {
		want[i] *= time.Millisecond
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %v; want %v", got, want)
	}
}

func TestJitter(t *testing.T) {
	for _, tc := range []struct {
		jitter   Jitter
		low, top time.Duration // inclusive bounds for a 400ms delay
	}{
		{None, 400 * time.Millisecond, 400 * time.Millisecond},
		{Half, 200 * time.Millisecond, 400 * time.Millisecond},
		{Full, 0, 400*time.Millisecond - 1},
	} {
		b := Backoff{Min: 100 * time.Millisecond, Max: time.Second, Jitter: tc.jitter}
		seen := map[time.Duration]bool{}
		for range 1000 {
			d := b.Delay(3)
			if d < tc.low || d > tc.top {
				t.Fatalf("jitter %d: Delay(3) = %v; want within [%v, %v]", tc.jitter, d, tc.low, tc.top)
			}
			seen[d] = true
		}
		if tc.jitter != None && len(seen) < 100 {
			t.Errorf("jitter %d: %d distinct delays in 1000; want them spread", tc.jitter, len(seen))
		}
	}
	// A 1ns delay cannot be halved; Full of 1ns is 0.
	if d := (&Backoff{Min: 1, Jitter: Half}).Delay(1); d != 1 {
		t.Errorf("Half of 1ns: got %v; want 1ns", d)
	}
}

func TestSleep(t *testing.T) {
	if err := Sleep(t.Context(), time.Millisecond); err != nil {
		t.Errorf("Sleep of 1ms: got %v; want nil", err)
	}
	if err := Sleep(t.Context(), 0); err != nil {
		t.Errorf("Sleep of 0: got %v; want nil", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	start := time.Now()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep with a cancelled context: got %v; want context.Canceled", err)
	}
	if took := time.Since(start); took > time.Minute {
		t.Errorf("Sleep with a cancelled context took %v; want at once", took)
	}
	if err := Sleep(ctx, 0); err != nil {
		t.Errorf("Sleep of 0 with a cancelled context: got %v; want nil (no wait)", err)
	}
}
