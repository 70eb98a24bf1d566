package controller

import (
	"reflect"
	"sort"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
)

// Load balancers follow the seed's endpoint package: the region keeps, for
// every load balancer, the addresses of the ready replicas its selector
// picks (compute resources of the same tenant in this region whose labels
// match), and pushes changes to the agents running it as a new generation
// of their assignments. The HAProxy provider turns a new generation into
// runtime API calls, without a reload.

// watchEndpoints marks every load balancer dirty when a replica's status
// or a placement changes, since that can change some balancer's backends.
func (c *Controller) watchEndpoints() {
	c.o.Caches.StatusFeed.Subscribe(func([]store.Change[api.AssignmentStatus]) { c.markBalancers() })
	c.o.Caches.AssignmentFeed.Subscribe(func([]store.Change[api.Assignment]) { c.markBalancers() })
	c.o.Caches.PlacementFeed.Subscribe(func(changes []store.Change[api.Placement]) {
		c.balancersMu.Lock()
		for _, ch := range changes {
			if ch.New != nil && ch.New.Value.Resource.Kind == api.KindLoadbalancer {
				c.balancers[ch.Name] = struct{}{}
			} else {
				delete(c.balancers, ch.Name)
			}
		}
		c.balancersMu.Unlock()
		c.markBalancers()
	})
}

func (c *Controller) markBalancers() {
	c.balancersMu.Lock()
	keys := make([]string, 0, len(c.balancers))
	for key := range c.balancers {
		keys = append(keys, key)
	}
	c.balancersMu.Unlock()
	if len(keys) > 0 {
		c.dirty.Mark(keys...)
	}
}

// endpoints are the backends of load balancer pl: the ready, addressed
// replicas of the compute resources its selector matches, sorted.
func (c *Controller) endpoints(pl *api.Placement) []api.Endpoint {
	lb := pl.Resource.Spec.Loadbalancer
	if lb == nil || len(lb.Selector) == 0 {
		return nil
	}
	sel := api.SelectorFromMap(lb.Selector)
	var out []api.Endpoint
	for _, it := range c.o.Caches.Placements.ListPrefix(pl.Resource.Tenant + "/") {
		r := &it.Value.Resource
		if r.Kind != api.KindCompute || r.Deleting() || !sel.Matches(r.Labels) {
			continue
		}
		for _, id := range c.index.ofResource(it.Name) {
			if addr := c.backendAddress(id, r.UID); addr != "" {
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
func (c *Controller) backendAddress(id, uid string) string {
	a, ok := c.o.Caches.Assignments.Get(id)
	if !ok || a.Value.Desired != api.DesiredRunning || a.Value.ResourceUID != uid {
		return ""
	}
	st, ok := c.o.Caches.Statuses.Get(id)
	if !ok || st.Value.Phase != api.PhaseReady || st.Value.Node != a.Value.Node {
		return ""
	}
	if st.Value.Address == "" && a.Value.Network != nil {
		return a.Value.Network.Address
	}
	return st.Value.Address
}

// updateEndpoints gives every running replica of a load balancer the
// current backends, as a new generation when they changed.
func (c *Controller) updateEndpoints(p *plan, key string, pl *api.Placement, live []*replica) {
	if pl.Resource.Kind != api.KindLoadbalancer {
		return
	}
	eps := c.endpoints(pl)
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
