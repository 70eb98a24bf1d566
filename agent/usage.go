package agent

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
)

// meter reads what the replicas use from the providers that measure it
// (provider.Meter), every meterEvery on its own goroutine so that a slow
// provider never delays a heartbeat, and turns the counters into rates:
// the beat carries the latest sums.
type meter struct {
	provs *providerSet
	table *replicaTable
	t     *timings
	clock func() time.Time

	// last is each replica's previous reading, for its rates.
	last map[string]reading

	mu      sync.Mutex
	metrics map[string]float64
}

// reading is one replica's usage at a time.
type reading struct {
	at time.Time
	u  api.Usage
}

// run reads every meterEvery until ctx is done.
func (m *meter) run(ctx context.Context) {
	tick := time.NewTicker(m.t.meterEvery)
	defer tick.Stop()
	for {
		m.read(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// read takes one reading of every metered provider and keeps the sums.
func (m *meter) read(ctx context.Context) {
	usage := map[string]api.Usage{}
	for _, e := range m.provs.list {
		mp, ok := e.p.(provider.Meter)
		if !ok {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, m.t.meterCall)
		u, err := mp.Usage(cctx)
		cancel()
		if err != nil {
			// The provider's health says why; a reading missed shows as
			// replicas not measured, which the autoscaler allows for.
			continue
		}
		for id, x := range u {
			usage[id] = x
		}
	}
	now := m.clock()
	sums := m.sum(now, usage, m.table.owners())
	m.mu.Lock()
	m.metrics = sums
	m.mu.Unlock()
}

// sum turns readings at now into per-resource sums, by the replicas'
// owners (tenant/resource by replica id, running replicas only), and
// keeps the readings for the next rates.
func (m *meter) sum(now time.Time, usage map[string]api.Usage, owners map[string]string) map[string]float64 {
	out := map[string]float64{}
	next := make(map[string]reading, len(usage))
	for id, u := range usage {
		owner, ok := owners[id]
		if !ok {
			continue
		}
		next[id] = reading{at: now, u: u}
		prev, seen := m.last[id]
		dt := now.Sub(prev.at).Seconds()
		if !seen || dt <= 0 || u.CPUSeconds < prev.u.CPUSeconds || u.Requests < prev.u.Requests {
			// A first reading, or counters that went back (the replica
			// restarted): no rate yet.
			continue
		}
		k := api.LoadPrefix + owner + "/"
		out[k+api.LoadReplicas]++
		out[k+api.LoadMilliCPU] += 1000 * (u.CPUSeconds - prev.u.CPUSeconds) / dt
		out[k+api.LoadMemoryMiB] += u.MemoryMiB
		out[k+api.LoadRequestRate] += (u.Requests - prev.u.Requests) / dt
		out[k+api.LoadSessions] += u.Sessions
	}
	m.last = next
	return out
}

// current is the latest sums, for a heartbeat (a copy the caller owns).
func (m *meter) current(into map[string]float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, v := range m.metrics {
		into[k] = round(v)
	}
}

// round keeps a reading to three decimals, so that a beat carries no
// noise digits.
func round(v float64) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'f', 3, 64), 64)
	return f
}
