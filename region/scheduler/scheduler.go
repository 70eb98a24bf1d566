// Package scheduler decides which node each replica goes to. It is pure:
// a Snapshot of nodes and what they hold goes in, decisions come out, and
// the snapshot's accounting follows the decisions so that one batch never
// overbooks a node. The controller owns writing the decisions.
//
// A placement passes every filter, then the best score wins:
//
//	filters: provider kind served, node Up, schedulable (not cordoned), no
//	condition in Error, free capacity, node selector, availability zones,
//	pinned node (a replica goes where its local volume is), hard
//	anti-affinity
//
//	scores: least allocated (default) or bin-packing, soft anti-affinity,
//	spread across zones
package scheduler

import (
	"fmt"
	"sort"
	"strings"

	"github.com/stratahq/strata/internal/api"
)

// NodeInfo is one node as the scheduler sees it.
type NodeInfo struct {
	Node      *api.Node
	Health    api.Health
	Errored   bool // a condition is in Error
	Allocated api.Capacity
	// Placed counts replicas per resource key (tenant/name) on the node.
	Placed map[string]int
}

func (n *NodeInfo) free() api.Capacity { return n.Node.Capacity.Sub(n.Allocated) }

// Snapshot is the state a batch of placements is decided against.
type Snapshot struct {
	nodes []*NodeInfo
	// zoneCount[resource][zone] counts a resource's replicas per zone.
	zoneCount map[string]map[string]int
}

// NewSnapshot builds a snapshot. NodeInfos are owned by the snapshot
// from then on: Place updates their accounting.
func NewSnapshot(nodes []*NodeInfo) *Snapshot {
	s := &Snapshot{nodes: nodes, zoneCount: map[string]map[string]int{}}
	sort.Slice(s.nodes, func(i, j int) bool { return s.nodes[i].Node.Name < s.nodes[j].Node.Name })
	for _, n := range nodes {
		if n.Placed == nil {
			n.Placed = map[string]int{}
		}
		for res, c := range n.Placed {
			s.addZone(res, n.Node.Zone, c)
		}
	}
	return s
}

func (s *Snapshot) addZone(res, zone string, c int) {
	m := s.zoneCount[res]
	if m == nil {
		m = map[string]int{}
		s.zoneCount[res] = m
	}
	m[zone] += c
}

// Len returns the number of nodes.
func (s *Snapshot) Len() int { return len(s.nodes) }

// Request is one replica to place.
type Request struct {
	// Resource is the replica's resource key (tenant/name).
	Resource string
	Provider api.ProviderKind
	Need     api.Capacity
	Rule     api.ScheduleRule
	// Pin is the node the replica must go to (its local volume is there).
	Pin string
	// Avoid is a node the replica must not go to (the one it leaves).
	Avoid string
}

// Decision is where a request goes; Node is empty when no node fits, and
// Reason then says which filters rejected how many nodes.
type Decision struct {
	Node   string
	Reason string
}

// Filter reasons, in the order filters run.
const (
	reasonProvider     = "does not serve the provider kind"
	reasonDown         = "not Up"
	reasonCordoned     = "cordoned"
	reasonCondition    = "a condition in Error"
	reasonPin          = "not the node holding its volume"
	reasonAvoid        = "the node it leaves"
	reasonSelector     = "node selector mismatch"
	reasonZone         = "outside the allowed zones"
	reasonAntiAffinity = "already running a replica (hard anti-affinity)"
	reasonCPU          = "insufficient cpu"
	reasonMemory       = "insufficient memory"
	reasonDisk         = "insufficient disk"
)

var reasonOrder = []string{reasonProvider, reasonDown, reasonCordoned, reasonCondition, reasonPin, reasonAvoid,
	reasonSelector, reasonZone, reasonAntiAffinity, reasonCPU, reasonMemory, reasonDisk}

// filter returns "" when n may take r, else the first reason it may not.
func filter(n *NodeInfo, r *Request) string {
	node := n.Node
	switch {
	case !node.Serves(r.Provider):
		return reasonProvider
	case n.Health != api.HealthUp:
		return reasonDown
	case !node.Schedulable:
		return reasonCordoned
	case n.Errored:
		return reasonCondition
	case r.Pin != "" && node.Name != r.Pin:
		return reasonPin
	case r.Avoid != "" && node.Name == r.Avoid:
		return reasonAvoid
	}
	for k, v := range r.Rule.NodeSelector {
		// A label asked with an empty value must still be there, as
		// with api.Selector's "k=".
		if lv, ok := node.Labels[k]; !ok || lv != v {
			return reasonSelector
		}
	}
	if len(r.Rule.Zones) > 0 && !contains(r.Rule.Zones, node.Zone) {
		return reasonZone
	}
	if r.Rule.AntiAffinity == "hard" && n.Placed[r.Resource] > 0 {
		return reasonAntiAffinity
	}
	free := n.free()
	switch {
	case r.Need.MilliCPU > free.MilliCPU:
		return reasonCPU
	case r.Need.MemoryMiB > free.MemoryMiB:
		return reasonMemory
	case r.Need.DiskMiB > free.DiskMiB:
		return reasonDisk
	}
	return ""
}

// score rates a feasible node for r; higher is better. Weights: zone
// spread and soft anti-affinity dominate the resource fit, which breaks
// ties between equally spread nodes.
func (s *Snapshot) score(n *NodeInfo, r *Request) float64 {
	capa := n.Node.Capacity
	after := n.Allocated.Add(r.Need)
	util := (ratio(after.MilliCPU, capa.MilliCPU) + ratio(after.MemoryMiB, capa.MemoryMiB)) / 2
	fit := 1 - util // least allocated
	if r.Rule.Strategy == "binpack" {
		fit = util
	}
	score := fit * 10
	if r.Rule.AntiAffinity != "" {
		score -= 100 * float64(n.Placed[r.Resource])
	}
	// Spread over zones: prefer the zone with the fewest replicas of
	// this resource.
	score -= 50 * float64(s.zoneCount[r.Resource][n.Node.Zone])
	return score
}

func ratio(a, b int64) float64 {
	if b <= 0 {
		return 1
	}
	return float64(a) / float64(b)
}

// Place decides every request in order and books each decision in the
// snapshot before deciding the next, so a batch never overbooks a node
// and replicas of one resource spread over the batch.
func (s *Snapshot) Place(reqs []Request) []Decision {
	out := make([]Decision, len(reqs))
	for i := range reqs {
		out[i] = s.placeOne(&reqs[i])
	}
	return out
}

func (s *Snapshot) placeOne(r *Request) Decision {
	var best *NodeInfo
	bestScore := 0.0
	var rejected map[string]int
	for _, n := range s.nodes {
		if why := filter(n, r); why != "" {
			if rejected == nil {
				rejected = map[string]int{}
			}
			rejected[why]++
			continue
		}
		sc := s.score(n, r)
		if best == nil || sc > bestScore {
			best, bestScore = n, sc
		}
	}
	if best == nil {
		return Decision{Reason: unschedulable(len(s.nodes), rejected)}
	}
	s.book(best, r)
	return Decision{Node: best.Node.Name}
}

func (s *Snapshot) book(n *NodeInfo, r *Request) {
	n.Allocated = n.Allocated.Add(r.Need)
	n.Placed[r.Resource]++
	s.addZone(r.Resource, n.Node.Zone, 1)
}

// Release returns a replica's share of a node to the snapshot (a replica
// destroyed in the same pass).
func (s *Snapshot) Release(node, resource string, need api.Capacity) {
	for _, n := range s.nodes {
		if n.Node.Name != node {
			continue
		}
		n.Allocated = n.Allocated.Sub(need)
		if n.Placed[resource] > 0 {
			n.Placed[resource]--
			s.addZone(resource, n.Node.Zone, -1)
		}
		return
	}
}

// unschedulable says which filters rejected how many nodes:
// "0/12 nodes fit: 3 cordoned, 9 insufficient memory".
func unschedulable(total int, rejected map[string]int) string {
	if total == 0 {
		return "no nodes in the region"
	}
	parts := make([]string, 0, len(rejected))
	for _, why := range reasonOrder {
		if c := rejected[why]; c > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c, why))
		}
	}
	return fmt.Sprintf("0/%d nodes fit: %s", total, strings.Join(parts, ", "))
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
