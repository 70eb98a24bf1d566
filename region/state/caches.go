package state

import (
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
)

// Caches are the in-memory copies of a region's collections, shared by
// every component of one region process (API, controller, monitor): one
// list and one watch over the whole region, however many readers.
//
// One watch feeds every cache (Watch), so they move together: once one
// cache holds revision R, the others hold it as soon as the watch's batch
// in hand is delivered, with no etcd round trip. A reader acting on one
// cache's newest change (the controller on a placement) sees nodes,
// drains and networks at least as new without asking etcd.
type Caches struct {
	// CacheSet runs them, waits for them and checks them together.
	store.CacheSet
	// Watch feeds every cache below.
	Watch *store.SharedWatch

	Placements  *store.Cache[api.Placement]
	Shares      *store.Cache[Share]
	Assignments *store.Cache[api.Assignment]
	Statuses    *store.Cache[api.AssignmentStatus]
	Nodes       *store.Cache[api.Node]
	NodeStatus  *store.Cache[api.NodeStatus]
	Drains      *store.Cache[api.DrainStatus]
	Networks    *store.Cache[api.Network]
	Ports       *store.Cache[api.Port]
	Blocks      *store.Cache[api.Block]
	Policies    *store.Cache[api.NetworkPolicy]
	Meta        *store.Cache[Epoch]

	// Feeds deliver each cache's changes to subscribers.
	PlacementFeed  store.Feed[api.Placement]
	ShareFeed      store.Feed[Share]
	AssignmentFeed store.Feed[api.Assignment]
	StatusFeed     store.Feed[api.AssignmentStatus]
	NodeFeed       store.Feed[api.Node]
	NodeStatusFeed store.Feed[api.NodeStatus]
	DrainFeed      store.Feed[api.DrainStatus]
	PolicyFeed     store.Feed[api.NetworkPolicy]
}

// NewCaches returns the caches of st; Run fills them.
func NewCaches(st *State) *Caches {
	c := &Caches{Watch: store.NewSharedWatch(st.Store, "")}
	w := store.WithSharedWatch(c.Watch)
	c.Placements = store.NewCache(st.Placements, w, store.WithOnChange(c.PlacementFeed.Publish), store.WithCompact(compactPlacement))
	c.Shares = store.NewCache(st.Shares, w, store.WithOnChange(c.ShareFeed.Publish))
	c.Assignments = store.NewCache(st.Assignments, w, store.WithOnChange(c.AssignmentFeed.Publish),
		store.WithIndex(AssignmentsByNode, assignmentNode), store.WithIndex(AssignmentsByTenant, assignmentTenant),
		store.WithCompact(compactAssignment))
	c.Statuses = store.NewCache(st.Statuses, w, store.WithOnChange(c.StatusFeed.Publish), store.WithCompact(compactStatus))
	c.Nodes = store.NewCache(st.Nodes, w, store.WithOnChange(c.NodeFeed.Publish))
	c.NodeStatus = store.NewCache(st.NodeStatus, w, store.WithOnChange(c.NodeStatusFeed.Publish))
	c.Drains = store.NewCache(st.Drains, w, store.WithOnChange(c.DrainFeed.Publish))
	c.Networks = store.NewCache(st.Networks, w)
	c.Ports = store.NewCache(st.Ports, w, store.WithCompact(compactPort))
	c.Blocks = store.NewCache(st.Blocks, w, store.WithIndex(BlocksByNode, blockNode))
	c.Policies = store.NewCache(st.Policies, w, store.WithOnChange(c.PolicyFeed.Publish))
	c.Meta = store.NewCache(st.Meta, w)
	c.CacheSet = store.NewCacheSet("region", c.Watch)
	return c
}

// ReplicaPhase is the lifecycle phase of a replica, derived from what the
// controller asked (the assignment) and what the agent saw (its status).
// The controller never writes phases itself: they follow from these two.
func ReplicaPhase(a *api.Assignment, st *api.AssignmentStatus) api.Phase {
	if a.Desired == api.DesiredDestroyed {
		if st != nil && st.Phase == api.PhaseDestroyed {
			return api.PhaseDestroyed
		}
		return api.PhaseDestroy
	}
	if a.Node == "" || st == nil || st.Node != a.Node {
		return api.PhaseCreated
	}
	switch st.Phase {
	case api.PhaseDestroyed, api.PhaseDestroy, "":
		// The agent removed it (an orphan clean-up raced a new
		// assignment); it will apply it again.
		return api.PhaseCreated
	}
	// A ready replica stays ready while the agent applies a newer
	// generation: generations change in place only for load balancer
	// endpoints; a new revision is a new replica.
	return st.Phase
}

// Feed is the change feed of a cache (see store.Feed).
type Feed[T any] = store.Feed[T]

// DefaultNetwork returns the region's default network, if one is
// recorded.
func (c *Caches) DefaultNetwork() (*api.Network, bool) {
	for _, it := range c.Networks.List() {
		if it.Value.Default {
			return it.Value, true
		}
	}
	return nil, false
}

// Indexes of the Assignments cache: by node (placed replicas) and by
// tenant, so that what one node's host needs of the tenants it runs
// (the network stream's policy view) costs those tenants' replicas, not
// the region's.
const (
	AssignmentsByNode   = "node"
	AssignmentsByTenant = "tenant"
)

func assignmentNode(_ string, a *api.Assignment) []string {
	if a.Node == "" {
		return nil
	}
	return []string{a.Node}
}

func assignmentTenant(_ string, a *api.Assignment) []string { return []string{a.Tenant} }

// compactAssignment shares the strings that a region's replicas repeat:
// a resource's ten replicas name the same tenant, resource, flavor and
// image, a node's hundreds the same node, every replica the same network.
// Per-replica strings stay as decoded, but for the ID: the record's name,
// which the cache holds anyway. The replicas of one revision share one
// compute spec (see shared): nobody may change a cached assignment's
// Spec.Compute in place.
func compactAssignment(name string, a *api.Assignment) {
	shareName(&a.ID, name)
	for _, s := range []*string{&a.Tenant, &a.Resource, &a.ResourceUID, &a.Node, &a.Spec.Flavor} {
		store.Intern(s)
	}
	store.Intern(&a.Kind)
	store.Intern(&a.Provider)
	store.Intern(&a.Desired)
	rev := revisionKey{a.ResourceUID, a.Revision}
	a.Spec.Compute = shareCompute(rev, a.Spec.Compute)
	if a.Image != nil {
		a.Image = images.share(rev, a.Image)
	}
	if n := a.Network; n != nil {
		for _, s := range []*string{&n.Network, &n.Bridge, &n.Subnet, &n.Gateway} {
			store.Intern(s)
		}
	}
}

// shareCompute interns a compute spec's repeated strings and returns the
// one copy of it held for rev (see shared); nil stays nil.
func shareCompute(rev revisionKey, c *api.ComputeSpec) *api.ComputeSpec {
	if c == nil {
		return nil
	}
	store.Intern(&c.Image)
	store.Intern(&c.Network)
	store.Intern(&c.RestartPolicy)
	return computeSpecs.share(rev, c)
}

// compactPlacement shares what a placement repeats: its compute spec and
// resolved image are those of every replica of its revision (the
// controller copies them into each assignment it creates), so the
// placement holds the same copy as its replicas; its flavor is that of
// every placement naming it. Nobody may change a cached placement's
// Resource.Spec.Compute, Image or Flavor in place (see
// compactAssignment).
func compactPlacement(_ string, p *api.Placement) {
	r := &p.Resource
	for _, s := range []*string{&p.Region, &r.Tenant, &r.UID, &r.Spec.Flavor} {
		store.Intern(s)
	}
	store.Intern(&r.Kind)
	rev := revisionKey{r.UID, r.Revision}
	r.Spec.Compute = shareCompute(rev, r.Spec.Compute)
	if p.Image != nil {
		p.Image = images.share(rev, p.Image)
	}
	if f := p.Flavor; f != nil {
		store.Intern(&f.Name)
		store.Intern(&f.Kind)
		p.Flavor = flavors.share(revisionKey{f.Name, f.ResourceVersion}, f)
	}
}

// compactStatus shares a status's node and phase, and its ID with its
// record's name (see compactAssignment).
func compactStatus(name string, s *api.AssignmentStatus) {
	shareName(&s.ID, name)
	store.Intern(&s.Node)
	store.Intern(&s.Phase)
}

// compactPort shares a port's network name (see compactAssignment).
func compactPort(_ string, p *api.Port) { store.Intern(&p.Network) }

// shareName points *s at name's memory when they are equal: a record
// that repeats its name (an assignment's or a status's ID) then keeps one
// copy of it, the cache's key, not two (20,000 replicas: 1.3 MB).
func shareName(s *string, name string) {
	if *s == name {
		*s = name
	}
}

// BlocksByNode indexes the Blocks cache by the node holding each block:
// a registering node finds the block recorded for it without a look at
// the others.
const BlocksByNode = "node"

func blockNode(_ string, b *api.Block) []string { return []string{b.Node} }
