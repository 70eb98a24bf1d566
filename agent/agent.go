// Package agent is Strata's node agent. It belongs to one region: it
// registers its node with the region's AgentService, heartbeats, watches the
// node's assignments and drives the node's providers to make them real,
// reports what the providers observe in batches, and serves NodeService
// (the region monitor's Status probe, and logs).
//
// Two rules shape the code. An agent restart changes nothing that is
// already right: providers are listed before anything is done, and a
// replica that already runs at the assignment's generation is adopted, not
// applied again. And nothing is deleted for lack of news: only a snapshot
// from the region (or an explicit removal) makes a local replica an
// orphan; an unreachable region or a shutdown deletes nothing.
package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/stratahq/strata/agent/netplane"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/metrics"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/internal/serving"
	"github.com/stratahq/strata/internal/transport"
	"github.com/stratahq/strata/internal/version"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	"github.com/stratahq/strata/providers/provider"
)

// Options configures an Agent.
type Options struct {
	// Config is the agent's configuration; it is copied by New.
	Config *config.Agent
	// Registry builds in-process providers by name.
	Registry *provider.Registry
	// Providers are pre-built providers by name (tests, benchmarks that
	// run many agents in one process). When set they replace
	// Config.Providers; the agent does not close them, their owner does.
	Providers map[string]provider.Provider
	// RegionConn is an optional connection to the region, which many
	// agents may share; without it the agent dials Config.Region.Endpoint
	// with Config.TLS (or plaintext with Config.Insecure).
	RegionConn grpc.ClientConnInterface
	// Listener is an optional listener for NodeService; without it the
	// agent listens on Config.Listen.GRPC.
	Listener net.Listener
	// DisableNodeService skips NodeService (benchmarks with many agents).
	DisableNodeService bool
	// Metrics, when set, times and counts every provider call, and is
	// served over HTTP on Config.Listen.Metrics when that is set.
	Metrics *metrics.Registry
	// Logger is the process's; the agent adds tier=agent and node=<name>.
	Logger *slog.Logger
	// Clock stamps statuses and conditions; timers use real time.
	Clock func() time.Time
	// NetKernel is the host the data plane programs (tests: a simulated
	// host); without it the agent programs its own network namespace,
	// when Config.Network says it should.
	NetKernel netplane.Kernel
}

// Agent runs one node. Build it with New and call Run once.
type Agent struct {
	metrics    *metrics.Providers
	metricsReg *metrics.Registry
	cfg        config.Agent
	registry   *provider.Registry
	prebuilt   map[string]provider.Provider
	conn       grpc.ClientConnInterface
	sec        *transport.Security
	region     string
	listener   net.Listener
	serveNode  bool
	log        *slog.Logger
	clock      func() time.Time
	t          timings

	started   atomic.Bool
	startedAt time.Time
	addr      atomic.Pointer[string]
	ready     chan struct{}

	// Set by Run before the goroutines that use them start, read-only
	// afterwards. A replica's walk through them: the assignment stream
	// merges the region's word into the table, which queues the ids
	// that changed; a worker reconciles each (the reconciler calls its
	// provider and records what it said in the table); observers record
	// what the providers report later; the table hands every changed
	// status to the reporter, which sends it to the region. health
	// keeps the node's conditions; net is the data plane.
	provs    *providerSet
	capacity api.Capacity
	queue    *workQueue
	table    *replicaTable
	reporter *reporter
	health   *health
	net      *dataPlane

	// netWanted: the agent programs its host (see dataPlaneWanted);
	// netKernel is Options.NetKernel.
	netWanted bool
	netKernel netplane.Kernel
}

// New checks o and returns an agent; nothing that blocks happens before
// Run.
func New(o Options) (*Agent, error) {
	cfg, err := checkOptions(o)
	if err != nil {
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var sec *transport.Security
	region := ""
	if o.RegionConn == nil || !o.DisableNodeService {
		if sec, region, err = nodeSecurity(&cfg); err != nil {
			return nil, err
		}
	}
	clock := o.Clock
	if clock == nil {
		clock = time.Now
	}
	log = log.With("tier", "agent", "node", cfg.Node.Name)
	return &Agent{
		cfg:        cfg,
		registry:   o.Registry,
		prebuilt:   o.Providers,
		metrics:    providerMetrics(o.Metrics),
		metricsReg: o.Metrics,
		conn:       o.RegionConn,
		sec:        sec,
		region:     region,
		listener:   o.Listener,
		serveNode:  !o.DisableNodeService,
		log:        log,
		clock:      clock,
		t:          defaultTimings(),
		ready:      make(chan struct{}),
		netWanted:  dataPlaneWanted(&cfg, len(o.Providers) > 0, o.NetKernel),
		netKernel:  o.NetKernel,
	}, nil
}

// checkOptions checks o and returns its configuration, defaulted.
func checkOptions(o Options) (config.Agent, error) {
	if o.Config == nil {
		return config.Agent{}, errors.New("agent: options: config is required")
	}
	cfg := *o.Config
	if cfg.Node.Name == "" {
		return cfg, errors.New("agent: options: config node.name is required")
	}
	if cfg.StatusInterval < 0 || cfg.Concurrency < 0 {
		return cfg, errors.New("agent: options: statusInterval and concurrency must not be negative")
	}
	def := config.DefaultAgent()
	cfg.StatusInterval = cmp.Or(cfg.StatusInterval, def.StatusInterval)
	cfg.Concurrency = cmp.Or(cfg.Concurrency, def.Concurrency)
	if err := checkProviders(o, &cfg); err != nil {
		return cfg, err
	}
	if o.RegionConn == nil && cfg.Region.Endpoint == "" {
		return cfg, errors.New("agent: options: config region.endpoint is required without a region connection")
	}
	if !o.DisableNodeService && o.Listener == nil && cfg.Listen.GRPC == "" {
		return cfg, errors.New("agent: options: config listen.grpc is required without a listener")
	}
	return cfg, nil
}

// checkProviders checks the providers the agent is given (o.Providers)
// or is to open (cfg.Providers).
func checkProviders(o Options, cfg *config.Agent) error {
	for name, p := range o.Providers {
		if p == nil {
			return fmt.Errorf("agent: options: provider %q is nil", name)
		}
	}
	if len(o.Providers) > 0 {
		return nil
	}
	if len(cfg.Providers) == 0 {
		return errors.New("agent: options: no providers (set Providers or config providers)")
	}
	for _, p := range cfg.Providers {
		if p.Name == "" {
			return errors.New("agent: options: a configured provider has no name")
		}
		if p.Plugin == "" && p.Socket == "" && o.Registry == nil {
			return fmt.Errorf("agent: options: provider %q is in-process but no registry was given", p.Name)
		}
	}
	return nil
}

// nodeSecurity is the agent's transport security: it dials its region
// and serves NodeService with its node identity,
// node:<region>/<node.name>, and the region it belongs to is the one its
// certificate names ("" in insecure mode).
func nodeSecurity(cfg *config.Agent) (*transport.Security, string, error) {
	sec, err := transport.NewSecurity(cfg.TLS, cfg.Insecure)
	if err != nil {
		return nil, "", fmt.Errorf("agent: %w", err)
	}
	if sec.IsInsecure() {
		return sec, "", nil
	}
	self := sec.Self()
	if self.Kind != pki.KindNode || self.Name != cfg.Node.Name {
		return nil, "", fmt.Errorf("agent: tls.cert names %s; node %q needs node:<region>/%s", self, cfg.Node.Name, cfg.Node.Name)
	}
	return sec, self.Region, nil
}

// Addr returns the NodeService address the region is told: the advertised
// address when one is configured, else the listener's, once listening.
func (a *Agent) Addr() string {
	if p := a.addr.Load(); p != nil {
		return *p
	}
	return ""
}

// Ready is closed once the first assignment snapshot has been reconciled
// once: every assignment in it was adopted or had one attempt.
func (a *Agent) Ready() <-chan struct{} { return a.ready }

// Run runs the agent until ctx is done and returns nil on a clean
// shutdown, a cancellation during start-up included. Every goroutine it
// starts has ended when it returns. Replicas are never deleted on
// shutdown.
func (a *Agent) Run(ctx context.Context) error {
	if !a.started.CompareAndSwap(false, true) {
		return errors.New("agent: run called twice")
	}
	a.startedAt = a.clock()
	err := a.run(ctx)
	if err != nil && ctx.Err() != nil {
		a.log.Info("agent stopped during start-up", "err", err)
		return nil
	}
	return err
}

func (a *Agent) run(ctx context.Context) error {
	if a.listener != nil && a.serveNode {
		// Serving takes the listener over; until then it is ours to close
		// if start-up fails.
		lis := a.listener
		defer func() {
			if a.Addr() == "" {
				lis.Close()
			}
		}()
	}
	opener := &providerOpener{cfg: &a.cfg, registry: a.registry, prebuilt: a.prebuilt, metrics: a.metrics, t: &a.t, log: a.log}
	provs, err := opener.open(ctx)
	if err != nil {
		return err
	}
	a.provs = provs
	defer provs.close(a.log)
	n := a.cfg.Node
	a.capacity = nodeCapacity(api.Capacity{MilliCPU: n.MilliCPU, MemoryMiB: n.MemoryMiB, DiskMiB: n.DiskMiB}, a.cfg.DataDir, provs, a.log)

	if a.sec != nil && a.sec.IsInsecure() {
		serving.WarnInsecure(a.log, serving.InsecureGRPC)
	}
	conn, closeConn, err := a.regionConn()
	if err != nil {
		return err
	}
	defer closeConn()
	client := agentv1.NewAgentServiceClient(conn)
	// Before NodeService: its calls read the table and the conditions.
	a.assemble(client)

	var node *nodeServer
	if a.serveNode {
		node, err = a.startNodeService()
		if err != nil {
			return err
		}
		defer node.stop(a.t.shutdownFlush)
	} else {
		addr := a.cfg.Advertise.GRPC
		a.addr.Store(&addr)
	}

	if a.metricsReg != nil && a.cfg.Listen.Metrics != "" {
		stop, err := serveMetrics(a.cfg.Listen.Metrics, a.metricsReg, a.log)
		if err != nil {
			return fmt.Errorf("agent: metrics: %w", err)
		}
		defer stop()
	}

	// Before registering: the node tells the region its underlay.
	defer a.net.setUp()()
	a.health.refresh(ctx)

	// Workers block in queue.get, which knows no context: shut the queue
	// down when ctx ends so that they return.
	stopQueue := context.AfterFunc(ctx, a.queue.shutDown)
	defer stopQueue()

	registered := make(chan struct{})
	var wg sync.WaitGroup
	a.startLoops(ctx, &wg, client, registered)
	<-ctx.Done()
	wg.Wait()
	a.net.dns.close()

	// Statuses observed last are still worth sending: the region sees
	// them before it notices the agent is gone. Bounded, best effort.
	select {
	case <-registered:
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.t.shutdownFlush)
		a.reporter.flushAll(fctx)
		cancel()
	default:
	}
	a.log.Info("agent stopped")
	return nil
}

// regionConn is the connection to the region: the one given, or a dial
// that close ends.
func (a *Agent) regionConn() (conn grpc.ClientConnInterface, close func(), err error) {
	if a.conn != nil {
		return a.conn, func() {}, nil
	}
	// The region's certificate must be its own: a node certificate (any
	// agent's) must not pass for the region that hands out assignments
	// and their secrets.
	opts := append(transport.WithFixedWindows(), grpc.WithConnectParams(a.t.regionConnect()))
	cc, err := transport.Dial(a.cfg.Region.Endpoint, a.sec, transport.ServerIs(pki.Region(a.region)), opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("agent: %w", err)
	}
	return cc, func() { cc.Close() }, nil
}

// assemble builds the agent's parts, once its providers are open and
// its region client exists.
func (a *Agent) assemble(client agentv1.AgentServiceClient) {
	name := a.cfg.Node.Name
	a.queue = newWorkQueue(a.t.retryMin, a.t.retryMax)
	a.reporter = newReporter(name, client, &a.t, a.log)
	a.health = &health{provs: a.provs, interval: a.cfg.StatusInterval, t: &a.t, clock: a.clock}
	a.net = &dataPlane{
		wanted: a.netWanted, kernel: a.netKernel, cfg: a.cfg.Network, node: name,
		provs: a.provs, health: a.health, log: a.log,
	}
	if a.netWanted && a.cfg.Network.DNS.Enabled {
		a.net.dns = newNodeDNS(a.cfg.Network.DNS, a.region, a.metricsReg, a.log.With("component", "dns"))
	}
	a.table = &replicaTable{
		node: name, clock: a.clock, t: &a.t, interval: a.cfg.StatusInterval,
		provs: a.provs, queue: a.queue, reporter: a.reporter, log: a.log,
		ready: a.ready, replicas: map[string]*replica{},
	}
}

// startLoops starts the agent's goroutines in wg, in the order a replica
// walks through them: the session with the region, the assignment
// stream, the work queue and its workers (the reconciler), the
// reporter, and per provider a poller (and a watcher, when it pushes);
// then health checks and the network stream (with a data plane).
func (a *Agent) startLoops(ctx context.Context, wg *sync.WaitGroup, client agentv1.AgentServiceClient, registered chan struct{}) {
	name := a.cfg.Node.Name
	meter := &meter{provs: a.provs, table: a.table, t: &a.t, clock: a.clock}
	sess := &session{
		name: name, client: client, node: a.node, addr: a.Addr,
		table: a.table, meter: meter, health: a.health, t: &a.t, clock: a.clock, log: a.log,
	}
	stream := &assignmentStream{node: name, client: client, table: a.table, provs: a.provs, t: &a.t, log: a.log}
	rec := &reconciler{table: a.table, configs: &configFetcher{node: name, client: client}, dns: a.net.dns, t: &a.t, log: a.log}
	wg.Go(func() { sess.run(ctx, registered) })
	wg.Go(func() { stream.run(ctx, registered) })
	wg.Go(func() { a.queue.runDelays(ctx) })
	for range a.cfg.Concurrency {
		wg.Go(func() { a.queue.work(ctx, rec.reconcile, a.log) })
	}
	wg.Go(func() { a.reporter.run(ctx, registered) })
	for _, e := range a.provs.list {
		o := &observer{e: e, table: a.table, interval: a.cfg.StatusInterval, t: &a.t, log: a.log}
		wg.Go(func() { o.runPoller(ctx) })
		if w, ok := e.p.(provider.Watcher); ok {
			wg.Go(func() { o.runWatcher(ctx, w) })
		}
	}
	wg.Go(func() { a.health.run(ctx) })
	wg.Go(func() { meter.run(ctx) })
	if a.net.plane != nil {
		wg.Go(func() { a.net.run(ctx, client, &a.t, registered) })
	}
}

func providerMetrics(r *metrics.Registry) *metrics.Providers {
	if r == nil {
		return nil
	}
	return r.Providers()
}

// serveMetrics serves /metrics on addr until stop is called.
func serveMetrics(addr string, r *metrics.Registry, log *slog.Logger) (stop func(), err error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	// Metrics are read-only numbers, served without a token like the
	// tiers' /metrics; the configuration decides who reaches the address.
	srv, err := serving.NewHTTP(lis, r.HTTP(http.NotFoundHandler()), serving.HTTPOptions{Insecure: true, AnyHost: true, Log: log})
	if err != nil {
		lis.Close()
		return nil, err
	}
	go func() { _ = srv.Serve() }()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Server.Shutdown(ctx)
	}, nil
}

// node is the node record the agent registers.
func (a *Agent) node() *api.Node {
	n := a.cfg.Node
	return &api.Node{
		Name:      n.Name,
		Zone:      n.Zone,
		Labels:    n.Labels,
		Address:   a.Addr(),
		Providers: a.provs.nodeProviders(),
		Capacity:  a.capacity,
		// The region keeps an operator's cordon; the agent only says it
		// is willing.
		Schedulable:        true,
		EnableAutoCordon:   n.EnableAutoCordon,
		AutoCordonInterval: api.D(n.AutoCordonInterval),
		EnableAutoDrain:    n.EnableAutoDrain,
		AutoDrainInterval:  api.D(n.AutoDrainInterval),
		AgentVersion:       a.agentVersion(),
		Network:            a.net.nodeNetwork(),
	}
}

func (a *Agent) agentVersion() string { return version.String() }
