package controller

import (
	"reflect"
	"sort"

	"github.com/stratahq/strata/internal/api"
)

// Load balancers follow the seed's endpoint package: the region keeps, for
// every load balancer, the addresses of the ready replicas its selector
// picks (compute resources of the same tenant in this region whose labels
// match), and pushes changes to the agents running it as a new generation
// of their assignments. The HAProxy provider turns a new generation into
// runtime API calls, without a reload.

// endpoints owns the load balancers' backends: what each balancer's
// replicas are given.
type endpoints struct {
	o     *Options
	index *index
}

// backends are the backends of load balancer pl: the ready, addressed
// replicas of the compute resources its selector matches, sorted.
func (ep *endpoints) backends(pl *api.Placement) []api.Endpoint {
	lb := pl.Resource.Spec.Loadbalancer
	if lb == nil || len(lb.Selector) == 0 {
		return nil
	}
	sel := api.SelectorFromMap(lb.Selector)
	var out []api.Endpoint
	for _, it := range ep.o.Caches.Placements.ListPrefix(pl.Resource.Tenant + "/") {
		r := &it.Value.Resource
		if r.Kind != api.KindCompute || r.Deleting() || !sel.Matches(r.Labels) {
			continue
		}
		for _, id := range ep.index.ofResource(it.Name) {
			if addr := ep.backendAddress(id, r.UID); addr != "" {
				out = append(out, api.Endpoint{Replica: id, Address: addr})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Replica < out[j].Replica })
	return out
}

// backendAddress is the address of replica id of the resource uid when it
// runs ready on its node: what its agent reports, else what IPAM gave it;
// "" when it is no backend.
func (ep *endpoints) backendAddress(id, uid string) string {
	a, ok := ep.o.Caches.Assignments.Get(id)
	if !ok || a.Value.Desired != api.DesiredRunning || a.Value.ResourceUID != uid {
		return ""
	}
	st, ok := ep.o.Caches.Statuses.Get(id)
	if !ok || st.Value.Phase != api.PhaseReady || st.Value.Node != a.Value.Node {
		return ""
	}
	if st.Value.Address == "" && a.Value.Network != nil {
		return a.Value.Network.Address
	}
	return st.Value.Address
}

// update gives every running replica of a load balancer the
// current backends, as a new generation when they changed.
func (ep *endpoints) update(p *plan, key string, pl *api.Placement, live []*replica) {
	if pl.Resource.Kind != api.KindLoadbalancer {
		return
	}
	eps := ep.backends(pl)
	for _, r := range live {
		if r.a.Desired != api.DesiredRunning || reflect.DeepEqual(r.a.Endpoints, eps) {
			continue
		}
		if len(r.a.Endpoints) == 0 && len(eps) == 0 {
			continue
		}
		a := *r.a
		a.Endpoints = eps
		if r.modRev == 0 {
			r.a = &a // a new replica: created with them
			continue
		}
		a.Generation++
		p.updateAssignment(key, &a, r.modRev)
		r.a = &a
	}
}
