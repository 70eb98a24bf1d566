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
// Two background loops run in Server.Run: the heartbeat batcher (one
// RecordBatch per ~100 ms for all agents) and the status writer (the
// reports of all agents coalesced into few transactions). Watches
// (WatchShares, WatchAssignments) live exactly as long as their streams.
package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/audit"
	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/events"
	"github.com/stratahq/strata/internal/heartbeat"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/internal/transport"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	globalv1 "github.com/stratahq/strata/proto/global/v1"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
	"github.com/stratahq/strata/region/agentconn"
	"github.com/stratahq/strata/region/state"
)

// Heartbeats is what the API needs of the heartbeat store
// (heartbeat.Store implements it).
type Heartbeats interface {
	RecordBatch(ctx context.Context, beats []heartbeat.Beat) error
	// Forget drops a deleted node's last beat.
	Forget(ctx context.Context, id string) error
}

// Emitter records events without blocking (events.Emitter).
type Emitter interface {
	Emit(ev events.Event)
}

// EventLog reads the region's event stream (events.Store).
type EventLog interface {
	Range(ctx context.Context, q events.Query) ([]events.Event, error)
}

// Events is what the API needs of the region's event stream: Emit for hot
// paths and Range for ListEvents. JoinEvents makes one from an
// events.Emitter and the events.Store it writes to.
type Events interface {
	Emitter
	EventLog
}

// JoinEvents pairs an emitter with the log operators read from.
func JoinEvents(e Emitter, l EventLog) Events {
	return struct {
		Emitter
		EventLog
	}{e, l}
}

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

const (
	// writeTimeout bounds one background transaction, so that a hung etcd
	// fails the waiting RPCs (agents retry) instead of stalling forever.
	writeTimeout = 10 * time.Second
	// cacheWait bounds how long a read waits for the caches to catch up
	// with etcd (current): past it, etcd or the watch is in trouble and
	// the client is better off with a 503 than a hung request.
	cacheWait = 10 * time.Second
	// shutdownFlush bounds the last heartbeat flush after Run's ctx ends.
	shutdownFlush = 2 * time.Second
	// maxAgentConns is how many idle agent connections Logs keeps.
	maxAgentConns = 32
	// cordonedByOperator marks cordons made through the API.
	cordonedByOperator = "operator"
)

// tuning holds the batching windows; tests shorten or shrink them.
type tuning struct {
	beatWindow   time.Duration // heartbeats per RecordBatch
	statusWindow time.Duration // agents' reports per transaction
	shareWindow  time.Duration // WatchShares coalescing
	assignWindow time.Duration // WatchAssignments coalescing
	netWindow    time.Duration // WatchNetwork coalescing
	watchBuffer  int           // change batches a watcher may lag behind
	maxBatch     int           // changes per watch message
}

func defaultTuning() tuning {
	return tuning{
		beatWindow:   100 * time.Millisecond,
		statusWindow: 5 * time.Millisecond,
		shareWindow:  10 * time.Millisecond,
		assignWindow: 5 * time.Millisecond,
		netWindow:    10 * time.Millisecond,
		watchBuffer:  1024,
		maxBatch:     500,
	}
}

// Server is a region's API. Create it with New, start Run, and serve
// RegisterGRPC and Handler.
type Server struct {
	region        string
	st            *state.State
	caches        *state.Caches
	heartbeats    Heartbeats
	events        Events
	hbInterval    time.Duration
	drainDeadline time.Duration
	maxBody       int64
	token         string
	audit         *audit.Log
	leader        func() string
	configData    func(ctx context.Context, req *globalv1.GetConfigDataRequest) (*globalv1.GetConfigDataResponse, error)
	log           *slog.Logger
	tune          tuning

	applied  atomic.Uint64
	epoch    epochMemo
	beats    beatQueue
	statuses statusQueue
	hub      *assignmentHub
	agents   *agentconn.Pool
}

// New checks opts and returns a Server.
func New(opts Options) (*Server, error) {
	switch {
	case opts.Region == "":
		return nil, errors.New("region api: region name is required")
	case opts.State == nil || opts.Caches == nil:
		return nil, errors.New("region api: state and caches are required")
	case opts.Heartbeats == nil:
		return nil, errors.New("region api: heartbeat store is required")
	case opts.Events == nil:
		return nil, errors.New("region api: events are required")
	case opts.Token == "":
		return nil, errors.New("region api: a REST token is required")
	case opts.Security == nil:
		return nil, errors.New("region api: transport security is required")
	}
	s := &Server{
		region:        opts.Region,
		st:            opts.State,
		caches:        opts.Caches,
		heartbeats:    opts.Heartbeats,
		events:        opts.Events,
		hbInterval:    cmp.Or(opts.HeartbeatInterval, config.DefaultLiveness().HeartbeatInterval),
		drainDeadline: cmp.Or(opts.DrainDeadline, config.DefaultRegionController().DrainDeadline),
		maxBody:       cmp.Or(opts.MaxBodyBytes, config.DefaultHTTPAPI().MaxBodyBytes),
		token:         opts.Token,
		audit:         opts.Audit,
		leader:        opts.Leader,
		configData:    opts.ConfigData,
		log:           opts.Logger,
		tune:          defaultTuning(),
		statuses:      statusQueue{kick: make(chan struct{}, 1)},
		hub:           newAssignmentHub(&opts.Caches.AssignmentFeed),
		agents:        agentconn.New(opts.Region, opts.Security, maxAgentConns),
	}
	if s.leader == nil {
		s.leader = func() string { return "" }
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

// Run runs the heartbeat batcher and the status writer until ctx is done,
// then closes the agent connections and returns ctx.Err(). Heartbeat and
// ReportStatus need it running; call it once.
func (s *Server) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { s.runBeats(ctx) })
	wg.Go(func() { s.runStatusWriter(ctx) })
	wg.Wait()
	s.agents.Close()
	return ctx.Err()
}

// RegisterGRPC registers RegionService and AgentService on g, which should
// come from transport.NewServer: its interceptors turn the api sentinels
// returned here into gRPC codes.
func (s *Server) RegisterGRPC(g *grpc.Server) {
	regionv1.RegisterRegionServiceServer(g, regionService{s: s})
	agentv1.RegisterAgentServiceServer(g, agentService{s: s})
}

// AppliedPlacements counts the placements ApplyPlacements has written
// since the server started; a placement sent again unchanged is not
// written and not counted.
func (s *Server) AppliedPlacements() uint64 { return s.applied.Load() }

// emit records an event; Emit never blocks.
func (s *Server) emit(typ, reason, object, msg string, fields map[string]string) {
	s.events.Emit(events.Event{Type: typ, Reason: reason, Object: object, Region: s.region, Message: msg, Fields: fields})
}

// current waits until the caches are at least as new as etcd is now
// (store.SharedWatch.WaitCurrent: one revision read, then the watch's
// delivery of it), so that what a read serves from them is never older
// than what another replica, or etcd, answered before the read arrived:
// a replica that was paused (SIGSTOP, a stalled VM) and woke with its
// watch behind catches up before it answers, instead of showing
// replicas long gone. It fails with ErrUnavailable (503) after cacheWait.
func (s *Server) current(ctx context.Context) error {
	stuck := errors.New("caches are stuck")
	ctx, cancel := context.WithTimeoutCause(ctx, cacheWait, stuck)
	defer cancel()
	err := s.caches.Watch.WaitCurrent(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(context.Cause(ctx), stuck):
		return fmt.Errorf("timed out after %s waiting for the region caches to catch up with etcd: %w: %w", cacheWait, api.ErrUnavailable, err)
	case ctx.Err() != nil:
		return fmt.Errorf("waiting for the region caches to catch up with etcd: %w", err)
	default:
		return fmt.Errorf("read the region's etcd revision: %w: %w", api.ErrUnavailable, err)
	}
}

// waitSynced waits for one cache's first list: a watch's snapshot taken
// before it would be empty, and its receiver deletes what a snapshot lacks.
func waitSynced(ctx context.Context, synced <-chan struct{}) error {
	select {
	case <-synced:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the region caches: %w", ctx.Err())
	}
}

// apiErr is the one place where store sentinels become api sentinels, at
// the edge (gRPC and REST), keeping the store's message.
func apiErr(err error) error {
	if err == nil {
		return nil
	}
	for _, m := range []struct{ from, to error }{
		{store.ErrNotFound, api.ErrNotFound},
		{store.ErrExists, api.ErrAlreadyExists},
		{store.ErrConflict, api.ErrConflict},
		{store.ErrFenced, api.ErrConflict},
		{store.ErrInvalidContinue, api.ErrInvalid},
		{events.ErrInvalidCursor, api.ErrInvalid},
	} {
		if errors.Is(err, m.from) && !errors.Is(err, m.to) {
			return &mappedError{err: err, sentinel: m.to}
		}
	}
	return err
}

type mappedError struct {
	err      error
	sentinel error
}

func (e *mappedError) Error() string   { return e.err.Error() }
func (e *mappedError) Unwrap() []error { return []error{e.err, e.sentinel} }
