package autoscale

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
)

var small = api.FlavorSpec{VCPUs: 1, MemoryMiB: 256}

func cpuLoad(replicas int, milli float64) []api.ResourceLoad {
	return []api.ResourceLoad{{Tenant: "t", Resource: "web", Replicas: replicas, MilliCPU: milli}}
}

func TestRecommend(t *testing.T) {
	cpu60 := &api.AutoscalePolicy{MinReplicas: 1, MaxReplicas: 20, CPUPercent: 60}
	rps := &api.AutoscalePolicy{MinReplicas: 2, MaxReplicas: 10, LoadBalancer: "lb", RequestsPerSecond: 50}
	both := &api.AutoscalePolicy{MinReplicas: 1, MaxReplicas: 20, CPUPercent: 60, LoadBalancer: "lb", RequestsPerSecond: 50}
	for _, c := range []struct {
		name     string
		in       Input
		want     int
		measured bool
		metric   string
	}{
		{"no readings keep the count", Input{Policy: cpu60, Current: 3, Flavor: small}, 3, false, ""},
		{"hot: 6 at 83 % of 60 % ask 9", Input{Policy: cpu60, Current: 6, Flavor: small, Load: cpuLoad(6, 6*830)}, 9, true, "cpu 83 % of 60 %"},
		{"within the tolerance nothing changes", Input{Policy: cpu60, Current: 6, Flavor: small, Load: cpuLoad(6, 6*640)}, 6, true, "cpu 64 % of 60 %"},
		{"cold: 6 at 20 % ask 2", Input{Policy: cpu60, Current: 6, Flavor: small, Load: cpuLoad(6, 6*200)}, 2, true, ""},
		// 3 of 6 measured at 120 %: the 3 others count as idle, so the
		// average is 60 %, the target: no change rather than 12.
		{"unmeasured replicas idle when scaling up", Input{Policy: cpu60, Current: 6, Flavor: small, Load: cpuLoad(3, 3*1200)}, 6, true, ""},
		// 3 of 6 measured at 10 %: the 3 others count as at the target,
		// (30 + 180) / 6 = 35 %: ask ceil(6 × 35/60) = 4, not 1.
		{"unmeasured replicas at target when scaling down", Input{Policy: cpu60, Current: 6, Flavor: small, Load: cpuLoad(3, 3*100)}, 4, true, ""},
		{"requests over two regions", Input{Policy: rps, Current: 2, Flavor: small, Balancer: []api.ResourceLoad{{RequestRate: 150}, {RequestRate: 250}}}, 8, true, "requests 200/s per replica of 50/s"},
		{"requests ask more than max", Input{Policy: rps, Current: 2, Flavor: small, Balancer: []api.ResourceLoad{{RequestRate: 5000}}}, 10, true, ""},
		{"requests idle ask min", Input{Policy: rps, Current: 8, Flavor: small, Balancer: []api.ResourceLoad{{RequestRate: 0}}}, 2, true, "requests 0/s per replica of 50/s"},
		{"the larger ask wins", Input{Policy: both, Current: 4, Flavor: small, Load: cpuLoad(4, 4*300), Balancer: []api.ResourceLoad{{RequestRate: 400}}}, 8, true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Recommend(c.in)
			if got.Desired != c.want || got.Measured != c.measured {
				t.Errorf("Recommend = %d (measured %v) %v; want %d (measured %v)", got.Desired, got.Measured, got.Metrics, c.want, c.measured)
			}
			if c.metric != "" && !strings.Contains(strings.Join(got.Metrics, ", "), c.metric) {
				t.Errorf("metrics %q; want %q among them", got.Metrics, c.metric)
			}
		})
	}
}

func TestDecideWindowsAndSteps(t *testing.T) {
	t0 := time.Unix(1000, 0)
	p := &api.AutoscalePolicy{MinReplicas: 1, MaxReplicas: 100, CPUPercent: 60}
	var h History
	// Up: +4 or 100 % a step, whichever is more; no up window.
	if n, why := h.Decide(t0, p, 2, 30); n != 6 || !strings.Contains(why, "+4") {
		t.Errorf("up from 2 to 30: %d (%q); want 6, at most +4", n, why)
	}
	if n, _ := h.Decide(t0.Add(15*time.Second), p, 6, 30); n != 12 {
		t.Errorf("up from 6 to 30: %d; want 12 (100 %%)", n)
	}
	// Down: the 5-minute window holds the highest recommendation (30).
	if n, why := h.Decide(t0.Add(30*time.Second), p, 12, 3); n != 12 || !strings.Contains(why, "scale-down window") {
		t.Errorf("down inside the window: %d (%q); want 12", n, why)
	}
	// Past the window of the 30s, only the recent lows count.
	if n, why := h.Decide(t0.Add(6*time.Minute), p, 12, 3); n != 3 || why != "" {
		t.Errorf("down after the window: %d (%q); want 3", n, why)
	}
	// A shorter window and a step bound.
	w := api.D(0)
	q := &api.AutoscalePolicy{MinReplicas: 2, MaxReplicas: 10, CPUPercent: 60, ScaleDown: api.ScalingRules{StabilizationWindow: &w, Replicas: 1}}
	var g History
	if n, why := g.Decide(t0, q, 8, 1); n != 7 || !strings.Contains(why, "-1") {
		t.Errorf("down by one a step: %d (%q); want 7", n, why)
	}
}

// TestDecideFreshHistoryWaits: a new master (or a resource just made
// autoscaled) does not scale down on its first reading: the count it
// first sees holds for the scale-down window. Scaling up is not held.
func TestDecideFreshHistoryWaits(t *testing.T) {
	t0 := time.Unix(1000, 0)
	p := &api.AutoscalePolicy{MinReplicas: 1, MaxReplicas: 10, CPUPercent: 60}
	var h History
	if n, why := h.Decide(t0, p, 6, 2); n != 6 || !strings.Contains(why, "scale-down window") {
		t.Errorf("first decision, 6 towards 2: %d (%q); want 6 held by the window", n, why)
	}
	if n, _ := h.Decide(t0.Add(4*time.Minute), p, 6, 2); n != 6 {
		t.Errorf("inside the window: %d; want 6", n)
	}
	if n, _ := h.Decide(t0.Add(5*time.Minute+time.Second), p, 6, 2); n != 2 {
		t.Errorf("past the window: %d; want 2", n)
	}
	var g History
	if n, _ := g.Decide(t0, p, 2, 5); n != 5 {
		t.Errorf("first decision, 2 towards 5: %d; want 5 (no up window)", n)
	}
}

// TestDecideProperties: whatever the recommendations, a decision stays
// within the bounds, never moves against the recommendation, and never
// steps further than the rules allow.
func TestDecideProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for world := range 300 {
		lo := 1 + rng.IntN(5)
		p := &api.AutoscalePolicy{MinReplicas: lo, MaxReplicas: lo + rng.IntN(40), CPUPercent: 50,
			ScaleUp: api.ScalingRules{Replicas: rng.IntN(5), Percent: rng.IntN(200)}}
		var h History
		now := time.Unix(0, 0)
		current := p.Clamp(rng.IntN(50))
		for range 40 {
			now = now.Add(time.Duration(1+rng.IntN(60)) * time.Second)
			desired := p.Clamp(rng.IntN(60))
			next, _ := h.Decide(now, p, current, desired)
			switch {
			case next < p.MinReplicas || next > p.MaxReplicas:
				t.Fatalf("world %d: %d outside %d..%d", world, next, p.MinReplicas, p.MaxReplicas)
			case desired >= current && next < current, desired <= current && next > current:
				t.Fatalf("world %d: from %d towards %d went to %d", world, current, desired, next)
			case next-current > p.MaxUp(current), current-next > p.MaxDown(current):
				t.Fatalf("world %d: step %d -> %d beyond the rules", world, current, next)
			}
			current = next
		}
	}
}
