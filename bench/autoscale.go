package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
)

// a1Steps is how many load steps each run of A1 makes.
const a1Steps = 2

// a1 times a load step ×4 to enough ready replicas (issue 40's A1), from
// the e2e test TestAutoscaleOnLoadBalancerRequests: real containerd and
// HAProxy, the whole path (the agent's meters, its heartbeat, the
// region's, the master's decision, the region's scheduler, the replicas'
// start and readiness). The autoscaler runs with its default period,
// 15 s; the target is two periods plus the start time. The baseline is a
// twin resource scaled by hand to the same 4 under the same load, in the
// same run: the start time.
func (s *suite) a1(ctx context.Context) error {
	var auto, twin []float64
	for range s.o.rounds {
		cmd := exec.CommandContext(ctx, "go", "test", "-count", "1", "-v", "-timeout", "15m", "-run", "^TestAutoscaleOnLoadBalancerRequests$", "./e2e")
		cmd.Env = append(os.Environ(), "CI=true", fmt.Sprintf("STRATA_A1_STEPS=%d", a1Steps), "STRATA_A1_PERIOD=15s")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("go test TestAutoscaleOnLoadBalancerRequests: %v\n%s", err, tailOf(string(out), 15))
		}
		re := regexp.MustCompile(`a1 sample autoscale ([0-9.]+) twin ([0-9.]+)`)
		ms := re.FindAllStringSubmatch(string(out), -1)
		if len(ms) != a1Steps {
			return fmt.Errorf("%d samples in the test output; want %d:\n%s", len(ms), a1Steps, tailOf(string(out), 15))
		}
		for _, m := range ms {
			a, err1 := strconv.ParseFloat(m[1], 64)
			b, err2 := strconv.ParseFloat(m[2], 64)
			if err1 != nil || err2 != nil {
				return fmt.Errorf("sample %q: %v %v", m[0], err1, err2)
			}
			auto, twin = append(auto, a/1000), append(twin, b/1000)
		}
	}
	a, tw := spreadFloats(auto), spreadFloats(twin)
	ratios := make([]float64, len(auto))
	for i := range auto {
		ratios[i] = auto[i] / twin[i]
	}
	r := spreadFloats(ratios)
	const period = 15.0
	s.r.add(row{id: "A1", what: "load step ×4 → enough ready replicas (autoscaled on the load balancer's request rate)", figure: a.format(fmtSecs),
		target: fmt.Sprintf("≤ 2 periods + start time (2 × %.0f s + the twin's median %s)", period, fmtSecs(tw.med)), met: verdict(a.med <= 2*period+tw.med),
		ratio: fmt.Sprintf("%.1f (%.1f–%.1f) × the twin scaled by hand to the same 4, %s", r.med, r.lo, r.hi, tw.format(fmtSecs)),
		notes: fmt.Sprintf("%d steps a run (%d in all; the runs are the samples, a time to converge rather than a latency distribution): a paced open-loop load of 20 requests/s through a real HAProxy on one replica (its target), then 80/s from the step until the 4th replica is ready (polled every 100 ms); then the twin, and the load stopped and both back to 1. Autoscale period 15 s (the default), tolerance 10 %%, scale-down window 6 s. One agent; the tiers as the e2e tests run them (a real etcd each, mutual TLS), not the production shape of B1–B10.", a1Steps, len(auto))})
	return nil
}
