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
	"strings"
	"sync"
	"time"

	"libvirt.org/go/libvirt"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/hostpolicy"
	"github.com/stratahq/strata/internal/version"
	"github.com/stratahq/strata/providers/provider"
)

// Domain types Config.DomainType accepts.
const (
	DomainTypeAuto = "auto"
	DomainTypeKVM  = "kvm"
	DomainTypeQEMU = "qemu"
	// domainTypeTest is the test driver's only domain type.
	domainTypeTest = "test"
)

// Config is the provider's settings; Factory reads them from the agent's
// config with the keys uri, pool, logDir, domainType, kvmProbeKernel,
// rescanInterval and imageDirs.
type Config struct {
	// URI is libvirtd's connection URI (default qemu:///system; the tests
	// use test:///default, which needs no daemon).
	URI string `mapstructure:"uri"`
	// Pool is the storage pool holding root disks and volumes (default
	// "strata"). It is created, as a directory pool under DataDir/pool,
	// when it does not exist.
	Pool string `mapstructure:"pool"`
	// LogDir holds the domains' serial console logs (default
	// DataDir/console).
	LogDir string `mapstructure:"logDir"`
	// DomainType is "auto" (the default: KVM when KVM guests actually
	// run, else QEMU's TCG), "kvm" or "qemu".
	DomainType string `mapstructure:"domainType"`
	// KVMProbeKernel is a Linux kernel that auto boots under KVM when the
	// provider starts, to decide; without it, the kernel of the first VM
	// applied is tried (a boot sector alone is no proof: see accel.go).
	KVMProbeKernel string `mapstructure:"kvmProbeKernel"`
	// RescanInterval is how often a watch rescans the domains (default
	// 5s; see WithRescanInterval).
	RescanInterval time.Duration `mapstructure:"rescanInterval"`
	// ImageDirs are the host directories an Image's kernel, initrd and
	// disk may be in (symbolic links resolved, ".." refused; never the
	// storage pool, the data or the console directory, which hold other
	// replicas' disks). Default none: VM images are refused.
	ImageDirs []string `mapstructure:"imageDirs"`
	// DriveDir holds the VMs' config drives and exit disks (default
	// /run/strata-libvirt/<node>: a tmpfs, so that secrets never reach
	// a disk, and reachable by QEMU's user, which the agent's data
	// directory need not be).
	DriveDir string `mapstructure:"driveDir"`
}

// withDefaults fills in what cfg leaves empty.
func (c Config) withDefaults(dataDir string) Config {
	if c.URI == "" {
		c.URI = "qemu:///system"
	}
	if c.Pool == "" {
		c.Pool = "strata"
	}
	if c.LogDir == "" && dataDir != "" {
		c.LogDir = filepath.Join(dataDir, "console")
	}
	if c.DomainType == "" {
		c.DomainType = DomainTypeAuto
	}
	return c
}

// Validate reports a config that makes no sense, wrapping api.ErrInvalid.
func (c Config) Validate() error {
	switch c.DomainType {
	case "", DomainTypeAuto, DomainTypeKVM, DomainTypeQEMU:
	default:
		return api.Invalid("domainType", "%q is not one of auto, kvm, qemu", c.DomainType)
	}
	if c.LogDir != "" && !filepath.IsAbs(c.LogDir) {
		return api.Invalid("logDir", "%q must be an absolute path", c.LogDir)
	}
	if c.DriveDir != "" && !filepath.IsAbs(c.DriveDir) {
		return api.Invalid("driveDir", "%q must be an absolute path", c.DriveDir)
	}
	if c.KVMProbeKernel != "" && !filepath.IsAbs(c.KVMProbeKernel) {
		return api.Invalid("kvmProbeKernel", "%q must be an absolute path", c.KVMProbeKernel)
	}
	if c.RescanInterval < 0 {
		return api.Invalid("rescanInterval", "must not be negative (got %s)", c.RescanInterval)
	}
	if strings.ContainsAny(c.Pool, "/ ") {
		return api.Invalid("pool", "%q is not a pool name", c.Pool)
	}
	if _, err := hostpolicy.NewDirs(c.ImageDirs, nil); err != nil {
		return api.Invalid("imageDirs", "%v", err)
	}
	return nil
}

// Option tunes a Provider.
type Option func(*Provider)

// WithName names the provider (default "libvirt"); its health condition
// is provider/<name>.
func WithName(name string) Option { return func(p *Provider) { p.name = name } }

// WithNode sets the agent's node: it is written into every domain's
// metadata, and List returns only this node's domains, since several
// agents may share one libvirtd.
func WithNode(node string) Option { return func(p *Provider) { p.node = node } }

// WithDataDir sets the provider's private directory: the default pool and
// console directories, and the records of this node's volumes.
func WithDataDir(dir string) Option { return func(p *Provider) { p.dataDir = dir } }

// WithLogger sets the logger (default: discard).
func WithLogger(log *slog.Logger) Option {
	return func(p *Provider) {
		if log != nil {
			p.log = log
		}
	}
}

// WithRescanInterval sets how often a Watch rescans the domains (default
// 5s; Config.RescanInterval). Lifecycle events make a watch look at a
// domain at once; the rescan catches what they cannot tell: a guest
// printing its ready marker, events lost while libvirtd restarted.
func WithRescanInterval(d time.Duration) Option { return func(p *Provider) { p.rescanInterval = d } }

// WithKVMProbeTimeout bounds how long the automatic domain type choice
// waits for a KVM test guest to run (default 5s; a working KVM runs it in
// well under a second).
func WithKVMProbeTimeout(d time.Duration) Option { return func(p *Provider) { p.probeTimeout = d } }

// Provider is the libvirt provider. It implements provider.Provider,
// Logger, Watcher and Closer.
type Provider struct {
	cfg            Config
	name           string
	node           string
	dataDir        string
	log            *slog.Logger
	rescanInterval time.Duration
	probeTimeout   time.Duration
	bridges        bridger
	// dirs are where VM images may be (Config.ImageDirs); the pool's
	// directory is denied at each use, since it is known from libvirt.
	dirs hostpolicy.Dirs

	// replicas serialises Apply and Delete of one replica.
	replicas keyedMutex

	connMu sync.Mutex
	conn   *libvirt.Connect // nil until connected
	// lifecycle is the id of conn's lifecycle event callback, -1 if none.
	lifecycle int

	// accelDone is closed once the first trial of KVM is done; accelMu
	// guards accel and serialises the trials (see accel.go).
	accelDone chan struct{}
	accelMu   sync.Mutex
	accel     accelVerdict

	poolMu sync.Mutex

	mu       sync.Mutex
	closed   bool
	closing  chan struct{} // closed by Close: watches end
	watchers map[*watcher]struct{}
	// errorSince is when each replica was first seen in its current error
	// phase: libvirt keeps no time of a domain's state change.
	errorSince map[string]phaseSince
	// inUse are the bridges VMs were attached to, for Health.
	inUse map[string]struct{}

	cancel context.CancelFunc
	bg     sync.WaitGroup
}

type phaseSince struct {
	phase  api.Phase
	reason string
	since  time.Time
}

var (
	_ provider.Provider = (*Provider)(nil)
	_ provider.Logger   = (*Provider)(nil)
	_ provider.Watcher  = (*Provider)(nil)
	_ provider.Closer   = (*Provider)(nil)
	_ provider.Factory  = Factory
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
		lifecycle:      -1,
		accelDone:      make(chan struct{}),
		closing:        make(chan struct{}),
		watchers:       map[*watcher]struct{}{},
		errorSince:     map[string]phaseSince{},
		inUse:          map[string]struct{}{},
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
	p.dirs = dirs
	if isTestURI(p.cfg.URI) {
		// The test driver runs nothing on this host.
		p.bridges = noBridges{}
	} else {
		p.bridges = &ipBridges{log: p.log}
	}
	// QEMU runs as its own user: it must be able to reach the pool and
	// the images under DataDir (traverse only; nothing is listable).
	for _, dir := range []string{p.dataDir, filepath.Join(p.dataDir, "pool"), p.cfg.LogDir, p.volumeRecordDir()} {
		if err := os.MkdirAll(dir, 0o711); err != nil {
			return nil, fmt.Errorf("libvirt: %w", err)
		}
	}
	if err := os.Chmod(p.dataDir, 0o711); err != nil {
		return nil, fmt.Errorf("libvirt: %w", err)
	}

	if c, err := p.connect(); err != nil {
		p.log.Warn("libvirtd is not reachable yet", "err", err)
	} else if pool, err := p.ensurePool(c); err != nil {
		p.log.Warn("storage pool not ready", "pool", p.cfg.Pool, "err", err)
	} else {
		pool.Free()
	}

	// The verdict outlives New's ctx: it is cancelled by Close only.
	bgCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p.cancel = cancel
	p.bg.Go(func() { p.decideAccel(bgCtx) })
	return p, nil
}

// Close stops the background work (watches included) and closes the
// connection.
func (p *Provider) Close() error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.closing)
	}
	p.mu.Unlock()
	p.cancel()
	p.bg.Wait()
	p.connMu.Lock()
	defer p.connMu.Unlock()
	p.dropConnLocked()
	return nil
}

// Info implements provider.Provider.
func (p *Provider) Info(context.Context) (provider.Info, error) {
	return provider.Info{Name: p.name, Version: version.String(), Kinds: []api.ProviderKind{api.ProviderVM}}, nil
}

// Health implements provider.Provider: provider/<name> says whether
// libvirtd answers, the pool is active and which domain type VMs run
// with; CNI says whether the bridges VMs are attached to are up.
func (p *Provider) Health(context.Context) ([]api.Condition, error) {
	cond := api.Condition{Type: provider.ConditionType(p.name), Status: api.ConditionReady}
	c, err := p.connect()
	if err != nil {
		cond.Status, cond.Reason, cond.Message = api.ConditionError, "LibvirtdUnreachable", err.Error()
		return []api.Condition{cond}, nil
	}
	// Ensured, not only looked up: a pool gone or stopped (a libvirtd
	// restarted without autostart) comes back, and only what could not be
	// mended is reported.
	pool, err := p.ensurePool(c)
	if err != nil {
		cond.Status, cond.Reason, cond.Message = api.ConditionError, "PoolUnavailable", err.Error()
		return []api.Condition{cond}, nil
	}
	pool.Free()
	switch v, ok := p.verdict(); {
	case !ok:
		cond.Message = "deciding the domain type (trying KVM)"
	case v.fellBack:
		cond.Status, cond.Reason = api.ConditionWarning, "KVMUnusable"
		cond.Message = "KVM unusable, running VMs under TCG: " + v.Reason
	default:
		cond.Message = fmt.Sprintf("domain type %s: %s", v.Type, v.Reason)
	}
	conds := []api.Condition{cond}
	if cni, ok := p.bridgeCondition(); ok {
		conds = append(conds, cni)
	}
	return conds, nil
}

// ---- connection ----

// eventLoop registers and runs libvirt's default event loop, once per
// process. It is process-wide state of the C library (registering it again
// would replace it under live connections), so it cannot belong to a
// Provider. Connections need it for lifecycle events and keepalives.
var eventLoop = sync.OnceValue(func() error {
	if err := libvirt.EventRegisterDefaultImpl(); err != nil {
		return fmt.Errorf("register libvirt's event loop: %w", err)
	}
	go func() {
		for {
			if err := libvirt.EventRunDefaultImpl(); err != nil {
				// Only a broken loop fails; do not spin.
				time.Sleep(time.Second)
			}
		}
	}()
	return nil
})

func isTestURI(uri string) bool {
	return strings.HasPrefix(uri, "test:") || strings.HasPrefix(uri, "test+")
}

// connect returns the live connection, reconnecting when libvirtd went
// away (it restarts on upgrades; its domains live on).
func (p *Provider) connect() (*libvirt.Connect, error) {
	p.connMu.Lock()
	defer p.connMu.Unlock()
	if p.conn != nil {
		if alive, err := p.conn.IsAlive(); err == nil && alive {
			return p.conn, nil
		}
		p.log.Warn("libvirt connection lost; reconnecting")
		p.dropConnLocked()
	}
	if err := eventLoop(); err != nil {
		p.log.Warn("no libvirt event loop: lifecycle events off, polling only", "err", err)
	}
	c, err := libvirt.NewConnect(p.cfg.URI)
	if err != nil {
		return nil, fmt.Errorf("connect to libvirt at %s: %w", p.cfg.URI, err)
	}
	if !isTestURI(p.cfg.URI) {
		// Detects a libvirtd that died without closing the socket.
		if err := c.SetKeepAlive(5, 3); err != nil {
			p.log.Debug("libvirt keepalive unavailable", "err", err)
		}
	}
	id, err := c.DomainEventLifecycleRegister(nil, p.onLifecycle)
	if err != nil {
		p.log.Warn("libvirt lifecycle events unavailable: watching by polling only", "err", err)
		id = -1
	}
	p.conn, p.lifecycle = c, id
	return c, nil
}

func (p *Provider) dropConnLocked() {
	if p.conn == nil {
		return
	}
	if p.lifecycle >= 0 {
		_ = p.conn.DomainEventDeregister(p.lifecycle)
	}
	if _, err := p.conn.Close(); err != nil {
		p.log.Debug("close libvirt connection", "err", err)
	}
	p.conn, p.lifecycle = nil, -1
}

// onLifecycle runs on libvirt's event loop: it must not block, so it only
// tells the watchers which replica to look at.
func (p *Provider) onLifecycle(_ *libvirt.Connect, d *libvirt.Domain, _ *libvirt.DomainEventLifecycle) {
	name, err := d.GetName()
	if err != nil {
		return
	}
	if id, ok := idFromDomainName(name); ok {
		p.kick(id)
	}
}

// ---- libvirt errors ----

// hasCode reports whether err is a libvirt error with one of codes.
func hasCode(err error, codes ...libvirt.ErrorNumber) bool {
	var le libvirt.Error
	if !errors.As(err, &le) {
		return false
	}
	for _, c := range codes {
		if le.Code == c {
			return true
		}
	}
	return false
}

// message is err's text without the binding's virError(...) wrapping, for
// reasons users read.
func message(err error) string {
	var le libvirt.Error
	if errors.As(err, &le) {
		return le.Message
	}
	return err.Error()
}

// callFailed tells errors of the call (libvirtd gone, connection broken),
// which Apply returns, from errors of the replica (a bad kernel path, a
// missing bridge), which it reports in the status.
func callFailed(err error) bool {
	return hasCode(err, libvirt.ERR_RPC, libvirt.ERR_NO_CONNECT, libvirt.ERR_AUTH_FAILED,
		libvirt.ERR_OPERATION_TIMEOUT, libvirt.ERR_INVALID_CONN) ||
		strings.Contains(message(err), "client socket is closed")
}

// keyedMutex is a mutex per key, freed when unused.
type keyedMutex struct {
	mu sync.Mutex
	m  map[string]*keyedEntry
}

type keyedEntry struct {
	mu sync.Mutex
	n  int
}

// lock locks key and returns its unlock.
func (k *keyedMutex) lock(key string) func() {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyedEntry{}
	}
	e, ok := k.m[key]
	if !ok {
		e = &keyedEntry{}
		k.m[key] = e
	}
	e.n++
	k.mu.Unlock()
	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		k.mu.Lock()
		if e.n--; e.n == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}
