package monitor

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/events"
	"github.com/stratahq/strata/internal/heartbeat"
	"github.com/stratahq/strata/internal/liveness"
	"github.com/stratahq/strata/internal/metrics"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/region/state"
	"github.com/stratahq/strata/testkit/etcdtest"
)

type guard struct {
	key string
	rev int64
}

func (g guard) GuardKey() string { return g.key }
func (g guard) GuardRev() int64  { return g.rev }

type prober struct {
	mu   sync.Mutex
	errs map[string]error
}

func (p *prober) Probe(_ context.Context, n *api.Node) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.errs[n.Name]
}

type emitted struct {
	mu  sync.Mutex
	evs []events.Event
}

func (e *emitted) Emit(ev events.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.evs = append(e.evs, ev)
}

func (e *emitted) count(reason string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.evs {
		if ev.Reason == reason {
			n++
		}
	}
	return n
}

type env struct {
	st     *state.State
	caches *state.Caches
	hb     *heartbeat.Memory
	probe  *prober
	events *emitted
	m      *Monitor
	tr     *liveness.Tracker
	g      guard
	now    time.Time
}

func newEnv(t *testing.T) *env {
	t.Helper()
	cli := etcdtest.Client(t, etcdtest.Embedded(t))
	e := &env{
		st: state.New(store.New(cli, "/strata/region/")), hb: heartbeat.NewMemory(),
		probe: &prober{errs: map[string]error{}}, events: &emitted{}, now: time.Now(), tr: liveness.NewTracker(),
	}
	e.caches = state.NewCaches(e.st)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = e.caches.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	if err := e.caches.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Put(ctx, "/test/leader", "me")
	if err != nil {
		t.Fatal(err)
	}
	e.g = guard{"/test/leader", resp.Header.Revision}
	e.m = New(Options{
		Region: "r1", State: e.st, Caches: e.caches, Heartbeats: e.hb, Events: e.events, Prober: e.probe,
		HeartbeatInterval: 2 * time.Second, SuspectAfter: 6 * time.Second, DownAfter: 10 * time.Second,
		Clock: func() time.Time { return e.now },
	})
	return e
}

func (e *env) node(t *testing.T, n *api.Node, conds ...api.Condition) {
	t.Helper()
	ctx := context.Background()
	if n.Capacity.MilliCPU == 0 {
		n.Capacity = api.Capacity{MilliCPU: 1000, MemoryMiB: 1024}
	}
	if _, err := e.st.Nodes.Put(ctx, n.Name, n); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.NodeStatus.Put(ctx, n.Name, &api.NodeStatus{Health: api.HealthUp, Conditions: conds}); err != nil {
		t.Fatal(err)
	}
	e.settle(t, n.Name)
}

func (e *env) beat(t *testing.T, node string, ago time.Duration) {
	t.Helper()
	if err := e.hb.Record(context.Background(), heartbeat.Beat{ID: node, At: e.now.Add(-ago)}); err != nil {
		t.Fatal(err)
	}
}

// settle waits until the caches have the node and its status.
func (e *env) settle(t *testing.T, node string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		_, a := e.caches.Nodes.Get(node)
		_, b := e.caches.NodeStatus.Get(node)
		if a && b {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("node %s not cached", node)
}

func (e *env) check(t *testing.T) {
	t.Helper()
	e.checkDue(t)
}

// wait moves the clock on to at, the monitor looking at the heartbeats
// on time meanwhile: moving it without looks is the monitor's own blind
// time (a stall), which no node's quiet clock counts.
func (e *env) wait(at time.Time) {
	th := liveness.Thresholds{SuspectAfter: e.m.o.SuspectAfter, DownAfter: e.m.o.DownAfter}
	for e.now.Before(at) {
		e.now = minTime(e.now.Add(e.m.lookEvery()), at)
		e.tr.Look(e.now, e.m.lookEvery(), th)
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// checkDue runs a pass and returns the Down deadline it reports.
func (e *env) checkDue(t *testing.T) time.Time {
	t.Helper()
	due, err := e.m.check(context.Background(), e.g, e.tr)
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	return due
}

func (e *env) health(t *testing.T, node string) api.Health {
	t.Helper()
	it, err := e.st.NodeStatus.Get(context.Background(), node)
	if err != nil {
		t.Fatal(err)
	}
	return it.Value.Health
}

func TestHealthTransitions(t *testing.T) {
	down := errors.New("connection refused")
	cases := []struct {
		name  string
		quiet time.Duration
		probe error
		want  api.Health
	}{
		{"fresh heartbeat", time.Second, nil, api.HealthUp},
		{"quiet, probe fails: suspect", 7 * time.Second, down, api.HealthSuspect},
		{"quiet, probe answers: up", 7 * time.Second, nil, api.HealthUp},
		{"long quiet, probe fails: down", 11 * time.Second, down, api.HealthDown},
		{"long quiet, probe answers: up", 11 * time.Second, nil, api.HealthUp},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			e.node(t, &api.Node{Name: "n1", Region: "r1", Schedulable: true, Address: "x"})
			e.beat(t, "n1", c.quiet)
			e.probe.errs["n1"] = c.probe
			e.check(t)
			if got := e.health(t, "n1"); got != c.want {
				t.Errorf("health: got %s; want %s", got, c.want)
			}
		})
	}
}

func TestOnlyTransitionsAreWritten(t *testing.T) {
	e := newEnv(t)
	e.node(t, &api.Node{Name: "n1", Region: "r1", Schedulable: true})
	e.beat(t, "n1", time.Second)
	before, err := e.st.Store.Client().Get(context.Background(), "/none")
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		e.check(t)
	}
	after, err := e.st.Store.Client().Get(context.Background(), "/none")
	if err != nil {
		t.Fatal(err)
	}
	if d := after.Header.Revision - before.Header.Revision; d != 0 {
		t.Errorf("steady Up node: %d etcd writes; want 0", d)
	}
	e.probe.errs["n1"] = errors.New("refused")
	// The node goes quiet: time passes, no beat comes.
	e.wait(e.now.Add(12 * time.Second))
	e.check(t)
	e.settleHealth(t, "n1", api.HealthDown)
	e.check(t)
	if got := e.events.count("NodeDown"); got != 1 {
		t.Errorf("NodeDown events: got %d; want 1", got)
	}
}

func (e *env) settleHealth(t *testing.T, node string, h api.Health) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if it, ok := e.caches.NodeStatus.Get(node); ok && it.Value.Health == h {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("cache never saw %s %s", node, h)
}

func TestAutoCordonAndDrain(t *testing.T) {
	e := newEnv(t)
	failing := api.Condition{Type: api.ConditionCRI, Status: api.ConditionError, Reason: "containerd down", Since: e.now.Add(-2 * time.Minute)}
	e.node(t, &api.Node{
		Name: "n1", Region: "r1", Schedulable: true,
		EnableAutoCordon: true, AutoCordonInterval: api.D(time.Minute),
		EnableAutoDrain: true, AutoDrainInterval: api.D(90 * time.Second),
	}, failing)
	e.beat(t, "n1", time.Second)
	e.check(t)
	n, err := e.st.Nodes.Get(context.Background(), "n1")
	if err != nil {
		t.Fatal(err)
	}
	if n.Value.Schedulable || n.Value.CordonedBy != "auto-cordon" || !strings.Contains(n.Value.CordonReason, "CRI") {
		t.Errorf("node: schedulable %v, by %q, reason %q; want cordoned by auto-cordon naming CRI", n.Value.Schedulable, n.Value.CordonedBy, n.Value.CordonReason)
	}
	d, err := e.st.Drains.Get(context.Background(), "n1")
	if err != nil {
		t.Fatalf("drain: %v; want one started", err)
	}
	if d.Value.State != api.DrainRunning || !strings.Contains(d.Value.Reason, "auto-drain") {
		t.Errorf("drain: %+v; want running, reason auto-drain", d.Value)
	}
	if e.events.count("AutoCordoned") != 1 || e.events.count("AutoDrainStarted") != 1 {
		t.Errorf("events: %+v; want one AutoCordoned and one AutoDrainStarted", e.events.evs)
	}
}

func TestConditionNotLongEnoughDoesNothing(t *testing.T) {
	e := newEnv(t)
	fresh := api.Condition{Type: api.ConditionCNI, Status: api.ConditionError, Reason: "bridge missing", Since: e.now.Add(-10 * time.Second)}
	e.node(t, &api.Node{Name: "n1", Region: "r1", Schedulable: true, EnableAutoCordon: true, AutoCordonInterval: api.D(time.Minute)}, fresh)
	e.beat(t, "n1", time.Second)
	e.check(t)
	n, _ := e.st.Nodes.Get(context.Background(), "n1")
	if !n.Value.Schedulable {
		t.Errorf("node cordoned after 10s of a condition with a 1m interval")
	}
}

// A pass that finds a node Suspect says when the node turns Down if it
// stays quiet (DownAfter after its last beat), and a pass at that moment
// finds it Down: the monitor's deadline pass needs no tick.
func TestSuspectReportsItsDownDeadline(t *testing.T) {
	e := newEnv(t)
	e.node(t, &api.Node{Name: "n1", Region: "r1", Schedulable: true, Address: "x"})
	e.node(t, &api.Node{Name: "n2", Region: "r1", Schedulable: true, Address: "y"})
	e.beat(t, "n1", time.Second)
	e.beat(t, "n2", time.Second)
	if due := e.checkDue(t); !due.IsZero() {
		t.Errorf("every node beating: Down deadline %s; want none", due)
	}
	lastBeat := e.now.Add(-time.Second)
	e.probe.errs["n2"] = errors.New("connection refused")
	e.wait(e.now.Add(6500 * time.Millisecond))
	e.beat(t, "n1", time.Second)
	due := e.checkDue(t)
	e.settleHealth(t, "n2", api.HealthSuspect)
	// Beats are kept to the microsecond.
	if want := lastBeat.Add(10 * time.Second); due.Sub(want).Abs() > time.Microsecond {
		t.Fatalf("Down deadline %s; want %s (the last beat + downAfter)", due, want)
	}
	e.wait(due.Add(-time.Millisecond))
	if e.checkDue(t); e.health(t, "n2") != api.HealthSuspect {
		t.Fatalf("n2 %s a millisecond before its deadline; want Suspect", e.health(t, "n2"))
	}
	e.wait(due)
	if again := e.checkDue(t); !again.IsZero() {
		t.Errorf("after the Down verdict: deadline %s; want none", again)
	}
	e.settleHealth(t, "n2", api.HealthDown)
	if got := e.health(t, "n1"); got != api.HealthUp {
		t.Errorf("n1 %s; want Up", got)
	}
}

// A Suspect node that answers its probe is Up and arms no deadline.
func TestAnsweringNodeArmsNoDeadline(t *testing.T) {
	e := newEnv(t)
	e.node(t, &api.Node{Name: "n1", Region: "r1", Schedulable: true, Address: "x"})
	e.beat(t, "n1", 7*time.Second)
	if due := e.checkDue(t); !due.IsZero() {
		t.Errorf("quiet node answering its probe: Down deadline %s; want none", due)
	}
	if got := e.health(t, "n1"); got != api.HealthUp {
		t.Errorf("n1 %s; want Up", got)
	}
}

// Lead makes a dead node Down at its deadline, without a tick: with a
// half-hour tick, only the first pass (at once) and the deadline pass
// it arms can run while the test waits.
func TestLeadDownAtTheDeadlineWithoutATick(t *testing.T) {
	e := newEnv(t)
	e.node(t, &api.Node{Name: "n1", Region: "r1", Schedulable: true, Address: "x"})
	e.probe.errs["n1"] = errors.New("connection refused")
	m := New(Options{
		Region: "r1", State: e.st, Caches: e.caches, Heartbeats: e.hb, Events: e.events, Prober: e.probe,
		HeartbeatInterval: time.Hour, SuspectAfter: time.Second, DownAfter: 4 * time.Second,
	})
	// Quiet for 1.5 s: Suspect at the first pass (which has 2.5 s to
	// run), Down at the deadline pass 2.5 s on.
	if err := e.hb.Record(context.Background(), heartbeat.Beat{ID: "n1", At: time.Now().Add(-1500 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = m.Lead(ctx, e.g) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(20 * time.Second)
	for e.events.count("NodeDown") == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no NodeDown (health %s); want one from the deadline pass", e.health(t, "n1"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if e.events.count("NodeSuspect") != 1 {
		t.Errorf("NodeSuspect events: %d; want 1 (the first pass)", e.events.count("NodeSuspect"))
	}
	if got := e.health(t, "n1"); got != api.HealthDown {
		t.Errorf("n1 %s; want Down", got)
	}
}

// flakyBeats fails to list while fail is set, as an unreachable Redis does.
type flakyBeats struct {
	Heartbeats
	fail bool
}

func (f *flakyBeats) Times(ctx context.Context) (map[string]time.Time, error) {
	if f.fail {
		return nil, errors.New("dial tcp: connection refused")
	}
	return f.Heartbeats.Times(ctx)
}

// TestOwnBlindTimeIsNotQuiet: while the monitor cannot look (its process
// stalled, or Redis cannot be read), beats can be neither recorded nor
// seen; that time counts against no node, up to DownAfter/2. A node that
// is really quiet while the monitor looks on time is Suspect as before.
func TestOwnBlindTimeIsNotQuiet(t *testing.T) {
	e := newEnv(t)
	hb := &flakyBeats{Heartbeats: e.hb}
	e.m.o.Heartbeats = hb
	reg := metrics.New("region")
	e.m.o.Metrics = reg.Monitor()
	for _, n := range []string{"n1", "n2"} {
		e.node(t, &api.Node{Name: n, Region: "r1", Schedulable: true, Address: "x"})
		e.beat(t, n, time.Second)
		e.probe.errs[n] = errors.New("probe timed out")
	}
	e.check(t)
	// A stall of 3s: the next look comes 3s late (2s past due).
	e.now = e.now.Add(3 * time.Second)
	e.check(t)
	// Redis cannot be read for 3s: the next look comes 2s past due too.
	// Each node is now 7s quiet (> suspectAfter), 4s of which the monitor
	// was blind.
	hb.fail = true
	for range 3 {
		e.now = e.now.Add(time.Second)
		if _, err := e.m.check(context.Background(), e.g, e.tr); err == nil {
			t.Fatal("check with Redis unreadable: no error")
		}
	}
	hb.fail = false
	e.check(t)
	for _, n := range []string{"n1", "n2"} {
		if h := e.health(t, n); h != api.HealthUp {
			t.Fatalf("after the monitor's blind spells: %s is %s; want Up", n, h)
		}
	}
	rec := httptest.NewRecorder()
	reg.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{`strata_monitor_late_looks_total{tier="region"} 2`, `strata_monitor_blind_seconds_total{tier="region"} 4`} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	// n1 beats; n2 stays quiet while the monitor looks on time: blind time
	// is capped (5s), so n2 is Down by downAfter+5s after its last beat.
	for range 10 {
		e.wait(e.now.Add(time.Second))
		e.beat(t, "n1", 0)
		e.check(t)
	}
	e.settleHealth(t, "n2", api.HealthDown)
	if h := e.health(t, "n1"); h != api.HealthUp {
		t.Errorf("n1 beating: %s; want Up", h)
	}
	if e.events.count("NodeSuspect") != 1 {
		t.Errorf("n2 went Down without being Suspect first")
	}
}
