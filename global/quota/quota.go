// Package quota counts what a tenant's resources hold against its
// quotas, from the global caches: the REST edge admits writes with it,
// and the master's alerts tell when a tenant nears a limit.
package quota

import (
	"fmt"
	"slices"

	"github.com/stratahq/strata/global/placement"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
)

// Counter counts over the resources and flavors caches.
type Counter struct {
	Resources *store.Cache[api.Resource]
	Flavors   *store.Cache[api.Flavor]
}

// Usage is what tenant holds, in total and in each of regions, over its
// resources but the one whose key is skip.
func (c Counter) Usage(tenant, skip string, regions []string) (api.Quota, map[string]api.Quota) {
	var total api.Quota
	in := make(map[string]api.Quota, len(regions))
	for _, it := range c.Resources.ListPrefix(tenant + "/") {
		if it.Name == skip {
			continue
		}
		t, rs := c.Charge(it.Value, regions)
		total = total.Add(t)
		for region, c := range rs {
			in[region] = in[region].Add(c)
		}
	}
	return total, in
}

// Charge is what r counts against its tenant's quotas: in total, and in
// each of regions. A resource being deleted counts nothing (its deletion
// cannot be undone). A region gets its share of the static split of the
// regions the schedule names; where placement picks the regions, every
// region it may pick is charged all the replicas.
func (c Counter) Charge(r *api.Resource, regions []string) (api.Quota, map[string]api.Quota) {
	if r == nil || r.Deleting() {
		return api.Quota{}, nil
	}
	split, static := placement.StaticSplit(r)
	total := c.total(r, split, static)
	if len(regions) == 0 {
		return total, nil
	}
	in := map[string]api.Quota{}
	for _, region := range regions {
		n, named := split[region]
		switch {
		case static && named && (n > 0 || r.Kind == api.KindImage):
			in[region] = c.amount(r, region, n)
		case !static && (len(r.Schedule.Regions) == 0 || slices.ContainsFunc(r.Schedule.Regions, func(t api.RegionTarget) bool { return t.Name == region })):
			in[region] = c.amount(r, region, r.Replicas)
		}
	}
	return total, in
}

// total is r's amount over every region. A region's override may name
// a larger flavor: the total counts each region's own, or where the
// regions are placement's choice, the largest the replicas may get.
func (c Counter) total(r *api.Resource, split map[string]int, static bool) api.Quota {
	total := c.amount(r, "", r.Replicas)
	if len(r.Overrides) == 0 {
		return total
	}
	if static {
		total.VCPUs, total.MemoryMiB = 0, 0
		for region, n := range split {
			a := c.amount(r, region, n)
			total.VCPUs, total.MemoryMiB = total.VCPUs+a.VCPUs, total.MemoryMiB+a.MemoryMiB
		}
		return total
	}
	for region := range r.Overrides {
		a := c.amount(r, region, r.Replicas)
		total.VCPUs, total.MemoryMiB = max(total.VCPUs, a.VCPUs), max(total.MemoryMiB, a.MemoryMiB)
	}
	return total
}

// amount is one resource with n replicas in region ("" for its spec
// without overrides).
func (c Counter) amount(r *api.Resource, region string, n int) api.Quota {
	if j := r.Spec.Job; j != nil && n > 0 {
		// A Job's share runs up to parallelism attempts at once.
		n = max(j.Parallelism, 1)
	}
	a := api.Quota{Resources: 1, Replicas: n}
	if r.Kind == api.KindLoadbalancer {
		a.Loadbalancers = 1
	}
	if v := r.Spec.Volume; v != nil {
		a.VolumeGiB = int64(n) * ((v.SizeMiB + 1023) / 1024)
	}
	flavor := r.Spec.Flavor
	if o, ok := r.Overrides[region]; ok && o.Flavor != "" {
		flavor = o.Flavor
	}
	if it, ok := c.Flavors.Get(flavor); ok && flavor != "" {
		a.VCPUs = float64(n) * it.Value.Spec.VCPUs
		a.MemoryMiB = int64(n) * it.Value.Spec.MemoryMiB
	}
	return a
}

// NearFull names the first amount of use at or above fraction of its
// limit in q ("replicas 9 of 10"), or "" when none is. A zero limit bounds
// nothing.
func NearFull(q, use api.Quota, fraction float64) string {
	type amount struct {
		name       string
		limit, use float64
	}
	for _, a := range []amount{
		{"resources", float64(q.Resources), float64(use.Resources)},
		{"replicas", float64(q.Replicas), float64(use.Replicas)},
		{"vcpus", q.VCPUs, use.VCPUs},
		{"memoryMiB", float64(q.MemoryMiB), float64(use.MemoryMiB)},
		{"volumeGiB", float64(q.VolumeGiB), float64(use.VolumeGiB)},
		{"loadbalancers", float64(q.Loadbalancers), float64(use.Loadbalancers)},
	} {
		if a.limit > 0 && a.use >= fraction*a.limit {
			return fmt.Sprintf("%s %g of %g", a.name, a.use, a.limit)
		}
	}
	return ""
}
