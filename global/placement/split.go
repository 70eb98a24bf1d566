package placement

import (
	"fmt"
	"sort"

	"github.com/stratahq/strata/internal/api"
)

// split is where a resource's replicas go.
type split struct {
	// replicas is every region that should run the resource, with its
	// share (possibly 0).
	replicas map[string]int
	// from names, per stand-in region, the region it stands in for.
	from map[string]string
	// reason says why a region could not be used.
	reason string
}

// split divides a resource's replicas over regions: the regions its
// schedule lists, weighted, or, when it lists none, every registered
// region. Images go to every candidate region (they have no replicas).
// With a failover policy, the share of a region that is Down moves to the
// failover regions.
func (v *view) split() split {
	targets, reason := v.candidates()
	if n := v.r.Schedule.SpreadRegions; n > 0 {
		targets = v.spreadOver(targets, n)
	}
	if v.r.Kind == api.KindImage {
		out := make(map[string]int, len(targets))
		for _, t := range targets {
			out[t.Name] = 0
		}
		return split{replicas: out, from: map[string]string{}, reason: reason}
	}
	s := split{replicas: weighted(v.r.Replicas, targets), from: map[string]string{}, reason: reason}
	if f := v.r.Failover; f != nil && f.Enabled {
		var why string
		s.replicas, s.from, why = v.failover(f, s.replicas)
		if why != "" {
			s.reason = why
		}
	}
	return s
}

// candidates are the schedule's registered regions with their weights, or
// every registered region weighted equally when the schedule lists none.
func (v *view) candidates() ([]api.RegionTarget, string) {
	var targets []api.RegionTarget
	reason := ""
	if len(v.r.Schedule.Regions) == 0 {
		for _, name := range v.registeredNames() {
			targets = append(targets, api.RegionTarget{Name: name, Weight: 1})
		}
		return targets, reason
	}
	for _, t := range v.r.Schedule.Regions {
		if !v.registered(t.Name) {
			reason = fmt.Sprintf("region %q is not registered", t.Name)
			continue
		}
		targets = append(targets, t)
	}
	return targets, reason
}

// spreadOver picks n regions, healthy ones first, in the given order, and
// weighs them equally.
func (v *view) spreadOver(targets []api.RegionTarget, n int) []api.RegionTarget {
	var up, rest []api.RegionTarget
	for _, t := range targets {
		if h, _ := v.health(t.Name); h == api.HealthDown {
			rest = append(rest, t)
		} else {
			up = append(up, t)
		}
	}
	all := append(up, rest...)
	if len(all) > n {
		all = all[:n]
	}
	out := make([]api.RegionTarget, len(all))
	for i, t := range all {
		out[i] = api.RegionTarget{Name: t.Name, Weight: 1}
	}
	return out
}

// weighted splits total by weights with the largest-remainder method, ties
// to the first listed; every listed region appears in the result (possibly
// with 0). Each region gets its exact share rounded down or up, and the
// shares add up to total unless no weight is positive. A region listed
// twice gets the sum of its entries.
func weighted(total int, targets []api.RegionTarget) map[string]int {
	out := make(map[string]int, len(targets))
	sum := 0
	for _, t := range targets {
		sum += max(t.Weight, 0)
		out[t.Name] += 0
	}
	if sum == 0 || total <= 0 {
		return out
	}
	type rem struct {
		i    int
		frac int
	}
	rems := make([]rem, len(targets))
	given := 0
	for i, t := range targets {
		share := total * max(t.Weight, 0)
		out[t.Name] += share / sum
		given += share / sum
		rems[i] = rem{i, share % sum}
	}
	sort.SliceStable(rems, func(a, b int) bool { return rems[a].frac > rems[b].frac })
	for k := 0; given < total; k++ {
		out[targets[rems[k%len(rems)].i].Name]++
		given++
	}
	return out
}

// StaticSplit is how r's replicas divide over the regions its schedule
// names, by weight, before region health, registration or failover change
// it: what quotas charge each region at admission. It is false when
// placement picks the regions (none named, or spreadRegions).
func StaticSplit(r *api.Resource) (map[string]int, bool) {
	if len(r.Schedule.Regions) == 0 || r.Schedule.SpreadRegions > 0 {
		return nil, false
	}
	if r.Kind == api.KindImage {
		out := make(map[string]int, len(r.Schedule.Regions))
		for _, t := range r.Schedule.Regions {
			out[t.Name] = 0
		}
		return out, true
	}
	return weighted(r.Replicas, r.Schedule.Regions), true
}
