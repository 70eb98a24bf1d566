package monitor_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/events"
	"github.com/stratahq/strata/internal/heartbeat"
	"github.com/stratahq/strata/internal/redisclient"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/region/monitor"
	"github.com/stratahq/strata/region/state"
	"github.com/stratahq/strata/testkit/etcdtest"
	"github.com/stratahq/strata/testkit/redistest"
)

type leaderGuard struct {
	key string
	rev int64
}

func (g leaderGuard) GuardKey() string { return g.key }
func (g leaderGuard) GuardRev() int64  { return g.rev }

// noProbe fails every probe: the simulated nodes serve no Status RPC, so
// only their heartbeats keep them Up, and a gap in the heartbeats longer
// than DownAfter would mark them Down.
type noProbe struct{}

func (noProbe) Probe(context.Context, *api.Node) error {
	return errors.New("simulated node: no Status RPC")
}

type recordedEvents struct {
	mu  sync.Mutex
	evs []events.Event
}

func (r *recordedEvents) Emit(ev events.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, ev)
}

func (r *recordedEvents) with(reason string) []events.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []events.Event
	for _, ev := range r.evs {
		if ev.Reason == reason {
			out = append(out, ev)
		}
	}
	return out
}

// simNode is a simulated node: it remembers when each of its beats got
// through.
type simNode struct {
	name string
	mu   sync.Mutex
	ok   []time.Time
}

// simAPI records the simulated nodes' beats as the region API does: the
// beats of a window go to the heartbeat store in one RecordBatch, under
// the API's own context, never cut short by a deadline of their own. A
// deadline of one interval per beat made beats fail under load for
// reasons of the test's making: a record cut short by its deadline closes
// its Redis connection, the next must dial again (the Sentinel lookup,
// AUTH, the script load after a failover), misses its deadline in turn,
// and beats stopped for seconds long after the promotion.
type simAPI struct {
	nodes []*simNode
	mu    sync.Mutex
	fails int
	err   error // the last failed batch's
}

func (a *simAPI) run(ctx context.Context, hb heartbeat.Store, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	beats := make([]heartbeat.Beat, len(a.nodes))
	for seq := uint64(1); ; seq++ {
		for i, n := range a.nodes {
			beats[i] = heartbeat.Beat{ID: n.name, Seq: seq}
		}
		if err := hb.RecordBatch(ctx, beats); err != nil {
			a.mu.Lock()
			a.fails, a.err = a.fails+1, err
			a.mu.Unlock()
		} else {
			at := time.Now()
			for _, n := range a.nodes {
				n.mu.Lock()
				n.ok = append(n.ok, at)
				n.mu.Unlock()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// failures says how many batches failed, and the last error.
func (a *simAPI) failures() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return fmt.Sprintf("%d failed batches, last: %v", a.fails, a.err)
}

// countLooks counts the node monitor's looks at the heartbeat store.
type countLooks struct {
	monitor.Heartbeats
	n atomic.Int64
}

func (c *countLooks) Times(ctx context.Context) (map[string]time.Time, error) {
	beats, err := c.Heartbeats.Times(ctx)
	if err == nil {
		c.n.Add(1)
	}
	return beats, err
}

// firstAfter is when the node's first beat after t got through.
func (n *simNode) firstAfter(t time.Time) (time.Time, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, at := range n.ok {
		if at.After(t) {
			return at, true
		}
	}
	return time.Time{}, false
}

// longestGap is the longest time between two beats that got through.
func (n *simNode) longestGap() time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	var gap time.Duration
	for i := 1; i < len(n.ok); i++ {
		gap = max(gap, n.ok[i].Sub(n.ok[i-1]))
	}
	return gap
}

// TestSentinelFailoverUnderHeartbeatLoad kills (SIGKILL) the Redis master
// of a region while 200 simulated nodes heartbeat through the region's
// heartbeat store and the region's node monitor runs, with thresholds
// scaled down for a test and probes that always fail. Sentinel promotes
// the replica; the heartbeats resume, no node may be marked Down, and
// every node that beats is Up again, while a node that really stopped
// beating is Down. How fast the beats resume and the verdicts follow is
// no assertion here (the machine may be loaded): the waits for them are
// bounds against a hang, and the one bound that matters is downAfter,
// which the monitor applies.
func TestSentinelFailoverUnderHeartbeatLoad(t *testing.T) {
	const (
		nodes        = 200
		interval     = 250 * time.Millisecond
		suspectAfter = 1500 * time.Millisecond
		// downAfter is well above a Sentinel failover here (one second
		// to notice, one to elect and promote; see redistest).
		downAfter = 8 * time.Second
	)
	g := redistest.StartSentinel(t, redistest.WithSentinelPassword("sentinel-secret"),
		redistest.WithServerOptions(redistest.WithUser("strata", "strata-secret", redisclient.ACLRules...)))
	rdb, err := redisclient.New(sentinelConfig(g))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	hb := heartbeat.NewRedis(rdb, "strata:region:r1")

	cli := etcdtest.Client(t, etcdtest.Embedded(t))
	st := state.New(store.New(cli, "/strata/region/"))
	caches := state.NewCaches(st)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() { _ = caches.Run(ctx) })
	if err := caches.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Put(ctx, "/test/leader", "me")
	if err != nil {
		t.Fatal(err)
	}
	guard := leaderGuard{"/test/leader", resp.Header.Revision}

	registered := time.Now().Add(-20 * time.Minute)
	var rev int64
	sims := make([]*simNode, nodes)
	for i := range nodes + 1 {
		name := fmt.Sprintf("n%03d", i)
		if i == nodes {
			name = "stopped" // registered, never beats
		}
		n := &api.Node{Name: name, Region: "r1", Schedulable: true, Address: "127.0.0.1:1", RegisteredAt: registered,
			Capacity: api.Capacity{MilliCPU: 1000, MemoryMiB: 1024}}
		if _, err := st.Nodes.Put(ctx, name, n); err != nil {
			t.Fatal(err)
		}
		if rev, err = st.NodeStatus.Put(ctx, name, &api.NodeStatus{Health: api.HealthUp, Since: registered}); err != nil {
			t.Fatal(err)
		}
		if i < nodes {
			sims[i] = &simNode{name: name}
		}
	}
	if err := caches.NodeStatus.WaitForRev(ctx, rev); err != nil {
		t.Fatal(err)
	}
	recorder := &simAPI{nodes: sims}
	wg.Go(func() { recorder.run(ctx, hb, interval) })
	// Every node has beaten before the monitor looks.
	waitUntil(t, 10*time.Second, "every node's first beat", func() (bool, string) {
		bs, err := hb.List(ctx)
		return err == nil && len(bs) == nodes, fmt.Sprintf("%d beats, %v", len(bs), err)
	})

	evs := &recordedEvents{}
	looks := &countLooks{Heartbeats: hb}
	m := monitor.New(monitor.Options{
		Region: "r1", State: st, Caches: caches, Heartbeats: looks, Events: evs, Prober: noProbe{},
		HeartbeatInterval: interval, SuspectAfter: suspectAfter, DownAfter: downAfter, ProbeTimeout: 100 * time.Millisecond,
	})
	wg.Go(func() { _ = m.Lead(ctx, guard) })
	health := func(node string) api.Health {
		if it, ok := caches.NodeStatus.Get(node); ok {
			return it.Value.Health
		}
		return api.HealthUnknown
	}
	// Steady state first: the monitor has looked at the beats.
	waitUntil(t, 10*time.Second, "the monitor's first looks", func() (bool, string) {
		n := looks.n.Load()
		return n >= 2, fmt.Sprintf("%d looks", n)
	})

	// Replication is asynchronous: the replica has the beats before the
	// master dies.
	replica := g.Replica.Client(t)
	waitUntil(t, 5*time.Second, "the replica holding every node's beat", func() (bool, string) {
		n, err := replica.ZCard(ctx, "{strata:region:r1}:hb").Result()
		return err == nil && n == nodes, fmt.Sprintf("ZCARD = %d, %v; master: %d\n%s", n, err,
			g.Master.Client(t).ZCard(ctx, "{strata:region:r1}:hb").Val(), g.Logs())
	})

	old := g.Master.Addr()
	killed := time.Now()
	g.Master.Kill()
	promotedAddr := g.WaitFailover(t, old, 30*time.Second)
	promoted := time.Now()
	t.Logf("Sentinel promoted %s %s after the SIGKILL", promotedAddr, promoted.Sub(killed).Round(10*time.Millisecond))

	// The replica had every node's beat: none is missing after promotion.
	if n, err := replica.ZCard(ctx, "{strata:region:r1}:hb").Result(); err != nil || n != nodes {
		t.Errorf("promoted replica: ZCARD of the beats = %d, %v; want %d\n%s", n, err, nodes, g.Logs())
	}
	// A bound against a hang: beats that resume later than downAfter
	// after the kill fail the test below anyway.
	waitUntil(t, downAfter, "every node beating again after the promotion", func() (bool, string) {
		var late []string
		for _, n := range sims {
			if _, ok := n.firstAfter(promoted); !ok {
				late = append(late, n.name)
			}
		}
		return len(late) == 0, fmt.Sprintf("%d nodes not yet, e.g. %v (%s)", len(late), late[:min(5, len(late))], recorder.failures())
	})
	var lastResumed time.Time
	var worstGap time.Duration
	for _, n := range sims {
		at, _ := n.firstAfter(promoted)
		lastResumed = later(lastResumed, at)
		worstGap = max(worstGap, n.longestGap())
	}
	t.Logf("heartbeats resumed %s after the promotion; longest gap between a node's beats %s",
		lastResumed.Sub(promoted).Round(10*time.Millisecond), worstGap.Round(10*time.Millisecond))

	// Watch past the point where a node silent since the kill would be
	// Down, then check the verdicts.
	for time.Since(killed) < downAfter+2*time.Second {
		for _, n := range sims {
			if h := health(n.name); h == api.HealthDown {
				t.Fatalf("node %s is Down %s after the SIGKILL; want no node Down through a failover (events: %v)",
					n.name, time.Since(killed).Round(10*time.Millisecond), evs.with("NodeDown"))
			}
		}
		time.Sleep(interval / 2)
	}
	for _, ev := range evs.with("NodeDown") {
		if ev.Object != "node/stopped" {
			t.Errorf("event %s %s: %s; want NodeDown for node/stopped only", ev.Reason, ev.Object, ev.Message)
		}
	}
	// Beats flow: the monitor's next passes bring every node Up. A bound
	// against a hang, not a speed (a loaded etcd writes the transitions
	// of a pass slowly).
	waitUntil(t, downAfter, "every beating node Up", func() (bool, string) {
		var notUp []string
		for _, n := range sims {
			if h := health(n.name); h != api.HealthUp {
				notUp = append(notUp, n.name+"="+string(h))
			}
		}
		return len(notUp) == 0, fmt.Sprintf("%d nodes not Up, e.g. %v (%s)", len(notUp), notUp[:min(5, len(notUp))], recorder.failures())
	})
	// The monitor does mark a silent node Down: the test can fail.
	waitUntil(t, downAfter, "the stopped node Down", func() (bool, string) {
		h := health("stopped")
		return h == api.HealthDown, string(h)
	})
}

// sentinelConfig is how a region configures the group, as the ACL user
// strata.
func sentinelConfig(g *redistest.Sentinel) config.Redis {
	return config.Redis{
		Mode: config.RedisModeSentinel, Username: "strata", Password: "strata-secret",
		Sentinel: config.RedisSentinel{MasterName: redistest.MasterName, Addrs: g.SentinelAddrs(), Password: "sentinel-secret"},
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// waitUntil polls cond until it is done or timeout passes.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		done, state := cond()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %s", what, timeout, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
