package placement

import (
	"fmt"
	"sort"
	"strings"

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
	// note says how the split differs from the weights for want of room
	// (fit.go); "" when it does not.
	note string
	// unfit counts the replicas that found room in no region.
	unfit int
}

// split divides a resource's replicas over regions: the regions its
// schedule lists, weighted, or, when it lists none, every registered
// region; no region more than it has room for while another has room
// (fit.go). Images go to every candidate region (they have no replicas).
// With a failover policy, the share of a region that is Down moves to the
// failover regions, again as they have room.
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
	base := weighted(v.r.Replicas, targets)
	room := func(name string) int {
		r := v.room(name)
		if h, _ := v.health(name); h == api.HealthDown && (r < 0 || r > base[name]) {
			return base[name] // a region Down takes no other's share
		}
		return r
	}
	got, _ := fit(v.r.Replicas, targets, room)
	s := split{replicas: got, from: map[string]string{}, reason: reason, note: fitNote(base, got)}
	if f := v.r.Failover; f != nil && f.Enabled {
		var why, note string
		s.replicas, s.from, why, note = v.failover(f, s.replicas)
		if why != "" {
			s.reason = why
		}
		s.note = joinNotes(s.note, note)
	}
	// What found room nowhere is counted once, on the final split: a
	// share cut in a region that then fails over is not lost twice.
	for name, n := range s.replicas {
		if r := room(name); r >= 0 && n > r {
			s.unfit += n - r
		}
	}
	if s.unfit > 0 {
		s.note = joinNotes(s.note, fmt.Sprintf("%d found room in no region and wait for it", s.unfit))
	}
	return s
}

// joinNotes joins the notes that are not empty.
func joinNotes(notes ...string) string {
	var out []string
	for _, n := range notes {
		if n != "" {
			out = append(out, n)
		}
	}
	return strings.Join(out, "; ")
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
