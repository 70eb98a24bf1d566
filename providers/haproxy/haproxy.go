// Package haproxy is the load-balancer provider: every Loadbalancer
// assignment of a node becomes frontends and backends of one haproxy
// process that the provider runs and supervises.
//
// Process. haproxy runs in master-worker mode (-W) with a master CLI
// socket (-S), a configuration file, an admin socket ("stats socket ...
// level admin expose-fd listeners") and a pid file, all in the state
// directory. It starts on the first load balancer and stops when the
// last one is deleted. The master runs in its own session, so it
// outlives the agent: an agent restart adopts it through the pid file and
// the master socket instead of dropping traffic. A supervisor goroutine
// restarts it from the current configuration if it dies.
//
// Changes. Endpoints come and go far more often than listeners, so they
// never cause a reload: servers are added and removed through the
// runtime API ("add server", "del server"), and the configuration file
// is rewritten with them so that a later reload or restart keeps them.
// Only a change of structure (a listener, port, mode, algorithm or health
// check) reloads haproxy, seamlessly, through the master socket: the new
// worker inherits the listening sockets and the servers' check states.
//
// State. Each load balancer is a JSON file in <stateDir>/lbs; List reads
// them back after a restart.
package haproxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/backoff"
	"github.com/stratahq/strata/internal/hostpolicy"
	"github.com/stratahq/strata/internal/version"
	"github.com/stratahq/strata/providers/provider"
)

// Defaults of Config.
const (
	DefaultBinary      = "/usr/sbin/haproxy"
	DefaultBindAddress = "127.0.0.1"
	DefaultMaxServers  = 64
	// DefaultPorts are the ports listeners may bind: the node-port range
	// (as the containerd provider's hostPorts), below Linux's ephemeral
	// ports and above the usual host services.
	DefaultPorts = "30000-32767"
	// DefaultUser and DefaultGroup are the account haproxy's workers run
	// as: Debian's haproxy package creates it.
	DefaultUser  = "haproxy"
	DefaultGroup = "haproxy"
)

const (
	// superviseEvery is how often the supervisor checks that haproxy
	// lives; it bounds how long a crash goes unnoticed.
	superviseEvery = 250 * time.Millisecond
	// watchEvery is how often statuses are polled for watchers.
	watchEvery = time.Second
	// statsMaxAge is how old a "show stat" snapshot may be to stand in
	// for one the admin socket could not give (a reload in progress).
	statsMaxAge = 5 * time.Second
	// stopGrace bounds a soft stop the supervisor or Shutdown makes.
	stopGrace = 5 * time.Second
	// crashWindow and crashLoop: that many unexpected exits within the
	// window make Health report an error.
	crashWindow = 5 * time.Minute
	crashLoop   = 3
	// maxBackoff caps the pause between failed restarts.
	maxBackoff = 30 * time.Second
)

// retryBackoff is the pause after n failures (of a reload, of haproxy
// itself): none, then 1s, 2s, 4s... up to maxBackoff.
var retryBackoff = backoff.Backoff{Min: time.Second, Max: maxBackoff}

// Config is the provider's settings. Factory reads them from the agent's
// config with the keys binary, stateDir, bindAddress, bindAddresses,
// ports, allowPrivilegedPorts, user, group and maxServers.
type Config struct {
	// Binary is the haproxy executable (default /usr/sbin/haproxy).
	Binary string
	// StateDir holds the configuration, sockets, pid file, log and the
	// load balancers' state (default: the provider's data directory).
	StateDir string
	// BindAddress is where a listener without an address binds
	// (default 127.0.0.1).
	BindAddress string
	// BindAddresses are the other addresses a listener's address may
	// name (default none: only BindAddress). "0.0.0.0" here lets tenants
	// bind every address of the node.
	BindAddresses []string
	// Ports are the ports listeners may bind (default DefaultPorts),
	// minus the node's own (provider.Options' ReservedPorts); below 1024
	// only with AllowPrivilegedPorts.
	Ports                string
	AllowPrivilegedPorts bool
	// User and Group are the account haproxy's workers run as (default
	// haproxy:haproxy); "root" keeps them root.
	User  string
	Group string
	// MaxServers caps the servers of one backend, i.e. the endpoints of a
	// load balancer that are balanced (default 64); more are reported in
	// the status reason.
	MaxServers int
}

func (c Config) withDefaults() Config {
	if c.Binary == "" {
		c.Binary = DefaultBinary
	}
	if c.BindAddress == "" {
		c.BindAddress = DefaultBindAddress
	}
	if c.MaxServers == 0 {
		c.MaxServers = DefaultMaxServers
	}
	if c.Ports == "" {
		c.Ports = DefaultPorts
	}
	if c.User == "" {
		c.User = DefaultUser
	}
	if c.Group == "" {
		c.Group = DefaultGroup
	}
	return c
}

// Validate reports a config that makes no sense, wrapping api.ErrInvalid.
func (c Config) Validate() error {
	switch {
	case c.StateDir == "":
		return api.Invalid("stateDir", "is required")
	case c.MaxServers < 1:
		return api.Invalid("maxServers", "must be at least 1, not %d", c.MaxServers)
	}
	if _, err := netip.ParseAddr(c.BindAddress); err != nil {
		return api.Invalid("bindAddress", "%q is not an IP address", c.BindAddress)
	}
	for _, a := range c.BindAddresses {
		if _, err := netip.ParseAddr(a); err != nil {
			return api.Invalid("bindAddresses", "%q is not an IP address", a)
		}
	}
	if _, err := hostpolicy.ParsePorts(c.Ports); err != nil {
		return api.Invalid("ports", "%v", err)
	}
	for key, name := range map[string]string{"user": c.User, "group": c.Group} {
		if name == "" || strings.ContainsAny(name, " \t\r\n#\"'\\") {
			return api.Invalid(key, "%q is not an account name", name)
		}
	}
	// A unix socket path is limited to 108 bytes.
	if n := len(newPaths(c.StateDir).Master); n > 100 {
		return api.Invalid("stateDir", "%q is too long for unix sockets in it (%d bytes)", c.StateDir, n)
	}
	return nil
}

// limits are the policy of cfg (validated), for resolve.
func (c Config) limits(reserved hostpolicy.PortRanges) limits {
	ports, _ := hostpolicy.ParsePorts(c.Ports)
	bind := netip.MustParseAddr(c.BindAddress).Unmap()
	lim := limits{
		bindAddress: c.BindAddress,
		addresses:   []netip.Addr{bind},
		ports:       hostpolicy.PortPolicy{Allowed: ports, Reserved: reserved, Privileged: c.AllowPrivilegedPorts},
		maxServers:  c.MaxServers,
	}
	for _, a := range c.BindAddresses {
		lim.addresses = append(lim.addresses, netip.MustParseAddr(a).Unmap())
	}
	return lim
}

// runAs is the account of the workers; root means none.
func (c Config) runAs() runAs {
	r := runAs{User: c.User, Group: c.Group}
	if r.User == "root" {
		r.User = ""
	}
	if r.Group == "root" {
		r.Group = ""
	}
	return r
}

// checkAccount makes sure the workers' account exists: haproxy would
// refuse the configuration at its first start otherwise, long after
// the agent started.
func checkAccount(r runAs) error {
	if r.User != "" {
		if _, err := user.Lookup(r.User); err != nil {
			return api.Invalid("user", "%v (create it, or name another unprivileged account)", err)
		}
	}
	if r.Group != "" {
		if _, err := user.LookupGroup(r.Group); err != nil {
			return api.Invalid("group", "%v", err)
		}
	}
	return nil
}

// Option tunes a Provider.
type Option func(*Provider)

// WithName names the provider (default "haproxy"); its health condition
// is provider/<name>.
func WithName(name string) Option { return func(p *Provider) { p.name = name } }

// WithNode sets the node reported in statuses.
func WithNode(node string) Option { return func(p *Provider) { p.node = node } }

// WithReservedPorts sets the node's own ports, which listeners never
// bind whatever Ports allows.
func WithReservedPorts(r hostpolicy.PortRanges) Option {
	return func(p *Provider) { p.reserved = r }
}

// WithLogger sets the logger (default: discard).
func WithLogger(log *slog.Logger) Option {
	return func(p *Provider) {
		if log != nil {
			p.log = log
		}
	}
}

// Provider serves load balancers with haproxy. It implements
// provider.Provider, provider.Watcher, provider.Closer and
// provider.Meter.
type Provider struct {
	name     string
	node     string
	cfg      Config
	reserved hostpolicy.PortRanges
	lim      limits
	run      runAs
	paths    paths
	// admin is the runtime API of the running worker (paths.Admin).
	admin   runtimeAPI
	log     *slog.Logger
	version string

	// op serializes whatever changes haproxy (start, reload, runtime API
	// writes, stop); it is a channel so that waiting for it honours ctx.
	op chan struct{}

	mu  sync.Mutex
	lbs map[string]*lb
	// proc is the running master, nil when none runs.
	proc *process
	// loaded is what the running master loaded.
	loaded  runningState
	reloads int
	// restarts counts unexpected exits followed by a restart; crashes
	// are their times within crashWindow.
	restarts int
	crashes  []time.Time
	lastExit string
	// lastErr is the last failure to converge (start, reload, runtime
	// API); dirty says the supervisor must converge again, not before
	// retryAt.
	lastErr  string
	dirty    bool
	failures int
	retryAt  time.Time
	snapshot stats
	health   api.Condition
	watchers *provider.Watchers
	pushed   map[string]api.AssignmentStatus

	stop      context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

var (
	_ provider.Provider   = (*Provider)(nil)
	_ provider.Watcher    = (*Provider)(nil)
	_ provider.Closer     = (*Provider)(nil)
	_ provider.HostServer = (*Provider)(nil)
	_ provider.Meter      = (*Provider)(nil)
	_ provider.Factory    = Factory
)

// lb is one load balancer.
type lb struct {
	state lbState
	res   resolved
	// structure hashes its sections of the configuration, to tell
	// whether the running haproxy has loaded this generation.
	structure string
	phase     api.Phase
	since     time.Time
}

// Factory makes a Provider from the agent's config (see Config for the
// keys); the state directory defaults to the provider's data directory.
func Factory(ctx context.Context, o provider.Options) (provider.Provider, error) {
	cfg := Config{StateDir: o.DataDir}
	if err := provider.Decode(o.Config, &cfg); err != nil {
		return nil, fmt.Errorf("haproxy: %w", err)
	}
	opts := []Option{WithNode(o.Node), WithLogger(o.Logger), WithReservedPorts(o.ReservedPorts)}
	if o.Name != "" {
		opts = append(opts, WithName(o.Name))
	}
	return New(ctx, cfg, opts...)
}

// HostListeners are the addresses and ports listeners may bind, but
// loopback addresses, which replicas cannot reach anyway: replicas of the
// node may reach its load balancers there.
func (p *Provider) HostListeners() []provider.HostListener {
	ports := p.lim.ports.Ports()
	if len(ports) == 0 {
		return nil
	}
	var out []provider.HostListener
	for _, a := range p.lim.addresses {
		if a.IsLoopback() || slices.ContainsFunc(out, func(l provider.HostListener) bool { return l.Addr == a }) {
			continue
		}
		out = append(out, provider.HostListener{Addr: a, Proto: "tcp", Ports: ports})
	}
	return out
}

// New returns a provider holding the load balancers found in the state
// directory. A haproxy still running from a previous provider on that
// directory is adopted as it is; if load balancers exist and none runs,
// the supervisor starts one.
func New(ctx context.Context, cfg Config, opts ...Option) (*Provider, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("haproxy: %w", err)
	}
	dir, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return nil, fmt.Errorf("haproxy: state dir: %w", err)
	}
	cfg.StateDir = dir
	p := &Provider{
		name:     "haproxy",
		cfg:      cfg,
		paths:    newPaths(dir),
		log:      slog.New(slog.DiscardHandler),
		op:       make(chan struct{}, 1),
		lbs:      map[string]*lb{},
		watchers: provider.NewWatchers(watchBuffer),
		pushed:   map[string]api.AssignmentStatus{},
		done:     make(chan struct{}),
	}
	for _, o := range opts {
		o(p)
	}
	p.admin = runtimeAPI{socket: p.paths.Admin, log: p.log}
	p.lim, p.run = cfg.limits(p.reserved), cfg.runAs()
	if err := checkAccount(p.run); err != nil {
		return nil, fmt.Errorf("haproxy: %w", err)
	}
	if err := os.MkdirAll(p.paths.LBs, 0o750); err != nil {
		return nil, fmt.Errorf("haproxy: state dir: %w", err)
	}
	p.version = haproxyVersion(ctx, cfg.Binary)
	states, err := loadLBs(p.paths.LBs)
	if err != nil {
		return nil, fmt.Errorf("haproxy: %w", err)
	}
	for _, s := range states {
		p.lbs[s.ID] = p.newLB(s)
	}
	p.adopt(ctx)
	// The first tick converges: it starts haproxy if load balancers
	// exist and none runs, and repairs what an agent that died mid-way
	// left undone (a no-op otherwise).
	p.dirty = true

	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p.stop = cancel
	go p.supervise(sctx)
	return p, nil
}

// adopt takes over a master left running by a previous provider.
func (p *Provider) adopt(ctx context.Context) {
	pid := readPIDFile(p.paths.PID)
	if !ownsPID(ctx, pid, p.paths.Config) {
		return
	}
	h, err := os.FindProcess(pid)
	if err != nil {
		return
	}
	if err := ready(ctx, p.paths); err != nil {
		p.log.Warn("adopted haproxy does not answer yet", "pid", pid, "err", err)
	}
	p.proc = &process{pid: pid, os: h}
	if rs, ok := loadRunning(p.paths.Running); ok && rs.PID == pid {
		p.loaded = rs
	}
	p.log.Info("adopted running haproxy", "pid", pid, "loadBalancers", len(p.lbs))
}

// ownsPID reports whether pid is a master running our configuration. An
// empty command line (a master re-executing itself) is looked at again
// rather than trusted: the pid in a stale pid file may be anyone's.
func ownsPID(ctx context.Context, pid int, cfgPath string) bool {
	for range 10 {
		if !procAlive(pid, cfgPath) {
			return false
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && runsConfig(b, cfgPath) {
			return true
		}
		if backoff.Sleep(ctx, pollEvery) != nil {
			return false
		}
	}
	return false
}

// haproxyVersion returns haproxy's version ("2.6.12-1+deb12u4"), or ""
// when the binary does not run.
func haproxyVersion(ctx context.Context, binary string) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, "-v").Output()
	if err != nil {
		return ""
	}
	first, _, _ := strings.Cut(string(out), "\n")
	f := strings.Fields(first)
	if len(f) >= 3 && f[1] == "version" {
		return f[2]
	}
	return strings.TrimSpace(first)
}

// newLB resolves a load balancer's spec; a spec haproxy cannot run puts
// it in error.
func (p *Provider) newLB(s *lbState) *lb {
	l := &lb{state: *s}
	res, err := resolve(s.ID, s.Spec, s.Endpoints, p.lim)
	if err != nil {
		if l.state.Error == "" {
			l.state.Error = "invalid load balancer: " + err.Error()
		}
		return l
	}
	l.res = res
	l.structure = render(p.paths, p.run, []resolved{res}).LBStructure[s.ID]
	return l
}

// MasterPID is the pid of the running haproxy master, 0 when none runs.
func (p *Provider) MasterPID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc == nil {
		return 0
	}
	return p.proc.pid
}

// Reloads counts the successful reloads this provider made.
func (p *Provider) Reloads() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reloads
}

// Restarts counts the times haproxy exited unexpectedly and the
// supervisor noticed.
func (p *Provider) Restarts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restarts
}

// StateDir is the directory the provider owns.
func (p *Provider) StateDir() string { return p.paths.Dir }

// Close stops the supervisor. It leaves haproxy running, so that the
// next provider on the same state directory (an agent restart) adopts it
// without dropping traffic; use Shutdown to stop haproxy too.
func (p *Provider) Close() error {
	p.closeOnce.Do(func() {
		p.stop()
		<-p.done
		// Nothing polls for them any more.
		p.watchers.Close()
	})
	return nil
}

// Shutdown closes the provider and stops haproxy. The load balancers'
// state stays: the next provider on the directory starts haproxy again.
// It is for tests and tooling; an agent only closes.
func (p *Provider) Shutdown(ctx context.Context) error {
	if err := p.Close(); err != nil {
		return err
	}
	if err := p.lockOp(ctx); err != nil {
		return fmt.Errorf("haproxy: shutdown: %w", err)
	}
	defer p.unlockOp()
	return p.stopLocked(ctx, stopGrace)
}

func (p *Provider) lockOp(ctx context.Context) error {
	select {
	case p.op <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *Provider) unlockOp() { <-p.op }

// Info implements provider.Provider.
func (p *Provider) Info(context.Context) (provider.Info, error) {
	return provider.Info{
		Name:    p.name,
		Version: version.String(),
		Kinds:   []api.ProviderKind{api.ProviderLoadbalancer},
	}, nil
}

// Health implements provider.Provider: one condition, provider/<name>.
// It is an error when the binary is missing, when haproxy cannot start,
// or when it exited crashLoop times within crashWindow; a warning after
// a restart or a failed reload.
func (p *Provider) Health(context.Context) ([]api.Condition, error) {
	now := time.Now()
	c := api.Condition{Type: provider.ConditionType(p.name)}
	binErr := checkBinary(p.cfg.Binary)

	p.mu.Lock()
	defer p.mu.Unlock()
	recent := p.recentCrashesLocked(now)
	want := p.activeCountLocked() > 0
	switch {
	case binErr != nil:
		c.Status, c.Reason, c.Message = api.ConditionError, "BinaryMissing", binErr.Error()
	case recent >= crashLoop:
		c.Status, c.Reason = api.ConditionError, "CrashLoop"
		c.Message = fmt.Sprintf("haproxy exited %d times in the last %v; last: %s", recent, crashWindow, p.lastExit)
	case want && p.proc == nil && p.lastErr != "":
		c.Status, c.Reason, c.Message = api.ConditionError, "StartFailed", p.lastErr
	case recent > 0:
		c.Status, c.Reason = api.ConditionWarning, "Restarted"
		c.Message = fmt.Sprintf("haproxy exited unexpectedly (%s) and was restarted; %d exits in the last %v", p.lastExit, recent, crashWindow)
	case p.lastErr != "":
		c.Status, c.Reason, c.Message = api.ConditionWarning, "Degraded", p.lastErr
	case p.proc != nil:
		c.Status, c.Reason = api.ConditionReady, "Running"
		c.Message = fmt.Sprintf("haproxy %s, master pid %d, %d load balancers, %d reloads", p.version, p.proc.pid, len(p.lbs), p.reloads)
	default:
		c.Status, c.Reason = api.ConditionReady, "Idle"
		c.Message = fmt.Sprintf("haproxy %s; it starts with the first load balancer", p.version)
	}
	if p.health.Status != c.Status || p.health.Reason != c.Reason {
		p.health = c
		p.health.Since = now
	}
	c.Since = p.health.Since
	return []api.Condition{c}, nil
}

func checkBinary(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("haproxy binary: %w", err)
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("haproxy binary %s is not executable", path)
	}
	return nil
}

func (p *Provider) recentCrashesLocked(now time.Time) int {
	p.crashes = slices.DeleteFunc(p.crashes, func(t time.Time) bool { return now.Sub(t) > crashWindow })
	return len(p.crashes)
}

func (p *Provider) activeCountLocked() int {
	n := 0
	for _, l := range p.lbs {
		if l.state.Error == "" {
			n++
		}
	}
	return n
}

// Apply implements provider.Provider. The load balancer is saved, then
// haproxy is made to match every load balancer: endpoints through the
// runtime API, listeners through a seamless reload. A spec haproxy
// cannot run, or a port it cannot bind, is reported as phase error.
func (p *Provider) Apply(ctx context.Context, a *api.Assignment) (api.AssignmentStatus, error) {
	if a == nil || a.ID == "" {
		return api.AssignmentStatus{}, api.Invalid("id", "is required")
	}
	if (a.Provider != "" && a.Provider != api.ProviderLoadbalancer) || (a.Kind != "" && a.Kind != api.KindLoadbalancer) {
		return api.AssignmentStatus{}, fmt.Errorf("haproxy: %s %s: %w", a.Kind, a.Provider, provider.ErrUnsupported)
	}
	gen := max(a.Generation, 1)
	kind := a.Kind
	if kind == "" {
		kind = api.KindLoadbalancer
	}
	next := &lbState{ID: a.ID, Kind: kind, Generation: gen, Spec: cloneSpec(a.Spec.Loadbalancer), Endpoints: slices.Clone(a.Endpoints)}
	if newer, err := p.hold(next); newer {
		// A newer generation was applied meanwhile.
		return p.Status(ctx, a.ID)
	} else if err != nil {
		return api.AssignmentStatus{}, fmt.Errorf("haproxy: apply %s: %w", a.ID, err)
	}

	if err := p.lockOp(ctx); err != nil {
		return api.AssignmentStatus{}, fmt.Errorf("haproxy: apply %s: %w", a.ID, err)
	}
	err := p.converge(ctx, stopGrace)
	p.unlockOp()
	if err != nil {
		if ctx.Err() != nil {
			return api.AssignmentStatus{}, fmt.Errorf("haproxy: apply %s: %w", a.ID, err)
		}
		// Not the caller's failure: the status says it, and the
		// supervisor retries.
		p.log.Warn("haproxy did not converge", "id", a.ID, "err", err)
	}
	st, err := p.Status(ctx, a.ID)
	if err != nil {
		return api.AssignmentStatus{}, err
	}
	p.mu.Lock()
	p.publishLocked(st)
	p.mu.Unlock()
	return st, nil
}

func cloneSpec(s *api.LoadbalancerSpec) *api.LoadbalancerSpec {
	if s == nil {
		return nil
	}
	c := *s
	c.Listeners = slices.Clone(s.Listeners)
	c.Selector = maps.Clone(s.Selector)
	if s.HealthCheck != nil {
		hc := *s.HealthCheck
		c.HealthCheck = &hc
	}
	return &c
}

// Delete implements provider.Provider: the load balancer's frontends go
// away through a reload, or haproxy stops, within grace, when it was the
// last one.
func (p *Provider) Delete(ctx context.Context, a *api.Assignment, grace time.Duration) error {
	if a == nil || a.ID == "" {
		return api.Invalid("id", "is required")
	}
	p.mu.Lock()
	cur, ok := p.lbs[a.ID]
	if !ok {
		p.mu.Unlock()
		return nil
	}
	if err := removeLB(p.paths.LBs, a.ID); err != nil {
		p.mu.Unlock()
		return fmt.Errorf("haproxy: delete %s: %w", a.ID, err)
	}
	delete(p.lbs, a.ID)
	p.mu.Unlock()

	if err := p.lockOp(ctx); err != nil {
		p.setDirty()
		return fmt.Errorf("haproxy: delete %s: %w", a.ID, err)
	}
	err := p.converge(ctx, grace)
	p.unlockOp()

	now := time.Now()
	p.mu.Lock()
	p.publishLocked(api.AssignmentStatus{
		ID: a.ID, Node: p.node, ObservedGeneration: cur.state.Generation,
		Phase: api.PhaseDestroyed, Since: now, UpdatedAt: now,
		ProviderID: providerID(a.ID),
	})
	delete(p.pushed, a.ID)
	p.mu.Unlock()
	if err != nil {
		return fmt.Errorf("haproxy: delete %s: %w", a.ID, err)
	}
	return nil
}

func providerID(id string) string { return "haproxy/" + safeName(id) }

func (p *Provider) setDirty() {
	p.mu.Lock()
	p.dirty = true
	p.mu.Unlock()
}

// Status implements provider.Provider.
func (p *Provider) Status(ctx context.Context, id string) (api.AssignmentStatus, error) {
	p.mu.Lock()
	_, ok := p.lbs[id]
	p.mu.Unlock()
	if !ok {
		return api.AssignmentStatus{}, fmt.Errorf("haproxy: load balancer %q: %w", id, provider.ErrNotFound)
	}
	snap, snapErr := p.stats(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	l, ok := p.lbs[id]
	if !ok {
		return api.AssignmentStatus{}, fmt.Errorf("haproxy: load balancer %q: %w", id, provider.ErrNotFound)
	}
	return p.statusLocked(l, snap, snapErr, time.Now()), nil
}

// List implements provider.Provider, sorted by id.
func (p *Provider) List(ctx context.Context) ([]provider.Listed, error) {
	snap, snapErr := p.stats(ctx)
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]provider.Listed, 0, len(p.lbs))
	for _, l := range p.lbs {
		out = append(out, provider.Listed{
			ID:         l.state.ID,
			Kind:       l.state.Kind,
			Generation: l.state.Generation,
			Status:     p.statusLocked(l, snap, snapErr, now),
		})
	}
	slices.SortFunc(out, func(a, b provider.Listed) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// stats asks haproxy for "show stat". While a reload swaps workers the
// admin socket may not answer for a moment; a recent snapshot stands in.
func (p *Provider) stats(ctx context.Context) (stats, error) {
	p.mu.Lock()
	running := p.proc != nil
	p.mu.Unlock()
	if !running {
		return stats{}, errors.New("haproxy is not running")
	}
	s, err := p.admin.stat(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		if time.Since(p.snapshot.At) < statsMaxAge {
			return p.snapshot, nil
		}
		return stats{}, err
	}
	s.At = time.Now()
	p.snapshot = s
	return s, nil
}

// hold makes next the load balancer held for its id, saved, unless a
// newer generation is held (newer). Holding what is held changes
// nothing, unless it is in error: then it is a retry (the port may be
// free now).
func (p *Provider) hold(next *lbState) (newer bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cur := p.lbs[next.ID]
	if cur != nil && next.Generation < cur.state.Generation {
		return true, nil
	}
	unchanged := cur != nil && cur.state.Error == "" && cur.state.Generation == next.Generation &&
		cur.state.Kind == next.Kind && reflect.DeepEqual(cur.state.Spec, next.Spec) && slices.Equal(cur.state.Endpoints, next.Endpoints)
	if unchanged {
		return false, nil
	}
	if err := saveLB(p.paths.LBs, next); err != nil {
		return false, err
	}
	l := p.newLB(next)
	if cur != nil {
		l.phase, l.since = cur.phase, cur.since
	}
	if l.state.Error != "" {
		if err := saveLB(p.paths.LBs, &l.state); err != nil {
			p.log.Warn("save load balancer", "id", next.ID, "err", err)
		}
	}
	p.lbs[next.ID] = l
	return false, nil
}

// statusLocked says what haproxy does for l: ready once every frontend
// is bound (even without a healthy backend, which the reason says).
func (p *Provider) statusLocked(l *lb, snap stats, snapErr error, now time.Time) api.AssignmentStatus {
	st := api.AssignmentStatus{
		ID:                 l.state.ID,
		Node:               p.node,
		ObservedGeneration: l.state.Generation,
		ProviderID:         providerID(l.state.ID),
		UpdatedAt:          now,
	}
	switch {
	case l.state.Error != "":
		st.Phase, st.Reason = api.PhaseError, l.state.Error
	case p.proc == nil && p.lastErr != "":
		st.Phase, st.Reason = api.PhaseError, "haproxy is not running: "+p.lastErr
	case p.proc == nil:
		st.Phase, st.Reason = api.PhaseProvision, "haproxy is starting"
	case p.loaded.LBStructure[l.state.ID] != l.structure:
		st.Phase, st.Reason = api.PhaseProvision, "waiting for haproxy to load this generation"
		if p.lastErr != "" {
			st.Reason += ": " + p.lastErr
		}
	case snapErr != nil:
		st.Phase, st.Reason = api.PhaseProvision, "haproxy runtime API: "+snapErr.Error()
	default:
		servingStatus(&st, l, snap)
	}
	if l.phase != st.Phase || l.since.IsZero() {
		l.phase, l.since = st.Phase, now
	}
	st.Since = l.since
	return st
}

// servingStatus is the status of a load balancer haproxy runs at its
// generation: ready once every frontend is bound, with its backends'
// health.
func servingStatus(st *api.AssignmentStatus, l *lb, snap stats) {
	var unbound []string
	for _, ls := range l.res.Listeners {
		fe := frontendName(l.state.ID, ls.Port)
		if s := snap.Frontends[fe].Status; s != "OPEN" {
			unbound = append(unbound, fmt.Sprintf("%s:%d (%s)", ls.Address, ls.Port, cmpOr(s, "absent")))
		}
	}
	if len(unbound) > 0 {
		st.Phase, st.Reason = api.PhaseProvision, "frontends not bound: "+strings.Join(unbound, ", ")
		return
	}
	st.Phase = api.PhaseReady
	st.Backends = backendStatuses(&l.res, snap)
	up := 0
	for _, b := range st.Backends {
		if b.Health == "up" {
			up++
		}
	}
	var reasons []string
	if up == 0 {
		reasons = append(reasons, "no healthy backends")
	}
	if l.res.Skipped != "" {
		reasons = append(reasons, l.res.Skipped)
	}
	st.Reason = strings.Join(reasons, "; ")
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// backendStatuses reports each endpoint once, however many listeners
// (backends) it serves: down if any backend finds it down, then maint,
// else up.
func backendStatuses(r *resolved, snap stats) []api.BackendStatus {
	bes := r.backends()
	var out []api.BackendStatus
	for i, e := range r.Endpoints {
		found, h, port := false, "up", e.Port
		for _, be := range bes {
			s := be.Servers[i]
			ss, ok := snap.Servers[be.Name][s.Name]
			if !ok {
				continue
			}
			if !found {
				port = s.Port
			}
			found = true
			switch got := health(ss.Status); {
			case got == "down":
				h = "down"
			case got == "maint" && h == "up":
				h = "maint"
			}
		}
		if found {
			out = append(out, api.BackendStatus{Replica: e.Replica, Address: e.Address, Port: port, Health: h})
		}
	}
	return out
}
