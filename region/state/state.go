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
//
// Placements, shares, assignments, astatus and ports, the objects written
// for every replica, are stored as protobuf (apiproto.StoreCodec), the
// others as JSON; both codecs read JSON, so a store written before the
// binary codec stays readable.
package state

import (
	"strings"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/proto/apiproto"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
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

// New returns the collections over s, writing binary values.
func New(s *store.Store) *State { return NewWriting(s, apiproto.FormatBinary) }

// NewWriting returns the collections over s; those with a binary codec
// write values in format f (FormatJSON during a rolling upgrade from a
// release that only reads JSON).
func NewWriting(s *store.Store, f apiproto.Format) *State {
	return &State{
		Store:       s,
		Placements:  store.NewCollection(s, "placements/", apiproto.StoreCodec(f, apiproto.PlacementToPB, apiproto.PlacementFromPB)),
		Shares:      store.NewCollection(s, "shares/", apiproto.StoreCodec(f, ShareToPB, ShareFromPB)),
		Assignments: store.NewCollection(s, "assignments/", apiproto.StoreCodec(f, apiproto.AssignmentToPB, apiproto.AssignmentFromPB)),
		Statuses:    store.NewCollection(s, "astatus/", apiproto.StoreCodec(f, apiproto.AssignmentStatusToPB, apiproto.AssignmentStatusFromPB)),
		Nodes:       store.NewCollection(s, "nodes/", store.JSON[api.Node]()),
		NodeStatus:  store.NewCollection(s, "nodestatus/", store.JSON[api.NodeStatus]()),
		Drains:      store.NewCollection(s, "drains/", store.JSON[api.DrainStatus]()),
		Networks:    store.NewCollection(s, "networks/", store.JSON[api.Network]()),
		Ports:       store.NewCollection(s, "ports/", apiproto.StoreCodec(f, apiproto.PortToPB, apiproto.PortFromPB)),
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

// ShareToPB converts a Share to the message RegionService.WatchShares
// sends, which is also how the region stores it; nil gives nil.
func ShareToPB(sh *Share) *regionv1.ShareEvent {
	if sh == nil {
		return nil
	}
	return &regionv1.ShareEvent{
		Tenant:   sh.Tenant,
		Name:     sh.Name,
		Uid:      sh.UID,
		Share:    apiproto.RegionShareToPB(&sh.RegionShare),
		Backends: apiproto.BackendStatusesToPB(sh.Backends),
	}
}

// ShareFromPB converts a ShareEvent (its removed mark aside) to a Share.
func ShareFromPB(p *regionv1.ShareEvent) Share {
	return Share{
		Tenant:      p.GetTenant(),
		Name:        p.GetName(),
		UID:         p.GetUid(),
		RegionShare: apiproto.RegionShareFromPB(p.GetShare()),
		Backends:    apiproto.BackendStatusesFromPB(p.GetBackends()),
	}
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
