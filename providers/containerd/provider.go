package containerd

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	tasktypes "github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/version"
	"github.com/stratahq/strata/providers/provider"
	"github.com/stratahq/strata/providers/provider/probe"
)

// Provider runs container replicas in containerd. It implements
// provider.Provider, Logger, Watcher, Closer and Meter by composing small
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

	images  *imageService
	volumes *volumeService
	network *networkService
	configs *configFiles
	tasks   *taskService
	sup     *supervisor
	probes  *probeService
	// probesDone is closed when the probes' updates are all handled.
	probesDone chan struct{}
	// conditions remember since when each health condition is so.
	conditions conditionMarks
}

var (
	_ provider.Provider = (*Provider)(nil)
	_ provider.Logger   = (*Provider)(nil)
	_ provider.Watcher  = (*Provider)(nil)
	_ provider.Closer   = (*Provider)(nil)
	_ provider.Meter    = (*Provider)(nil)
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
	p.tasks.backoff = p.sup
	p.volumes = newVolumeService(cfg, o.node, log, p.sup.notify)
	p.startProbes(context.WithoutCancel(p.nsCtx(ctx)), o.probeOpts)
	// The supervisor lives as long as the provider, not as the ctx of
	// the call that made it.
	p.sup.start(context.WithoutCancel(ctx))
	return p, nil
}

// startProbes makes the probe service and runs it until Close: its
// readiness changes are pushed as statuses, its liveness failures kill
// tasks for the supervisor to restart.
func (p *Provider) startProbes(ctx context.Context, opts []probe.Option) {
	p.probes = newProbeService(p.log, p.client, p.network.netnsPath, opts...)
	p.probes.push = func(ctx context.Context, id string) {
		if st, err := p.tasks.statusOf(ctx, id); err == nil {
			p.sup.notify(st)
		}
	}
	p.probes.unhealthy = p.killUnhealthy
	p.tasks.probes = p.probes
	p.probesDone = make(chan struct{})
	go func() {
		defer close(p.probesDone)
		p.probes.run(ctx)
	}()
}

// killUnhealthy kills the task of a container whose liveness or startup
// probe failed, its reason recorded first: the supervisor sees the exit
// and restarts it with its back-off, as any other.
func (p *Provider) killUnhealthy(ctx context.Context, replica, name, message string) {
	unlock, err := p.replicas.lock(ctx, replica)
	if err != nil {
		return
	}
	defer unlock()
	id := containerIDOf(replica, name)
	t, err := p.tasks.task(ctx, id)
	if err != nil || t == nil || t.status != tasktypes.Status_RUNNING {
		return
	}
	if err := p.tasks.setLabels(ctx, id, map[string]string{labelUnhealthy: truncate(message)}); err != nil {
		p.log.Warn("record unhealthy container", "id", id, "err", err)
		return
	}
	if err := p.tasks.kill(ctx, id); err != nil {
		p.log.Warn("kill unhealthy container", "id", id, "err", err)
	}
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
	p.probes.close()
	<-p.probesDone
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
	return provider.Info{Name: p.name, Version: version.String(), Kinds: []api.ProviderKind{api.ProviderContainer},
		Features: []string{provider.FeaturePods, provider.FeatureInitContainers, provider.FeatureProbes}}, nil
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
