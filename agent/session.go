package agent

import (
	"context"
	"slices"
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
		Network:            a.nodeNetwork(),
	}
}

// runSession registers the node, closes registered, then heartbeats until
// ctx is done (on one stream, beatStream), registering again when the
// region asks.
func (a *Agent) runSession(ctx context.Context, client agentv1.AgentServiceClient, registered chan<- struct{}) {
	interval, ok := a.register(ctx, client)
	if !ok {
		return
	}
	close(registered)
	warn := warnLimiter{every: a.t.warnEvery}
	beats := &beatStream{client: client, timeout: a.t.regionCall, unaryFor: a.t.unaryBeats, clock: a.clock}
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
		resp, err := beats.beat(ctx, a.heartbeatRequest(seq))
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			warn.fail(a.log, "heartbeat failed", err)
		default:
			warn.ok(a.log, "heartbeats delivered again")
			if ms := resp.GetHeartbeatIntervalMs(); ms > 0 {
				interval = time.Duration(ms) * time.Millisecond
			}
			if resp.GetReregister() {
				a.log.Info("region asked the node to register again")
				if interval, ok = a.register(ctx, client); !ok {
					return
				}
			}
		}
		t.Reset(interval)
	}
}

// register calls Register until it succeeds (jittered backoff) and
// returns the heartbeat interval, or false when ctx is done.
func (a *Agent) register(ctx context.Context, client agentv1.AgentServiceClient) (time.Duration, bool) {
	b := a.t.regionBackoff()
	warn := warnLimiter{every: a.t.warnEvery}
	for {
		rctx, cancel := context.WithTimeout(ctx, a.t.regionCall)
		resp, err := client.Register(rctx, &agentv1.RegisterRequest{Node: apiproto.NodeToPB(a.node())})
		cancel()
		if err == nil {
			interval := a.t.heartbeat
			if ms := resp.GetHeartbeatIntervalMs(); ms > 0 {
				interval = time.Duration(ms) * time.Millisecond
			}
			a.log.Info("registered with region", "address", a.Addr(), "heartbeat", interval)
			return interval, true
		}
		if ctx.Err() != nil {
			return 0, false
		}
		warn.fail(a.log, "register with region failed; retrying", err)
		if backoff.Sleep(ctx, b.Next()) != nil {
			return 0, false
		}
	}
}

func (a *Agent) heartbeatRequest(seq uint64) *agentv1.HeartbeatRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	var replicas int
	var alloc api.Capacity
	for _, r := range a.replicas {
		if !r.running() {
			continue
		}
		replicas++
		alloc = alloc.Add(r.asg.Flavor.Capacity())
	}
	return &agentv1.HeartbeatRequest{
		Node:       a.cfg.Node.Name,
		Seq:        seq,
		Conditions: apiproto.ConditionsToPB(a.conditions),
		Metrics: map[string]float64{
			MetricReplicas:  float64(replicas),
			MetricMilliCPU:  float64(alloc.MilliCPU),
			MetricMemoryMiB: float64(alloc.MemoryMiB),
		},
	}
}

// runHealth refreshes the providers' conditions every status interval:
// heartbeats carry the latest, they do not ask for it.
func (a *Agent) runHealth(ctx context.Context) {
	t := time.NewTicker(a.cfg.StatusInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a.refreshHealth(ctx)
		}
	}
}

// refreshHealth asks every provider for its conditions. A failed Health
// call is itself a condition, provider/<name> in Error.
func (a *Agent) refreshHealth(ctx context.Context) {
	var conds []api.Condition
	for _, e := range a.provs.list {
		hctx, cancel := context.WithTimeout(ctx, a.t.providerCall)
		cs, err := e.p.Health(hctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			conds = append(conds, api.Condition{
				Type:    "provider/" + e.name,
				Status:  api.ConditionError,
				Reason:  "HealthFailed",
				Message: err.Error(),
			})
			continue
		}
		conds = append(conds, cs...)
	}
	now := a.clock()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.netCond != nil {
		conds = append(conds, *a.netCond)
	}
	a.conditions = mergeConditions(a.conditions, conds, now)
}

// mergeConditions keeps one condition per type (the worst, when two
// providers report the same type), in type order, and keeps Since from
// prev while a condition's status is unchanged.
func mergeConditions(prev, next []api.Condition, now time.Time) []api.Condition {
	byType := map[string]api.Condition{}
	for _, c := range next {
		if cur, ok := byType[c.Type]; ok && severity(cur.Status) >= severity(c.Status) {
			continue
		}
		byType[c.Type] = c
	}
	out := make([]api.Condition, 0, len(byType))
	for _, c := range byType {
		since := now
		if i := slices.IndexFunc(prev, func(p api.Condition) bool { return p.Type == c.Type }); i >= 0 && prev[i].Status == c.Status {
			since = prev[i].Since
		} else if !c.Since.IsZero() {
			since = c.Since
		}
		c.Since = since
		out = append(out, c)
	}
	slices.SortFunc(out, func(x, y api.Condition) int {
		switch {
		case x.Type < y.Type:
			return -1
		case x.Type > y.Type:
			return 1
		}
		return 0
	})
	return out
}

func severity(s api.ConditionStatus) int {
	switch s {
	case api.ConditionError:
		return 2
	case api.ConditionWarning:
		return 1
	}
	return 0
}
