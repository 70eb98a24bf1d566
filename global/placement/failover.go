package placement

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/stratahq/strata/internal/api"
)

// fate is what failover does with one region's share.
type fate int

const (
	// stay: the region keeps its share.
	stay fate = iota
	// move: the share goes to the stand-ins (the region is Down, or it
	// returned and the policy does not fail back).
	move
	// lend: the region keeps its share and the stand-ins keep a copy
	// (fail-back, make-before-break: the region is home but not ready).
	lend
)

// failover moves the share of every region that has been Down for
// f.After (or, with f.OnUnhealthy, whose ready replicas of the resource
// stayed below minHealthy that long) to the failover regions that are
// not Down. When the region
// returns, its share goes back to it if f.FailBack (make-before-break:
// the stand-ins keep their extra replicas until the region is ready
// again), else the stand-ins keep it and the region's stale copies are
// removed. Every region's fate is decided on its own share of base, so
// what one region receives as a stand-in never moves on with another's.
// A moving share goes to the stand-ins by weight as they have room
// (fit.go), counting what each already holds.
// It returns the new split, per receiving region the region it stands in
// for, why a share could not move, and how the stand-ins' shares differ
// from equal ones for want of room.
func (v *view) failover(f *api.FailoverPolicy, base map[string]int) (map[string]int, map[string]string, string, string) {
	out := maps.Clone(base)
	from := map[string]string{}
	reason := ""
	var notes []string
	for _, region := range slices.Sorted(maps.Keys(base)) {
		n := base[region]
		if n == 0 {
			continue
		}
		fa := v.fate(f, region)
		if fa == stay {
			continue
		}
		stand := v.standIns(f, region)
		if len(stand) == 0 {
			// The share stays. That is a problem only when the region
			// is down; one that came back simply runs it again.
			if h, _ := v.health(region); fa == move && h == api.HealthDown {
				reason = fmt.Sprintf("region %s is down and no failover region is up", region)
			} else if fa == move && v.unhealthy(f, region) {
				reason = fmt.Sprintf("region %s is unhealthy for the resource and no failover region is up", region)
			}
			continue
		}
		if fa == move {
			if out[region] -= n; out[region] == 0 {
				delete(out, region)
			}
		}
		left := func(name string) int {
			if r := v.room(name); r >= 0 {
				return max(r-out[name], 0)
			}
			return -1
		}
		got, _ := fit(n, stand, left)
		if note := fitNote(weighted(n, stand), got); note != "" {
			notes = append(notes, "standing in for "+region+": "+note)
		}
		for t, k := range got {
			if k > 0 {
				out[t] += k
				from[t] = region
			}
		}
	}
	return out, from, reason, strings.Join(notes, "; ")
}

// fate decides what happens to region's share.
func (v *view) fate(f *api.FailoverPolicy, region string) fate {
	health, since := v.health(region)
	down := health == api.HealthDown && v.in.Now.Sub(since) >= f.After.Duration || v.unhealthy(f, region)
	back := !down && failedOverFrom(v.stored(), region)
	switch {
	case down:
		return move
	case back && !f.FailBack:
		return move // stay where the replicas went; the region's copies go
	case back:
		if sh := v.share(region); sh != nil && sh.Phase == api.PhaseReady && sh.ObservedGeneration == v.r.Generation {
			return stay // home again and ready: the stand-ins give it back
		}
		return lend
	default:
		return stay
	}
}

// unhealthy reports whether, with f.OnUnhealthy, region is up but its
// ready replicas of the resource have been below the resource's
// minHealthy (the region judges it: its share's unhealthySince) for
// f.After. Only a live share counts: a stale one says nothing of now.
func (v *view) unhealthy(f *api.FailoverPolicy, region string) bool {
	if !f.OnUnhealthy {
		return false
	}
	reg := v.regions[region]
	if reg == nil || !reg.Live {
		return false
	}
	sh := v.share(region)
	return sh != nil && sh.FailoverFrom == "" && !sh.UnhealthySince.IsZero() && v.in.Now.Sub(sh.UnhealthySince) >= f.After.Duration
}

// standIns are the regions that may take over region's share, each once:
// the policy's toRegions, else the schedule's other regions, else every
// other registered region; never one that is Down or not registered.
func (v *view) standIns(f *api.FailoverPolicy, region string) []api.RegionTarget {
	var names []string
	switch {
	case len(f.ToRegions) > 0:
		names = f.ToRegions
	case len(v.r.Schedule.Regions) > 1:
		for _, t := range v.r.Schedule.Regions {
			names = append(names, t.Name)
		}
	default:
		names = v.registeredNames()
	}
	var out []api.RegionTarget
	seen := map[string]bool{}
	for _, n := range names {
		if n == region || seen[n] || !v.registered(n) {
			continue
		}
		seen[n] = true
		if h, _ := v.health(n); h == api.HealthDown {
			continue
		}
		out = append(out, api.RegionTarget{Name: n, Weight: 1})
	}
	return out
}

// failedOverFrom reports whether some region stands in for region.
func failedOverFrom(st *api.ResourceStatus, region string) bool {
	if st == nil {
		return false
	}
	for _, sh := range st.Regions {
		if sh.FailoverFrom == region {
			return true
		}
	}
	return false
}
