package api

import (
	"slices"
	"time"
)

// Capacity is an amount of node resources.
type Capacity struct {
	MilliCPU  int64 `json:"milliCPU"`
	MemoryMiB int64 `json:"memoryMiB"`
	DiskMiB   int64 `json:"diskMiB,omitempty"`
}

// Add returns c + o.
func (c Capacity) Add(o Capacity) Capacity {
	return Capacity{c.MilliCPU + o.MilliCPU, c.MemoryMiB + o.MemoryMiB, c.DiskMiB + o.DiskMiB}
}

// Sub returns c - o.
func (c Capacity) Sub(o Capacity) Capacity {
	return Capacity{c.MilliCPU - o.MilliCPU, c.MemoryMiB - o.MemoryMiB, c.DiskMiB - o.DiskMiB}
}

// Fits reports whether o fits in c.
func (c Capacity) Fits(o Capacity) bool {
	return o.MilliCPU <= c.MilliCPU && o.MemoryMiB <= c.MemoryMiB && o.DiskMiB <= c.DiskMiB
}

// Capacity returns what a replica of this flavor takes.
func (f FlavorSpec) Capacity() Capacity {
	return Capacity{MilliCPU: f.MilliCPU(), MemoryMiB: f.MemoryMiB, DiskMiB: f.DiskMiB}
}

// NodeProvider is a provider running on a node.
type NodeProvider struct {
	Name    string         `json:"name"`
	Kinds   []ProviderKind `json:"kinds"`
	Version string         `json:"version,omitempty"`
	// Features are what the provider can do beyond a one-container
	// replica (FeaturePods, FeatureProbes), as it advertises them.
	Features []string `json:"features,omitempty"`
}

// The features a provider advertises and a replica may need.
const (
	// FeaturePods: several containers per replica side by side (the
	// spec's containers) and scratch volumes.
	FeaturePods = "pods"
	// FeatureInitContainers: init containers, run to completion before
	// the others.
	FeatureInitContainers = "initContainers"
	// FeatureProbes: startup, readiness and liveness probes.
	FeatureProbes = "probes"
)

// RequiredFeatures are the provider features a replica of spec needs:
// FeaturePods for containers beside the main one or scratch volumes,
// FeatureInitContainers for init containers, FeatureProbes for probes;
// nil for none.
func RequiredFeatures(spec *ResourceSpec) []string {
	c := spec.Compute
	if c == nil {
		return nil
	}
	var out []string
	if len(c.Containers) > 0 || len(c.ScratchVolumes) > 0 {
		out = append(out, FeaturePods)
	}
	if len(c.InitContainers) > 0 {
		out = append(out, FeatureInitContainers)
	}
	if c.HasProbes() {
		out = append(out, FeatureProbes)
	}
	return out
}

// ServesWith reports whether one of n's providers serves k and has
// feature.
func (n *Node) ServesWith(k ProviderKind, feature string) bool {
	for _, p := range n.Providers {
		if slices.Contains(p.Kinds, k) && slices.Contains(p.Features, feature) {
			return true
		}
	}
	return false
}

// Node is a machine with an agent, in one region.
type Node struct {
	Name   string            `json:"name"`
	Region string            `json:"region"`
	Zone   string            `json:"zone,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	// Address is the agent's NodeService gRPC address.
	Address   string         `json:"address,omitempty"`
	Providers []NodeProvider `json:"providers,omitempty"`
	Capacity  Capacity       `json:"capacity"`
	// Network is the node's place on the region network.
	Network *NodeNetwork `json:"network,omitempty"`

	// Schedulable is false while the node is cordoned.
	Schedulable  bool      `json:"schedulable"`
	CordonReason string    `json:"cordonReason,omitempty"`
	CordonedBy   string    `json:"cordonedBy,omitempty"`
	CordonedAt   time.Time `json:"cordonedAt,omitzero"`

	EnableAutoCordon   bool     `json:"enableAutoCordon,omitempty"`
	AutoCordonInterval Duration `json:"autoCordonInterval,omitzero"`
	EnableAutoDrain    bool     `json:"enableAutoDrain,omitempty"`
	AutoDrainInterval  Duration `json:"autoDrainInterval,omitzero"`
	EnableAlert        bool     `json:"enableAlert,omitempty"`

	AgentVersion    string    `json:"agentVersion,omitempty"`
	RegisteredAt    time.Time `json:"registeredAt,omitzero"`
	ResourceVersion int64     `json:"resourceVersion,omitempty"`

	Status *NodeStatus `json:"status,omitempty"`
}

// Serves reports whether a provider on the node serves kind k.
func (n *Node) Serves(k ProviderKind) bool {
	for _, p := range n.Providers {
		for _, pk := range p.Kinds {
			if pk == k {
				return true
			}
		}
	}
	return false
}

// ConditionStatus is the state of one node condition.
type ConditionStatus string

const (
	ConditionReady   ConditionStatus = "Ready"
	ConditionWarning ConditionStatus = "Warning"
	ConditionError   ConditionStatus = "Error"
)

// Well-known condition types; providers add "provider/<name>".
const (
	ConditionCRI = "CRI"
	ConditionCNI = "CNI"
	ConditionCSI = "CSI"
	// ConditionNetwork is the agent's data plane: the host programmed
	// for the region network (bridge, routes to other nodes, NAT).
	ConditionNetwork = "Network"
)

// Condition is one health aspect of a node.
type Condition struct {
	Type    string          `json:"type"`
	Status  ConditionStatus `json:"status"`
	Reason  string          `json:"reason,omitempty"`
	Message string          `json:"message,omitempty"`
	Since   time.Time       `json:"since,omitzero"`
}

// NodeStatus is the region's view of a node. Only transitions are written
// to etcd; heartbeats live in the heartbeat store.
type NodeStatus struct {
	Health        Health       `json:"health"`
	Reason        string       `json:"reason,omitempty"`
	Since         time.Time    `json:"since,omitzero"`
	Conditions    []Condition  `json:"conditions,omitempty"`
	LastHeartbeat time.Time    `json:"lastHeartbeat,omitzero"`
	Allocated     Capacity     `json:"allocated"`
	Replicas      int          `json:"replicas"`
	Drain         *DrainStatus `json:"drain,omitempty"`
}

// Condition returns the condition of type t, if reported.
func (s *NodeStatus) Condition(t string) (Condition, bool) {
	if s == nil {
		return Condition{}, false
	}
	for _, c := range s.Conditions {
		if c.Type == t {
			return c, true
		}
	}
	return Condition{}, false
}

// WorstCondition returns Error if any condition is in Error, else Warning
// if any is, else Ready.
func WorstCondition(cs []Condition) ConditionStatus {
	worst := ConditionReady
	for _, c := range cs {
		switch c.Status {
		case ConditionError:
			return ConditionError
		case ConditionWarning:
			worst = ConditionWarning
		}
	}
	return worst
}

// DrainRequest asks a region to empty a node.
type DrainRequest struct {
	// Deadline bounds the drain; past it, the remaining replicas are
	// stopped without waiting for their replacements.
	Deadline    Duration `json:"deadline,omitzero"`
	MaxParallel int      `json:"maxParallel,omitempty"`
	Reason      string   `json:"reason,omitempty"`
}

// Drain states.
const (
	DrainRunning   = "running"
	DrainSucceeded = "succeeded"
	DrainFailed    = "failed"
	DrainCancelled = "cancelled"
)

// DrainStatus is the progress of a drain.
type DrainStatus struct {
	Node        string      `json:"node"`
	State       string      `json:"state"`
	Reason      string      `json:"reason,omitempty"`
	StartedAt   time.Time   `json:"startedAt"`
	Deadline    time.Time   `json:"deadline"`
	FinishedAt  time.Time   `json:"finishedAt,omitzero"`
	MaxParallel int         `json:"maxParallel"`
	Total       int         `json:"total"`
	Moved       int         `json:"moved"`
	Remaining   int         `json:"remaining"`
	Failed      int         `json:"failed"`
	Message     string      `json:"message,omitempty"`
	Steps       []DrainStep `json:"steps,omitempty"`
}

// Done reports whether the drain has finished.
func (d *DrainStatus) Done() bool { return d != nil && d.State != DrainRunning }

// DrainStep is one replica moved by a drain.
type DrainStep struct {
	Replica  string    `json:"replica"`
	Resource string    `json:"resource"`
	To       string    `json:"to,omitempty"`
	State    string    `json:"state"`
	Message  string    `json:"message,omitempty"`
	At       time.Time `json:"at"`
}

// GetResourceVersion is the version the REST edge sends as the ETag (the
// region's store's).
func (n Node) GetResourceVersion() int64 { return n.ResourceVersion }
