// Package provider is the contract between an agent and the providers that
// make assignments real on a node: containerd for containers, libvirt for
// VMs, HAProxy for load balancers, and an in-memory fake.
//
// The Go interface mirrors proto/provider/v1's ProviderService, so that a
// provider runs in the agent's process or as a plugin binary behind a unix
// socket with the same behaviour; the conformance suite in providertest
// checks both. Every call is idempotent on the assignment id.
package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/hostpolicy"
)

// ErrNotFound is returned by Status for a replica the provider does not
// hold. It wraps api.ErrNotFound so that it survives the gRPC edge.
var ErrNotFound = api.ErrNotFound

// ErrUnsupported is returned for an assignment kind the provider does not
// serve, or by optional capabilities a provider lacks.
var ErrUnsupported = errors.New("unsupported by this provider")

// Provider makes assignments real on a node.
type Provider interface {
	// Info says who the provider is and which kinds it serves.
	Info(ctx context.Context) (Info, error)
	// Health reports the provider's conditions (CRI, CNI, CSI,
	// provider/<name>), which feed the node's conditions.
	Health(ctx context.Context) ([]api.Condition, error)
	// Apply converges the replica towards a and returns what it observed.
	// It may return before the replica is ready (phase provision); the
	// agent then polls Status. Applying the same assignment again changes
	// nothing; a higher Generation updates what changed (endpoints of a
	// load balancer, for example). A failure of the replica itself (bad
	// image, exit) is reported in the status (phase error, reason), not as
	// an error: the error return is for calls that could not be made.
	Apply(ctx context.Context, a *api.Assignment) (api.AssignmentStatus, error)
	// Delete stops the replica and removes everything it holds on the
	// node (volumes are removed only for Volume assignments). grace bounds
	// a graceful stop before a forced one. A replica that does not exist
	// is not an error. a may carry only the ID (an orphan found by List).
	Delete(ctx context.Context, a *api.Assignment, grace time.Duration) error
	// Status returns the replica's current state, or ErrNotFound.
	Status(ctx context.Context, id string) (api.AssignmentStatus, error)
	// List returns every replica the provider holds for this agent, for
	// restart recovery and orphan clean-up.
	List(ctx context.Context) ([]Listed, error)
}

// ConditionType is the type of the condition a provider called name
// reports about itself in Health: "provider/<name>".
func ConditionType(name string) string { return "provider/" + name }

// Info describes a provider.
type Info struct {
	Name    string
	Version string
	Kinds   []api.ProviderKind
	// Capacity is what the provider contributes to the node when it
	// knows better than the agent; nil means unknown.
	Capacity *api.Capacity
	// Features are what the provider can run beyond one process per
	// replica: FeaturePods, FeatureInitContainers, FeatureProbes. The scheduler places a
	// replica that needs one only on nodes whose provider has it.
	Features []string
}

// The features a provider may advertise in Info.Features.
const (
	// FeaturePods: more containers beside the main one, and scratch
	// volumes.
	FeaturePods = api.FeaturePods
	// FeatureInitContainers: init containers.
	FeatureInitContainers = api.FeatureInitContainers
	// FeatureProbes: startup, readiness and liveness probes.
	FeatureProbes = api.FeatureProbes
)

// HasFeature reports whether info advertises feature.
func (info Info) HasFeature(feature string) bool {
	for _, f := range info.Features {
		if f == feature {
			return true
		}
	}
	return false
}

// Listed is one replica found by List.
type Listed struct {
	ID   string
	Kind api.ResourceKind
	// Generation is the assignment generation the replica was last
	// applied with.
	Generation int64
	Status     api.AssignmentStatus
}

// LogOptions selects what Logs writes.
type LogOptions struct {
	Follow bool
	// TailLines limits the output to the last lines; 0 means all.
	TailLines int
	// Container names the container of a pod whose output to write;
	// empty is the main container (api.MainContainer).
	Container string
}

// SingleContainerLogs is what a provider whose replicas are one container
// or guest says of opts.Container: nil for the main one (empty or
// api.MainContainer), ErrNotFound naming the container otherwise.
func SingleContainerLogs(id string, opts LogOptions) error {
	if opts.Container == "" || opts.Container == api.MainContainer {
		return nil
	}
	return fmt.Errorf("replica %q has no container %q: %w", id, opts.Container, ErrNotFound)
}

// Logger is an optional capability: providers that keep a replica's
// output implement it. Logs writes to w until the output ends or, when
// following, until ctx is done; following that ends because ctx is done
// is not a failure and returns nil.
type Logger interface {
	Logs(ctx context.Context, id string, opts LogOptions, w io.Writer) error
}

// Watcher is an optional capability: providers that learn of state changes
// (a container exiting, a domain crashing) push them, and an agent stops
// polling the replicas of a provider whose watch is in place.
//
// Watch returns once the watch is in place: every change of a replica's
// status after that is sent, in order, until the channel closes (a
// replica deleted is sent as phase destroyed). The channel is bounded and
// the provider never blocks on it: a watcher that falls behind is closed
// (Watchers does this). The channel closes when ctx is done, when the
// provider closes, or when a change could not be delivered (the watcher
// fell behind, a plugin's stream broke): the caller then watches again
// and, once that watch is in place, relists what it holds (Status or
// List), since changes in between may be lost. A provider that does not
// watch returns ErrUnsupported; so does the client of a plugin whose
// provider does not.
type Watcher interface {
	Watch(ctx context.Context) (<-chan api.AssignmentStatus, error)
}

// HostServer is an optional capability: providers that serve replicas
// from the node's own addresses (load balancers' listeners) say where,
// and the node's firewall lets the replicas on its bridge reach those
// ports and no other service of the host. A plugin behind a socket does
// not offer it: replicas reach none of its listeners through the host.
type HostServer interface {
	HostListeners() []HostListener
}

// HostListener is where a provider may listen on the node for replicas.
type HostListener struct {
	// Addr is the address; the unspecified address is every address
	// of the node.
	Addr netip.Addr
	// Proto is "tcp" or "udp".
	Proto string
	Ports hostpolicy.PortRanges
}

// Closer is an optional capability for providers holding connections or
// processes.
type Closer interface {
	Close() error
}

// Options is what an agent gives a provider factory.
type Options struct {
	// Name is the provider's configured name.
	Name string
	// Node is the agent's node name; providers scope what they own by it
	// (a containerd namespace, a libvirt domain name prefix).
	Node string
	// DataDir is a directory private to this provider on this node.
	DataDir string
	// Config is the provider's own settings from the agent's config file
	// (decode it with Decode).
	Config map[string]any
	Logger *slog.Logger
	// ReservedPorts are the node's own service ports (the agent's, and
	// those the operator lists for tiers sharing the host): a provider
	// never gives them to a tenant, whatever its own ranges allow.
	ReservedPorts hostpolicy.PortRanges
}

// Factory makes a provider.
type Factory func(ctx context.Context, o Options) (Provider, error)

// Registry maps provider names to factories. The binary that embeds
// providers fills one explicitly (no init-time globals), so that which
// providers a binary carries is visible in its main.
type Registry struct {
	factories map[string]Factory
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{factories: map[string]Factory{}} }

// Register adds a factory; registering a name twice panics (a programming
// error in a main function).
func (r *Registry) Register(name string, f Factory) {
	if _, dup := r.factories[name]; dup {
		panic("provider: " + name + " registered twice")
	}
	r.factories[name] = f
}

// New makes the provider called name.
func (r *Registry) New(ctx context.Context, name string, o Options) (Provider, error) {
	f, ok := r.factories[name]
	if !ok {
		return nil, errors.New("provider: no provider named " + name + " in this binary (run it as a plugin?)")
	}
	return f(ctx, o)
}

// Names lists the registered providers.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.factories))
	for n := range r.factories {
		names = append(names, n)
	}
	return names
}

// Meter is an optional capability: providers that measure what their
// replicas use. Usage returns the usage of every replica the provider
// holds and can measure, by assignment id; a replica it cannot measure
// now (not started, gone) is left out rather than failing the call. It
// is cheap enough to be called every heartbeat. A plugin behind a socket
// does not offer it yet.
type Meter interface {
	Usage(ctx context.Context) (map[string]api.Usage, error)
}
