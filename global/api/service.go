// Package api is the global tier's API: the operations on flavors,
// resources, regions and nodes (Service), served over REST (rest.go) and
// gRPC (grpc.go), with bearer-token tenancy (auth.go).
//
// The API is the only writer of specs in the global etcd. Every write is one
// store transaction; reads of one object go to etcd, lists are served from
// caches that the API waits on for its own latest write, so a client always
// sees what it just wrote.
package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/election"
	"github.com/stratahq/strata/internal/heartbeat"
	"github.com/stratahq/strata/internal/store"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
)

// DefaultRegionTimeout is Options.RegionTimeout's default; the others
// come from package config.
const DefaultRegionTimeout = 5 * time.Second

// cacheWait bounds how long a request waits for a cache to load or to catch
// up with a write: past it, etcd or the watch is in trouble and the client
// is better off with a 503 than a hung request.
const cacheWait = 10 * time.Second

// readyTimeout bounds the etcd probe of /readyz: a probe that hangs is as
// bad as one that fails.
const readyTimeout = 2 * time.Second

// RegionClients gives a RegionService client per region (regions.Pool).
type RegionClients interface {
	Client(ctx context.Context, region string) (regionv1.RegionServiceClient, error)
}

// HeartbeatRecorder records region heartbeats (heartbeat.Store).
type HeartbeatRecorder interface {
	Record(ctx context.Context, b heartbeat.Beat) error
}

// LeaderSource tells who the master is (election.Elector). If it also has
// IsLeader() bool, Status uses that to say whether this replica leads.
type LeaderSource interface {
	Leader(ctx context.Context) (election.LeaderInfo, error)
}

// Options configures a Service.
type Options struct {
	// State is the global etcd; required.
	State *state.State
	// Caches are caches of State shared with the rest of the process (the
	// master controller); their owner runs them. Nil makes the Service
	// keep its own, which Run runs.
	Caches *state.Caches
	// Regions reaches regions for node operations and replica lists; without
	// it those operations answer Unavailable.
	Regions RegionClients
	// Heartbeats stores region heartbeats; without it RegionHeartbeat
	// answers Unavailable.
	Heartbeats HeartbeatRecorder
	// Leader reports the master in Status; optional.
	Leader LeaderSource
	// ID is this API replica's identity (config.Global.ID); required.
	ID string
	// MaxBodyBytes bounds a REST request body; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// RegionTimeout bounds each region's answer in a fan-out (all nodes,
	// replicas); 0 means DefaultRegionTimeout.
	RegionTimeout time.Duration
	// HeartbeatInterval is what RegionHeartbeat tells regions; 0 means
	// DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
	// Version is reported by Status.
	Version string
	// Logger defaults to discarding.
	Logger *slog.Logger
}

// Service is the global API's operations, shared by REST and gRPC. Every
// method takes the caller's Identity from the context (see WithIdentity)
// and checks it; methods that have no caller (PruneRequests, NewToken,
// EnsureBootstrapToken) are for the process itself.
type Service struct {
	st         *state.State
	regions    RegionClients
	heartbeats HeartbeatRecorder
	leader     LeaderSource
	id         string
	version    string
	maxBody    int64
	regionWait time.Duration
	beatEvery  time.Duration
	log        *slog.Logger

	resources    *store.Cache[api.Resource]
	flavors      *store.Cache[api.Flavor]
	statuses     *store.Cache[api.ResourceStatus]
	regionCache  *store.Cache[api.Region]
	regionStatus *store.Cache[api.RegionStatus]
	tokens       *store.Cache[api.Token]
	// ownCaches says whether Run runs the caches (they are not shared).
	ownCaches bool

	// Revisions of this replica's latest writes per cache, for
	// read-your-writes: a cached read waits for the cache to reach them.
	// Tracking them per cache keeps a list of resources from waiting on a
	// token write the resources cache never sees.
	wroteResources written
	wroteStatuses  written
	wroteRegions   written
	wroteTokens    written
}

// New returns a Service; call Run to load its caches.
func New(o Options) (*Service, error) {
	if o.State == nil {
		return nil, errors.New("api: Options.State is required")
	}
	if o.ID == "" {
		return nil, errors.New("api: Options.ID is required")
	}
	s := &Service{
		st:         o.State,
		regions:    o.Regions,
		heartbeats: o.Heartbeats,
		leader:     o.Leader,
		id:         o.ID,
		version:    o.Version,
		maxBody:    o.MaxBodyBytes,
		regionWait: o.RegionTimeout,
		beatEvery:  o.HeartbeatInterval,
		log:        o.Logger,
	}
	if c := o.Caches; c != nil {
		s.resources, s.statuses, s.tokens, s.flavors = c.Resources, c.Statuses, c.Tokens, c.Flavors
		s.regionCache, s.regionStatus = c.Regions, c.RegionStatus
	} else {
		s.ownCaches = true
		s.resources = store.NewCache(o.State.Resources)
		s.flavors = store.NewCache(o.State.Flavors)
		s.statuses = store.NewCache(o.State.Statuses)
		s.regionCache = store.NewCache(o.State.Regions)
		s.regionStatus = store.NewCache(o.State.RegionStatus)
		s.tokens = store.NewCache(o.State.Tokens)
	}
	if s.maxBody <= 0 {
		s.maxBody = config.DefaultHTTPAPI().MaxBodyBytes
	}
	if s.regionWait <= 0 {
		s.regionWait = DefaultRegionTimeout
	}
	if s.beatEvery <= 0 {
		s.beatEvery = config.DefaultRegionsLiveness().HeartbeatInterval
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

// Run keeps the Service's own caches current until ctx is done, then
// returns ctx.Err(). Shared caches (Options.Caches) are their owner's to
// run: a cache runs once.
func (s *Service) Run(ctx context.Context) error {
	if !s.ownCaches {
		<-ctx.Done()
		return ctx.Err()
	}
	runs := []func(context.Context) error{
		s.resources.Run, s.flavors.Run, s.statuses.Run, s.regionCache.Run, s.regionStatus.Run, s.tokens.Run,
	}
	var wg sync.WaitGroup
	for _, run := range runs {
		wg.Go(func() {
			if err := run(ctx); err != nil && ctx.Err() == nil {
				s.log.Error("api cache stopped", "err", err)
			}
		})
	}
	wg.Wait()
	return ctx.Err()
}

// Ready reports whether etcd answers and every cache holds its first list.
func (s *Service) Ready(ctx context.Context) error {
	caches := []struct {
		name   string
		synced <-chan struct{}
	}{
		{"resources", s.resources.Synced()},
		{"statuses", s.statuses.Synced()},
		{"regions", s.regionCache.Synced()},
		{"regionstatus", s.regionStatus.Synced()},
		{"tokens", s.tokens.Synced()},
	}
	for _, c := range caches {
		select {
		case <-c.synced:
		default:
			return fmt.Errorf("%s cache not loaded yet: %w", c.name, api.ErrUnavailable)
		}
	}
	// A linearizable read goes through raft, so it proves that a quorum
	// answers; one flavor at most keeps it cheap.
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if _, err := s.st.Flavors.List(ctx, store.ListOptions{Limit: 1}); err != nil {
		return fmt.Errorf("etcd: %w: %w", api.ErrUnavailable, err)
	}
	return nil
}

// written holds the highest revision noted.
type written struct{ rev atomic.Int64 }

func (w *written) note(rev int64) {
	for {
		cur := w.rev.Load()
		if rev <= cur || w.rev.CompareAndSwap(cur, rev) {
			return
		}
	}
}

// caught waits until c holds its first list and is current at this
// replica's latest write to it (w; nil for a cache this replica never
// writes to).
func caught[T any](ctx context.Context, c *store.Cache[T], w *written) error {
	// The cause tells a stuck cache (ours: 503) from a client that gave up.
	stuck := errors.New("cache is stuck")
	ctx, cancel := context.WithTimeoutCause(ctx, cacheWait, stuck)
	defer cancel()
	waitErr := func(what string) error {
		if errors.Is(context.Cause(ctx), stuck) {
			return fmt.Errorf("timed out after %s waiting to %s: %w", cacheWait, what, api.ErrUnavailable)
		}
		return fmt.Errorf("waiting to %s: %w", what, ctx.Err())
	}
	select {
	case <-c.Synced():
	case <-ctx.Done():
		return waitErr("load the cache")
	}
	if w == nil {
		return nil
	}
	if err := c.WaitForRev(ctx, w.rev.Load()); err != nil {
		return waitErr("catch up with the latest write")
	}
	return nil
}

// storeErr turns a store error about one object into the api sentinel a
// client understands. Errors it does not know pass through (500).
func storeErr(err error, what, name string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return api.NotFound(what, name)
	case errors.Is(err, store.ErrExists):
		return api.AlreadyExists(what, name)
	case errors.Is(err, store.ErrConflict):
		return fmt.Errorf("%s %q was modified concurrently; read it again and retry: %w", what, name, api.ErrConflict)
	case errors.Is(err, store.ErrInvalidContinue):
		return api.Invalid("continue", "is not a token this list issued")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	if st, ok := status.FromError(err); ok && (st.Code() == codes.Unavailable || st.Code() == codes.DeadlineExceeded) {
		return fmt.Errorf("etcd: %w: %w", api.ErrUnavailable, err)
	}
	return err
}

// now is the server's clock, in UTC so that stored times compare and print
// the same on every replica.
func now() time.Time { return time.Now().UTC() }
