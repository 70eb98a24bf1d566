// Package api is a region's API server: RegionService for the global tier,
// AgentService for the region's agents, and the operator REST API.
//
// Reads are served from the region's shared caches (state.Caches); writes go
// to etcd through the typed collections of state.State, and a handler that
// wrote waits for the cache to catch up before it answers, so that callers
// read their own writes. Heartbeats go to the heartbeat store and never to
// etcd: of everything an agent reports on each beat, only changes of its
// conditions are written.
//
// Server is thin: each part of the API is a small type that owns its
// state, and Server puts them together. nodes (nodes.go, registration.go,
// drains.go) owns the nodes, their cordons and drains; beats (beats.go)
// the heartbeats and conditions the agents send; statuses (statuses.go)
// the replica statuses they report; placements (placements.go, shares.go)
// and policies (policies.go) what the global tier's master sends, fenced
// by meta/epoch (fence.go); agentStreams (streams.go, network.go) the
// assignment and network streams down to the agents; replicas
// (replicas.go) the replica views and their logs; configRelay
// (configdata.go) the Config and Secret data passed to the agents. What
// they all share and none owns (the state, caches, events, log) is core
// (core.go). The gRPC services (regionservice.go, agentservice.go) and the
// REST API (rest.go) are adapters over them; auditor (audit.go) records
// the calls that change something.
//
// Two background loops run in Server.Run: the heartbeat batcher (one
// RecordBatch per ~100 ms for all agents) and the status writer (the
// reports of all agents coalesced into few transactions). Watches
// (WatchShares, WatchAssignments) live exactly as long as their streams.
package api

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/audit"
	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/internal/transport"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	globalv1 "github.com/stratahq/strata/proto/global/v1"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
	"github.com/stratahq/strata/region/agentconn"
	"github.com/stratahq/strata/region/state"
)

// maxAgentConns is how many idle agent connections Logs keeps.
const maxAgentConns = 32

// Options configure a Server. Region, State, Caches, Heartbeats and Events
// are required; zero durations and sizes take the defaults of
// config.DefaultRegion.
type Options struct {
	Region     string
	State      *state.State
	Caches     *state.Caches
	Heartbeats Heartbeats
	Events     Events
	// HeartbeatInterval is what agents are told to beat at.
	HeartbeatInterval time.Duration
	// DrainDeadline is the deadline of drains that name none.
	DrainDeadline time.Duration
	// MaxBodyBytes bounds REST request bodies.
	MaxBodyBytes int64
	// Token protects the REST API (bearer); required: there is no
	// anonymous mode.
	Token string
	// Audit records every call that changes something (REST, and the
	// gRPC calls people cause: node operations from the global tier, a
	// node's registration); nil records nothing.
	Audit *audit.Log
	// Security secures the links to agents' NodeService (logs); required.
	Security *transport.Security
	// Leader returns the current controller leader's id, for Status.
	Leader func() string
	// ConfigData asks the global tier for the data of Configs and
	// Secrets (GetConfigData); nil answers agents that ask Unavailable.
	ConfigData func(ctx context.Context, req *globalv1.GetConfigDataRequest) (*globalv1.GetConfigDataResponse, error)
	Logger     *slog.Logger
}

// Server is a region's API: the services that own its parts, put
// together. Create it with New, start Run, and serve RegisterGRPC and
// Handler.
type Server struct {
	core       core
	leader     func() string
	hbInterval time.Duration
	agents     *agentconn.Pool
	audit      *auditor // nil records nothing

	nodes      *nodes
	beats      *beats
	statuses   *statuses
	placements *placements
	policies   *policies
	streams    *agentStreams
	replicas   *replicas
	configs    *configRelay
	rest       *restAPI
}

// New checks opts and returns a Server.
func New(opts Options) (*Server, error) {
	return newServer(opts, defaultTuning())
}

// newServer is New with the batching windows of tune.
func newServer(opts Options, tune tuning) (*Server, error) {
	if err := check(opts); err != nil {
		return nil, err
	}
	c := core{region: opts.Region, st: opts.State, caches: opts.Caches, events: opts.Events, log: opts.Logger}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		core:       c,
		leader:     opts.Leader,
		hbInterval: cmp.Or(opts.HeartbeatInterval, config.DefaultLiveness().HeartbeatInterval),
		agents:     agentconn.New(opts.Region, opts.Security, maxAgentConns),
	}
	if s.leader == nil {
		s.leader = func() string { return "" }
	}
	if opts.Audit != nil {
		s.audit = &auditor{region: opts.Region, log: opts.Audit}
	}
	fence := &epochFence{st: c.st, caches: c.caches}
	s.beats = &beats{core: c, store: opts.Heartbeats, window: tune.beatWindow}
	s.statuses = &statuses{core: c, window: tune.statusWindow, queue: statusQueue{kick: make(chan struct{}, 1)}}
	s.nodes = &nodes{core: c, beats: s.beats, drainDeadline: cmp.Or(opts.DrainDeadline, config.DefaultRegionController().DrainDeadline)}
	s.placements = &placements{core: c, fence: fence, tune: tune}
	s.policies = &policies{core: c, fence: fence}
	s.streams = &agentStreams{core: c, tune: tune, hub: newAssignmentHub(&c.caches.AssignmentFeed)}
	s.replicas = &replicas{core: c, agents: s.agents}
	s.configs = &configRelay{core: c, ask: opts.ConfigData}
	s.rest = &restAPI{
		core: c, nodes: s.nodes, placements: s.placements, replicas: s.replicas, summary: s.Summary,
		token: opts.Token, maxBody: cmp.Or(opts.MaxBodyBytes, config.DefaultHTTPAPI().MaxBodyBytes), audit: s.audit,
	}
	return s, nil
}

// check refuses Options that lack what is required.
func check(opts Options) error {
	switch {
	case opts.Region == "":
		return errors.New("region api: region name is required")
	case opts.State == nil || opts.Caches == nil:
		return errors.New("region api: state and caches are required")
	case opts.Heartbeats == nil:
		return errors.New("region api: heartbeat store is required")
	case opts.Events == nil:
		return errors.New("region api: events are required")
	case opts.Token == "":
		return errors.New("region api: a REST token is required")
	case opts.Security == nil:
		return errors.New("region api: transport security is required")
	}
	return nil
}

// Run runs the heartbeat batcher and the status writer until ctx is done,
// then closes the agent connections and returns ctx.Err(). Heartbeat and
// ReportStatus need it running; call it once.
func (s *Server) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { s.beats.run(ctx) })
	wg.Go(func() { s.statuses.run(ctx) })
	wg.Wait()
	s.agents.Close()
	return ctx.Err()
}

// GRPCPolicy says who may call the region's gRPC services: RegionService
// is the global tier's (global:*), with room for its large batches;
// AgentService is this region's agents' (node:<region>/*), each acting
// for its own node only (checked per call, agentService.authorize), with small
// messages.
func (s *Server) GRPCPolicy() transport.Policy {
	var audited transport.Auditor
	if s.audit != nil {
		audited = s.audit.grpc
	}
	return transport.Policy{
		regionv1.RegionService_ServiceDesc.ServiceName: {Kinds: []pki.Kind{pki.KindGlobal}, MaxRecvBytes: transport.LargeMessageBytes, Audit: audited},
		agentv1.AgentService_ServiceDesc.ServiceName:   {Kinds: []pki.Kind{pki.KindNode}, Region: s.core.region, Audit: audited},
	}
}

// RegisterGRPC registers RegionService and AgentService on g, which should
// come from transport.NewServer: its interceptors turn the api sentinels
// returned here into gRPC codes.
func (s *Server) RegisterGRPC(g *grpc.Server) {
	regionv1.RegisterRegionServiceServer(g, regionService{
		nodes: s.nodes, placements: s.placements, policies: s.policies, replicas: s.replicas,
		events: s.core.events, summary: s.Summary,
	})
	agentv1.RegisterAgentServiceServer(g, agentService{
		region: s.core.region, hbInterval: s.hbInterval,
		nodes: s.nodes, beats: s.beats, statuses: s.statuses, streams: s.streams, configs: s.configs,
	})
}

// Handler returns the operator REST API:
//
//	GET    /v1/nodes?selector=&limit=&continue=   nodes with their status
//	GET    /v1/nodes/{name}
//	DELETE /v1/nodes/{name}
//	POST   /v1/nodes/{name}/cordon        CordonRequest (optional)
//	POST   /v1/nodes/{name}/uncordon
//	POST   /v1/nodes/{name}/drain         api.DrainRequest (optional)
//	GET    /v1/nodes/{name}/drain
//	GET    /v1/resources?limit=&continue= placements, the region's share as status
//	GET    /v1/resources/{tenant}/{name}/replicas?limit=&continue=
//	GET    /v1/replicas?node=&limit=&continue=
//	GET    /v1/events?after=&continue=&limit=&object=&tenant=
//	GET    /v1/status
//	GET    /healthz, /readyz              unauthenticated probes
//
// Everything else requires "Authorization: Bearer <token>" (api.token;
// there is no anonymous mode). Lists are rest.List, paged as the global
// tier's (rest.Page, api.Paginate); errors are api.ErrorBody; a query
// parameter a route does not take is refused: the edge (internal/rest) is
// the global tier's too. The reads served from the caches (nodes, drains,
// resources, replicas) never go back in time (fresh).
func (s *Server) Handler() http.Handler { return s.rest.handler() }

// Summary is the region's status from the caches, as RegionService.Status
// answers the global monitor's probe (and the region's heartbeats to the
// global tier carry it). It fails with ErrUnavailable until the caches
// hold their first list.
func (s *Server) Summary() (api.RegionStatus, error) {
	return summarize(s.core.caches, s.leader())
}

// AppliedPlacements counts the placements ApplyPlacements has written
// since the server started; a placement sent again unchanged is not
// written and not counted.
func (s *Server) AppliedPlacements() uint64 { return s.placements.applied.Load() }

// FollowingNodes is how many nodes follow their assignments through this
// replica (an open WatchAssignments stream): after a replica's loss, its
// agents are back once the survivors' counts add up again.
func (s *Server) FollowingNodes() int { return s.streams.following() }
