// Package containerd is the container provider: it runs an agent's
// container replicas in containerd, networks them with CNI (a bridge per
// region network, the address the region's IPAM chose), keeps local
// volumes as directories, and supervises restarts.
//
// Everything lives in one containerd namespace per agent and carries the
// labels strata.io/assignment, strata.io/generation and strata.io/kind,
// so that the provider keeps no database: Status and List read containerd
// (and, for volumes, one small JSON file per volume), and a provider made
// after an agent restart finds its replicas where the previous one left
// them. Closing the provider stops its supervision, never its replicas.
//
// A replica is one containerd container named after the assignment id,
// with a snapshot of the same name, a task whose output goes to
// <LogRoot>/<id>.log (appended by a small logger the shim runs, so that
// it outlives agent restarts), and a network namespace
// <NetNSDir>/<namespace>-<id> set up by the CNI conflist
// <CNIConfDir>/<id>.conflist.
package containerd

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/identifiers"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/version"
	"github.com/stratahq/strata/providers/provider"
)

// Labels on everything the provider creates in containerd. The first
// three are the contract with List; the others carry what Status and the
// supervisor need after an agent restart.
const (
	LabelAssignment = "strata.io/assignment"
	LabelGeneration = "strata.io/generation"
	LabelKind       = "strata.io/kind"

	// labelSpec is a digest of what a replacement container would get
	// (image, command, resources, mounts, network): equal digests mean
	// nothing to recreate.
	labelSpec = "strata.io/spec"
	// labelRestart is the restart policy, read by the supervisor on
	// every exit; changing it needs no new container.
	labelRestart = "strata.io/restart-policy"
	// labelGrace is the stop grace period (a Go duration).
	labelGrace     = "strata.io/stop-grace"
	labelMemoryMiB = "strata.io/memory-mib"
	labelAddress   = "strata.io/address"
	// labelRestarts counts task restarts of this replica.
	labelRestarts = "strata.io/restarts"
	// labelStarted is when the current task started (RFC 3339).
	labelStarted = "strata.io/started"
	// labelLastExit says why the previous task ended, once restarted.
	labelLastExit = "strata.io/last-exit"
	// labelOOM holds the pid of a task the kernel OOM-killed, set from
	// containerd's TaskOOM event.
	labelOOM = "strata.io/oom-pid"
	// labelError marks a replica that could not be created (bad image,
	// missing volume, CNI failure): the container holds only labels, so
	// that Status and List still know the failure.
	labelError = "strata.io/error"
	// labelUserPrefix prefixes the assignment's own labels.
	labelUserPrefix = "label.strata.io/"
)

// maxIdentifier is containerd's limit on names (namespaces, containers).
const maxIdentifier = 76

func validIdentifier(s string) error { return identifiers.Validate(s) }

// Provider runs container replicas in containerd. It implements
// provider.Provider, Logger, Watcher and Closer by composing small
// services, each owning its own state: images (import, pull, unpack,
// user namespace remaps), volumes (directories with quotas), network
// (network namespaces, CNI, hosts files, host ports), configs (the files
// of Configs and Secrets), tasks (each container and its task: create,
// start, stop, restart, status, logs) and the supervisor (containerd's
// events, restarts with back-off, the Watch fan-out). The Provider
// itself holds only what makes one replica out of those parts (Apply,
// Delete) and the replica locks that serialise them.
type Provider struct {
	name   string
	node   string
	cfg    Config
	log    *slog.Logger
	client *client.Client

	// replicas serialise everything that changes one replica (Apply,
	// Delete, the supervisor's restarts); tasks and the supervisor
	// share them.
	replicas *keyedLocks

	images   *imageService
	volumes  *volumeService
	network  *networkService
	configs  *configFiles
	tasks    *taskService
	sup      *supervisor
	statuses conditionMarks
}

var (
	_ provider.Provider = (*Provider)(nil)
	_ provider.Logger   = (*Provider)(nil)
	_ provider.Watcher  = (*Provider)(nil)
	_ provider.Closer   = (*Provider)(nil)
	_ provider.Factory  = Factory
)

// New returns a provider of the replicas in cfg's namespace and starts
// its supervisor. It does not need containerd to be up: Health reports
// it (condition CRI) and the supervisor keeps reconnecting.
func New(ctx context.Context, cfg Config, opts ...Option) (*Provider, error) {
	o := options{name: "containerd", log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&o)
	}
	cfg = cfg.withDefaults(o.node, o.dataDir)
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("containerd: %w", err)
	}
	for _, d := range []string{cfg.CNIConfDir, cfg.StateDir, cfg.VolumeRoot, cfg.LogRoot} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return nil, fmt.Errorf("containerd: %w", err)
		}
	}
	if err := installLogScript(cfg); err != nil {
		return nil, fmt.Errorf("containerd: %w", err)
	}
	log := o.log.With("namespace", cfg.Namespace)
	images, err := newImageService(cfg, log)
	if err != nil {
		return nil, fmt.Errorf("containerd: %w", err)
	}
	network, err := newNetworkService(cfg, log, o.reserved)
	if err != nil {
		return nil, fmt.Errorf("containerd: %w", err)
	}
	c, err := client.New(cfg.Address, client.WithDefaultNamespace(cfg.Namespace), client.WithDefaultRuntime(cfg.Runtime))
	if err != nil {
		return nil, fmt.Errorf("containerd: connect %s: %w", cfg.Address, err)
	}
	images.client = c
	p := &Provider{
		name:     o.name,
		node:     o.node,
		cfg:      cfg,
		log:      log,
		client:   c,
		replicas: newKeyedLocks(),
		images:   images,
		network:  network,
		configs:  &configFiles{root: filepath.Join(cfg.StateDir, "configs")},
	}
	p.tasks = newTaskService(cfg, o.node, log, c, p.replicas, network)
	p.sup = newSupervisor(cfg, log, c, p.tasks, p.replicas)
	p.volumes = newVolumeService(cfg, o.node, log, p.sup.notify)
	// The supervisor lives as long as the provider, not as the ctx of
	// the call that made it.
	p.sup.start(context.WithoutCancel(ctx))
	return p, nil
}

// userRange is the user namespace range of new replicas in cfg (nil:
// none).
func userRange(cfg Config) *idRange {
	if !cfg.UserNamespace {
		return nil
	}
	return &idRange{hostID: uint32(cfg.UserNamespaceHostID), size: uint32(cfg.UserNamespaceSize)}
}

// Namespace is the containerd namespace holding this provider's replicas.
func (p *Provider) Namespace() string { return p.cfg.Namespace }

// Client is the provider's containerd client, for tests and benchmarks
// that compare with direct containerd use.
func (p *Provider) Client() *client.Client { return p.client }

// Config is the provider's configuration with defaults applied.
func (p *Provider) Config() Config { return p.cfg }

// Close stops the supervisor and watchers and closes the connection to
// containerd. Replicas keep running: an agent restarting finds them with
// List.
func (p *Provider) Close() error {
	if !p.sup.close() {
		return nil
	}
	if err := p.client.Close(); err != nil {
		return fmt.Errorf("containerd: close: %w", err)
	}
	return nil
}

// Info implements provider.Provider.
func (p *Provider) Info(context.Context) (provider.Info, error) {
	return provider.Info{Name: p.name, Version: version.String(), Kinds: []api.ProviderKind{api.ProviderContainer}}, nil
}

// nsCtx puts the provider's namespace into ctx: the client's default
// namespace covers its gRPC calls, but some client-side helpers (leases,
// unpacking) read the namespace from the context.
func (p *Provider) nsCtx(ctx context.Context) context.Context {
	return namespaces.WithNamespace(ctx, p.cfg.Namespace)
}

// Watch implements provider.Watcher: exits (with their restart), OOM
// kills and deletions are pushed as they happen. A watch is only as good
// as the containerd event stream behind it: while the supervisor does
// not follow it, Watch fails with api.ErrUnavailable (the agent polls
// meanwhile), and when the stream breaks every watcher is closed, to
// watch again and relist once it is back. The channel also closes when
// ctx is done or the provider closes.
func (p *Provider) Watch(ctx context.Context) (<-chan api.AssignmentStatus, error) {
	return p.sup.watch(ctx)
}

// keyedLocks is a mutex per key that a waiter can give up on when its
// context ends (an Apply queued behind a long image pull).
type keyedLocks struct {
	mu    sync.Mutex
	locks map[string]*keyedLock
}

type keyedLock struct {
	ch   chan struct{}
	refs int
}

func newKeyedLocks() *keyedLocks { return &keyedLocks{locks: map[string]*keyedLock{}} }

// lock takes key's lock and returns its unlock.
func (k *keyedLocks) lock(ctx context.Context, key string) (func(), error) {
	k.mu.Lock()
	l, ok := k.locks[key]
	if !ok {
		l = &keyedLock{ch: make(chan struct{}, 1)}
		k.locks[key] = l
	}
	l.refs++
	k.mu.Unlock()
	release := func() {
		k.mu.Lock()
		l.refs--
		if l.refs == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
	select {
	case l.ch <- struct{}{}:
		return func() { <-l.ch; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}

// held reports whether someone holds or waits for key's lock: a replica
// being applied, restarted or deleted.
func (k *keyedLocks) held(key string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.locks[key]
	return ok
}

// isNotFound reports a containerd NotFound, from the client or the wire.
func isNotFound(err error) bool { return errdefs.IsNotFound(err) }

// keys returns m's keys sorted.
func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func writeFileAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
