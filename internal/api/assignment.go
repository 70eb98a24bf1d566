package api

import (
	"slices"
	"strings"
	"time"
)

// Desired says whether an assignment's replica should exist.
type Desired string

const (
	DesiredRunning   Desired = "running"
	DesiredDestroyed Desired = "destroyed"
)

// Assignment (ResourceAssignment in the seeds) is one replica of a
// resource placed on one node. The region controller writes it; the agent
// on its node makes it real and reports an AssignmentStatus.
type Assignment struct {
	ID          string            `json:"id"`
	Tenant      string            `json:"tenant"`
	Resource    string            `json:"resource"`
	ResourceUID string            `json:"resourceUID"`
	Kind        ResourceKind      `json:"kind"`
	Provider    ProviderKind      `json:"provider"`
	Revision    int64             `json:"revision"`
	Labels      map[string]string `json:"labels,omitempty"`
	// Node is empty until the scheduler places the replica.
	Node    string  `json:"node,omitempty"`
	Desired Desired `json:"desired"`
	// Spec is resolved: region overrides applied.
	Spec      ResourceSpec       `json:"spec"`
	Flavor    FlavorSpec         `json:"flavor"`
	Image     *ImageSpec         `json:"image,omitempty"`
	Volumes   []VolumeAttachment `json:"volumes,omitempty"`
	Network   *NetworkAttachment `json:"network,omitempty"`
	Endpoints []Endpoint         `json:"endpoints,omitempty"`
	// Generation changes whenever the agent has something new to do.
	Generation int64     `json:"generation"`
	CreatedAt  time.Time `json:"createdAt"`
	// Reason says why the replica exists or why it is not placed
	// ("unschedulable: 3 nodes cordoned, 2 nodes lack memory").
	Reason string `json:"reason,omitempty"`
	// Replaces names a replica this one replaces (drain, reschedule).
	Replaces string `json:"replaces,omitempty"`
	// ScheduledAt is when the replica was placed; its provision deadline
	// counts from there.
	ScheduledAt time.Time `json:"scheduledAt,omitzero"`
	// DestroyRequestedAt is when Desired became destroyed; its destroy
	// deadline counts from there.
	DestroyRequestedAt time.Time `json:"destroyRequestedAt,omitzero"`
	// ExitedAt is set by the region once a Job's attempt has exited: it
	// runs no more and takes no CPU or memory from its node (its stopped
	// container, and its address, stay until its TTL).
	ExitedAt time.Time `json:"exitedAt,omitzero"`
}

// ResourceKey is tenant/resource.
func (a *Assignment) ResourceKey() string { return a.Tenant + "/" + a.Resource }

// VolumeAttachment mounts a local volume into a replica.
type VolumeAttachment struct {
	Name string `json:"name"`
	// VolumeID is the assignment ID of the Volume resource's replica,
	// which names the volume on the node.
	VolumeID string       `json:"volumeID"`
	Path     string       `json:"path"`
	ReadOnly bool         `json:"readOnly,omitempty"`
	Format   VolumeFormat `json:"format,omitempty"`
	SizeMiB  int64        `json:"sizeMiB,omitempty"`
}

// NetworkAttachment is a replica's address on a region network: Subnet
// is its node's block, Gateway the block's first address, Bridge and MTU
// what the node's host uses.
type NetworkAttachment struct {
	Network string `json:"network"`
	Bridge  string `json:"bridge"`
	Subnet  string `json:"subnet"`
	Gateway string `json:"gateway"`
	Address string `json:"address"`
	// MTU of the replica's interface; 0 leaves the provider's default.
	MTU int `json:"mtu,omitempty"`
	// DNS is the replica's resolver; nil leaves the provider's default
	// (the node's own resolv.conf).
	DNS *DNSConfig `json:"dns,omitempty"`
}

// DNSConfig is the resolver a replica gets (its resolv.conf): set by the agent when the node serves names.
type DNSConfig struct {
	Nameservers []string `json:"nameservers,omitempty"`
	Search      []string `json:"search,omitempty"`
	Options     []string `json:"options,omitempty"`
}

// ResolvConf renders it as a resolv.conf file ("nameserver X" lines, one "search a b" line, one "options x y" line), ending with a newline.
// Empty lists give no line; a nil or empty config gives a lone newline.
func (d *DNSConfig) ResolvConf() string {
	var b strings.Builder
	if d != nil {
		for _, ns := range d.Nameservers {
			b.WriteString("nameserver " + ns + "\n")
		}
		if len(d.Search) > 0 {
			b.WriteString("search " + strings.Join(d.Search, " ") + "\n")
		}
		if len(d.Options) > 0 {
			b.WriteString("options " + strings.Join(d.Options, " ") + "\n")
		}
	}
	if b.Len() == 0 {
		return "\n"
	}
	return b.String()
}

// Endpoint is a backend of a load balancer: a ready replica's address.
type Endpoint struct {
	Replica string `json:"replica"`
	Address string `json:"address"`
	Port    int    `json:"port,omitempty"`
}

// AssignmentStatus is what the agent observed of a replica.
type AssignmentStatus struct {
	ID                 string          `json:"id"`
	Node               string          `json:"node"`
	ObservedGeneration int64           `json:"observedGeneration"`
	Phase              Phase           `json:"phase"`
	Reason             string          `json:"reason,omitempty"`
	Since              time.Time       `json:"since,omitzero"`
	UpdatedAt          time.Time       `json:"updatedAt,omitzero"`
	ProviderID         string          `json:"providerID,omitempty"`
	Address            string          `json:"address,omitempty"`
	ExitCode           *int32          `json:"exitCode,omitempty"`
	Restarts           int             `json:"restarts,omitempty"`
	Backends           []BackendStatus `json:"backends,omitempty"`
	// Containers are the states of a container replica's containers,
	// init containers first, as ComputeSpec.ContainerNames orders them
	// (empty from providers that do not report them).
	Containers []ContainerStatus `json:"containers,omitempty"`
}

// ContainerState is where a container of a replica is in its life.
type ContainerState string

const (
	// ContainerWaiting: not started yet (an init container ahead of it
	// runs, its image is fetched) or waiting out its back-off.
	ContainerWaiting ContainerState = "waiting"
	ContainerRunning ContainerState = "running"
	// ContainerTerminated: exited and not to be started again (an init
	// container that succeeded, a container whose policy is never).
	ContainerTerminated ContainerState = "terminated"
)

// The reasons a container status gives, Kubernetes' where they exist.
const (
	ReasonCrashLoopBackOff = "CrashLoopBackOff"
	ReasonOOMKilled        = "OOMKilled"
	ReasonError            = "Error"
	ReasonCompleted        = "Completed"
	// ReasonUnhealthy: restarted because its liveness (or startup)
	// probe failed.
	ReasonUnhealthy = "Unhealthy"
)

// ContainerStatus is one container of a replica as its node sees it.
type ContainerStatus struct {
	Name  string         `json:"name"`
	State ContainerState `json:"state"`
	// Ready: running, and its readiness probe (if any) passes.
	Ready bool `json:"ready"`
	// Restarts counts the starts after the first.
	Restarts int `json:"restarts,omitempty"`
	// ExitCode and Reason are of its last exit (Reason also says why it
	// waits: CrashLoopBackOff); Message says more, in words
	// ("back-off 40s restarting failed container web (liveness probe
	// failed: …)", "HTTP probe failed with statuscode: 500").
	ExitCode  *int32    `json:"exitCode,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	Message   string    `json:"message,omitempty"`
	StartedAt time.Time `json:"startedAt,omitzero"`
	// NextStartAt is when a container waiting in CrashLoopBackOff starts
	// again: a moment, not a countdown, so that a status read later
	// still says the truth (the CLI and the consoles show "next start in
	// 12s" from it).
	NextStartAt time.Time `json:"nextStartAt,omitzero"`
}

// Clone returns a copy of s that shares nothing with it.
func (s AssignmentStatus) Clone() AssignmentStatus {
	s.Backends = slices.Clone(s.Backends)
	s.Containers = slices.Clone(s.Containers)
	for i := range s.Containers {
		if c := s.Containers[i].ExitCode; c != nil {
			code := *c
			s.Containers[i].ExitCode = &code
		}
	}
	if s.ExitCode != nil {
		code := *s.ExitCode
		s.ExitCode = &code
	}
	return s
}

// Replica is an assignment with its status, as the API shows it.
type Replica struct {
	Assignment
	Region string            `json:"region,omitempty"`
	Phase  Phase             `json:"phase"`
	Status *AssignmentStatus `json:"status,omitempty"`
}
