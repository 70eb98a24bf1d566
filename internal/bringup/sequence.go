// Package bringup is the tiers' one start-up sequence: the global tier
// and every region run it with their own parts. It stands apart from
// internal/serving, which the agent links too: the sequence opens etcd,
// the store and the elector, none of which an agent's binary may carry.
package bringup

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"github.com/stratahq/strata/internal/audit"
	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/election"
	"github.com/stratahq/strata/internal/etcdserver"
	"github.com/stratahq/strata/internal/metrics"
	"github.com/stratahq/strata/internal/serving"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/internal/transport"
)

// Sequence is a tier's one start-up sequence (the global tier's and a
// region's), the way k3s starts its servers: the kit owns the order, the
// tier supplies what differs (Build). In order it opens etcd (or takes
// the client given) and the store on it, the elector, the audit log,
// asks the tier for its parts, builds the gRPC and HTTP servers, runs
// the tier's caches, API and runners beside the servers, says the tier
// is ready once its caches are synced and etcd takes its transactions,
// and only then stands for election. When ctx ends the servers stop
// first (each given a grace), then what was opened closes, last opened
// first.
type Sequence struct {
	// Name is "global" or "region": in errors, log lines and metrics.
	Name   string
	Config *config.Server
	Log    *slog.Logger
	// Etcd, when set, is used instead of opening Config.Etcd; EtcdName
	// names the client opened (etcdserver.Open). TimedEtcd times its
	// calls in the tier's metrics.
	Etcd      *clientv3.Client
	EtcdName  string
	TimedEtcd bool
	// ElectionPrefix is where the tier's election lives under the
	// store's prefix.
	ElectionPrefix string
	// The listeners, the gRPC security and the HTTP options, set by
	// Listen.
	GRPCListener, HTTPListener net.Listener
	Security                   *transport.Security
	HTTP                       serving.HTTPOptions
	// Ready is closed once the tier serves.
	Ready chan struct{}
	// Build makes the tier's parts on what the kit opened. ctx ends when
	// the tier stops.
	Build func(ctx context.Context, b *Base) (*Parts, error)
}

// Run runs the sequence until ctx is done, then stops the tier.
func (b *Sequence) Run(ctx context.Context) error {
	// stopping is set when the servers are told to stop; what was opened
	// closes before this, the first deferred, logs how long it took.
	var stopping time.Time
	defer func() {
		if !stopping.IsZero() {
			b.Log.Info(b.Name+" stopped", "took", time.Since(stopping).Round(time.Millisecond).String())
		}
	}()
	base := &Base{Metrics: metrics.New(b.Name)}
	defer base.close() // after the servers stopped (g.Wait)
	if err := b.open(ctx, base); err != nil {
		return fmt.Errorf("%s: %w", b.Name, err)
	}
	g, gctx := errgroup.WithContext(ctx)
	parts, err := b.Build(gctx, base)
	if err != nil {
		return fmt.Errorf("%s: %w", b.Name, err)
	}
	tier, err := b.servers(base, parts)
	if err != nil {
		return fmt.Errorf("%s: %w", b.Name, err)
	}
	g.Go(func() error { return serving.IgnoreCanceled(parts.Caches.Run(gctx)) })
	g.Go(func() error { return serving.IgnoreCanceled(parts.API.Run(gctx)) })
	for _, run := range parts.Runners {
		g.Go(func() error { return serving.IgnoreCanceled(run(gctx)) })
	}
	g.Go(func() error { return b.lead(gctx, base.Elector, parts) })
	g.Go(func() error { return base.Audit.ReopenOnHangup(gctx, b.Log) })
	tier.Serve(gctx, g, b.Ready, func(ctx context.Context) error { return ready(ctx, base.Store, parts) })
	// Said once by every replica, leader or standby, so that a stop that
	// takes long shows where it started (stopped: at Run's very end).
	g.Go(func() error {
		<-gctx.Done()
		stopping = time.Now()
		b.Log.Info(b.Name+" stopping", "leader", base.Elector.IsLeader())
		return nil
	})
	return g.Wait()
}

// open opens etcd (unless given), the store, the elector and the audit
// log into base, each closed by base.close.
func (b *Sequence) open(ctx context.Context, base *Base) error {
	cfg := b.Config
	base.Etcd = b.Etcd
	if base.Etcd == nil {
		var dial []grpc.DialOption
		if b.TimedEtcd {
			dial = append(dial, etcdserver.TimedCalls(base.Metrics))
		}
		cli, closeEtcd, err := etcdserver.Open(ctx, b.EtcdName, cfg.Etcd, dial...)
		if err != nil {
			return err
		}
		base.Defer(closeEtcd)
		base.Etcd = cli
		go etcdserver.LogUnreachable(ctx, cli, cfg.Etcd, b.Log)
	}
	base.Store = store.New(base.Etcd, cfg.Etcd.Prefix, store.WithLogger(b.Log), store.WithMaxTxnOps(cfg.Etcd.MaxTxnOps))
	var err error
	base.Elector, err = election.New(election.Config{
		Client: base.Etcd, Prefix: base.Store.Prefix() + b.ElectionPrefix, ID: cfg.ID, TTL: cfg.LeaseTTL, Logger: b.Log,
		// The replica's own address, never the balancer's (the region's
		// advertise.* may be one): a wildcard listen address gives none.
		Addr: election.ServingAddr(b.GRPCListener.Addr()), KeepDeadLeaders: !cfg.RevokeDeadLeader,
	})
	if err != nil {
		return err
	}
	if base.Audit, err = audit.OpenConfigured(cfg.Audit, b.Log); err != nil {
		return err
	}
	base.Defer(func() { base.Audit.Close() })
	return nil
}

// servers builds the tier's gRPC server (its API's services, under its
// policy) and its HTTP server (the API, the console beside it), and
// warns of what they serve without protection.
func (b *Sequence) servers(base *Base, parts *Parts) (serving.Tier, error) {
	grpcSrv, err := transport.NewServer(b.Security, parts.API.GRPCPolicy(), b.Log, append(base.Metrics.GRPC(), parts.GRPCOptions...)...)
	if err != nil {
		return serving.Tier{}, err
	}
	parts.API.RegisterGRPC(grpcSrv)
	mux := http.NewServeMux()
	if parts.Console != nil {
		mux.Handle("/console/", parts.Console)
	}
	mux.Handle("/", parts.API.Handler())
	httpSrv, err := serving.NewHTTP(b.HTTPListener, base.Metrics.HTTP(mux), b.HTTP)
	if err != nil {
		return serving.Tier{}, fmt.Errorf("listen.http: %w", err)
	}
	var weak []string
	if b.Security.IsInsecure() {
		weak = append(weak, serving.InsecureGRPC)
	}
	serving.WarnInsecure(b.Log, append(weak, httpSrv.Warnings()...)...)
	serving.WarnWeak(b.Log, b.Config.Weaknesses()...)
	return serving.Tier{Name: b.Name, GRPC: grpcSrv, GRPCListener: b.GRPCListener, HTTP: httpSrv, Log: b.Log}, nil
}

// ready is what a tier does before it says it serves: its caches hold
// etcd's state, etcd takes transactions as large as configured (a limit
// above the server's stops the tier), then the tier's own step. nil
// when ctx ends first.
func ready(ctx context.Context, st *store.Store, parts *Parts) error {
	if parts.Caches.WaitSynced(ctx) != nil {
		return nil // ctx is done
	}
	if err := st.EnsureTxnLimit(ctx); err != nil {
		return err
	}
	if parts.Ready != nil {
		return parts.Ready(ctx)
	}
	return nil
}

// lead stands for election once the tier serves (and BeforeLead is
// done) and runs the leader's work while elected, until ctx ends.
func (b *Sequence) lead(ctx context.Context, e *election.Elector, parts *Parts) error {
	select {
	case <-ctx.Done():
		return nil
	case <-b.Ready: // caches synced, transaction limit checked
	}
	if parts.BeforeLead != nil {
		if err := parts.BeforeLead(ctx); err != nil {
			return err
		}
	}
	return serving.IgnoreCanceled(e.Run(ctx, parts.Lead))
}
