// Package state is a region's view of its own etcd: one typed collection
// per kind of object, and the key layout in one place.
//
//	placements/<tenant>/<name>   api.Placement (desired state from the global tier)
//	shares/<tenant>/<name>       Share (the region's status of a resource; controller)
//	assignments/<id>             api.Assignment (a replica on a node; controller)
//	astatus/<id>                 api.AssignmentStatus (reported by the node's agent)
//	nodes/<name>                 api.Node (agent registration + operator fields)
//	nodestatus/<name>            api.NodeStatus (monitor; transitions only)
//	drains/<node>                api.DrainStatus
//	networks/<name>              api.Network
//	ports/<network>/<address>    api.Port (IPAM)
//	blocks/<network>/<a.b.c.d-n> api.Block (a node's block of a network)
//	policies/<tenant>/<name>     api.NetworkPolicy (from the global tier)
//	meta/epoch                   Epoch (newest global master seen)
//	election/                    the region controller election
package state

import (
	"strings"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
)

// ElectionPrefix is the controller election's prefix under the store prefix.
const ElectionPrefix = "election/"

// State holds the region collections.
type State struct {
	Store       *store.Store
	Placements  *store.Collection[api.Placement]
	Shares      *store.Collection[Share]
	Assignments *store.Collection[api.Assignment]
	Statuses    *store.Collection[api.AssignmentStatus]
	Nodes       *store.Collection[api.Node]
	NodeStatus  *store.Collection[api.NodeStatus]
	Drains      *store.Collection[api.DrainStatus]
	Networks    *store.Collection[api.Network]
	Ports       *store.Collection[api.Port]
	Blocks      *store.Collection[api.Block]
	Policies    *store.Collection[api.NetworkPolicy]
	Meta        *store.Collection[Epoch]
}

// New returns the collections over s.
func New(s *store.Store) *State {
	return &State{
		Store:       s,
		Placements:  store.NewCollection(s, "placements/", store.JSON[api.Placement]()),
		Shares:      store.NewCollection(s, "shares/", store.JSON[Share]()),
		Assignments: store.NewCollection(s, "assignments/", store.JSON[api.Assignment]()),
		Statuses:    store.NewCollection(s, "astatus/", store.JSON[api.AssignmentStatus]()),
		Nodes:       store.NewCollection(s, "nodes/", store.JSON[api.Node]()),
		NodeStatus:  store.NewCollection(s, "nodestatus/", store.JSON[api.NodeStatus]()),
		Drains:      store.NewCollection(s, "drains/", store.JSON[api.DrainStatus]()),
		Networks:    store.NewCollection(s, "networks/", store.JSON[api.Network]()),
		Ports:       store.NewCollection(s, "ports/", store.JSON[api.Port]()),
		Blocks:      store.NewCollection(s, "blocks/", store.JSON[api.Block]()),
		Policies:    store.NewCollection(s, "policies/", store.JSON[api.NetworkPolicy]()),
		Meta:        store.NewCollection(s, "meta/", store.JSON[Epoch]()),
	}
}

// Share is the region's status of one resource, as the global tier sees it
// through RegionService.WatchShares.
type Share struct {
	Tenant string `json:"tenant"`
	Name   string `json:"name"`
	UID    string `json:"uid"`
	api.RegionShare
	Backends []api.BackendStatus `json:"backends,omitempty"`
}

// Epoch is the election revision of the newest global master that has
// propagated to this region; placements from older masters are refused.
type Epoch struct {
	Epoch  int64  `json:"epoch"`
	Master string `json:"master,omitempty"`
}

// EpochName is the Meta name holding the Epoch.
const EpochName = "epoch"

// PortName is the Ports name of an address on a network.
func PortName(network, address string) string { return network + "/" + address }

// BlockName is the Blocks name of a block (CIDR) of a network; the CIDR's
// slash becomes a dash, so that a network's blocks are one level below it.
func BlockName(network, block string) string {
	return network + "/" + strings.Replace(block, "/", "-", 1)
}
