package api

import "time"

// Health is the liveness of a node or a region, as its monitor sees it.
type Health string

const (
	HealthUnknown Health = "Unknown"
	HealthUp      Health = "Up"
	HealthSuspect Health = "Suspect"
	HealthDown    Health = "Down"
)

// Region is one independent region known to the global tier.
type Region struct {
	Name string `json:"name"`
	// Endpoint is the region's gRPC address (RegionService).
	Endpoint string `json:"endpoint"`
	// ConsoleURL is the region's operator console.
	ConsoleURL      string            `json:"consoleURL,omitempty"`
	Zones           []string          `json:"zones,omitempty"`
	Labels          map[string]string `json:"labels,omitempty"`
	RegisteredAt    time.Time         `json:"registeredAt,omitzero"`
	ResourceVersion int64             `json:"resourceVersion,omitempty"`
	Status          *RegionStatus     `json:"status,omitempty"`
}

// RegionStatus is the global monitor's view of a region.
type RegionStatus struct {
	Health        Health    `json:"health"`
	Reason        string    `json:"reason,omitempty"`
	Since         time.Time `json:"since,omitzero"`
	LastHeartbeat time.Time `json:"lastHeartbeat,omitzero"`
	Leader        string    `json:"leader,omitempty"`
	Nodes         int       `json:"nodes"`
	NodesUp       int       `json:"nodesUp"`
	Resources     int       `json:"resources"`
	Replicas      int       `json:"replicas"`
	Ready         int       `json:"ready"`
	// Headroom is how many more replicas of each flavor of the global
	// catalog the region's nodes hold now, in all and per zone: its
	// free capacity, as of its last heartbeat.
	Headroom []FlavorHeadroom `json:"headroom,omitempty"`
	// Load is what the region's replicas use, per resource, as of its
	// last heartbeat: the autoscaler's input, shown per resource in its
	// status.autoscale rather than here.
	Load []ResourceLoad `json:"-"`
}

// FlavorHeadroom is how many more replicas of one flavor fit on a
// region's schedulable nodes (Up, not cordoned, no condition in Error,
// serving the flavor's kind) by CPU, memory, disk and free addresses,
// as if each node took only that flavor. It is coarse: a resource's own
// node selector, zones and anti-affinity may fit fewer.
type FlavorHeadroom struct {
	Flavor   string `json:"flavor"`
	Replicas int    `json:"replicas"`
	// Zones splits Replicas by the nodes' zones ("" for nodes without
	// one).
	Zones map[string]int `json:"zones,omitempty"`
}

// Placement is the global master's instruction to one region: run this
// resource here, with this share of its replicas. The region stores it
// and reconciles towards it even when the global tier is unreachable.
type Placement struct {
	Region string `json:"region"`
	// Resource has the region's overrides applied and Replicas set to the
	// region's share.
	Resource Resource `json:"resource"`
	// Flavor and Image are resolved by the global tier, so that a region
	// needs no global catalog.
	Flavor *Flavor    `json:"flavor,omitempty"`
	Image  *ImageSpec `json:"image,omitempty"`
	// Epoch is the propagating master's election revision: a region
	// refuses placements from an older master than one it has heard from.
	Epoch int64 `json:"epoch,omitempty"`
	// FailoverFrom names the region this placement stands in for.
	FailoverFrom string    `json:"failoverFrom,omitempty"`
	UpdatedAt    time.Time `json:"updatedAt,omitzero"`
}

// Key is tenant/name.
func (p *Placement) Key() string { return p.Resource.Key() }

// GetResourceVersion is the version the REST edge sends as the ETag.
func (r Region) GetResourceVersion() int64 { return r.ResourceVersion }
