package placement

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/stratahq/strata/internal/api"
)

// fitted reports whether the resource's split heeds the regions'
// headroom: a compute resource that is not a Job and mounts no Volume
// resource (a Job's run stays in the region that started it; a Volume
// pins its replica to the region that holds it; scratch volumes do not).
func (v *view) fitted() bool {
	s := v.r.Spec
	if v.r.Kind != api.KindCompute || s.Job != nil || s.Compute == nil {
		return false
	}
	for _, m := range s.Compute.Volumes {
		if m.Volume != "" {
			return false
		}
	}
	return true
}

// flavorIn is the flavor the resource runs with in region (its override
// applied).
func (v *view) flavorIn(region string) string {
	if o, ok := v.r.Overrides[region]; ok && o.Flavor != "" {
		return o.Flavor
	}
	return v.r.Spec.Flavor
}

// free is how many more replicas of the resource region's nodes hold
// now, by its last heartbeat's headroom for the resource's flavor there;
// -1 when that is not known (no headroom reported, or not for that
// flavor yet). A region that is Down has none.
func (v *view) free(region string) int {
	reg := v.regions[region]
	if reg == nil || reg.Headroom == nil {
		return -1
	}
	n, ok := reg.Headroom[v.flavorIn(region)]
	if !ok {
		return -1
	}
	if h, _ := v.health(region); h == api.HealthDown {
		return 0
	}
	return max(n, 0)
}

// room is how many replicas of the resource region can hold: those it
// has placed and as many more as its headroom says; -1 for no limit
// (a resource the split does not fit, or a region whose headroom is not
// known). What a region placed is its own count (the share's replicas
// less its unplaced ones), so a share is only cut below what the region
// asked for when the region itself says some did not fit.
func (v *view) room(region string) int {
	if !v.fitted() {
		return -1
	}
	free := v.free(region)
	if free < 0 {
		return -1
	}
	placed := 0
	if sh := v.share(region); sh != nil {
		placed = max(sh.Replicas-sh.Unplaced, 0)
	}
	return placed + free
}

// fit splits total over targets by weight, as weighted does, but gives
// no target more than its room (room returns -1 for no limit) while
// another target of positive weight has room left: what a target cannot
// hold goes to those that can, by weight, round after round. What no
// target has room for (over) waits in the targets it was cut from, in
// proportion to what each was cut, so that no target ends above its
// weighted share or its room, whichever is larger. With room enough
// everywhere it is weighted's split exactly.
func fit(total int, targets []api.RegionTarget, room func(string) int) (out map[string]int, over int) {
	out = weighted(0, targets)
	caps := make(map[string]int, len(targets))
	var active []api.RegionTarget
	for _, t := range targets {
		caps[t.Name] = room(t.Name)
		if t.Weight > 0 {
			active = append(active, t)
		}
	}
	if len(active) == 0 {
		return out, 0 // no weight: nothing goes anywhere
	}
	open := func(name string) bool { c := caps[name]; return c < 0 || out[name] < c }
	left := total
	// Every round either places all that is left or fills at least one
	// target, which leaves the next round: at most len(targets) rounds.
	for left > 0 && len(active) > 0 {
		for name, k := range weighted(left, active) {
			if c := caps[name]; c >= 0 {
				k = min(k, c-out[name])
			}
			out[name] += k
			left -= k
		}
		next := make([]api.RegionTarget, 0, len(active))
		for _, t := range active {
			if open(t.Name) {
				next = append(next, t)
			}
		}
		if len(next) == len(active) {
			break
		}
		active = next
	}
	if left > 0 {
		giveBack(out, weighted(total, targets), targets, left)
	}
	return out, left
}

// giveBack adds left replicas to the targets of out cut below their
// weighted share base, in proportion to their cuts. The cuts add up to
// at least left, so none gets back more than it lost.
func giveBack(out, base map[string]int, targets []api.RegionTarget, left int) {
	var cut []api.RegionTarget
	for _, t := range targets {
		if d := base[t.Name] - out[t.Name]; d > 0 && !slices.ContainsFunc(cut, func(c api.RegionTarget) bool { return c.Name == t.Name }) {
			cut = append(cut, api.RegionTarget{Name: t.Name, Weight: d})
		}
	}
	for name, k := range weighted(left, cut) {
		out[name] += k
	}
}

// fitNote says how a fitted split differs from the weighted one (""
// when it does not): which regions lacked room, and where their
// replicas went instead.
func fitNote(want, got map[string]int) string {
	var short, gained []string
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if got[name] < want[name] {
			short = append(short, fmt.Sprintf("%s has room for %d of its %d", name, got[name], want[name]))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(got)) {
		if got[name] > want[name] {
			gained = append(gained, fmt.Sprintf("%s +%d", name, got[name]-want[name]))
		}
	}
	var parts []string
	if len(short) > 0 {
		parts = append(parts, strings.Join(short, ", "))
	}
	if len(gained) > 0 {
		parts = append(parts, "went to "+strings.Join(gained, ", "))
	}
	return strings.Join(parts, "; ")
}

// reserve says whether the headroom of the other regions could absorb
// the loss of the resource's k largest regions (schedule.reserve: N+k),
// as of their last heartbeats: the regions that would stand in for them
// (as failover would pick them: toRegions, else the schedule's other
// regions, else every registered one; never one that is Down) need room
// for their replicas. Headroom is counted for each resource alone: two
// resources with a reserve may count on the same free capacity. nil
// without a reserve.
func (v *view) reserve(desired map[string]int) *api.ReserveStatus {
	k, ok := v.r.Schedule.ReserveLosses()
	if k == 0 || !ok || !v.fitted() {
		return nil
	}
	st := &api.ReserveStatus{}
	st.Lost, st.Need = largest(desired, k)
	if st.Need == 0 {
		st.Holds, st.Message = true, "nothing to absorb: no region holds replicas"
		return st
	}
	var with, unknown []string
	for _, name := range v.reserveStandIns(st.Lost) {
		n := v.free(name)
		if n < 0 {
			unknown = append(unknown, name)
			continue
		}
		st.Free += n
		with = append(with, fmt.Sprintf("%s %d", name, n))
	}
	st.Holds = st.Free >= st.Need
	loss := fmt.Sprintf("losing %s (%d replicas)", strings.Join(st.Lost, ", "), st.Need)
	elsewhere := strings.Join(with, ", ")
	if elsewhere == "" {
		elsewhere = "none known"
	}
	switch {
	case len(with) == 0 && len(unknown) == 0:
		st.Message = loss + ": no other region could take them"
	case st.Holds:
		st.Message = fmt.Sprintf("%s leaves room for %d elsewhere (%s)", loss, st.Free, elsewhere)
	default:
		st.Message = fmt.Sprintf("%s: room for %d elsewhere (%s), %d short", loss, st.Free, elsewhere, st.Need-st.Free)
	}
	if len(unknown) > 0 {
		st.Message += fmt.Sprintf("; no headroom known for flavor %s from %s", v.r.Spec.Flavor, strings.Join(unknown, ", "))
	}
	return st
}

// largest are the k regions with the most replicas in desired (ties by
// name; none with 0), and their replicas.
func largest(desired map[string]int, k int) ([]string, int) {
	byShare := slices.Collect(maps.Keys(desired))
	slices.SortFunc(byShare, func(a, b string) int {
		if desired[a] != desired[b] {
			return desired[b] - desired[a]
		}
		return strings.Compare(a, b)
	})
	var names []string
	need := 0
	for _, name := range byShare {
		if len(names) == k || desired[name] == 0 {
			break
		}
		names = append(names, name)
		need += desired[name]
	}
	return names, need
}

// reserveStandIns are the regions that would stand in for all of lost,
// by name, as failover picks them, lost ones left out.
func (v *view) reserveStandIns(lost []string) []string {
	f := v.r.Failover
	if f == nil {
		f = &api.FailoverPolicy{}
	}
	stand := map[string]bool{}
	for _, l := range lost {
		for _, t := range v.standIns(f, l) {
			if !slices.Contains(lost, t.Name) {
				stand[t.Name] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(stand))
}
