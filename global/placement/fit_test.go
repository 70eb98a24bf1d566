package placement

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// headroom sets the region's headroom: n more replicas of flavor small.
func headroom(n int) func(*Region) {
	return func(r *Region) { r.Headroom = map[string]int{"small": n} }
}

// placed makes the region report a ready share of n replicas of which
// unplaced found no node.
func placed(n, unplaced int) func(*Region) {
	return func(r *Region) {
		r.Share = &Share{UID: "u1", RegionShare: api.RegionShare{
			Phase: api.PhaseReady, Replicas: n, Ready: n - unplaced, Unplaced: unplaced, Revision: 1, ObservedGeneration: 1,
		}}
		r.Settled = false
	}
}

func TestFitSplit(t *testing.T) {
	withVolume := resource(4, rt("a", 1), rt("b", 1))
	withVolume.Spec.Compute.Volumes = []api.VolumeMount{{Volume: "data", Path: "/data"}}
	job := resource(4, rt("a", 1), rt("b", 1))
	job.Spec.Job = &api.JobSpec{}
	override := resource(4, rt("a", 1), rt("b", 1))
	override.Overrides = map[string]api.SpecOverride{"a": {Flavor: "large"}}
	for _, tc := range []struct {
		name     string
		w        *world
		want     map[string]int
		wantNote string
	}{
		{"room everywhere: the weights",
			newWorld(resource(6, rt("a", 1), rt("b", 1))).region("a", headroom(10)).region("b", headroom(10)),
			map[string]int{"a": 3, "b": 3}, ""},
		{"no headroom known: the weights",
			newWorld(resource(6, rt("a", 1), rt("b", 1))).region("a").region("b", headroom(0)),
			map[string]int{"a": 6, "b": 0}, "b has room for 0 of its 3; went to a +3"},
		{"a full region's excess goes where there is room",
			newWorld(resource(6, rt("a", 1), rt("b", 1))).region("a", headroom(1)).region("b", headroom(10)),
			map[string]int{"a": 1, "b": 5}, "a has room for 1 of its 3; went to b +2"},
		{"what a region placed counts as its room",
			newWorld(resource(6, rt("a", 1), rt("b", 1))).region("a", headroom(0), placed(3, 1)).region("b", headroom(10)),
			map[string]int{"a": 2, "b": 4}, "a has room for 2 of its 3; went to b +1"},
		{"the excess goes by weight among those with room",
			newWorld(resource(12, rt("a", 2), rt("b", 1), rt("c", 1))).region("a", headroom(0)).region("b", headroom(20)).region("c", headroom(20)),
			map[string]int{"a": 0, "b": 6, "c": 6}, "a has room for 0 of its 6; went to b +3, c +3"},
		{"round after round",
			newWorld(resource(12, rt("a", 1), rt("b", 1), rt("c", 1))).region("a", headroom(1)).region("b", headroom(4)).region("c", headroom(20)),
			map[string]int{"a": 1, "b": 4, "c": 7}, "a has room for 1 of its 4; went to c +3"},
		{"room nowhere: the rest waits where the weights put it",
			newWorld(resource(6, rt("a", 1), rt("b", 1))).region("a", headroom(1)).region("b", headroom(2)),
			map[string]int{"a": 3, "b": 3}, "3 found room in no region and wait for it"},
		{"weight 0 takes nothing",
			newWorld(resource(4, rt("a", 1), rt("b", 0))).region("a", headroom(1)).region("b", headroom(10)),
			map[string]int{"a": 4, "b": 0}, "3 found room in no region and wait for it"},
		{"a region down has no room",
			newWorld(resource(4, rt("a", 1), rt("b", 1))).region("a", headroom(10), down(time.Minute)).region("b", headroom(10)),
			map[string]int{"a": 0, "b": 4}, "a has room for 0 of its 2; went to b +2"},
		{"a down region without headroom keeps its share and takes no other's",
			newWorld(resource(6, rt("a", 1), rt("b", 1), rt("c", 1))).region("a", down(time.Minute)).region("b", headroom(0)).region("c"),
			map[string]int{"a": 2, "b": 0, "c": 4}, "b has room for 0 of its 2; went to c +2"},
		{"a volume pins replicas: not fitted",
			newWorld(withVolume).region("a", headroom(0)).region("b", headroom(10)),
			map[string]int{"a": 2, "b": 2}, ""},
		{"a job: not fitted",
			newWorld(job).region("a", headroom(0)).region("b", headroom(10)),
			map[string]int{"a": 2, "b": 2}, ""},
		{"the flavor of the region's override",
			newWorld(override).region("a", func(r *Region) { r.Headroom = map[string]int{"small": 10, "large": 0} }).region("b", headroom(10)),
			map[string]int{"a": 0, "b": 4}, "a has room for 0 of its 2; went to b +2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.w.in)
			if got := replicasOf(d); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("split %v; want %v", got, tc.want)
			}
			if d.Status == nil || d.Status.Split != tc.wantNote {
				t.Errorf("status split note %q; want %q", d.Status.Split, tc.wantNote)
			}
		})
	}
}

func TestFitFailover(t *testing.T) {
	r := resource(6, rt("a", 1))
	r.Failover = &api.FailoverPolicy{Enabled: true, ToRegions: []string{"b", "c"}}
	d := Decide(newWorld(r).region("a", down(time.Hour)).region("b", headroom(1)).region("c", headroom(10)).in)
	if got, want := replicasOf(d), map[string]int{"b": 1, "c": 5}; !reflect.DeepEqual(got, want) {
		t.Errorf("split %v; want %v", got, want)
	}
	if want := "standing in for a: b has room for 1 of its 3; went to c +2"; d.Status.Split != want {
		t.Errorf("note %q; want %q", d.Status.Split, want)
	}
	// A stand-in's room counts what it already holds of its own share.
	r = resource(6, rt("a", 1), rt("b", 1))
	r.Failover = &api.FailoverPolicy{Enabled: true, ToRegions: []string{"b", "c"}}
	d = Decide(newWorld(r).region("a", down(time.Hour)).region("b", headroom(0), placed(3, 0)).region("c", headroom(10)).in)
	if got, want := replicasOf(d), map[string]int{"b": 3, "c": 3}; !reflect.DeepEqual(got, want) {
		t.Errorf("split %v; want %v", got, want)
	}
}

func TestReserve(t *testing.T) {
	withReserve := func(k string, replicas int, regions ...api.RegionTarget) *api.Resource {
		r := resource(replicas, regions...)
		r.Schedule.Reserve = k
		return r
	}
	for _, tc := range []struct {
		name string
		w    *world
		want *api.ReserveStatus
	}{
		{"none asked", newWorld(resource(6, rt("a", 1), rt("b", 1))).region("a", headroom(10)).region("b", headroom(10)), nil},
		{"N+1 holds",
			newWorld(withReserve("N+1", 6, rt("a", 2), rt("b", 1))).region("a", headroom(10)).region("b", headroom(4)),
			&api.ReserveStatus{Holds: true, Lost: []string{"a"}, Need: 4, Free: 4, Message: "losing a (4 replicas) leaves room for 4 elsewhere (b 4)"}},
		{"N+1 short",
			newWorld(withReserve("N+1", 6, rt("a", 2), rt("b", 1))).region("a", headroom(10)).region("b", headroom(3)),
			&api.ReserveStatus{Lost: []string{"a"}, Need: 4, Free: 3, Message: "losing a (4 replicas): room for 3 elsewhere (b 3), 1 short"}},
		{"N+2: the two largest, ties by name",
			newWorld(withReserve("N+2", 6, rt("a", 1), rt("b", 1), rt("c", 1))).region("a", headroom(0), placed(2, 0)).region("b", headroom(0), placed(2, 0)).region("c", headroom(4)),
			&api.ReserveStatus{Holds: true, Lost: []string{"a", "b"}, Need: 4, Free: 4, Message: "losing a, b (4 replicas) leaves room for 4 elsewhere (c 4)"}},
		{"a down stand-in does not count",
			newWorld(withReserve("N+1", 2, rt("a", 1))).region("a", headroom(10)).region("b", headroom(10), down(time.Minute)),
			&api.ReserveStatus{Lost: []string{"a"}, Need: 2, Message: "losing a (2 replicas): no other region could take them"}},
		{"headroom not known",
			newWorld(withReserve("N+1", 2, rt("a", 1), rt("b", 0))).region("a", headroom(10)).region("b"),
			&api.ReserveStatus{Lost: []string{"a"}, Need: 2, Message: "losing a (2 replicas): room for 0 elsewhere (none known), 2 short; no headroom known for flavor small from b"}},
		{"toRegions are the stand-ins",
			newWorld(func() *api.Resource {
				r := withReserve("N+1", 4, rt("a", 1))
				r.Failover = &api.FailoverPolicy{ToRegions: []string{"c"}}
				return r
			}()).region("a", headroom(0)).region("b", headroom(10)).region("c", headroom(1)),
			&api.ReserveStatus{Lost: []string{"a"}, Need: 4, Free: 1, Message: "losing a (4 replicas): room for 1 elsewhere (c 1), 3 short"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.w.in)
			if d.Status == nil || !reflect.DeepEqual(d.Status.Reserve, tc.want) {
				t.Errorf("reserve %+v; want %+v", d.Status.Reserve, tc.want)
			}
		})
	}
}

// TestFitProperty: fit on random targets and rooms, against what
// docs/architecture.md (Placement that fits) promises:
//
//   - the shares add up to total (when any weight is positive), and a
//     weight of 0 takes nothing;
//   - with room enough everywhere, it is weighted's split exactly;
//   - no target holds more than its room while another target of
//     positive weight has room left, and over is what exceeds the room
//     of them all;
//   - a target gets less than its weighted share only when it is full,
//     more only when another is full, and never more than the larger of
//     its weighted share and its room;
//   - targets that are not full share what is left by weight: within
//     one replica per round of their exact share of it.
func TestFitProperty(t *testing.T) {
	forEachWorld(t, func(t *testing.T, rng *rand.Rand) string {
		total := rng.IntN(200)
		targets := make([]api.RegionTarget, 1+rng.IntN(7))
		rooms := map[string]int{}
		for i := range targets {
			name := fmt.Sprintf("r%d", i)
			targets[i] = api.RegionTarget{Name: name, Weight: rng.IntN(6)}
			rooms[name] = rng.IntN(60) - 10 // some unlimited (< 0)
			if rooms[name] < 0 {
				rooms[name] = -1
			}
		}
		room := func(name string) int { return rooms[name] }
		got, over := fit(total, targets, room)
		want := weighted(total, targets)
		sumW, roomAll, unlimited := 0, 0, false
		for _, tg := range targets {
			sumW += tg.Weight
			if tg.Weight > 0 {
				if rooms[tg.Name] < 0 {
					unlimited = true
				}
				roomAll += max(rooms[tg.Name], 0)
			}
		}
		where := fmt.Sprintf("fit(%d, %v, rooms %v) = %v, over %d (weighted %v)", total, targets, rooms, got, over, want)
		given := 0
		for _, n := range got {
			given += n
		}
		switch {
		case sumW > 0 && given != total:
			return where + fmt.Sprintf(": adds up to %d", given)
		case sumW == 0 && (given != 0 || over != 0):
			return where + ": no weight, yet something was given"
		case unlimited && over != 0, !unlimited && sumW > 0 && over != max(total-roomAll, 0):
			return where + ": over is not what exceeds every room"
		}
		fits := true
		for _, tg := range targets {
			if r := rooms[tg.Name]; r >= 0 && want[tg.Name] > r {
				fits = false
			}
		}
		if fits && !reflect.DeepEqual(got, want) {
			return where + ": room enough everywhere, yet not the weighted split"
		}
		full := func(name string) bool { r := rooms[name]; return r >= 0 && got[name] >= r }
		anyFull := false
		for _, tg := range targets {
			anyFull = anyFull || tg.Weight > 0 && full(tg.Name)
		}
		var open []api.RegionTarget
		left := total
		for _, tg := range targets {
			n, r := got[tg.Name], rooms[tg.Name]
			switch {
			case tg.Weight == 0 && n != 0:
				return where + fmt.Sprintf(": %s of weight 0 got %d", tg.Name, n)
			case over == 0 && r >= 0 && n > r:
				return where + fmt.Sprintf(": %s got %d over its room %d while others had room", tg.Name, n, r)
			case over > 0 && r >= 0 && n < r && tg.Weight > 0:
				return where + fmt.Sprintf(": %d over, yet %s has room for %d more", over, tg.Name, r-n)
			case n < want[tg.Name] && !full(tg.Name):
				return where + fmt.Sprintf(": %s got %d, under its weighted %d, and is not full", tg.Name, n, want[tg.Name])
			case n > want[tg.Name] && !anyFull:
				return where + fmt.Sprintf(": %s got %d, over its weighted %d, with no region full", tg.Name, n, want[tg.Name])
			case r >= 0 && n > max(want[tg.Name], r):
				return where + fmt.Sprintf(": %s got %d, over both its weighted %d and its room %d", tg.Name, n, want[tg.Name], r)
			}
			if tg.Weight > 0 && !full(tg.Name) {
				open = append(open, tg)
			} else {
				left -= n
			}
		}
		if over > 0 || len(open) == 0 {
			return ""
		}
		exact := oracleWeighted(left, open)
		for _, tg := range open {
			if d := got[tg.Name] - exact[tg.Name]; d > len(targets) || d < -len(targets) {
				return where + fmt.Sprintf(": %s, not full, got %d, far from its share %d of the %d left to those not full", tg.Name, got[tg.Name], exact[tg.Name], left)
			}
		}
		return ""
	})
}

// TestDecideFitProperties: Decide on random worlds whose regions report
// headroom. Replicas are neither lost nor made up (the regions hold
// what is asked, plus what fail-back lends); without failover no
// candidate region holds more than its room while another candidate has
// room left, and the status' note is set exactly when the split differs
// from the weights; the decision settles as without headroom.
func TestDecideFitProperties(t *testing.T) {
	forEachWorld(t, func(t *testing.T, rng *rand.Rand) string {
		in := randomInput(rng)
		for i := range in.Regions {
			if rng.IntN(4) > 0 {
				in.Regions[i].Headroom = map[string]int{"small": rng.IntN(15)}
			}
		}
		d := Decide(in)
		for _, check := range []func(Input, Decision) string{checkRegistered, checkStandIns, checkStatus, checkStable, checkFitted} {
			if msg := check(in, d); msg != "" {
				return msg + "\n" + dump(in, d)
			}
		}
		return ""
	})
}

// checkFitted: the fitted split holds the replicas asked; without a
// failover policy no candidate holds more than its room while another
// has room left (a region Down has room for its own share at most), and the note says whether the split is the weights'.
func checkFitted(in Input, d Decision) string {
	o := newOracle(in)
	r := in.Resource
	if r.Kind == api.KindImage || r.Deleting() {
		return ""
	}
	got := replicasOf(d)
	total := 0
	for _, n := range got {
		total += n
	}
	weights := 0
	for _, n := range o.base {
		weights += n
	}
	if want := weights + o.lent(); !o.failover() && total != weights || o.failover() && total > want+r.Replicas {
		return fmt.Sprintf("regions hold %d replicas; asked %d", total, r.Replicas)
	}
	if o.failover() {
		return ""
	}
	v := newView(in)
	room := map[string]int{}
	anyRoom := false
	for name := range o.base {
		room[name] = v.room(name)
		if o.down(name) && (room[name] < 0 || room[name] > o.base[name]) {
			room[name] = o.base[name] // a region Down takes no other's share
		}
		if w := weightOf(r, name); w > 0 && (room[name] < 0 || got[name] < room[name]) {
			anyRoom = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(got)) {
		if rm := room[name]; rm >= 0 && got[name] > rm && anyRoom {
			return fmt.Sprintf("%s holds %d over its room %d while another region has room", name, got[name], rm)
		}
	}
	differs := !reflect.DeepEqual(got, o.base) && !(len(got) == 0 && len(o.base) == 0)
	if note := d.Status.Split; differs != (note != "") && !strings.Contains(note, "found room in no region") {
		return fmt.Sprintf("split %v against the weights' %v, yet the note is %q", got, o.base, note)
	}
	return ""
}

// weightOf is region's weight in r's candidates (1 when the schedule
// names no region, or spreads).
func weightOf(r *api.Resource, region string) int {
	if len(r.Schedule.Regions) == 0 || r.Schedule.SpreadRegions > 0 {
		return 1
	}
	for _, t := range r.Schedule.Regions {
		if t.Name == region {
			return t.Weight
		}
	}
	return 0
}
