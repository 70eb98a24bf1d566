// Package global runs one replica of the global tier: the REST and gRPC
// API (every replica serves it) and the master controller (every replica
// runs it; only the elected master acts).
package global

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stratahq/strata/global/alerts"
	globalapi "github.com/stratahq/strata/global/api"
	globalconsole "github.com/stratahq/strata/global/console"
	"github.com/stratahq/strata/global/controller"
	"github.com/stratahq/strata/global/regions"
	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/bringup"
	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/election"
	"github.com/stratahq/strata/internal/events"
	"github.com/stratahq/strata/internal/heartbeat"
	"github.com/stratahq/strata/internal/metrics"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/internal/redisclient"
	"github.com/stratahq/strata/internal/secretbox"
	"github.com/stratahq/strata/internal/version"
	"github.com/stratahq/strata/proto/apiproto"
)

// Options are what a global replica needs beyond its configuration.
type Options struct {
	Config *config.Global
	// Logger is the process's; the server adds tier=global and
	// instance=<id>, its components their component=…, each once.
	Logger *slog.Logger
	// Etcd, when set, is used instead of the configured etcd.
	Etcd *clientv3.Client
	// Heartbeats, when set, replaces the configured store (Redis, or
	// in-memory when no Redis address is configured; several replicas
	// need Redis to share region heartbeats).
	Heartbeats heartbeat.Store
	// GRPCListener and HTTPListener, when set, replace listening on the
	// configured addresses.
	GRPCListener, HTTPListener net.Listener
}

// Server is a running global replica.
type Server struct {
	o   Options
	cfg *config.Global
	log *slog.Logger
	// kit is the replica's start-up sequence; it holds its listeners.
	kit *bringup.Sequence

	mu   sync.Mutex
	api  *globalapi.Server
	ctrl *controller.Controller
}

// New checks the options and listens; Run serves.
func New(o Options) (*Server, error) {
	if o.Config == nil {
		return nil, errors.New("global: no configuration")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{o: o, cfg: o.Config, log: o.Logger.With("tier", "global", "instance", o.Config.ID)}
	s.kit = &bringup.Sequence{
		Name: "global", Config: &s.cfg.Server, Log: s.log,
		Etcd: o.Etcd, EtcdName: "global", TimedEtcd: true, ElectionPrefix: state.ElectionPrefix,
		Ready: make(chan struct{}), Build: s.build,
	}
	// Refuse to start a replica that would answer without an identity.
	if err := s.kit.Listen(o.GRPCListener, o.HTTPListener, pki.Global(s.cfg.ID), s.cfg.API.HTTPAPI); err != nil {
		return nil, err
	}
	return s, nil
}

// GRPCAddr is where ResourceService and FederationService listen.
func (s *Server) GRPCAddr() string { return s.kit.GRPCListener.Addr().String() }

// HTTPAddr is where the REST API listens.
func (s *Server) HTTPAddr() string { return s.kit.HTTPListener.Addr().String() }

// Ready is closed once the replica serves.
func (s *Server) Ready() <-chan struct{} { return s.kit.Ready }

// API returns the API once Run has built it.
func (s *Server) API() *globalapi.Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.api
}

// Controller returns the master controller once Run has built it.
func (s *Server) Controller() *controller.Controller {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ctrl
}

// Run serves until ctx is done: the tier kit's start-up sequence with
// what a global replica is (build).
func (s *Server) Run(ctx context.Context) error { return s.kit.Run(ctx) }

// build makes what a global replica is on what the kit opened: its state
// and caches, the Secrets' keyring, the shared heartbeats and events,
// the pool of region clients, the API, and the master's work.
func (s *Server) build(_ context.Context, b *bringup.Base) (*bringup.Parts, error) {
	cfg := s.cfg
	st := state.NewWriting(b.Store, apiproto.WriteFormat(cfg.Etcd.JSONValues))
	caches := state.NewCaches(st)
	ring, err := s.keyring()
	if err != nil {
		return nil, err
	}
	hb, evs, closeStores, err := s.sharedStores()
	if err != nil {
		return nil, err
	}
	b.Defer(closeStores)
	pool, err := regions.New(regions.Options{Lookup: regions.CacheLookup(caches.Regions), Security: s.kit.Security, Logger: s.log})
	if err != nil {
		return nil, err
	}
	b.Defer(func() { pool.Close() })
	svc, err := globalapi.New(globalapi.Options{
		State:             st,
		Caches:            caches,
		Regions:           pool,
		Heartbeats:        hb,
		Events:            evs,
		Leader:            b.Elector,
		ID:                cfg.ID,
		MaxBodyBytes:      cfg.API.MaxBodyBytes,
		HeartbeatInterval: cfg.Regions.HeartbeatInterval,
		Version:           version.String(),
		Audit:             b.Audit,
		Secrets:           ring,
		BootstrapToken:    cfg.API.BootstrapToken,
		AlertReceivers:    cfg.Alerts.Networks(),
		Logger:            s.log,
	})
	if err != nil {
		return nil, err
	}
	ctrl, alerter := s.masterWork(b, st, caches, pool, hb, svc, ring)
	s.mu.Lock()
	s.api, s.ctrl = svc, ctrl
	s.mu.Unlock()
	return &bringup.Parts{
		Caches:  caches,
		API:     svc,
		Console: globalconsole.Handler(globalconsole.Options{Logger: s.log}),
		// The bootstrap token is stored before the replica says it
		// serves, so that the operator's token works at once.
		Ready: func(ctx context.Context) error {
			if err := svc.Tokens().Bootstrap(ctx); err != nil && ctx.Err() == nil {
				return err
			}
			return nil
		},
		Lead: func(leaderCtx context.Context, l *election.Leadership) { s.lead(leaderCtx, l, ctrl, alerter) },
	}, nil
}

// masterWork builds what the elected master runs, the controller and
// the alert dispatcher, and the gauges that follow them.
func (s *Server) masterWork(b *bringup.Base, st *state.State, caches *state.Caches, pool *regions.Pool, hb heartbeat.Store, svc *globalapi.Server, ring *secretbox.Keyring) (*controller.Controller, *alerts.Dispatcher) {
	cfg := s.cfg
	ctrl := controller.New(controller.Options{
		State:             st,
		Caches:            caches,
		Regions:           pool,
		Heartbeats:        hb,
		HeartbeatInterval: cfg.Regions.HeartbeatInterval,
		SuspectAfter:      cfg.Regions.SuspectAfter,
		DownAfter:         cfg.Regions.DownAfter,
		ProbeTimeout:      cfg.Regions.ProbeTimeout,
		Reverter:          svc.Resources(),
		Scaler:            svc.Resources(),
		Pruner:            svc.Resources(),
		Metrics:           b.Metrics.Controller(),
		MonitorMetrics:    b.Metrics.Monitor(),
		Logger:            s.log,
	})
	registerGlobalGauges(b.Metrics, caches, b.Elector, ctrl)
	alerter := alerts.New(alerts.Options{
		Collections: alerts.NewCollections(st.Store),
		Source:      alerts.RegionSource{Caches: caches, Clients: pool},
		Keyring:     ring,
		Receivers:   cfg.Alerts.Networks(),
		Logger:      s.log,
	})
	registerAlertMetrics(b.Metrics, alerter)
	return ctrl, alerter
}

// keyring loads the Secrets' key files (nil without any: Secrets are
// refused).
func (s *Server) keyring() (*secretbox.Keyring, error) {
	files := s.cfg.Secrets.KeyFiles
	if len(files) == 0 {
		s.log.Warn("secrets.keyFiles names no key file: the API refuses to store Secrets")
		return nil, nil
	}
	ring, err := secretbox.LoadKeyring(files)
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	s.log.Info("secrets: keys loaded", "primary", ring.Primary(), "keys", len(files))
	return ring, nil
}

// sharedStores are what the replicas share outside etcd: the region
// heartbeats (the store given, else Redis when configured, else memory:
// one replica only) and the global event stream (Redis when configured,
// else nil: the API keeps it in memory). close releases them.
func (s *Server) sharedStores() (hb heartbeat.Store, evs events.Store, close func(), err error) {
	if !s.cfg.Redis.Configured() {
		hb = s.o.Heartbeats
		if hb == nil {
			hb = heartbeat.NewMemory()
		}
		return hb, nil, func() {}, nil
	}
	rc, err := redisclient.New(s.cfg.Redis)
	if err != nil {
		return nil, nil, nil, err
	}
	hb = s.o.Heartbeats
	if hb == nil {
		hb = heartbeat.NewRedis(rc, "strata:global", heartbeat.WithLogger(s.log))
	}
	return hb, events.NewRedis(rc, "strata:global:events", events.DefaultCapacity, events.WithLogger(s.log)), func() { rc.Close() }, nil
}

// lead runs the master's work while this replica is elected, until
// leaderCtx ends.
func (s *Server) lead(leaderCtx context.Context, l *election.Leadership, ctrl *controller.Controller, alerter *alerts.Dispatcher) {
	s.log.Info("this replica is the master")
	// Alerts run beside the controller, never in its loop: a slow
	// receiver cannot hold a pass.
	var wg sync.WaitGroup
	defer wg.Wait()
	actx, cancel := context.WithCancel(leaderCtx)
	defer cancel() // before the Wait: the master's work ends together
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := alerter.Lead(actx, l); err != nil && actx.Err() == nil {
			s.log.Warn("alert delivery ended", "err", err)
		}
	}()
	if err := ctrl.Lead(leaderCtx, l); err != nil && leaderCtx.Err() == nil {
		s.log.Warn("master work ended", "err", err)
	}
}

// registerGlobalGauges exposes the master's state and what the global
// tier holds, counted from its caches when scraped.
func registerGlobalGauges(reg *metrics.Registry, caches *state.Caches, e *election.Elector, ctrl *controller.Controller) {
	reg.GaugeFunc("strata_global_is_master", "1 when this replica is the elected master.", func() float64 {
		if e.IsLeader() {
			return 1
		}
		return 0
	})
	reg.CounterFunc("strata_global_propagations_total", "Placements regions applied under this replica's mastership.", func() float64 {
		return float64(ctrl.Propagations())
	})
	reg.GaugeSet("strata_global_regions", "Regions by health.", "health", func() map[string]float64 {
		out := map[string]float64{}
		for _, it := range caches.Regions.List() {
			h := api.HealthUnknown
			if st, ok := caches.RegionStatus.Get(it.Name); ok {
				h = st.Value.Health
			}
			out[string(h)]++
		}
		return out
	})
	reg.GaugeSet("strata_global_resources", "Resources by phase.", "phase", func() map[string]float64 {
		out := map[string]float64{}
		for _, it := range caches.Resources.List() {
			p := api.PhaseCreated
			if st, ok := caches.Statuses.Get(it.Name); ok && st.Value.UID == it.Value.UID {
				p = st.Value.Phase
			}
			out[string(p)]++
		}
		return out
	})
}
