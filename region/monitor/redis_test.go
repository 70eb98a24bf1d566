package monitor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/heartbeat"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/region/state"
	"github.com/stratahq/strata/testkit/etcdtest"
	"github.com/stratahq/strata/testkit/redistest"
)

// failingProber fails every probe, as an overloaded region does when a
// one-second probe times out: only heartbeats keep nodes Up.
type failingProber struct{}

func (failingProber) Probe(context.Context, *api.Node) error {
	return errors.New("probe timed out")
}

// fakeAgent heartbeats into the heartbeat store every interval, as the
// region API records agents' beats, until stopped; a failed record (Redis
// restarting refuses it at once) is retried at the next interval. A
// record is not cut short by a deadline of its own, as the region API's
// are not: with a deadline of one interval, a record that missed it on a
// loaded machine closed its Redis connection, the next had to dial again
// (and load the record script after a restart), missed it in turn, and
// beats stopped for longer than SuspectAfter for reasons of the test's
// making.
type fakeAgent struct {
	stop   chan struct{}
	done   chan struct{}
	kick   chan struct{} // capacity 1: beat now
	paused atomic.Bool
}

func startAgent(hb heartbeat.Store, node string, every time.Duration) *fakeAgent {
	a := &fakeAgent{stop: make(chan struct{}), done: make(chan struct{}), kick: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-a.stop
		cancel()
	}()
	go func() {
		defer close(a.done)
		t := time.NewTicker(every)
		defer t.Stop()
		var seq uint64
		for {
			if !a.paused.Load() {
				seq++
				_ = hb.Record(ctx, heartbeat.Beat{ID: node, Seq: seq}) // stamped by the store's clock
			}
			select {
			case <-a.stop:
				return
			case <-t.C:
			case <-a.kick:
			}
		}
	}()
	return a
}

func (a *fakeAgent) halt() {
	select {
	case <-a.stop:
	default:
		close(a.stop)
	}
	<-a.done
}

// resume lets a paused agent beat again, at once.
func (a *fakeAgent) resume() {
	a.paused.Store(false)
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// emptyLooks is the monitor's view of the heartbeat store: the first
// look that finds no beat at all after arm (as a new leader over an
// emptied Redis does) runs the armed function before the monitor goes on.
type emptyLooks struct {
	Heartbeats
	mu    sync.Mutex
	onHit func()
}

// arm runs f at the next look that finds the store empty.
func (h *emptyLooks) arm(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.onHit = f
}

func (h *emptyLooks) Times(ctx context.Context) (map[string]time.Time, error) {
	beats, err := h.Heartbeats.Times(ctx)
	if err == nil && len(beats) == 0 {
		h.mu.Lock()
		f := h.onHit
		h.onHit = nil
		h.mu.Unlock()
		if f != nil {
			f()
		}
	}
	return beats, err
}

// Short thresholds for a region on a real Redis.
const (
	rInterval = 200 * time.Millisecond
	rSuspect  = time.Second
	rDown     = 3 * time.Second
	rWindow   = rDown + time.Second // longer than any grace
)

// redisRegion is a region's node monitor on a real Redis and an embedded
// etcd, with nodes registered twenty minutes ago whose agents heartbeat
// and whose probes all fail.
type redisRegion struct {
	t      *testing.T
	ctx    context.Context
	srv    *redistest.Server
	caches *state.Caches
	m      *Monitor
	looks  *emptyLooks
	g      guard
	evs    *emitted
	nodes  []string
	agents map[string]*fakeAgent
	stop   func() // stops the current leader
}

func newRedisRegion(t *testing.T, nodes ...string) *redisRegion {
	srv := redistest.Start(t)
	hb := heartbeat.NewRedis(srv.Client(t), "strata:region:r1")
	cli := etcdtest.Client(t, etcdtest.Embedded(t))
	st := state.New(store.New(cli, "/strata/region/"))
	ctx, cancel := context.WithCancel(context.Background())
	r := &redisRegion{t: t, ctx: ctx, srv: srv, caches: state.NewCaches(st), evs: &emitted{}, nodes: nodes, agents: map[string]*fakeAgent{},
		looks: &emptyLooks{Heartbeats: hb}}
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() { _ = r.caches.Run(ctx) })
	if err := r.caches.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Put(ctx, "/test/leader", "me")
	if err != nil {
		t.Fatal(err)
	}
	r.g = guard{"/test/leader", resp.Header.Revision}
	registered := time.Now().Add(-20 * time.Minute)
	for _, name := range nodes {
		r.addNode(st, name, registered)
		r.agents[name] = startAgent(hb, name, rInterval)
	}
	t.Cleanup(func() {
		for _, a := range r.agents {
			a.halt()
		}
	})
	r.m = New(Options{
		Region: "r1", State: st, Caches: r.caches, Heartbeats: r.looks, Events: r.evs, Prober: failingProber{},
		HeartbeatInterval: rInterval, SuspectAfter: rSuspect, DownAfter: rDown, ProbeTimeout: 100 * time.Millisecond,
	})
	r.lead()
	t.Cleanup(func() { r.stop() })
	return r
}

func (r *redisRegion) addNode(st *state.State, name string, registered time.Time) {
	n := &api.Node{Name: name, Region: "r1", Schedulable: true, Address: "127.0.0.1:1", RegisteredAt: registered,
		Capacity: api.Capacity{MilliCPU: 1000, MemoryMiB: 1024}}
	if _, err := st.Nodes.Put(r.ctx, name, n); err != nil {
		r.t.Fatal(err)
	}
	rev, err := st.NodeStatus.Put(r.ctx, name, &api.NodeStatus{Health: api.HealthUp, Since: registered})
	if err != nil {
		r.t.Fatal(err)
	}
	if err := r.caches.NodeStatus.WaitForRev(r.ctx, rev); err != nil {
		r.t.Fatal(err)
	}
}

// lead starts a new leader (a new Lead, with a memory of its own).
func (r *redisRegion) lead() {
	ctx, cancel := context.WithCancel(r.ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = r.m.Lead(ctx, r.g) }()
	r.stop = func() { cancel(); <-done }
}

// leadOverEmptyStore starts a new leader while the agents are paused and
// resumes them from within the new leader's first look that finds the
// heartbeat store empty, so that the leader knows no beat of anyone and
// the agents are held back no longer than that: each moment they were
// held back longer would eat into SuspectAfter.
func (r *redisRegion) leadOverEmptyStore() {
	r.t.Helper()
	found := make(chan struct{})
	r.looks.arm(func() {
		for _, a := range r.agents {
			a.resume()
		}
		close(found)
	})
	r.lead()
	select {
	case <-found:
	case <-time.After(rWindow):
		r.t.Fatalf("the new leader did not list the emptied heartbeat store within %s", rWindow)
	}
}

func (r *redisRegion) pauseAgents() {
	for _, a := range r.agents {
		a.paused.Store(true)
	}
}

func (r *redisRegion) health(node string) api.Health {
	if it, ok := r.caches.NodeStatus.Get(node); ok {
		return it.Value.Health
	}
	return api.HealthUnknown
}

// noneLeavesUp watches every node for rWindow and fails on the first
// that is not Up.
func (r *redisRegion) noneLeavesUp(what string) {
	r.t.Helper()
	deadline := time.Now().Add(rWindow)
	for time.Now().Before(deadline) {
		for _, n := range r.nodes {
			if h := r.health(n); h != api.HealthUp {
				r.t.Fatalf("%s: node %s is %s (%v); want every node Up", what, n, h, r.evs.reasons())
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRedisLossMakesNoNodeDown: Redis is flushed, then restarted (losing
// every beat, and refusing connections for a while), then restarted
// again while the leader changes and the agents are held back for a
// moment, so that the new leader finds no beat at all. No node may leave
// Up, over windows longer than DownAfter, although every probe fails. A
// node whose agent really stops still goes Suspect, then Down.
func TestRedisLossMakesNoNodeDown(t *testing.T) {
	r := newRedisRegion(t, "n1", "n2", "n3", "n4")
	r.noneLeavesUp("steady")

	if err := r.srv.Client(t).FlushAll(r.ctx).Err(); err != nil {
		t.Fatalf("FLUSHALL: %v", err)
	}
	r.noneLeavesUp("after FLUSHALL")

	// Redis refuses connections while it is down (the monitor cannot
	// list, the agents cannot record), and comes back empty.
	r.srv.Kill()
	time.Sleep(rDown)
	r.srv.Restart(t)
	r.noneLeavesUp("after a restart")

	// The new leader knows no beat of anyone.
	r.pauseAgents()
	r.stop()
	r.srv.Restart(t)
	r.leadOverEmptyStore()
	r.noneLeavesUp("after a leader change over an empty Redis")
	if n := r.evs.count("NodeDown") + r.evs.count("NodeSuspect"); n != 0 {
		t.Fatalf("%d NodeSuspect/NodeDown events; want none (%v)", n, r.evs.reasons())
	}

	// The control: an agent that stops is Suspect first, then Down.
	r.agents["n4"].halt()
	deadline := time.Now().Add(rDown + 5*time.Second)
	for r.health("n4") != api.HealthDown {
		if time.Now().After(deadline) {
			t.Fatalf("n4 stopped beating: health %s after %v; want Down", r.health("n4"), rDown+5*time.Second)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r.evs.count("NodeSuspect") != 1 {
		t.Errorf("n4 went Down without being Suspect first (%v)", r.evs.reasons())
	}
	for _, n := range r.nodes[:3] {
		if h := r.health(n); h != api.HealthUp {
			t.Errorf("node %s is %s; want Up", n, h)
		}
	}
}

func (e *emitted) reasons() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, ev := range e.evs {
		out = append(out, fmt.Sprintf("%s %s: %s", ev.Reason, ev.Object, ev.Message))
	}
	return out
}
