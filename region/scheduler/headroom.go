package scheduler

import (
	"math"

	"github.com/stratahq/strata/internal/api"
)

// Headroom is how many more replicas of each flavor fit on the
// snapshot's nodes, in all and per zone: on every node that passes the
// node filters (Up, schedulable, no condition in Error) and serves the
// flavor's kind, as many as its free CPU, memory and disk hold, and, when
// address is set (the region has a network) and the flavor is of a
// compute kind, its free addresses. Each flavor is counted as if the
// nodes took only it. Flavors of no size fit nothing (no figure would
// mean anything) and are left out.
func (s *Snapshot) Headroom(flavors []api.Flavor, address bool) []api.FlavorHeadroom {
	out := make([]api.FlavorHeadroom, 0, len(flavors))
	for _, f := range flavors {
		need := f.Spec.Capacity()
		if need.MilliCPU <= 0 && need.MemoryMiB <= 0 && need.DiskMiB <= 0 {
			continue
		}
		serves := s.serving(f.Kind)
		withAddress := address && f.Kind != api.ProviderLoadbalancer
		h := api.FlavorHeadroom{Flavor: f.Name, Zones: map[string]int{}}
		for i := range s.nodes {
			if s.state[i] != fits || !serves[i] {
				continue
			}
			n := s.fitCount(i, need)
			if withAddress {
				n = min(n, max(s.addrs[i], 0))
			}
			h.Replicas += n
			h.Zones[s.zoneNames[s.zone[i]]] += n
		}
		out = append(out, h)
	}
	return out
}

// fitCount is how many replicas of need fit in node i's free capacity.
func (s *Snapshot) fitCount(i int, need api.Capacity) int {
	free := s.capa[i].Sub(s.alloc[i])
	n := math.MaxInt
	for _, r := range [...][2]int64{{free.MilliCPU, need.MilliCPU}, {free.MemoryMiB, need.MemoryMiB}, {free.DiskMiB, need.DiskMiB}} {
		if r[1] <= 0 {
			continue
		}
		n = min(n, int(max(r[0], 0)/r[1]))
	}
	return n
}
