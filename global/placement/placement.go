// Package placement decides where a global resource runs and what its
// aggregated status says. It is pure: it reads nothing but its input (the
// resource, its stored status, what the master knows of every region) and
// writes nothing; the master controller reads its caches, calls Decide,
// and carries the decision out (placements and removals through its links
// to the regions, the status through a fenced store.Batch).
//
// The rules, each in its own file:
//
//   - split.go: replicas over regions by weight (largest remainder, ties
//     to the first listed), spreadRegions, images everywhere;
//   - fit.go: no region more than it has room for (its headroom) while
//     another has room, why a split differs from the weights, and
//     whether schedule.reserve holds;
//   - failover.go: the share of a region Down for failover.after moves to
//     stand-ins that are not Down, and back with failBack;
//   - rollout.go: a new revision goes region by region in the schedule's
//     order; pause holds it where it is; a failure stops it and, with
//     autoRevert, asks for a revert;
//   - spec.go: a region's placement (overrides, flavor and image resolved);
//   - status.go: the regions' shares aggregated into one status.
package placement

import (
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// Input is everything a decision about one resource depends on.
type Input struct {
	// Now stamps what the decision starts (a rollout, a status' since).
	Now time.Time
	// Resource is the resource as stored.
	Resource *api.Resource
	// Status is the resource's stored status, whatever its UID (a status
	// left by an earlier resource of the same name only counts for since
	// and change detection); nil when there is none.
	Status *api.ResourceStatus
	// Regions are the regions the master knows of: registered, linked,
	// or both.
	Regions []Region
	// Catalog resolves the flavors and images placements name.
	Catalog Catalog
	// Autoscale is the autoscaler's last reading of the resource, which
	// its status carries; nil when it has none.
	Autoscale *api.AutoscaleStatus
}

// Region is what the master knows of one region, for one resource.
type Region struct {
	Name string
	// Registered: the region is in the registry, so the split may use it.
	Registered bool
	// Health is the region monitor's verdict (HealthUnknown without one)
	// and HealthSince when it started.
	Health      api.Health
	HealthSince time.Time
	// Linked: the master has a link to the region, so placements and
	// removals can be sent to it.
	Linked bool
	// Live: the link's share stream is up, so Share is current rather than
	// what the region said before it became unreachable.
	Live bool
	// Settled: the region holds nothing of the resource and nothing is on
	// its way to it (as far as the link knows).
	Settled bool
	// Share is what the region reports of the resource, whatever its UID;
	// nil when it reports nothing.
	Share *Share
	// Headroom is how many more replicas of each flavor the region's
	// nodes hold, by its last heartbeat; nil when it reported none.
	Headroom map[string]int
}

// Share is one resource's status as a region reports it.
type Share struct {
	UID string
	api.RegionShare
	Backends []api.BackendStatus
}

// Catalog resolves what a placement carries so that a region needs no
// global catalog.
type Catalog interface {
	// Flavor returns a flavor by name.
	Flavor(name string) (*api.Flavor, bool)
	// Image returns the spec of tenant's Image resource name.
	Image(tenant, name string) (*api.ImageSpec, bool)
	// Revision returns revision number of the resource tenant/name whose
	// UID is uid.
	Revision(tenant, name, uid string, number int64) (*api.Revision, bool)
}

// Target is the decision for one region that should run the resource.
type Target struct {
	Region string
	// Replicas is the region's share of the replicas.
	Replicas int
	// Revision is the revision the region runs after this decision: the
	// resource's when it is sent, the one it has when the rollout holds
	// it back.
	Revision int64
	// FailoverFrom names the region this one stands in for.
	FailoverFrom string
	// Placement is what to send: at Revision, with the region's share of
	// the replicas. A region the rollout holds back gets the revision it
	// runs, so that scaling reaches it before its turn. nil when the
	// region is not linked, or the placement could not be built (see
	// Reason; a held region whose revision is no longer stored keeps
	// what it has).
	Placement *api.Placement
}

// Removal asks a region to destroy what it holds of the resource.
type Removal struct {
	Region string
	UID    string
}

// Revert asks for a new revision with the spec a failed rollout started
// from.
type Revert struct {
	Tenant, Name, UID string
	Failed, To        int64
	Why               string
}

// Decision is what the master should do about one resource.
type Decision struct {
	// Targets are the regions that should run the resource, by name.
	Targets []Target
	// Remove lists regions that must destroy their copy.
	Remove []Removal
	// Finalize: a deleted resource is gone from every region; its records
	// may be forgotten.
	Finalize bool
	// Rollout is the rollout's state (nil when there is none).
	Rollout *api.RolloutStatus
	// Revert, when set, asks for an auto-revert.
	Revert *Revert
	// Reason explains why the resource cannot be placed as asked.
	Reason string
	// Unfit counts the replicas that find room in no region (fit.go):
	// they wait, unplaced, where the split puts them.
	Unfit int
	// Status is the aggregated status to write; nil when the stored one
	// says the same.
	Status *api.ResourceStatus
}

// Target returns the decision for region, if it should run the resource.
func (d *Decision) Target(region string) (Target, bool) {
	for _, t := range d.Targets {
		if t.Region == region {
			return t, true
		}
	}
	return Target{}, false
}

// Decide decides about one resource.
func Decide(in Input) Decision {
	v := newView(in)
	if v.r.Deleting() {
		return v.deletion()
	}
	split := v.split()
	send, ro, revert := v.rollout(split.replicas)
	d := Decision{Rollout: ro, Revert: revert, Reason: split.reason, Unfit: split.unfit}
	for _, name := range slices.Sorted(maps.Keys(split.replicas)) {
		t := Target{Region: name, Replicas: split.replicas[name], Revision: v.r.Revision, FailoverFrom: split.from[name]}
		if !send[name] {
			if sh := v.share(name); sh != nil {
				t.Revision = sh.Revision
				t.Placement = v.held(name, sh, t.Replicas)
			}
		} else if reg := v.regions[name]; reg != nil && reg.Linked {
			p, err := v.placement(v.r, name, t.Replicas)
			if err != nil {
				d.Reason = err.Error()
			} else {
				t.Placement = p
			}
		}
		if t.Placement != nil {
			t.Placement.FailoverFrom = t.FailoverFrom
		}
		d.Targets = append(d.Targets, t)
	}
	for _, name := range v.names {
		reg := v.regions[name]
		if _, ok := split.replicas[name]; ok || !reg.Linked || reg.Share == nil {
			continue
		}
		d.Remove = append(d.Remove, Removal{Region: name, UID: reg.Share.UID})
	}
	d.Status = v.status(split, "", d.Reason, ro)
	return d
}

// deletion removes a deleted resource from every region and finalizes it
// once none holds anything of it.
func (v *view) deletion() Decision {
	var d Decision
	var waiting []string
	for _, name := range v.names {
		reg := v.regions[name]
		if !reg.Linked {
			continue
		}
		if reg.Share != nil || !reg.Settled {
			uid := v.r.UID
			if reg.Share != nil {
				uid = reg.Share.UID
			}
			d.Remove = append(d.Remove, Removal{Region: name, UID: uid})
		}
		if !reg.Settled {
			waiting = append(waiting, name)
		}
	}
	if len(waiting) == 0 {
		d.Finalize = true
		return d
	}
	sort.Strings(waiting)
	d.Status = v.status(split{}, api.PhaseDestroy, "waiting for "+strings.Join(waiting, ", ")+" to destroy it", nil)
	return d
}

// view indexes an input.
type view struct {
	in      Input
	r       *api.Resource
	regions map[string]*Region
	names   []string // every region, by name
}

func newView(in Input) *view {
	v := &view{in: in, r: in.Resource, regions: make(map[string]*Region, len(in.Regions))}
	for i := range in.Regions {
		reg := &in.Regions[i]
		if _, dup := v.regions[reg.Name]; !dup {
			v.names = append(v.names, reg.Name)
		}
		v.regions[reg.Name] = reg
	}
	sort.Strings(v.names)
	return v
}

func (v *view) registered(name string) bool {
	reg := v.regions[name]
	return reg != nil && reg.Registered
}

// registeredNames lists the registered regions by name.
func (v *view) registeredNames() []string {
	var out []string
	for _, name := range v.names {
		if v.regions[name].Registered {
			out = append(out, name)
		}
	}
	return out
}

// health is a region's health and since when.
func (v *view) health(name string) (api.Health, time.Time) {
	if reg := v.regions[name]; reg != nil && reg.Health != "" {
		return reg.Health, reg.HealthSince
	}
	return api.HealthUnknown, time.Time{}
}

// stored is the resource's stored status when it is this resource's
// (same UID).
func (v *view) stored() *api.ResourceStatus {
	if st := v.in.Status; st != nil && st.UID == v.r.UID {
		return st
	}
	return nil
}

// share is what a linked region reports of this resource (same UID).
func (v *view) share(name string) *Share {
	reg := v.regions[name]
	if reg == nil || !reg.Linked || reg.Share == nil || reg.Share.UID != v.r.UID {
		return nil
	}
	return reg.Share
}
