// Package autoscale decides how many replicas a resource with an
// autoscale policy should have. It is pure: the master controller gives
// it the policy, the count now and what the regions' heartbeats say the
// replicas use, and carries the answer out (a scale fenced by its
// leadership, and an event that names the inputs).
//
// The rules are those of Kubernetes' HorizontalPodAutoscaler, so that an
// operator who knows one knows the other:
//
//   - each target asks for ceil(replicas × used / target); the largest
//     ask wins; within the tolerance band a target asks for no change;
//   - replicas not measured yet (starting, in a region whose beat has not
//     said) count as using nothing when scaling up and as using the
//     target when scaling down, so that neither direction overshoots on
//     half the data;
//   - scaling down goes no lower than the highest recommendation of the
//     scale-down window, scaling up no higher than the lowest of the
//     scale-up window;
//   - one step adds or removes at most what the rules allow, and the
//     count stays within minReplicas and maxReplicas.
package autoscale

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// Input is one decision's input.
type Input struct {
	Policy *api.AutoscalePolicy
	// Current is the resource's replica count now.
	Current int
	// Flavor is what one replica may use (the flavor's vCPUs and memory),
	// the base of the utilisation targets.
	Flavor api.FlavorSpec
	// Load is what the resource's replicas use, one entry per region
	// that reported it.
	Load []api.ResourceLoad
	// Balancer is what the policy's load balancer carries, per region;
	// empty without one, or before it reported.
	Balancer []api.ResourceLoad
}

// Recommendation is what the targets ask for.
type Recommendation struct {
	// Desired is the count the targets ask for, within the policy's
	// bounds; Current when no target has a reading.
	Desired int
	// Metrics are the readings, e.g. "cpu 83 % of 60 %", in the order
	// cpu, memory, requests, sessions.
	Metrics []string
	// Measured is false when no target had a reading.
	Measured bool
}

// Recommend computes what in's targets ask for.
func Recommend(in Input) Recommendation {
	p := in.Policy
	rec := Recommendation{Desired: in.Current}
	ask := 0
	measured := 0
	var cpu, mem float64
	for _, l := range in.Load {
		measured += l.Replicas
		cpu += l.MilliCPU
		mem += l.MemoryMiB
	}
	if measured > 0 && in.Current > 0 {
		if p.CPUPercent > 0 && in.Flavor.VCPUs > 0 {
			used := 100 * cpu / (float64(measured) * in.Flavor.VCPUs * 1000)
			ask = max(ask, utilisationAsk(in.Current, measured, used, float64(p.CPUPercent), p.Tolerance()))
			rec.Metrics = append(rec.Metrics, fmt.Sprintf("cpu %.0f %% of %d %%", used, p.CPUPercent))
		}
		if p.MemoryPercent > 0 && in.Flavor.MemoryMiB > 0 {
			used := 100 * mem / (float64(measured) * float64(in.Flavor.MemoryMiB))
			ask = max(ask, utilisationAsk(in.Current, measured, used, float64(p.MemoryPercent), p.Tolerance()))
			rec.Metrics = append(rec.Metrics, fmt.Sprintf("memory %.0f %% of %d %%", used, p.MemoryPercent))
		}
	}
	if len(in.Balancer) > 0 && in.Current > 0 {
		var rate, sessions float64
		for _, l := range in.Balancer {
			rate += l.RequestRate
			sessions += l.Sessions
		}
		if t := p.RequestsPerSecond; t > 0 {
			ask = max(ask, totalAsk(in.Current, rate, t, p.Tolerance()))
			rec.Metrics = append(rec.Metrics, fmt.Sprintf("requests %s/s per replica of %s/s", num(rate/float64(in.Current)), num(t)))
		}
		if t := p.Sessions; t > 0 {
			ask = max(ask, totalAsk(in.Current, sessions, t, p.Tolerance()))
			rec.Metrics = append(rec.Metrics, fmt.Sprintf("sessions %s per replica of %s", num(sessions/float64(in.Current)), num(t)))
		}
	}
	if len(rec.Metrics) == 0 {
		rec.Desired = p.Clamp(in.Current)
		return rec
	}
	rec.Measured = true
	rec.Desired = p.Clamp(ask)
	return rec
}

// utilisationAsk is what a utilisation target asks of current replicas,
// measured of which use used percent on average: HPA's rule with its
// handling of the replicas not measured.
func utilisationAsk(current, measured int, used, target, tolerance float64) int {
	ratio := used / target
	if math.Abs(ratio-1) <= tolerance {
		return current
	}
	if missing := current - measured; missing > 0 {
		total := used * float64(measured)
		if ratio > 1 {
			// Scaling up: the replicas not measured count as idle.
			ratio = total / float64(current) / target
		} else {
			// Scaling down: they count as at the target.
			ratio = (total + target*float64(missing)) / float64(current) / target
		}
		if math.Abs(ratio-1) <= tolerance {
			return current
		}
	}
	return int(math.Ceil(float64(current) * ratio))
}

// totalAsk is what a per-replica target on a total (a load balancer's
// request rate or sessions) asks of current replicas.
func totalAsk(current int, total, perReplica, tolerance float64) int {
	ratio := total / float64(current) / perReplica
	if math.Abs(ratio-1) <= tolerance {
		return current
	}
	return int(math.Ceil(total / perReplica))
}

// num is a reading with no more digits than it needs.
func num(v float64) string {
	if v >= 10 || v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// History is one resource's past recommendations, for the stabilization
// windows; the master keeps one per autoscaled resource, in memory, as
// the HPA does. A new history (a new master, a resource just created)
// starts with the count it first sees as a recommendation, so that its
// first scale-down waits a window rather than trusting one reading.
type History struct {
	recs []record
}

type record struct {
	at time.Time
	n  int
}

// Decide records the recommendation desired at now and returns the
// count to set, with why it differs from desired ("" when it does not).
func (h *History) Decide(now time.Time, p *api.AutoscalePolicy, current, desired int) (int, string) {
	if h.recs == nil {
		h.recs = []record{{at: now, n: current}}
	}
	keep := max(p.UpWindow(), p.DownWindow())
	up, down := desired, desired
	kept := h.recs[:0]
	for _, r := range h.recs {
		age := now.Sub(r.at)
		if age > keep {
			continue
		}
		kept = append(kept, r)
		// A window of 0 holds nothing back, not even a recommendation
		// of this instant.
		if age < p.UpWindow() {
			up = min(up, r.n)
		}
		if age < p.DownWindow() {
			down = max(down, r.n)
		}
	}
	h.recs = append(kept, record{at: now, n: desired})
	next := current
	var why []string
	if next < up {
		next = up
	}
	if next > down {
		next = down
	}
	switch {
	case desired < current && next > desired:
		why = append(why, fmt.Sprintf("scale-down window %s holds %d", p.DownWindow(), next))
	case desired > current && next < desired:
		why = append(why, fmt.Sprintf("scale-up window %s holds %d", p.UpWindow(), next))
	}
	if lim := current + p.MaxUp(current); next > lim {
		next = lim
		why = append(why, fmt.Sprintf("at most +%d a step", p.MaxUp(current)))
	}
	if lim := current - p.MaxDown(current); next < lim {
		next = lim
		why = append(why, fmt.Sprintf("at most -%d a step", p.MaxDown(current)))
	}
	if c := p.Clamp(next); c != next {
		next = c
		why = append(why, fmt.Sprintf("bounds %d to %d", p.MinReplicas, p.MaxReplicas))
	}
	return next, strings.Join(why, "; ")
}
