// Package libvirt is the provider of VMs: it makes Compute assignments of
// provider kind vm into libvirt domains and Volume assignments into
// storage volumes, on the libvirtd of its node.
//
// It needs cgo and libvirt's client library, so only the plugin binary
// (cmd/strata-provider-libvirt) imports it; the strata binary stays pure Go
// and runs it as a plugin.
//
// Everything a replica is lives in libvirt: the domain strata-<id>, whose
// UUID is derived from the id (so that applying twice finds the same
// domain) and whose metadata element records the assignment id, node,
// kind and generation, so that List recovers the replicas after a restart
// from libvirt alone; its copy-on-write root disk strata-<id>.qcow2 in the
// pool; and its serial console log under LogDir. Volume replicas are pool
// volumes named by their id; which of them belong to this node is
// recorded under DataDir, because a volume has no metadata of its own.
package libvirt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/hostpolicy"
	"github.com/stratahq/strata/internal/version"
	"github.com/stratahq/strata/providers/provider"
	"github.com/stratahq/strata/providers/provider/probe"
)

// Provider is the libvirt provider. It implements provider.Provider,
// Logger, Watcher, Closer and ConfigApplier, by composing the services below, each the
// owner of its own state: it checks an assignment, serialises the calls
// of one replica and says which service does what.
type Provider struct {
	cfg            Config
	name           string
	node           string
	dataDir        string
	log            *slog.Logger
	rescanInterval time.Duration
	probeTimeout   time.Duration

	// replicas serialises Apply and Delete of one replica.
	replicas keyedMutex

	conn    *connection  // libvirtd, reconnected when it restarts
	accel   *accelerator // the domain type VMs run with (accel.go)
	pool    *storagePool // the storage pool (pool.go)
	images  *images      // image files and the root disks over them
	volumes *volumes     // Volume replicas (volumes.go)
	network *network     // the bridges VMs join
	console *console     // the serial console logs
	drives  *drives      // config drives and exit disks (configdrive.go)
	phases  *phases      // since when each replica is in its phase
	domains *domains     // the domains of Compute replicas
	hub     *hub         // the watches (hub.go, watch.go)

	cancel context.CancelFunc
	bg     sync.WaitGroup
}

var (
	_ provider.Provider      = (*Provider)(nil)
	_ provider.Logger        = (*Provider)(nil)
	_ provider.Watcher       = (*Provider)(nil)
	_ provider.Closer        = (*Provider)(nil)
	_ provider.ConfigApplier = (*Provider)(nil)
	_ provider.Factory       = Factory
)

// Factory makes a Provider from the agent's options (see Config for the
// keys).
func Factory(ctx context.Context, o provider.Options) (provider.Provider, error) {
	var cfg Config
	if err := provider.Decode(o.Config, &cfg); err != nil {
		return nil, fmt.Errorf("libvirt: %w", err)
	}
	opts := []Option{WithNode(o.Node), WithDataDir(o.DataDir), WithLogger(o.Logger)}
	if o.Name != "" {
		opts = append(opts, WithName(o.Name))
	}
	if cfg.RescanInterval > 0 {
		opts = append(opts, WithRescanInterval(cfg.RescanInterval))
	}
	return New(ctx, cfg, opts...)
}

// New returns a provider of cfg's libvirtd. An unreachable libvirtd is not
// an error: Health reports it and calls fail until it answers. The choice
// of domain type (Config.DomainType auto) runs in the background; Apply
// waits for it.
func New(ctx context.Context, cfg Config, opts ...Option) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("libvirt: %w", err)
	}
	p := &Provider{
		name:           "libvirt",
		log:            slog.New(slog.DiscardHandler),
		rescanInterval: 5 * time.Second,
		probeTimeout:   5 * time.Second,
	}
	for _, o := range opts {
		o(p)
	}
	p.cfg = cfg.withDefaults(p.dataDir)
	if p.dataDir == "" {
		return nil, errors.New("libvirt: a data directory is required (pool, console logs, volume records)")
	}
	p.log = p.log.With("uri", p.cfg.URI)
	dirs, err := hostpolicy.NewDirs(p.cfg.ImageDirs, []string{p.dataDir, p.cfg.LogDir})
	if err != nil {
		return nil, fmt.Errorf("libvirt: %w", api.Invalid("imageDirs", "%v", err))
	}
	p.compose(dirs)
	// QEMU runs as its own user: it must be able to reach the pool and
	// the images under DataDir (traverse only; nothing is listable).
	for _, dir := range []string{p.dataDir, p.pool.dir, p.cfg.LogDir, p.volumes.dir} {
		if err := os.MkdirAll(dir, 0o711); err != nil {
			return nil, fmt.Errorf("libvirt: %w", err)
		}
	}
	if err := os.Chmod(p.dataDir, 0o711); err != nil {
		return nil, fmt.Errorf("libvirt: %w", err)
	}

	if c, err := p.conn.connect(); err != nil {
		p.log.Warn("libvirtd is not reachable yet", "err", err)
	} else if pool, err := p.pool.ensure(c); err != nil {
		p.log.Warn("storage pool not ready", "pool", p.cfg.Pool, "err", err)
	} else {
		pool.Free()
	}

	// The verdict outlives New's ctx: it is cancelled by Close only.
	bgCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p.cancel = cancel
	p.bg.Go(func() { p.accel.decide(bgCtx) })
	p.bg.Go(func() {
		p.domains.ready.relay(func(u unhealthy) { p.bg.Go(func() { p.restartUnhealthy(bgCtx, u) }) })
	})
	return p, nil
}

// compose makes the services of p from its settings; dirs are where VM
// images may be.
func (p *Provider) compose(dirs hostpolicy.Dirs) {
	var bridges bridger = &ipBridges{log: p.log}
	if isTestURI(p.cfg.URI) {
		// The test driver runs nothing on this host.
		bridges = noBridges{}
	}
	p.hub = newHub()
	p.conn = newConnection(p.cfg.URI, p.log, p.hub.kick)
	p.console = &console{dir: p.cfg.LogDir, systemDaemon: p.cfg.URI == "qemu:///system", log: p.log}
	p.accel = &accelerator{
		conn: p.conn, console: p.console, log: p.log,
		configured: p.cfg.DomainType, probeKernel: p.cfg.KVMProbeKernel,
		dir: p.dataDir, node: p.node, timeout: p.probeTimeout,
		done: make(chan struct{}),
	}
	p.pool = &storagePool{name: p.cfg.Pool, dir: filepath.Join(p.dataDir, "pool"), log: p.log}
	p.images = &images{dirs: dirs, pool: p.pool, log: p.log}
	p.phases = newPhases(p.node, p.log)
	p.volumes = &volumes{
		dir: filepath.Join(p.dataDir, "volumes"), node: p.node, pool: p.pool,
		phases: p.phases, log: p.log, kick: p.hub.kick,
	}
	p.network = newNetwork(bridges)
	p.drives = newDrives(p.cfg.DriveDir, p.node)
	p.domains = &domains{
		node: p.node, log: p.log, console: p.console, drives: p.drives,
		ready:  newReadiness(p.console, probe.NewManager(probe.WithLogger(p.log), probe.WithGuestAgent(p)), p.hub.kick),
		phases: p.phases, kick: p.hub.kick,
	}
}

// Close stops the background work (watches included) and closes the
// connection.
func (p *Provider) Close() error {
	p.hub.close()
	p.cancel()
	p.domains.ready.probes.Close() // ends the relay
	p.bg.Wait()
	p.hub.wait()
	p.conn.close()
	return nil
}

// restartUnhealthy restarts the domain whose liveness or startup probe
// failed (domains.restart), serialised with Apply and Delete. There is
// no back-off of its own: the probe's initial delay, period and failure
// threshold space the restarts, as the provider has none for crashed
// domains either (the agent's next Apply restarts those).
func (p *Provider) restartUnhealthy(ctx context.Context, u unhealthy) {
	if ctx.Err() != nil {
		return
	}
	unlock := p.replicas.lock(u.id)
	defer unlock()
	c, err := p.conn.connect()
	if err == nil {
		err = p.domains.restart(c, u)
	}
	if err != nil {
		p.log.Warn("restart of an unhealthy domain failed", "id", u.id, "why", u.why, "err", err)
	}
}

// Info implements provider.Provider.
func (p *Provider) Info(context.Context) (provider.Info, error) {
	// Probes: a VM's, run by the readiness service from the node to the
	// guest (no pods: a VM is one guest).
	return provider.Info{Name: p.name, Version: version.String(), Kinds: []api.ProviderKind{api.ProviderVM},
		Features: []string{provider.FeatureProbes}}, nil
}
