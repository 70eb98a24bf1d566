package agent

import (
	"context"
	"log/slog"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/backoff"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	"github.com/stratahq/strata/proto/apiproto"
)

// Heartbeat metric names.
const (
	MetricReplicas  = "replicas"
	MetricMilliCPU  = "milli_cpu"
	MetricMemoryMiB = "memory_mib"
)

// session owns the node's standing with the region: it registers the
// node record and heartbeats, carrying the node's conditions and load.
type session struct {
	name   string
	client agentv1.AgentServiceClient
	// node is the record to register, built when it is registered.
	node   func() *api.Node
	addr   func() string
	table  *replicaTable
	meter  *meter
	health *health
	t      *timings
	clock  func() time.Time
	log    *slog.Logger
}

// run registers the node, closes registered, then heartbeats until
// ctx is done (on one stream, beatStream), registering again when the
// region asks.
func (s *session) run(ctx context.Context, registered chan<- struct{}) {
	interval, ok := s.register(ctx)
	if !ok {
		return
	}
	close(registered)
	warn := warnLimiter{every: s.t.warnEvery}
	beats := &beatStream{client: s.client, timeout: s.t.regionCall, unaryFor: s.t.unaryBeats, clock: s.clock}
	defer beats.close()
	var seq uint64
	// The first heartbeat goes at once: it carries the conditions the
	// registration does not.
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		seq++
		resp, err := beats.beat(ctx, s.heartbeatRequest(seq))
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			warn.fail(s.log, "heartbeat failed", err)
		default:
			warn.ok(s.log, "heartbeats delivered again")
			if ms := resp.GetHeartbeatIntervalMs(); ms > 0 {
				interval = time.Duration(ms) * time.Millisecond
			}
			if resp.GetReregister() {
				s.log.Info("region asked the node to register again")
				if interval, ok = s.register(ctx); !ok {
					return
				}
			}
		}
		t.Reset(interval)
	}
}

// register calls Register until it succeeds (jittered backoff) and
// returns the heartbeat interval, or false when ctx is done.
func (s *session) register(ctx context.Context) (time.Duration, bool) {
	b := s.t.regionBackoff()
	warn := warnLimiter{every: s.t.warnEvery}
	for {
		rctx, cancel := context.WithTimeout(ctx, s.t.regionCall)
		resp, err := s.client.Register(rctx, &agentv1.RegisterRequest{Node: apiproto.NodeToPB(s.node())})
		cancel()
		if err == nil {
			interval := s.t.heartbeat
			if ms := resp.GetHeartbeatIntervalMs(); ms > 0 {
				interval = time.Duration(ms) * time.Millisecond
			}
			s.log.Info("registered with region", "address", s.addr(), "heartbeat", interval)
			return interval, true
		}
		if ctx.Err() != nil {
			return 0, false
		}
		warn.fail(s.log, "register with region failed; retrying", err)
		if backoff.Sleep(ctx, b.Next()) != nil {
			return 0, false
		}
	}
}

func (s *session) heartbeatRequest(seq uint64) *agentv1.HeartbeatRequest {
	replicas, alloc := s.table.load()
	metrics := map[string]float64{
		MetricReplicas:  float64(replicas),
		MetricMilliCPU:  float64(alloc.MilliCPU),
		MetricMemoryMiB: float64(alloc.MemoryMiB),
	}
	if s.meter != nil {
		s.meter.current(metrics)
	}
	return &agentv1.HeartbeatRequest{
		Node:       s.name,
		Seq:        seq,
		Conditions: apiproto.ConditionsToPB(s.health.current()),
		Metrics:    metrics,
	}
}
