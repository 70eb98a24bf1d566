package api

import (
	"bytes"
	"encoding/json"
	"time"
)

// ResourceKind says what a resource is.
type ResourceKind string

const (
	KindCompute      ResourceKind = "Compute"
	KindVolume       ResourceKind = "Volume"
	KindImage        ResourceKind = "Image"
	KindLoadbalancer ResourceKind = "Loadbalancer"
)

// ResourceKinds lists the kinds Strata knows. New kinds (Configmap, Secret)
// are added here and in Resource.Validate.
var ResourceKinds = []ResourceKind{KindCompute, KindVolume, KindImage, KindLoadbalancer, KindJob}

// ProviderKind is what a provider serves on a node; an agent routes each
// assignment to the provider that serves its ProviderKind.
type ProviderKind string

const (
	ProviderContainer    ProviderKind = "container"
	ProviderVM           ProviderKind = "vm"
	ProviderLoadbalancer ProviderKind = "loadbalancer"
)

// ProviderKinds lists the provider kinds.
var ProviderKinds = []ProviderKind{ProviderContainer, ProviderVM, ProviderLoadbalancer}

// Flavor is a named size: how much of a node a replica takes.
type Flavor struct {
	Name      string       `json:"name"`
	Kind      ProviderKind `json:"kind"`
	Spec      FlavorSpec   `json:"spec"`
	CreatedAt time.Time    `json:"createdAt,omitzero"`
	UpdatedAt time.Time    `json:"updatedAt,omitzero"`
	// ResourceVersion is the store's modification revision; send it back
	// on update to make the write conditional.
	ResourceVersion int64 `json:"resourceVersion,omitempty"`
}

// FlavorSpec is the size of a replica.
type FlavorSpec struct {
	VCPUs     float64 `json:"vcpus"`
	MemoryMiB int64   `json:"memoryMiB"`
	DiskMiB   int64   `json:"diskMiB,omitempty"`
}

// MilliCPU returns the vCPUs in thousandths.
func (f FlavorSpec) MilliCPU() int64 { return int64(f.VCPUs*1000 + 0.5) }

// Resource is what a tenant asks for: a compute deployment, a volume, an
// image or a load balancer, placed in one or more regions.
type Resource struct {
	Name   string            `json:"name"`
	Tenant string            `json:"tenant,omitempty"`
	UID    string            `json:"uid,omitempty"`
	Kind   ResourceKind      `json:"kind"`
	Labels map[string]string `json:"labels,omitempty"`

	// Spec is what a revision snapshots; changing it makes a new revision.
	Spec ResourceSpec `json:"spec"`
	// Replicas is the total over every region. Scaling is not a new revision.
	Replicas int `json:"replicas"`
	// Schedule says where the replicas go.
	Schedule ScheduleRule `json:"schedule"`
	// Overrides change the spec in one region (keyed by region name).
	Overrides map[string]SpecOverride `json:"overrides,omitempty"`
	Failover  *FailoverPolicy         `json:"failover,omitempty"`
	Rollout   RolloutPolicy           `json:"rollout,omitzero"`
	// Autoscale hands Replicas to the global master, which sets it from
	// what the replicas use (autoscale.go); nil scales by hand only.
	Autoscale *AutoscalePolicy `json:"autoscale,omitempty"`
	// MaxRevisionHistory bounds the revisions kept (pinned ones excepted).
	MaxRevisionHistory int `json:"maxRevisionHistory,omitempty"`

	// Set by the server.
	Revision            int64      `json:"revision,omitempty"`
	Generation          int64      `json:"generation,omitempty"`
	CreatedAt           time.Time  `json:"createdAt,omitzero"`
	UpdatedAt           time.Time  `json:"updatedAt,omitzero"`
	DeletionRequestedAt *time.Time `json:"deletionRequestedAt,omitempty"`
	ResourceVersion     int64      `json:"resourceVersion,omitempty"`

	// Status is stored apart from the spec (the controller writes it, the
	// API writes the spec) and joined on read.
	Status *ResourceStatus `json:"status,omitempty"`
}

// Key is the resource's name within the store: tenant/name.
func (r *Resource) Key() string { return r.Tenant + "/" + r.Name }

// Deleting reports whether deletion was requested.
func (r *Resource) Deleting() bool { return r.DeletionRequestedAt != nil }

// Settable returns the part of r a client may set; everything else is
// the server's.
func (r *Resource) Settable() Resource {
	return Resource{
		Name: r.Name, Tenant: r.Tenant, Kind: r.Kind, Labels: r.Labels,
		Spec: r.Spec, Replicas: r.Replicas, Schedule: r.Schedule, Overrides: r.Overrides,
		Failover: r.Failover, Rollout: r.Rollout, Autoscale: r.Autoscale, MaxRevisionHistory: r.MaxRevisionHistory,
	}
}

// SameJSON compares two values by their JSON encoding, as storage and the
// wire see them: unlike reflect.DeepEqual it takes an empty map or list
// for an absent one, and ignores what JSON does not carry (time
// locations, monotonic readings), in which values read back from etcd or
// converted from protobuf differ.
func SameJSON(a, b any) bool {
	ja, erra := json.Marshal(a)
	jb, errb := json.Marshal(b)
	return erra == nil && errb == nil && bytes.Equal(ja, jb)
}

// ResourceSpec is the revisioned part of a resource. Exactly one of the
// kind sections is set, matching the resource's kind.
type ResourceSpec struct {
	Flavor       string            `json:"flavor,omitempty"`
	Compute      *ComputeSpec      `json:"compute,omitempty"`
	Volume       *VolumeSpec       `json:"volume,omitempty"`
	Image        *ImageSpec        `json:"image,omitempty"`
	Loadbalancer *LoadbalancerSpec `json:"loadbalancer,omitempty"`
	// Job is set, with Compute, on a Job.
	Job *JobSpec `json:"job,omitempty"`
}

// RestartPolicy says what happens when a container or VM exits.
type RestartPolicy string

const (
	RestartAlways    RestartPolicy = "always"
	RestartOnFailure RestartPolicy = "on-failure"
	RestartNever     RestartPolicy = "never"
)

// ComputeSpec is a container or a VM, depending on the flavor's kind.
type ComputeSpec struct {
	// Image names an Image resource of the same tenant, or (containers
	// only) an OCI reference to pull.
	Image      string            `json:"image"`
	Command    []string          `json:"command,omitempty"`
	Args       []string          `json:"args,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	WorkingDir string            `json:"workingDir,omitempty"`
	Ports      []PortSpec        `json:"ports,omitempty"`
	Volumes    []VolumeMount     `json:"volumes,omitempty"`
	// Network is the region network the replica gets its address on;
	// empty means the region's default network.
	Network         string        `json:"network,omitempty"`
	RestartPolicy   RestartPolicy `json:"restartPolicy,omitempty"`
	StopGracePeriod Duration      `json:"stopGracePeriod,omitzero"`
	// KernelArgs is appended to a VM's kernel command line.
	KernelArgs string `json:"kernelArgs,omitempty"`
	// Files mounts Configs and Secrets of the tenant as read-only files
	// (containers, and VMs through their config drive; see configdata.go).
	Files []FileMount `json:"files,omitempty"`
	// EnvFrom takes environment variables from Configs and Secrets.
	EnvFrom []EnvSource `json:"envFrom,omitempty"`
	// PullSecret names a registry Secret the image is pulled with.
	PullSecret string `json:"pullSecret,omitempty"`
	// ConfigVersions are the generations of the Configs and Secrets the
	// spec names ("config/NAME", "secret/NAME"), set by the server: a
	// change of one is a new revision, rolled out like any other.
	ConfigVersions map[string]int64 `json:"configVersions,omitempty"`
	// SecurityContext says which user a container runs as (containers
	// only: a VM's users are its guest's).
	SecurityContext *SecurityContext `json:"securityContext,omitempty"`

	// Probes check the main container (containers), or the guest from
	// the host (VMs: httpGet, tcpSocket and grpc to its address).
	Probes
	// InitContainers run one after another, each to completion, before
	// the main container and the others start (containers; see pod.go).
	InitContainers []Container `json:"initContainers,omitempty"`
	// Containers run beside the main one, in its network namespace.
	Containers []Container `json:"containers,omitempty"`
	// ScratchVolumes are empty directories made with the replica and
	// removed with it, which its containers mount by name.
	ScratchVolumes []ScratchVolume `json:"scratchVolumes,omitempty"`
}

// SecurityContext is the user a container's process runs as, with the
// names and meaning of Kubernetes' container securityContext. Without
// one, the process runs as the image's USER (root when the image sets
// none).
type SecurityContext struct {
	// RunAsUser is the process's uid, in place of the image's USER.
	RunAsUser *int64 `json:"runAsUser,omitempty"`
	// RunAsGroup is the process's primary gid, in place of the one of
	// the user (the image's USER group, else the user's in the image's
	// /etc/passwd, else 0).
	RunAsGroup *int64 `json:"runAsGroup,omitempty"`
	// RunAsNonRoot refuses to start the container when its process would
	// run as uid 0, whether runAsUser or the image says so: the replica
	// fails with the reason instead.
	RunAsNonRoot bool `json:"runAsNonRoot,omitempty"`
}

// MaxUserID bounds runAsUser and runAsGroup, as Kubernetes does.
const MaxUserID = 1<<31 - 1

// PortSpec publishes a port of a replica.
type PortSpec struct {
	Name          string `json:"name,omitempty"`
	ContainerPort int    `json:"containerPort"`
	HostPort      int    `json:"hostPort,omitempty"`
	Protocol      string `json:"protocol,omitempty"`
}

// VolumeMount mounts a Volume resource into a replica.
type VolumeMount struct {
	// Volume names a Volume resource; in a pod's other containers, one
	// the replica mounts. Scratch names one of the replica's
	// scratchVolumes instead (exactly one of the two is set).
	Volume   string `json:"volume,omitempty"`
	Scratch  string `json:"scratch,omitempty"`
	Path     string `json:"path"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// VolumeFormat is how a volume is stored on its node.
type VolumeFormat string

const (
	VolumeDir   VolumeFormat = "dir"
	VolumeQcow2 VolumeFormat = "qcow2"
	VolumeRaw   VolumeFormat = "raw"
)

// VolumeSpec is local storage on one node.
type VolumeSpec struct {
	SizeMiB int64        `json:"sizeMiB"`
	Format  VolumeFormat `json:"format,omitempty"`
	// Provider is the kind of compute that will mount it: container
	// (a directory) or vm (a disk in a storage pool).
	Provider ProviderKind `json:"provider,omitempty"`
}

// ImageSpec says where an image comes from. Agents fetch it lazily when a
// replica needs it, and cache it.
type ImageSpec struct {
	// Ref is the image's name in the runtime (an OCI reference such as
	// docker.io/library/busybox:latest); pulled from its registry unless
	// Archive is set.
	Ref string `json:"ref,omitempty"`
	// Archive is a path or http(s) URL of an OCI or Docker archive to
	// import (offline sites).
	Archive string `json:"archive,omitempty"`
	// Kernel, Initrd and Cmdline boot a VM directly.
	Kernel  string `json:"kernel,omitempty"`
	Initrd  string `json:"initrd,omitempty"`
	Cmdline string `json:"cmdline,omitempty"`
	// Disk is a qcow2 image a VM boots from (copied on write).
	Disk string `json:"disk,omitempty"`
	// ReadyMarker is text a VM's guest prints on its console once it is
	// up. With it, a VM is ready only when the marker appears after its
	// latest start (so drains and rollouts wait for the guest, not just
	// the domain); without it, a running domain is ready.
	ReadyMarker string `json:"readyMarker,omitempty"`
}

// LoadbalancerSpec is an HAProxy frontend in front of the ready replicas of
// the compute resources its selector matches, in the same region.
type LoadbalancerSpec struct {
	Listeners   []Listener        `json:"listeners"`
	Selector    map[string]string `json:"selector"`
	Algorithm   string            `json:"algorithm,omitempty"`
	HealthCheck *HealthCheck      `json:"healthCheck,omitempty"`
}

// Listener is one frontend port.
type Listener struct {
	Name     string `json:"name,omitempty"`
	Port     int    `json:"port"`
	Protocol string `json:"protocol,omitempty"`
	// TargetPort is the backends' port; defaults to Port.
	TargetPort int `json:"targetPort,omitempty"`
	// Address to bind; defaults to the node's load balancer address.
	Address string `json:"address,omitempty"`
}

// HealthCheck is how HAProxy decides a backend is up.
type HealthCheck struct {
	Type     string   `json:"type,omitempty"`
	Path     string   `json:"path,omitempty"`
	Interval Duration `json:"interval,omitzero"`
	Timeout  Duration `json:"timeout,omitzero"`
	Rise     int      `json:"rise,omitempty"`
	Fall     int      `json:"fall,omitempty"`
}

// ScheduleRule says where replicas may go and how they spread.
type ScheduleRule struct {
	// Regions is one region, or several with weights (a static split of
	// the replicas).
	Regions []RegionTarget `json:"regions,omitempty"`
	// SpreadRegions spreads the replicas evenly over this many healthy
	// regions (chosen from Regions if given, else from all).
	SpreadRegions int `json:"spreadRegions,omitempty"`
	// Zones restricts placement to these availability zones.
	Zones []string `json:"zones,omitempty"`
	// NodeSelector restricts placement to nodes with these labels.
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// AntiAffinity between replicas of this resource: "" (none), "soft"
	// (prefer different nodes) or "hard" (never two on one node).
	AntiAffinity string `json:"antiAffinity,omitempty"`
	// Strategy is "spread" (least allocated, the default) or "binpack".
	Strategy string `json:"strategy,omitempty"`
	// Reserve asks the master to watch that the other regions' headroom
	// could absorb the loss of the resource's largest regions: "N+1" the
	// largest, "N+2" the two largest, and so on (at most N+9). It moves
	// nothing; the status' reserve says whether it holds, and an alert
	// on ReserveShort says when it stops holding.
	Reserve string `json:"reserve,omitempty"`
}

// RegionTarget is one region of a schedule with its weight.
type RegionTarget struct {
	Name   string `json:"name"`
	Weight int    `json:"weight,omitempty"`
}

// SpecOverride changes a resource's spec in one region.
type SpecOverride struct {
	Flavor string            `json:"flavor,omitempty"`
	Image  string            `json:"image,omitempty"`
	Env    map[string]string `json:"env,omitempty"`
}

// FailoverPolicy moves a resource's replicas out of a region that is Down.
type FailoverPolicy struct {
	Enabled   bool     `json:"enabled"`
	ToRegions []string `json:"toRegions,omitempty"`
	After     Duration `json:"after,omitzero"`
	// FailBack moves the replicas home when the region returns.
	FailBack bool `json:"failBack,omitempty"`
	// OnUnhealthy also moves the share of a region that is up but whose
	// ready replicas of the resource stayed below rollout.minHealthy (at
	// least 1, at most the region's share) for After.
	OnUnhealthy bool `json:"onUnhealthy,omitempty"`
}

// RolloutPolicy bounds how a new revision, a drain or a failover replaces
// replicas.
type RolloutPolicy struct {
	MaxUnavailable int  `json:"maxUnavailable,omitempty"`
	MaxSurge       int  `json:"maxSurge,omitempty"`
	MinHealthy     int  `json:"minHealthy,omitempty"`
	AutoRevert     bool `json:"autoRevert,omitempty"`
	Paused         bool `json:"paused,omitempty"`
	// MinReadySeconds is how long a new replica must have been ready
	// before it counts as available (replaces an old one, completes the
	// rollout).
	MinReadySeconds int `json:"minReadySeconds,omitempty"`
	// ProgressDeadlineSeconds bounds how long a region's rollout may go
	// without its new replicas all available (0: DefaultProgressDeadline);
	// past it the region reports the rollout failed.
	ProgressDeadlineSeconds int `json:"progressDeadlineSeconds,omitempty"`
}

// DefaultProgressDeadline is the progress deadline of a rollout policy
// that sets none (Kubernetes' default).
const DefaultProgressDeadline = 600 * time.Second

// MaxRolloutSeconds bounds minReadySeconds and progressDeadlineSeconds
// (a week).
const MaxRolloutSeconds = 7 * 24 * 3600

// MinReady is MinReadySeconds as a duration.
func (ro RolloutPolicy) MinReady() time.Duration {
	return time.Duration(ro.MinReadySeconds) * time.Second
}

// ProgressDeadline is ProgressDeadlineSeconds as a duration, the default
// when unset.
func (ro RolloutPolicy) ProgressDeadline() time.Duration {
	if ro.ProgressDeadlineSeconds <= 0 {
		return DefaultProgressDeadline
	}
	return time.Duration(ro.ProgressDeadlineSeconds) * time.Second
}

// ResourceStatus is the observed state, aggregated over regions.
type ResourceStatus struct {
	UID                string                 `json:"uid"`
	Phase              Phase                  `json:"phase"`
	Reason             string                 `json:"reason,omitempty"`
	Since              time.Time              `json:"since,omitzero"`
	ObservedGeneration int64                  `json:"observedGeneration,omitempty"`
	Revision           int64                  `json:"revision,omitempty"`
	Replicas           int                    `json:"replicas"`
	Ready              int                    `json:"ready"`
	Updated            int                    `json:"updated,omitempty"`
	Regions            map[string]RegionShare `json:"regions,omitempty"`
	Backends           []BackendStatus        `json:"backends,omitempty"`
	UpdatedAt          time.Time              `json:"updatedAt,omitzero"`
	Conditions         map[string]string      `json:"conditions,omitempty"`
	Rollout            *RolloutStatus         `json:"rollout,omitempty"`
	// Job is a Job's state (from the region that runs it).
	Job *JobStatus `json:"job,omitempty"`
	// Split says why the replicas' split over regions differs from the
	// schedule's weights (a region without room for its share); "" when
	// it does not.
	Split string `json:"split,omitempty"`
	// Reserve is whether schedule.reserve holds now; nil without one.
	Reserve *ReserveStatus `json:"reserve,omitempty"`
	// Autoscale is what the autoscaler last read and decided; nil
	// without autoscale.
	Autoscale *AutoscaleStatus `json:"autoscale,omitempty"`
}

// ReserveStatus says whether the other regions' headroom could absorb
// the loss of a resource's largest regions (schedule.reserve).
type ReserveStatus struct {
	// Holds: it could, as of the regions' last heartbeats.
	Holds bool `json:"holds"`
	// Lost names the regions whose loss was weighed (the largest shares),
	// Need their replicas and Free the room the other regions have for
	// them.
	Lost []string `json:"lost,omitempty"`
	Need int      `json:"need"`
	Free int      `json:"free"`
	// Message says the same in words.
	Message string `json:"message,omitempty"`
}

// RegionShare is a resource's state in one region.
type RegionShare struct {
	Phase              Phase     `json:"phase"`
	Reason             string    `json:"reason,omitempty"`
	Replicas           int       `json:"replicas"`
	Ready              int       `json:"ready"`
	Updated            int       `json:"updated,omitempty"`
	Revision           int64     `json:"revision,omitempty"`
	ObservedGeneration int64     `json:"observedGeneration,omitempty"`
	UpdatedAt          time.Time `json:"updatedAt,omitzero"`
	// FailoverFrom names the region this share stands in for.
	FailoverFrom string `json:"failoverFrom,omitempty"`
	// ProgressingSince is when the region started rolling out Revision;
	// zero once every replica of it was available (a later unready
	// replica does not restart the progress deadline).
	ProgressingSince time.Time `json:"progressingSince,omitzero"`
	// UnhealthySince is since when the region's ready replicas are below
	// the resource's minHealthy (at least 1); zero while they are not.
	UnhealthySince time.Time `json:"unhealthySince,omitzero"`
	// Unplaced counts the replicas the region could not put on a node
	// (no node has room, or none fits), which the master may move to a
	// region with headroom.
	Unplaced int `json:"unplaced,omitempty"`
	// Job is a Job's state in this region.
	Job *JobStatus `json:"job,omitempty"`
}

// BackendStatus is one backend of a load balancer as HAProxy sees it.
type BackendStatus struct {
	Replica string `json:"replica,omitempty"`
	Address string `json:"address"`
	Port    int    `json:"port,omitempty"`
	Health  string `json:"health"`
}

// Rollout states. There is no "reverted": the status follows the
// rollout of the resource's current revision, and going back (cancel,
// auto-revert) makes a new revision, whose rollout is the one shown from
// then on; after a failure it is marked Revert, with the failed revision
// as its FromRevision.
const (
	RolloutProgressing = "progressing"
	RolloutPaused      = "paused"
	RolloutSucceeded   = "succeeded"
	RolloutFailed      = "failed"
)

// RolloutStatus follows a new revision through regions and batches.
type RolloutStatus struct {
	Revision     int64     `json:"revision"`
	FromRevision int64     `json:"fromRevision,omitempty"`
	State        string    `json:"state"`
	Region       string    `json:"region,omitempty"`
	Message      string    `json:"message,omitempty"`
	StartedAt    time.Time `json:"startedAt,omitzero"`
	// Revert marks a rollout that undoes a failed one: it is never
	// reverted itself.
	Revert bool `json:"revert,omitempty"`
}

// Revision is an immutable snapshot of a resource's spec.
type Revision struct {
	Resource   string       `json:"resource"`
	Tenant     string       `json:"tenant"`
	UID        string       `json:"uid"`
	Number     int64        `json:"number"`
	Spec       ResourceSpec `json:"spec"`
	FlavorSpec *FlavorSpec  `json:"flavorSpec,omitempty"`
	Pinned     bool         `json:"pinned,omitempty"`
	Cause      string       `json:"cause,omitempty"`
	CreatedAt  time.Time    `json:"createdAt"`
}

// GetResourceVersion is the version the REST edge sends as the ETag.
func (r Resource) GetResourceVersion() int64 { return r.ResourceVersion }

// GetResourceVersion is the version the REST edge sends as the ETag.
func (f Flavor) GetResourceVersion() int64 { return f.ResourceVersion }
