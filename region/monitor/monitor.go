// Package monitor turns heartbeats into node health, following the seed:
// a node quiet for SuspectAfter is Suspect and its NodeService.Status is
// probed; if it answers it is refreshed (Up). A node quiet for DownAfter
// whose probe fails is Down, and the controller reschedules its replicas.
// The verdict is internal/liveness's, shared with the global tier's region
// monitor: a beat missing from Redis (restarted, flushed) is measured from
// the newest evidence, never from a registration minutes ago. Only
// transitions are written to etcd: steady heartbeats cost nothing there.
//
// It also applies each node's automatic policies: auto-cordon when a
// condition stays in Error for AutoCordonInterval, auto-drain when it stays
// for AutoDrainInterval, each recorded as an event with its reason.
package monitor

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/events"
	"github.com/stratahq/strata/internal/liveness"
	"github.com/stratahq/strata/internal/metrics"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/internal/transport"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	"github.com/stratahq/strata/region/agentconn"
	"github.com/stratahq/strata/region/state"
)

// Heartbeats tells when each node last beat (heartbeat.Store does).
type Heartbeats interface {
	Times(ctx context.Context) (map[string]time.Time, error)
}

// Emitter records events without blocking.
type Emitter interface {
	Emit(ev events.Event)
}

// Prober asks a node's agent whether it is alive.
type Prober interface {
	Probe(ctx context.Context, node *api.Node) error
}

// Options configure a Monitor.
type Options struct {
	Region            string
	State             *state.State
	Caches            *state.Caches
	Heartbeats        Heartbeats
	Events            Emitter
	Prober            Prober
	HeartbeatInterval time.Duration
	SuspectAfter      time.Duration
	DownAfter         time.Duration
	ProbeTimeout      time.Duration
	// DrainDeadline bounds automatic drains.
	DrainDeadline time.Duration
	// Metrics may be nil.
	Metrics *metrics.Monitor
	// Logger is the region's (it names the region); the monitor adds
	// component=monitor.
	Logger *slog.Logger
	Clock  func() time.Time
}

// Monitor watches a region's nodes while its process leads the region.
type Monitor struct {
	o   Options
	log *slog.Logger
}

// New returns a monitor.
func New(o Options) *Monitor {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	o.ProbeTimeout = cmp.Or(o.ProbeTimeout, config.DefaultLiveness().ProbeTimeout)
	o.DrainDeadline = cmp.Or(o.DrainDeadline, config.DefaultRegionController().DrainDeadline)
	return &Monitor{o: o, log: o.Logger.With("component", "monitor")}
}

// Lead checks every node at once, then each half heartbeat interval
// until ctx is done, and once more between two of those passes at the
// moment a Suspect node's quiet reaches DownAfter: the Down verdict,
// which the controller reschedules on, waits for no tick. Only nodes
// already Suspect (quiet for SuspectAfter, probe failed) arm that pass,
// and at most one such pass runs between two ticks, so that a fleet that
// beats costs nothing more and many nodes going quiet together no more
// than twice the passes.
func (m *Monitor) Lead(ctx context.Context, guard store.Guard) error {
	if err := m.o.Caches.WaitSynced(ctx); err != nil {
		return err
	}
	// What this leader remembers of the heartbeat store starts now: a
	// beat missing at its first look has been missing since its start.
	tr := liveness.NewTracker()
	tick := time.NewTicker(m.lookEvery())
	defer tick.Stop()
	due := time.NewTimer(time.Hour)
	due.Stop()
	defer due.Stop()
	var dueC <-chan time.Time // armed for one deadline pass at a time
	ticked := true            // the first pass runs at once, as if on a tick
	for {
		down, err := m.check(ctx, guard, tr)
		if err != nil && ctx.Err() == nil {
			m.log.Warn("node monitor pass failed", "err", err)
			if isFenced(err) {
				return err
			}
		}
		dueC = nil
		if ticked && !down.IsZero() {
			// A little past the deadline: the pass must find the quiet
			// at DownAfter, not a hair short of it.
			due.Reset(down.Sub(m.o.Clock()) + deadlineSlack)
			dueC = due.C
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			ticked = true
		case <-dueC:
			ticked = false
		}
	}
}

// lookEvery is how often the monitor looks at the heartbeats.
func (m *Monitor) lookEvery() time.Duration { return m.o.HeartbeatInterval / 2 }

// deadlineSlack is how long past a Down deadline its pass runs.
const deadlineSlack = 10 * time.Millisecond

// verdict is the monitor's judgement of one node in one pass.
type verdict struct {
	node *api.Node
	liveness.Verdict
}

// check is one pass over every node: probes run concurrently, so one
// hung agent does not delay the verdict on the others. It returns the
// earliest moment a node it judged Suspect becomes Down if it stays quiet
// (zero: none is Suspect). A look that comes late (this process stalled,
// or Redis could not be read in between) is blind time that tr leaves out
// of every node's quiet clock; the time the pass waits on probes is not.
func (m *Monitor) check(ctx context.Context, guard store.Guard, tr *liveness.Tracker) (time.Time, error) {
	// Only the beats' times: a pass every half interval reading every
	// node's metrics too would cost Redis a hash read per node.
	last, err := m.o.Heartbeats.Times(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("list heartbeats: %w", err)
	}
	now := m.o.Clock()
	th := liveness.Thresholds{SuspectAfter: m.o.SuspectAfter, DownAfter: m.o.DownAfter}
	m.o.Metrics.Blind(tr.Look(now, m.lookEvery(), th))
	nodes := m.o.Caches.Nodes.List()
	tr.Retain(func(id string) bool { _, ok := m.o.Caches.Nodes.Get(id); return ok })
	verdicts := make([]verdict, len(nodes))
	var wg sync.WaitGroup
	var probing time.Time // when the first probe started
	for i, it := range nodes {
		n := it.Value
		e := m.evidence(n, now, last, tr)
		if !liveness.NeedsProbe(now, e, th) {
			verdicts[i] = verdict{n, liveness.Judge(now, e, th, liveness.Probe{})}
			continue
		}
		if probing.IsZero() {
			probing = m.o.Clock()
		}
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, m.o.ProbeTimeout)
			defer cancel()
			verdicts[i] = verdict{n, liveness.Judge(now, e, th, liveness.Failed(m.o.Prober.Probe(pctx, n)))}
		})
	}
	wg.Wait()
	if !probing.IsZero() {
		tr.Excuse(m.o.Clock().Sub(probing))
	}
	return downDeadline(verdicts, now, m.o.DownAfter), m.apply(ctx, guard, verdicts, now)
}

// downDeadline is the earliest moment a Suspect verdict of a pass at now
// turns Down if its node stays quiet: DownAfter after its quiet began.
// Zero when no verdict is Suspect.
func downDeadline(verdicts []verdict, now time.Time, downAfter time.Duration) time.Time {
	var out time.Time
	for _, v := range verdicts {
		if v.Health != api.HealthSuspect || v.Quiet >= downAfter {
			continue
		}
		if at := now.Add(downAfter - v.Quiet); out.IsZero() || at.Before(out) {
			out = at
		}
	}
	return out
}

// transitionWorkers bounds the writes of one pass in flight. A pass that
// has many to write (nodes lost together, or back together) does not
// write them one etcd round trip after another: at thousands of nodes
// that took minutes, and a verdict written that late may be wrong (a
// node that beats again, written Down).
const transitionWorkers = 16

// apply writes a pass's verdicts: the health transitions, and the
// automatic policies of the nodes that are Up.
func (m *Monitor) apply(ctx context.Context, guard store.Guard, verdicts []verdict, now time.Time) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(transitionWorkers)
	for _, v := range verdicts {
		m.o.Metrics.Lag(v.Quiet)
		if !m.hasWork(v) {
			continue
		}
		g.Go(func() error {
			if err := m.transition(gctx, guard, v, now); err != nil {
				return err
			}
			if v.Health == api.HealthUp {
				return m.autoPolicies(gctx, guard, v.node, now)
			}
			return nil
		})
	}
	return g.Wait()
}

// hasWork reports whether a verdict may write anything: a health other
// than the recorded one, or automatic policies to check.
func (m *Monitor) hasWork(v verdict) bool {
	if v.Health == api.HealthUp && (v.node.EnableAutoCordon || v.node.EnableAutoDrain) {
		return true
	}
	cur, ok := m.o.Caches.NodeStatus.Get(v.node.Name)
	return !ok || cur.Value.Health != v.Health
}

// evidence gathers what is known of n's life: its beat in the heartbeat
// store (through tr, which remembers what the store lost), the beat and
// health recorded in etcd, its last registration.
func (m *Monitor) evidence(n *api.Node, now time.Time, last map[string]time.Time, tr *liveness.Tracker) liveness.Evidence {
	e := liveness.Evidence{Registered: n.RegisteredAt, Current: api.HealthUnknown}
	if st, ok := m.o.Caches.NodeStatus.Get(n.Name); ok {
		e.Recorded, e.Current = st.Value.LastHeartbeat, st.Value.Health
	}
	at, ok := last[n.Name]
	tr.Observe(n.Name, at, ok, now, &e)
	return e
}

// transition writes a node's health when it changes.
func (m *Monitor) transition(ctx context.Context, guard store.Guard, v verdict, now time.Time) error {
	n, health, reason := v.node, v.Health, v.Reason
	cur, ok := m.o.Caches.NodeStatus.Get(n.Name)
	if ok && cur.Value.Health == health {
		return nil
	}
	from := api.HealthUnknown
	changed := false
	_, err := m.o.State.NodeStatus.Modify(ctx, n.Name, func(s *api.NodeStatus) error {
		changed = false
		if s.Health == health {
			return store.ErrNoChange
		}
		from = s.Health
		s.Health, s.Reason, s.Since, s.LastHeartbeat = health, reason, now, v.LastAlive
		changed = true
		return nil
	}, guard)
	if err != nil {
		return fmt.Errorf("node %s → %s: %w", n.Name, health, err)
	}
	if !changed {
		return nil // our cache was behind our own earlier write
	}
	typ, level := events.TypeNormal, m.log.Info
	if health != api.HealthUp {
		typ, level = events.TypeWarning, m.log.Warn
	}
	m.o.Metrics.Transition(string(health))
	level("node health changed", "node", n.Name, "from", from, "to", health, "reason", reason)
	m.o.Events.Emit(events.Event{
		Type: typ, Reason: "Node" + string(health), Object: "node/" + n.Name, Region: m.o.Region,
		Message: fmt.Sprintf("%s → %s: %s", from, health, reason),
	})
	return nil
}

// autoPolicies cordons and drains a node whose conditions stayed in Error
// for the intervals it asks for.
func (m *Monitor) autoPolicies(ctx context.Context, guard store.Guard, n *api.Node, now time.Time) error {
	if !n.EnableAutoCordon && !n.EnableAutoDrain {
		return nil
	}
	worst := m.worstCondition(n.Name)
	if worst == nil {
		return nil
	}
	inError := now.Sub(worst.Since)
	why := fmt.Sprintf("condition %s in Error for %s: %s", worst.Type, inError.Round(time.Second), worst.Reason)
	if n.EnableAutoCordon && n.Schedulable && inError >= n.AutoCordonInterval.Or(time.Minute) {
		if err := m.autoCordon(ctx, guard, n, why, now); err != nil {
			return err
		}
	}
	if n.EnableAutoDrain && inError >= n.AutoDrainInterval.Or(5*time.Minute) {
		return m.autoDrain(ctx, guard, n, worst, why, now)
	}
	return nil
}

// worstCondition is node's longest-standing condition in Error, if any.
func (m *Monitor) worstCondition(node string) *api.Condition {
	st, ok := m.o.Caches.NodeStatus.Get(node)
	if !ok {
		return nil
	}
	var worst *api.Condition
	for i := range st.Value.Conditions {
		c := &st.Value.Conditions[i]
		if c.Status == api.ConditionError && (worst == nil || c.Since.Before(worst.Since)) {
			worst = c
		}
	}
	return worst
}

func (m *Monitor) autoCordon(ctx context.Context, guard store.Guard, n *api.Node, why string, now time.Time) error {
	cordoned, err := m.cordon(ctx, guard, n.Name, "auto-cordon", why, now)
	if err != nil {
		return fmt.Errorf("auto-cordon %s: %w", n.Name, err)
	}
	if cordoned {
		m.log.Warn("node auto-cordoned", "node", n.Name, "reason", why)
		m.o.Events.Emit(events.Event{Type: events.TypeWarning, Reason: "AutoCordoned", Object: "node/" + n.Name, Region: m.o.Region, Message: why})
	}
	return nil
}

// autoDrain starts a drain of n, unless one runs or one started since the
// condition went into Error.
func (m *Monitor) autoDrain(ctx context.Context, guard store.Guard, n *api.Node, worst *api.Condition, why string, now time.Time) error {
	if d, ok := m.o.Caches.Drains.Get(n.Name); ok && (d.Value.State == api.DrainRunning || d.Value.StartedAt.After(worst.Since)) {
		return nil
	}
	d := &api.DrainStatus{
		Node: n.Name, State: api.DrainRunning, Reason: "auto-drain: " + why,
		StartedAt: now, Deadline: now.Add(m.o.DrainDeadline), MaxParallel: 1,
	}
	if _, err := m.o.State.Drains.Put(ctx, n.Name, d, guard); err != nil {
		return fmt.Errorf("auto-drain %s: %w", n.Name, err)
	}
	if n.Schedulable {
		_, _ = m.cordon(ctx, guard, n.Name, "auto-drain", why, now)
	}
	m.log.Warn("node auto-drained", "node", n.Name, "reason", why)
	m.o.Events.Emit(events.Event{Type: events.TypeWarning, Reason: "AutoDrainStarted", Object: "node/" + n.Name, Region: m.o.Region, Message: why})
	return nil
}

// cordon makes node unschedulable on by's behalf; it reports whether it
// did (false when it already was).
func (m *Monitor) cordon(ctx context.Context, guard store.Guard, node, by, why string, now time.Time) (bool, error) {
	cordoned := false
	_, err := m.o.State.Nodes.Modify(ctx, node, func(x *api.Node) error {
		cordoned = false
		if !x.Schedulable {
			return store.ErrNoChange
		}
		x.Schedulable, x.CordonReason, x.CordonedBy, x.CordonedAt = false, by+": "+why, by, now
		cordoned = true
		return nil
	}, guard)
	return cordoned, err
}

// GRPCProber probes agents over NodeService.Status through a pool of
// agent connections. A failed probe drops its connection, so that the
// next probe of an agent that restarted on the same address dials it
// again rather than failing on the old connection's reconnect backoff.
type GRPCProber struct {
	pool *agentconn.Pool
}

// maxProbeConns bounds the idle connections the prober keeps: probes go
// to quiet nodes only.
const maxProbeConns = 64

// NewGRPCProber returns a prober dialing the agents of region with sec;
// each agent must present its own node identity.
func NewGRPCProber(region string, sec *transport.Security, opts ...grpc.DialOption) *GRPCProber {
	return &GRPCProber{pool: agentconn.New(region, sec, maxProbeConns, opts...)}
}

// Probe calls the node's NodeService.Status.
func (p *GRPCProber) Probe(ctx context.Context, n *api.Node) error {
	if n.Address == "" {
		return fmt.Errorf("node %s has no address to probe", n.Name)
	}
	cc, release, err := p.pool.Get(n.Name, n.Address)
	if err != nil {
		return err
	}
	_, err = agentv1.NewNodeServiceClient(cc).Status(ctx, &agentv1.NodeStatusRequest{})
	release(err != nil)
	return err
}

// Close closes the agent connections.
func (p *GRPCProber) Close() { p.pool.Close() }
