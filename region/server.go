// Package region runs one region: its API (RegionService for the global
// tier, AgentService for agents, REST for operators), and, on the elected
// leader, its controller and node monitor. Everything a region needs to
// keep working lives in its own etcd: a region cut off from the global
// tier keeps reconciling what it has.
package region

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/backoff"
	"github.com/stratahq/strata/internal/bringup"
	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/election"
	"github.com/stratahq/strata/internal/events"
	"github.com/stratahq/strata/internal/heartbeat"
	"github.com/stratahq/strata/internal/metrics"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/internal/redisclient"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/internal/transport"
	"github.com/stratahq/strata/proto/apiproto"
	globalv1 "github.com/stratahq/strata/proto/global/v1"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
	regionapi "github.com/stratahq/strata/region/api"
	"github.com/stratahq/strata/region/console"
	"github.com/stratahq/strata/region/controller"
	"github.com/stratahq/strata/region/monitor"
	"github.com/stratahq/strata/region/state"
)

// grpcReadBuffer is each gRPC connection's read buffer. Every agent holds
// a connection to its region, so a region with 1,000 nodes holds 1,000
// of them: gRPC's default of 32 KiB took 32 MB of heap, 8 KiB still 8 MB.
// Under TLS (every production link) the connection buffers already:
// crypto/tls reads as many records as the socket holds and hands them out
// from its own buffer, so a gRPC buffer on top only copies what is
// buffered, and there is none. Plaintext (insecure mode, one machine)
// keeps a small one: without it every frame header would be a system
// call.
func grpcReadBuffer(sec *transport.Security) int {
	if sec != nil && sec.IsInsecure() {
		return 8 << 10
	}
	return 0
}

// grpcWriteBuffer is the buffer a gRPC connection gathers frames in
// before it writes them. gRPC takes one from a pool for each flush and
// gives it back after; the pool keeps what the busiest moment took, and
// a connection's writer holds its buffer while it yields for more
// frames. With 500 agent connections at the end of B1 the region's heap
// held 4–7 MB of them at 16 KiB each (32 KiB, gRPC's default, took 6.7
// MB at once). What a region sends its agents is mostly small (a
// heartbeat's answer, a node's few changed assignments); a larger
// message costs one write per 4 KiB, a few microseconds each, on the
// rarer large ones (a node's snapshot when its agent connects).
const grpcWriteBuffer = 4 << 10

// Options are what a region needs beyond its configuration.
type Options struct {
	Config *config.Region
	// Logger is the process's; the server adds tier=region, region=<name>
	// and instance=<id>, its components their component=…, each once.
	Logger *slog.Logger
	// Etcd, when set, is used instead of the configured etcd.
	Etcd *clientv3.Client
	// Heartbeats and Events, when set, replace the configured stores
	// (Redis, or in-memory when no Redis address is configured).
	Heartbeats heartbeat.Store
	Events     events.Store
	// GRPCListener and HTTPListener, when set, replace listening on the
	// configured addresses.
	GRPCListener, HTTPListener net.Listener
}

// Server is a running region.
type Server struct {
	o   Options
	cfg *config.Region
	log *slog.Logger
	// kit is the region's start-up sequence; it holds its listeners.
	kit    *bringup.Sequence
	api    *regionapi.Server
	apiMu  sync.Mutex
	leader string
	// consoleURL is what federate registers, set before it starts.
	consoleURL string
}

// New checks the options and listens; Run serves.
func New(o Options) (*Server, error) {
	if o.Config == nil {
		return nil, errors.New("region: no configuration")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	// Refuse to start a region that would answer without an identity.
	if o.Config.API.Token == "" {
		return nil, errors.New("region: api.token is required: the region REST API and console have no anonymous mode")
	}
	s := &Server{o: o, cfg: o.Config, log: o.Logger.With("tier", "region", "region", o.Config.Name, "instance", o.Config.ID)}
	s.kit = &bringup.Sequence{
		Name: "region", Config: &s.cfg.Server, Log: s.log,
		Etcd: o.Etcd, EtcdName: "region-" + s.cfg.Name, ElectionPrefix: state.ElectionPrefix,
		Ready: make(chan struct{}), Build: s.build,
	}
	var hosts []string
	if host, _, err := net.SplitHostPort(s.cfg.Advertise.HTTP); err == nil && host != "" {
		hosts = append(hosts, host)
	}
	if err := s.kit.Listen(o.GRPCListener, o.HTTPListener, pki.Region(s.cfg.Name), s.cfg.API.HTTPAPI, hosts...); err != nil {
		return nil, err
	}
	return s, nil
}

// GRPCAddr is where RegionService and AgentService listen.
func (s *Server) GRPCAddr() string { return s.kit.GRPCListener.Addr().String() }

// HTTPAddr is where the operator REST API listens.
func (s *Server) HTTPAddr() string { return s.kit.HTTPListener.Addr().String() }

// advertised returns the configured advertise address, or the listener's
// address when the configuration has none or names port 0.
func advertised(configured string, l net.Listener) string {
	if configured == "" {
		return l.Addr().String()
	}
	if _, port, err := net.SplitHostPort(configured); err == nil && port == "0" {
		return l.Addr().String()
	}
	return configured
}

// Ready is closed once the region serves.
func (s *Server) Ready() <-chan struct{} { return s.kit.Ready }

// API returns the region's API server once Run has built it.
func (s *Server) API() *regionapi.Server {
	s.apiMu.Lock()
	defer s.apiMu.Unlock()
	return s.api
}

// Run serves until ctx is done: the tier kit's start-up sequence with
// what a region is (build).
func (s *Server) Run(ctx context.Context) error { return s.kit.Run(ctx) }

// build makes what a region is on what the kit opened: its state and
// caches, the heartbeat and event stores, the connections to the global
// tier, the API, and the leader's work (the controller, the node
// monitor, the heartbeats to the global tier). ctx ends when the region
// stops: its streams end then (endStreams), and the console's.
func (s *Server) build(ctx context.Context, b *bringup.Base) (*bringup.Parts, error) {
	cfg := s.cfg
	st := state.NewWriting(b.Store, apiproto.WriteFormat(cfg.Etcd.JSONValues))
	caches := state.NewCaches(st)
	hb, evs, closeHot, err := s.hotStores()
	if err != nil {
		return nil, err
	}
	b.Defer(closeHot)
	emitter := events.NewEmitter(evs, cfg.Name, s.log)
	global, closeGlobal, err := s.dialGlobal(s.kit.Security)
	if err != nil {
		return nil, err
	}
	b.Defer(closeGlobal)
	apiSrv, err := regionapi.New(regionapi.Options{
		ConfigData:        global.configData,
		Region:            cfg.Name,
		State:             st,
		Caches:            caches,
		Heartbeats:        hb,
		Events:            regionapi.JoinEvents(emitter, evs),
		HeartbeatInterval: cfg.Nodes.HeartbeatInterval,
		DrainDeadline:     cfg.Controller.DrainDeadline,
		MaxBodyBytes:      cfg.API.MaxBodyBytes,
		Token:             cfg.API.Token,
		Audit:             b.Audit,
		Security:          s.kit.Security,
		Leader:            s.leaderID,
		Logger:            s.log,
	})
	if err != nil {
		return nil, err
	}
	s.apiMu.Lock()
	s.api = apiSrv
	s.apiMu.Unlock()
	registerRegionGauges(b.Metrics, caches, apiSrv)
	registerEventMetrics(b.Metrics, emitter)
	lead := s.leaderWork(b, st, caches, hb, emitter, global)
	s.consoleURL = s.kit.HTTP.Scheme() + "://" + advertised(cfg.Advertise.HTTP, s.kit.HTTPListener) + "/console"
	return &bringup.Parts{
		Caches: caches,
		API:    apiSrv,
		Console: console.Handler(console.Options{
			Region: cfg.Name, Logger: s.log, Events: evs, Token: cfg.API.Token, Done: ctx.Done(),
		}),
		GRPCOptions: append([]grpc.ServerOption{grpc.ReadBufferSize(grpcReadBuffer(s.kit.Security)), grpc.WriteBufferSize(grpcWriteBuffer),
			grpc.ChainStreamInterceptor(endStreams(ctx))}, transport.FixedWindows()...),
		Runners: []func(context.Context) error{
			func(ctx context.Context) error { emitter.Run(ctx); return nil },
			func(ctx context.Context) error { return s.watchLeader(ctx, b.Elector) },
		},
		// Leading needs the region's network in place.
		BeforeLead: func(ctx context.Context) error { return s.ensureNetwork(ctx, st) },
		Lead:       lead,
	}, nil
}

// leaderWork builds the controller and the node monitor, and returns
// what the region's leader runs: them, and the heartbeats to the global
// tier, until leaderCtx ends.
func (s *Server) leaderWork(b *bringup.Base, st *state.State, caches *state.Caches, hb heartbeat.Store, emitter *events.Emitter, global *globalReplicas) func(context.Context, *election.Leadership) {
	cfg := s.cfg
	ctrl := controller.New(controller.Options{
		Region:           cfg.Name,
		State:            st,
		Caches:           caches,
		Events:           emitter,
		ProvisionTimeout: cfg.Controller.ProvisionTimeout,
		DestroyTimeout:   cfg.Controller.DestroyTimeout,
		RetryBackoff:     cfg.Controller.RetryBackoff,
		Resync:           cfg.Controller.Resync,
		Metrics:          b.Metrics.Controller(),
		SchedulerMetrics: b.Metrics.Scheduler(),
		Logger:           s.log,
	})
	prober := monitor.NewGRPCProber(cfg.Name, s.kit.Security)
	b.Defer(prober.Close)
	mon := monitor.New(monitor.Options{
		Region:            cfg.Name,
		State:             st,
		Caches:            caches,
		Heartbeats:        hb,
		Events:            emitter,
		Prober:            prober,
		HeartbeatInterval: cfg.Nodes.HeartbeatInterval,
		SuspectAfter:      cfg.Nodes.SuspectAfter,
		DownAfter:         cfg.Nodes.DownAfter,
		ProbeTimeout:      cfg.Nodes.ProbeTimeout,
		DrainDeadline:     cfg.Controller.DrainDeadline,
		Metrics:           b.Metrics.Monitor(),
		Logger:            s.log,
	})
	return func(leaderCtx context.Context, l *election.Leadership) {
		s.log.Info("leading the region")
		lg, lctx := errgroup.WithContext(leaderCtx)
		lg.Go(func() error { return ctrl.Lead(lctx, l) })
		lg.Go(func() error { return mon.Lead(lctx, l) })
		if len(global.clients) > 0 {
			// Only the leader speaks for the region, so that the
			// registered endpoint does not flip between replicas.
			lg.Go(func() error { s.federate(lctx, global, ctrl.Headroom, hb); return nil })
		}
		if err := lg.Wait(); err != nil && leaderCtx.Err() == nil {
			s.log.Warn("region leadership work ended", "err", err)
		}
	}
}

// registerRegionGauges exposes what the region holds, counted from its
// caches when scraped.
func registerRegionGauges(reg *metrics.Registry, caches *state.Caches, a *regionapi.Server) {
	reg.GaugeSet("strata_region_nodes", "Nodes by health.", "health", func() map[string]float64 {
		out := map[string]float64{}
		for _, h := range []api.Health{api.HealthUp, api.HealthSuspect, api.HealthDown, api.HealthUnknown} {
			out[string(h)] = 0
		}
		for _, it := range caches.Nodes.List() {
			h := api.HealthUnknown
			if st, ok := caches.NodeStatus.Get(it.Name); ok {
				h = st.Value.Health
			}
			out[string(h)]++
		}
		return out
	})
	reg.GaugeSet("strata_region_replicas", "Replicas by phase.", "phase", func() map[string]float64 {
		out := map[string]float64{}
		for _, p := range api.Phases {
			out[string(p)] = 0
		}
		for _, it := range caches.Assignments.List() {
			var st *api.AssignmentStatus
			if s, ok := caches.Statuses.Get(it.Name); ok {
				st = s.Value
			}
			out[string(state.ReplicaPhase(it.Value, st))]++
		}
		return out
	})
	reg.GaugeFunc("strata_region_placements", "Resources placed in the region.", func() float64 {
		return float64(caches.Placements.Len())
	})
	reg.GaugeFunc("strata_region_agents_following", "Nodes whose agent follows its assignments through this replica (an open assignment stream).", func() float64 {
		return float64(a.FollowingNodes())
	})
	reg.CounterFunc("strata_region_placements_applied_total", "Placements from the global tier that changed the region's desired state.", func() float64 {
		return float64(a.AppliedPlacements())
	})
}

// registerEventMetrics exposes what the event emitter could not write
// one by one: what it dropped, by why, and what it counted into a
// resource's summary events.
func registerEventMetrics(reg *metrics.Registry, e *events.Emitter) {
	reg.CounterSet("strata_events_dropped_total", "Events that never reached the event stream, by why (buffer_full, append_failed, invalid).", "reason", func() map[string]float64 {
		out := map[string]float64{}
		for why, n := range e.DroppedBy() {
			out[why] = float64(n)
		}
		return out
	})
	reg.CounterFunc("strata_events_coalesced_total", "Replica events counted into their resource's summary events instead of written one by one.", func() float64 {
		return float64(e.Coalesced())
	})
}

func (s *Server) hotStores() (heartbeat.Store, events.Store, func(), error) {
	hb, evs := s.o.Heartbeats, s.o.Events
	closeFn := func() {}
	if (hb == nil || evs == nil) && s.cfg.Redis.Configured() {
		rc, err := redisclient.New(s.cfg.Redis)
		if err != nil {
			return nil, nil, nil, err
		}
		closeFn = func() { rc.Close() }
		if hb == nil {
			hb = heartbeat.NewRedis(rc, "strata:region:"+s.cfg.Name, heartbeat.WithLogger(s.log))
		}
		if evs == nil {
			evs = events.NewRedis(rc, "strata:region:"+s.cfg.Name+":events", 100000, events.WithLogger(s.log))
		}
	}
	if hb == nil {
		hb = heartbeat.NewMemory()
	}
	if evs == nil {
		evs = events.NewMemory(events.DefaultCapacity)
	}
	return hb, evs, closeFn, nil
}

// ensureNetwork records the configured default network when the region
// has none yet. A network recorded before node blocks gets the
// configured node mask, backend and VNI once (the upgrade from one host:
// its addresses in use stay valid, see ipam.PickBlock); nothing else of a
// recorded network changes.
func (s *Server) ensureNetwork(ctx context.Context, st *state.State) error {
	n := s.cfg.Network
	nw := &api.Network{Name: n.Name, Subnet: n.Subnet, Gateway: n.Gateway, Bridge: n.Bridge, Reserved: n.Reserved,
		NodeMask: n.NodeMask, Backend: n.Backend, VNI: n.VNI, Default: true, CreatedAt: time.Now()}
	if err := nw.Validate(); err != nil {
		return fmt.Errorf("region: network: %w", err)
	}
	_, err := st.Networks.Create(ctx, n.Name, nw)
	if !errors.Is(err, store.ErrExists) {
		if err != nil {
			return fmt.Errorf("region: network %s: %w", n.Name, err)
		}
		return nil
	}
	rec, err := st.Networks.Modify(ctx, n.Name, func(cur *api.Network) error {
		if cur.NodeMask != 0 && cur.Backend != "" {
			return store.ErrNoChange
		}
		if cur.NodeMask == 0 {
			cur.NodeMask = n.NodeMask
		}
		if cur.Backend == "" {
			cur.Backend, cur.VNI = n.Backend, n.VNI
		}
		if err := cur.Validate(); err != nil {
			return fmt.Errorf("network %s recorded before node blocks: %w (set network.nodeMask to fit %s)", n.Name, err, cur.Subnet)
		}
		s.log.Info("network upgraded to node blocks", "network", n.Name, "subnet", cur.Subnet, "nodeMask", cur.NodeMask, "backend", cur.Backend)
		return nil
	})
	if err != nil {
		return fmt.Errorf("region: network %s: %w", n.Name, err)
	}
	if differ := networkDrift(nw, rec.Value); len(differ) > 0 {
		s.log.Warn("network settings differ from the region's recorded network and are not applied: a region's network is fixed at its first start",
			"network", n.Name, "differ", strings.Join(differ, ", "))
	}
	return nil
}

// networkDrift names the settings of the configured network cfg that
// differ from the recorded one, each with both values.
func networkDrift(cfg, rec *api.Network) []string {
	var out []string
	diff := func(key string, c, r any) {
		if fmt.Sprint(c) != fmt.Sprint(r) {
			out = append(out, fmt.Sprintf("network.%s %v (recorded %v)", key, c, r))
		}
	}
	diff("subnet", cfg.Subnet, rec.Subnet)
	diff("gateway", cfg.Gateway, rec.Gateway)
	diff("bridge", cfg.Bridge, rec.Bridge)
	diff("reserved", cfg.Reserved, rec.Reserved)
	diff("nodeMask", cfg.NodeMask, rec.NodeMask)
	diff("backend", cfg.Backend, rec.Backend)
	diff("vni", cfg.VNI, rec.VNI)
	return out
}

func (s *Server) watchLeader(ctx context.Context, e *election.Elector) error {
	for info := range e.Observe(ctx) {
		s.apiMu.Lock()
		s.leader = info.ID
		s.apiMu.Unlock()
	}
	return nil
}

func (s *Server) leaderID() string {
	s.apiMu.Lock()
	defer s.apiMu.Unlock()
	return s.leader
}

// globalReplicas are the global tier's replicas a region heartbeats.
type globalReplicas struct {
	clients []globalv1.FederationServiceClient
	current int
}

// dialGlobal connects to the global tier's replicas (global.endpoint,
// comma-separated); none when the region runs stand-alone. closeAll
// closes the connections.
func (s *Server) dialGlobal(sec *transport.Security) (g *globalReplicas, closeAll func(), err error) {
	g = &globalReplicas{}
	var conns []io.Closer
	closeAll = func() {
		for _, c := range conns {
			c.Close()
		}
	}
	for _, ep := range strings.Split(s.cfg.Global.Endpoint, ",") {
		if ep = strings.TrimSpace(ep); ep == "" {
			continue
		}
		cc, err := transport.Dial(ep, sec, transport.ServerKind(pki.KindGlobal))
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("dial global %s: %w", ep, err)
		}
		conns = append(conns, cc)
		g.clients = append(g.clients, globalv1.NewFederationServiceClient(cc))
	}
	return g, closeAll, nil
}

// beat sends one heartbeat. Any global replica records heartbeats (in a
// shared Redis), so the next one is tried when the current one does not
// answer.
func (g *globalReplicas) beat(ctx context.Context, req *globalv1.RegionHeartbeatRequest) (*globalv1.RegionHeartbeatResponse, error) {
	var err error
	for range g.clients {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		resp, cerr := g.clients[g.current].RegionHeartbeat(cctx, req)
		cancel()
		if cerr == nil {
			return resp, nil
		}
		err = cerr
		g.current = (g.current + 1) % len(g.clients)
	}
	return nil, err
}

// configData asks the global tier for the data of Configs and Secrets a
// replica needs, from the first replica that answers. Nothing of it is
// kept or logged here.
func (g *globalReplicas) configData(ctx context.Context, req *globalv1.GetConfigDataRequest) (*globalv1.GetConfigDataResponse, error) {
	if len(g.clients) == 0 {
		return nil, fmt.Errorf("the region runs stand-alone (no global.endpoint): configs and secrets come from the global tier: %w", api.ErrUnavailable)
	}
	var err error
	for _, c := range g.clients {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, cerr := c.GetConfigData(cctx, req)
		cancel()
		if cerr == nil || status.Code(cerr) != codes.Unavailable && status.Code(cerr) != codes.DeadlineExceeded {
			return resp, cerr
		}
		err = cerr
	}
	return nil, err
}

// federate heartbeats the global tier while this replica leads the region
// (ctx is the leader context), so that the global tier registers the
// region on the first beat and follows its health from then on.
//
// Each beat carries the region's headroom for the global tier's flavor
// catalog, which the answers bring when it changed (headroom counts it
// from the controller's view of the nodes), and what the replicas use,
// summed from the nodes' last beats in hb (regionLoad).
func (s *Server) federate(ctx context.Context, global *globalReplicas, headroom func([]api.Flavor) []api.FlavorHeadroom, hb heartbeat.Store) {
	interval := 2 * time.Second
	failing := false
	var catalog flavorCatalog
	for seq := uint64(1); ; seq++ {
		req := s.heartbeat(seq, func() []api.FlavorHeadroom { return headroom(catalog.flavors) }, func() []api.ResourceLoad { return regionLoad(ctx, hb, s.cfg.Nodes.HeartbeatInterval) })
		req.FlavorsVersion = catalog.version
		resp, err := global.beat(ctx, req)
		if ctx.Err() != nil {
			return
		}
		failing = s.noteFederation(err, failing)
		if err == nil && resp.GetIntervalMs() > 0 {
			interval = time.Duration(resp.GetIntervalMs()) * time.Millisecond
		}
		wait := interval
		if err == nil && resp.GetFlavorsVersion() != "" {
			catalog = flavorCatalog{version: resp.GetFlavorsVersion()}
			for _, f := range resp.GetFlavors() {
				catalog.flavors = append(catalog.flavors, apiproto.FlavorFromPB(f))
			}
			// The new catalog's headroom without waiting a beat.
			wait = 0
		}
		if backoff.Sleep(ctx, wait) != nil {
			return
		}
	}
}

// flavorCatalog is the global tier's flavor catalog as of version, which
// the region counts its headroom for.
type flavorCatalog struct {
	version string
	flavors []api.Flavor
}

// heartbeat is the region's heartbeat number seq: its registration and,
// once the API runs, its numbers, its headroom and its load (counted only
// then).
func (s *Server) heartbeat(seq uint64, headroom func() []api.FlavorHeadroom, load func() []api.ResourceLoad) *globalv1.RegionHeartbeatRequest {
	req := &globalv1.RegionHeartbeatRequest{Seq: seq, Region: &resourcev1.Region{
		Name:       s.cfg.Name,
		Endpoint:   advertised(s.cfg.Advertise.GRPC, s.kit.GRPCListener),
		ConsoleUrl: s.consoleURL,
		Zones:      s.cfg.Zones,
	}}
	if a := s.API(); a != nil {
		if rs, err := a.Summary(); err == nil {
			rs.Headroom = headroom()
			rs.Load = load()
			req.Status = apiproto.RegionStatusToPB(&rs)
		}
	}
	return req
}

// regionLoad is what the region's replicas use, summed from the load
// metrics of its nodes' last beats (api.SumLoad); beats older than three
// of the nodes' heartbeat intervals (every) are left out, since the
// store keeps a silent node's metrics for minutes. A store that does not
// answer within a second gives no load, which the autoscaler reads as no
// readings.
func regionLoad(ctx context.Context, hb heartbeat.Store, every time.Duration) []api.ResourceLoad {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	beats, err := hb.List(ctx)
	if err != nil {
		return nil
	}
	fresh := time.Now().Add(-3 * max(every, 2*time.Second))
	nodes := make([]map[string]float64, 0, len(beats))
	for _, b := range beats {
		if b.At.After(fresh) {
			nodes = append(nodes, b.Metrics)
		}
	}
	return api.SumLoad(nodes)
}

// noteFederation logs when heartbeats to the global tier start failing
// (err) and when they resume; it returns whether they are failing now.
func (s *Server) noteFederation(err error, failing bool) bool {
	switch {
	case err != nil && !failing:
		s.log.Warn("cannot heartbeat the global tier; the region keeps running on its own", "global", s.cfg.Global.Endpoint, "err", err)
	case err == nil && failing:
		s.log.Info("heartbeats to the global tier resumed")
	}
	return err != nil
}
