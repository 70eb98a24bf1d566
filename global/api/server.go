// Package api is the global tier's API: the operations on flavors,
// resources, regions, nodes, replicas, events and tokens, each a small
// type of its own (Flavors, Resources, Regions, Nodes, Replicas, Events,
// Tokens), put together by Server and served over REST (rest.go, on the
// edge of internal/rest) and gRPC (grpc.go), with bearer-token tenancy
// (auth.go).
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
	"time"

	"github.com/stratahq/strata/global/quota"
	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/audit"
	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/election"
	"github.com/stratahq/strata/internal/events"
	"github.com/stratahq/strata/internal/hostpolicy"
	"github.com/stratahq/strata/internal/secretbox"
	"github.com/stratahq/strata/internal/store"
)

// DefaultRegionTimeout is Options.RegionTimeout's default; the others
// come from package config.
const DefaultRegionTimeout = 5 * time.Second

// readyTimeout bounds the etcd probe of /readyz: a probe that hangs is as
// bad as one that fails.
const readyTimeout = 2 * time.Second

// LeaderSource tells who the master is (election.Elector). If it also has
// IsLeader() bool, Status uses that to say whether this replica leads.
type LeaderSource interface {
	Leader(ctx context.Context) (election.LeaderInfo, error)
}

// Options configures a Server.
type Options struct {
	// State is the global etcd; required.
	State *state.State
	// Caches are caches of State shared with the rest of the process (the
	// master controller); their owner runs them. Nil makes the Server
	// keep its own, which Run runs.
	Caches *state.Caches
	// Regions reaches regions for node operations and replica lists; without
	// it those operations answer Unavailable.
	Regions RegionClients
	// Heartbeats stores region heartbeats; without it RegionHeartbeat
	// answers Unavailable.
	Heartbeats HeartbeatRecorder
	// Events is the global tier's own event stream (operators' actions on
	// resources), shared by every replica (Redis); nil keeps one in memory,
	// right for a single replica.
	Events events.Store
	// Leader reports the master in Status; optional.
	Leader LeaderSource
	// ID is this API replica's identity (config.Global.ID); required.
	ID string
	// MaxBodyBytes bounds a REST request body; 0 means
	// config.DefaultHTTPAPI().MaxBodyBytes.
	MaxBodyBytes int64
	// RegionTimeout bounds each region's answer in a fan-out (all nodes,
	// replicas); 0 means DefaultRegionTimeout.
	RegionTimeout time.Duration
	// HeartbeatInterval is what RegionHeartbeat tells regions; 0 means
	// config.DefaultRegionsLiveness().HeartbeatInterval.
	HeartbeatInterval time.Duration
	// Version is reported by Status.
	Version string
	// Audit records every call that changes something (REST, and
	// ResourceService over gRPC), and every read of secret values, logs
	// or another tenant's objects (audit.go); nil records nothing.
	Audit *audit.Log
	// Secrets seals and opens the tenants' Secrets (the key files of
	// config.Global.Secrets); nil refuses Secret writes and reveals.
	Secrets *secretbox.Keyring
	// BootstrapToken is an admin token of tenant default to store
	// (config api.bootstrapToken), empty for none: Tokens.Bootstrap
	// stores it, and authentication waits and Ready fails until then.
	BootstrapToken string
	// AlertReceivers is where alert rules' receivers may be (config
	// alerts.receiverNetworks): a rule whose URL names an internal
	// address outside it is refused.
	AlertReceivers hostpolicy.Networks
	// Logger defaults to discarding.
	Logger *slog.Logger
}

// Server is the global API: the services of each kind of object, shared by
// REST and gRPC. Every operation takes the caller's Identity from the
// context (see WithIdentity) and checks it; operations that have no caller
// (PruneRequests, Tokens.New, Tokens.EnsureBootstrap) are for the process
// itself.
type Server struct {
	flavors   *Flavors
	resources *Resources
	regions   *Regions
	nodes     *Nodes
	replicas  *Replicas
	events    *Events
	tokens    *Tokens
	tenants   *Tenants
	policies  *NetworkPolicies
	configs   *Configs
	secrets   *Secrets

	st      *state.State
	caches  *state.Caches
	leader  LeaderSource
	id      string
	version string
	maxBody int64
	audit   *audit.Log
	log     *slog.Logger
	// alertReceivers is Options.AlertReceivers.
	alertReceivers hostpolicy.Networks
	// ownCaches says whether Run runs the caches (they are not shared).
	ownCaches bool
}

// New returns a Server; call Run to load its caches.
func New(o Options) (*Server, error) {
	if o.State == nil {
		return nil, errors.New("api: Options.State is required")
	}
	if o.ID == "" {
		return nil, errors.New("api: Options.ID is required")
	}
	s := &Server{
		st: o.State, caches: o.Caches, leader: o.Leader, id: o.ID, version: o.Version,
		maxBody: positiveOr(o.MaxBodyBytes, config.DefaultHTTPAPI().MaxBodyBytes), audit: o.Audit, log: o.Logger,
		alertReceivers: o.AlertReceivers,
	}
	if s.caches == nil {
		s.caches, s.ownCaches = state.NewCaches(o.State), true
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	st, c, log := o.State, s.caches, s.log
	s.regions = &Regions{
		regions: st.Regions, statuses: st.RegionStatus, resources: st.Resources, st: st.Store,
		cache: c.Regions, statusCache: c.RegionStatus,
		heartbeats: o.Heartbeats, beatEvery: positiveOr(o.HeartbeatInterval, config.DefaultRegionsLiveness().HeartbeatInterval), log: log,
	}
	s.flavors = &Flavors{flavors: st.Flavors, resources: st.Resources}
	fan := &regionFan{clients: o.Regions, dir: s.regions, wait: positiveOr(o.RegionTimeout, DefaultRegionTimeout), log: log}
	own := o.Events
	if own == nil {
		own = events.NewMemory(events.DefaultCapacity)
	}
	s.events = &Events{fan: fan, own: own, log: log}
	s.resources = &Resources{st: st, resources: c.Resources, statuses: c.Statuses, flavors: c.Flavors, regions: s.regions, events: s.events, log: log}
	q := &quotas{
		st: st, tenants: c.Tenants, admissions: c.Admissions, resources: c.Resources, count: quota.Counter{Resources: c.Resources, Flavors: c.Flavors},
		wroteTenants: &written{}, wroteAdmissions: &written{}, wroteResources: &s.resources.wroteResources,
	}
	s.resources.quotas = q
	s.tenants = &Tenants{st: st, cache: c.Tenants, quotas: q, regions: s.regions, wrote: q.wroteTenants}
	s.nodes = &Nodes{fan: fan}
	s.replicas = &Replicas{fan: fan, resources: s.resources}
	s.tokens = newTokens(st.Tokens, c.Tokens, o.BootstrapToken, log)
	s.policies = &NetworkPolicies{st: st, cache: c.Policies, fan: fan}
	s.configs = &Configs{configs: st.Configs, resources: st.Resources, roll: s.resources.rollUsers}
	s.secrets = &Secrets{secrets: st.Secrets, ring: o.Secrets, resources: st.Resources, roll: s.resources.rollUsers}
	return s, nil
}

// positiveOr is v when it is set (positive), else def.
func positiveOr[T int64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// Flavors is the flavor catalog.
func (s *Server) Flavors() *Flavors { return s.flavors }

// Resources are the tenants' resources, their revisions and rollouts.
func (s *Server) Resources() *Resources { return s.resources }

// Regions are the registered regions.
func (s *Server) Regions() *Regions { return s.regions }

// Nodes are the node operations, forwarded to the regions.
func (s *Server) Nodes() *Nodes { return s.nodes }

// Replicas are the resources' replicas and their output, asked of the
// regions.
func (s *Server) Replicas() *Replicas { return s.replicas }

// Events are the regions' events.
func (s *Server) Events() *Events { return s.events }

// Tokens are the bearer tokens and the authentication by them.
func (s *Server) Tokens() *Tokens { return s.tokens }

// Tenants are the tenants' records (quotas) and usage.
func (s *Server) Tenants() *Tenants { return s.tenants }

// NetworkPolicies are the tenants' network policies.
func (s *Server) NetworkPolicies() *NetworkPolicies { return s.policies }

// Configs are the tenants' Configs.
func (s *Server) Configs() *Configs { return s.configs }

// Secrets are the tenants' Secrets.
func (s *Server) Secrets() *Secrets { return s.secrets }

// Run keeps the Server's own caches current until ctx is done, then
// returns ctx.Err(). Shared caches (Options.Caches) are their owner's to
// run: a cache runs once.
func (s *Server) Run(ctx context.Context) error {
	if s.ownCaches {
		if err := s.caches.Run(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("api caches stopped", "err", err)
		}
	}
	<-ctx.Done()
	return ctx.Err()
}

// Ready reports whether etcd answers, every cache holds its first list
// and the bootstrap token is stored (Tokens.Bootstrap).
func (s *Server) Ready(ctx context.Context) error {
	c := s.caches
	caches := []struct {
		name   string
		synced <-chan struct{}
	}{
		{"resources", c.Resources.Synced()},
		{"statuses", c.Statuses.Synced()},
		{"regions", c.Regions.Synced()},
		{"regionstatus", c.RegionStatus.Synced()},
		{"tokens", c.Tokens.Synced()},
		{"tenants", c.Tenants.Synced()},
		{"admissions", c.Admissions.Synced()},
		{"netpolicies", c.Policies.Synced()},
	}
	for _, c := range caches {
		select {
		case <-c.synced:
		default:
			return fmt.Errorf("%s cache not loaded yet: %w", c.name, api.ErrUnavailable)
		}
	}
	if !s.tokens.bootstrapped() {
		return errBootstrapPending
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

// Status is the global tier's overview.
type Status struct {
	// ID is the replica that answered.
	ID          string       `json:"id"`
	Leader      string       `json:"leader,omitempty"`
	LeaderSince time.Time    `json:"leaderSince,omitzero"`
	IsLeader    bool         `json:"isLeader"`
	Version     string       `json:"version"`
	Regions     []api.Region `json:"regions"`
	// Caller is who asked: the consoles show the caller's tenant (and
	// its quota) from it.
	Caller Caller `json:"caller"`
}

// Caller is the identity a request was made with, as Status shows it.
type Caller struct {
	Tenant string   `json:"tenant,omitempty"`
	Role   api.Role `json:"role,omitempty"`
}

// Status reports this replica, the master and the regions. Callers who
// may not read regions (members, viewers) see each region's name, zones
// and health, not where it is (endpoints, console, leader).
func (s *Server) Status(ctx context.Context) (Status, error) {
	id, err := authorize(ctx, readStatus)
	if err != nil {
		return Status{}, err
	}
	out := Status{ID: s.id, Version: s.version, Caller: Caller{Tenant: id.Tenant, Role: id.Role}}
	if s.leader != nil {
		l, err := s.leader.Leader(ctx)
		switch {
		case err == nil:
			out.Leader, out.LeaderSince, out.IsLeader = l.ID, l.Since, l.ID == s.id
			// The elector itself knows best (its candidate id need not be
			// this replica's id).
			if e, ok := s.leader.(interface{ IsLeader() bool }); ok {
				out.IsLeader = e.IsLeader()
			}
		case errors.Is(err, election.ErrNoLeader):
		default:
			// The overview is still worth having without the leader.
			s.log.Warn("status: reading the leader", "err", err)
		}
	}
	regions, err := s.regions.all(ctx)
	if err != nil {
		return Status{}, err
	}
	if !id.may(readRegions) {
		for i := range regions {
			regions[i] = withoutWhere(regions[i])
		}
	}
	out.Regions = regions
	return out, nil
}

// withoutWhere is r without what says where the region is.
func withoutWhere(r api.Region) api.Region {
	r.Endpoint, r.ConsoleURL, r.Labels = "", "", nil
	if r.Status != nil {
		st := *r.Status
		st.Leader = ""
		r.Status = &st
	}
	return r
}
