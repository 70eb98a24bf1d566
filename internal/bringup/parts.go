package bringup

import (
	"context"
	"net/http"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/stratahq/strata/internal/audit"
	"github.com/stratahq/strata/internal/election"
	"github.com/stratahq/strata/internal/metrics"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/internal/transport"
)

// Base is what the kit has opened when it asks the tier for its parts.
type Base struct {
	Etcd    *clientv3.Client
	Store   *store.Store
	Elector *election.Elector
	Audit   *audit.Log
	Metrics *metrics.Registry
	closers []func()
}

// Defer has f run when the tier stops, once its servers have stopped,
// in reverse order of the calls (and before what the kit opened).
func (b *Base) Defer(f func()) { b.closers = append(b.closers, f) }

// close runs what Defer was given, last first.
func (b *Base) close() {
	for i := len(b.closers) - 1; i >= 0; i-- {
		b.closers[i]()
	}
	b.closers = nil
}

// Caches are a tier's caches of etcd: run until ctx ends, synced once
// they hold etcd's state.
type Caches interface {
	Run(ctx context.Context) error
	WaitSynced(ctx context.Context) error
}

// API is what a tier serves: gRPC services under their authorization
// policy, and its REST handler. Run runs its background work until ctx
// ends.
type API interface {
	GRPCPolicy() transport.Policy
	RegisterGRPC(*grpc.Server)
	Handler() http.Handler
	Run(ctx context.Context) error
}

// Parts are what a tier is, beyond what every tier has.
type Parts struct {
	Caches Caches
	API    API
	// Console, when set, is served at /console/ beside the API (it
	// authenticates in the browser; the API's handler requires a token
	// everywhere).
	Console http.Handler
	// GRPCOptions come after the metrics' on the gRPC server.
	GRPCOptions []grpc.ServerOption
	// Runners run beside the servers until the tier stops; a
	// cancellation is a clean stop, any other error stops the tier.
	Runners []func(ctx context.Context) error
	// Ready, when set, is the tier's last step before it says it serves
	// (its caches are synced and etcd takes its transactions by then); an
	// error stops the tier, nil when ctx ends first.
	Ready func(ctx context.Context) error
	// BeforeLead, when set, runs once the tier is ready, before it
	// stands for election; an error stops the tier.
	BeforeLead func(ctx context.Context) error
	// Lead is the leader's work, run while the tier holds leadership
	// until leaderCtx ends.
	Lead func(leaderCtx context.Context, l *election.Leadership)
}
