package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/events"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/region/ipam"
	"github.com/stratahq/strata/region/state"
	"github.com/stratahq/strata/testkit/etcdtest"
)

// harness runs a controller against embedded etcd, with a simulated agent
// that reports what the test lets it report.
type harness struct {
	t      *testing.T
	st     *state.State
	caches *state.Caches
	ctrl   *Controller
	guard  testGuard
	ev     *events.Memory

	mu sync.Mutex
	// hold keeps replicas of these resources from becoming ready.
	hold map[string]bool
	// unready, when set, keeps the replicas it picks running but not
	// ready (phase provision), as a failing readiness probe does.
	unready func(*api.Assignment) bool
	// fail makes replicas of these resources report error.
	fail map[string]bool
	// exit makes replicas of these resources report that their process
	// exited with the code (a Job's attempts).
	exit map[string]int32
	// down nodes never report.
	down map[string]bool
	// network is the default network once addNetwork recorded it; blocks
	// are the blocks its nodes got.
	network *api.Network
	blocks  map[netip.Prefix]bool
	// slowDestroy: replicas of these resources take 300 ms to confirm
	// a destroy, running meanwhile, as a real provider's stop does.
	slowDestroy map[string]bool
	// failed counts the controller's failed passes.
	failed atomic.Int64
}

type testGuard struct {
	key string
	rev int64
}

func (g testGuard) GuardKey() string { return g.key }
func (g testGuard) GuardRev() int64  { return g.rev }

func newHarness(t *testing.T, opts ...func(*Options)) *harness {
	t.Helper()
	return newHarnessWith(t, etcdtest.Embedded(t), nil, opts...)
}

// newHarnessWith runs the harness on the etcd at endpoints, with a store
// built with storeOpts.
func newHarnessWith(t *testing.T, endpoints []string, storeOpts []store.Option, opts ...func(*Options)) *harness {
	t.Helper()
	cli := etcdtest.Client(t, endpoints)
	s := store.New(cli, "/strata/region/", storeOpts...)
	h := &harness{t: t, st: state.New(s), hold: map[string]bool{}, fail: map[string]bool{}, exit: map[string]int32{}, down: map[string]bool{}, slowDestroy: map[string]bool{}}
	h.caches = state.NewCaches(h.st)
	h.ev = events.NewMemory(10000)
	resp, err := cli.Put(context.Background(), "/test/leader", "me")
	if err != nil {
		t.Fatal(err)
	}
	h.guard = testGuard{key: "/test/leader", rev: resp.Header.Revision}
	o := Options{
		Region:           "r1",
		State:            h.st,
		Caches:           h.caches,
		Events:           emitFunc(func(ev events.Event) { _, _ = h.ev.Append(context.Background(), ev) }),
		ProvisionTimeout: time.Minute,
		DestroyTimeout:   time.Minute,
		RetryBackoff:     50 * time.Millisecond,
		Resync:           time.Hour,
		Logger:           slog.New(&passFailures{n: &h.failed}),
	}
	for _, f := range opts {
		f(&o)
	}
	h.ctrl = New(o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 3)
	go func() { _ = h.caches.Run(ctx); done <- struct{}{} }()
	go func() { _ = h.ctrl.Lead(ctx, h.guard); done <- struct{}{} }()
	go func() { h.simulateAgents(ctx); done <- struct{}{} }()
	t.Cleanup(func() {
		cancel()
		for range 3 {
			<-done
		}
	})
	if err := h.caches.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	return h
}

// passFailures counts the control loop's "pass failed" warnings.
type passFailures struct {
	n *atomic.Int64
}

func (p *passFailures) Enabled(context.Context, slog.Level) bool { return true }
func (p *passFailures) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "pass failed; retrying" {
		p.n.Add(1)
	}
	return nil
}
func (p *passFailures) WithAttrs([]slog.Attr) slog.Handler { return p }
func (p *passFailures) WithGroup(string) slog.Handler      { return p }

func (h *harness) failedPasses() int64 { return h.failed.Load() }

// addNetwork makes subnet the region's default network, with blocks of
// /nodeMask, and gives every node its block, as registering does.
func (h *harness) addNetwork(subnet string, nodeMask int) {
	h.t.Helper()
	pfx := netip.MustParsePrefix(subnet)
	gw := pfx.Addr().Next()
	nw := &api.Network{Name: "default", Subnet: subnet, Gateway: gw.String(), Bridge: "st0", NodeMask: nodeMask, Backend: api.BackendVXLAN, VNI: 1, Default: true}
	if _, err := h.st.Networks.Put(context.Background(), "default", nw); err != nil {
		h.t.Fatal(err)
	}
	h.eventually("network cached", func() error {
		if _, ok := h.caches.Networks.Get("default"); !ok {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	h.mu.Lock()
	h.network, h.blocks = nw, map[netip.Prefix]bool{}
	h.mu.Unlock()
	for _, it := range h.caches.Nodes.List() {
		n := *it.Value
		h.putNode(&n)
	}
}

// putNode records a node, with a block of the network if there is one.
func (h *harness) putNode(n *api.Node) {
	h.t.Helper()
	h.mu.Lock()
	if h.network != nil && (n.Network == nil || n.Network.Block == "") {
		b, err := ipam.PickBlock(*h.network, n.Name, func(b netip.Prefix) bool { return h.blocks[b] }, nil)
		if err != nil {
			h.mu.Unlock()
			h.t.Fatalf("block for %s: %v", n.Name, err)
		}
		h.blocks[b] = true
		nn := api.NodeNetwork{MTU: 1500}
		if n.Network != nil {
			nn = *n.Network
		}
		nn.Block = b.String()
		n.Network = &nn
	}
	h.mu.Unlock()
	rev, err := h.st.Nodes.Put(context.Background(), n.Name, n)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.caches.Nodes.WaitForRev(context.Background(), rev); err != nil {
		h.t.Fatal(err)
	}
}

// shareReady reports nil once name's share reads ready with n ready.
func (h *harness) shareReady(name string, n int) error {
	s := h.share(name)
	if s == nil || s.Phase != api.PhaseReady || s.Ready != n {
		return fmt.Errorf("share %+v; want ready %d/%d", s, n, n)
	}
	return nil
}

type emitFunc func(events.Event)

func (f emitFunc) Emit(ev events.Event) { f(ev) }

// simulateAgents plays every node's agent: it reports running replicas
// ready (unless held or failing) and destroyed ones destroyed.
func (h *harness) simulateAgents(ctx context.Context) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		h.mu.Lock()
		b := h.st.Store.Batch()
		for _, it := range h.caches.Assignments.List() {
			a := it.Value
			if a.Node == "" || h.down[a.Node] {
				continue
			}
			phase := api.PhaseReady
			reason := ""
			code, exits := h.exit[a.ResourceKey()]
			switch {
			case a.Desired == api.DesiredDestroyed && h.slowDestroy[a.ResourceKey()] && time.Since(a.DestroyRequestedAt) < 300*time.Millisecond:
				continue
			case a.Desired == api.DesiredDestroyed:
				phase = api.PhaseDestroyed
			case h.fail[a.ResourceKey()]:
				phase, reason = api.PhaseError, "exit code 1"
			case exits:
				phase, reason = api.PhaseError, fmt.Sprintf("exited with code %d", code)
			case h.hold[a.ResourceKey()], h.unready != nil && h.unready(a):
				phase = api.PhaseProvision
			}
			if cur, ok := h.caches.Statuses.Get(a.ID); ok && cur.Value.Phase == phase && cur.Value.ObservedGeneration == a.Generation && cur.Value.Node == a.Node {
				continue
			}
			st := &api.AssignmentStatus{ID: a.ID, Node: a.Node, ObservedGeneration: a.Generation, Phase: phase, Reason: reason, Since: time.Now()}
			if exits && phase == api.PhaseError {
				st.ExitCode = &code
			}
			// As the region API writes reports: only while the
			// assignment exists, or a report racing its removal would
			// leave a status behind for good.
			step := b.Step(a.ID)
			h.st.Assignments.TxnRequire(step, a.ID, it.CreateRevision)
			_ = h.st.Statuses.TxnPut(step, a.ID, st)
		}
		h.mu.Unlock()
		if _, err := b.Commit(ctx); err != nil && !errors.Is(err, store.ErrNotFound) && ctx.Err() == nil {
			h.t.Logf("simulated agents: %v", err)
		}
	}
}

func (h *harness) set(m map[string]bool, k string, v bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m[k] = v
}

func newNode(name, zone string) *api.Node {
	return &api.Node{
		Name: name, Region: "r1", Zone: zone, Schedulable: true,
		Providers: []api.NodeProvider{{Name: "fake", Kinds: []api.ProviderKind{api.ProviderContainer}}},
		Capacity:  api.Capacity{MilliCPU: 8000, MemoryMiB: 16384, DiskMiB: 100000},
	}
}

func (h *harness) addNode(name, zone string, health api.Health) {
	h.t.Helper()
	h.putNode(newNode(name, zone))
	h.setHealth(name, health)
}

// setHealth records a node's health and waits until the controller's
// caches see the node with it: a placement written next is then decided
// with the node in view, not before it (which made zone spread flaky).
func (h *harness) setHealth(name string, health api.Health) {
	h.t.Helper()
	rev, err := h.st.NodeStatus.Put(context.Background(), name, &api.NodeStatus{Health: health, Since: time.Now()})
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.caches.Nodes.WaitForRev(ctx, rev); err != nil {
		h.t.Fatal(err)
	}
	if err := h.caches.NodeStatus.WaitForRev(ctx, rev); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) place(name string, replicas int, revision int64, mutate ...func(*api.Placement)) {
	h.t.Helper()
	pl := &api.Placement{
		Region: "r1",
		Resource: api.Resource{
			Name: name, Tenant: "t", UID: "uid-" + name, Kind: api.KindCompute, Replicas: replicas,
			Revision: revision, Generation: revision,
			Spec: api.ResourceSpec{Flavor: "small", Compute: &api.ComputeSpec{Image: "busybox"}},
		},
		Flavor: &api.Flavor{Name: "small", Kind: api.ProviderContainer, Spec: api.FlavorSpec{VCPUs: 1, MemoryMiB: 512}},
	}
	for _, f := range mutate {
		f(pl)
	}
	if _, err := h.st.Placements.Put(context.Background(), "t/"+name, pl); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) share(name string) *state.Share {
	it, ok := h.caches.Shares.Get("t/" + name)
	if !ok {
		return nil
	}
	return it.Value
}

func (h *harness) replicas(name string) (running, destroying []*api.Assignment) {
	for _, it := range h.caches.Assignments.List() {
		a := it.Value
		if a.Resource != name {
			continue
		}
		if a.Desired == api.DesiredRunning {
			running = append(running, a)
		} else {
			destroying = append(destroying, a)
		}
	}
	return running, destroying
}

// checkCachedAssignments checks that no cached assignment was changed in
// place: each equals what the store holds at its revision. The replicas
// of one revision share one decoded compute spec (region/state), so a
// change made through one replica would show in all of them; it checks
// that they do share it.
func (h *harness) checkCachedAssignments() {
	h.t.Helper()
	stored, rev, err := h.st.Assignments.ListAll(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.caches.Assignments.WaitForRev(context.Background(), rev); err != nil {
		h.t.Fatal(err)
	}
	specs := map[string]*api.ComputeSpec{}
	for _, it := range stored {
		c, ok := h.caches.Assignments.Get(it.Name)
		if !ok || c.ModRevision != it.ModRevision {
			continue // changed since the list
		}
		if !reflect.DeepEqual(c.Value, it.Value) {
			h.t.Errorf("cached assignment %s is %+v; the store holds %+v (changed in place)", it.Name, c.Value, it.Value)
		}
		if c.Value.Spec.Compute == nil {
			continue
		}
		k := fmt.Sprintf("%s@%d", c.Value.ResourceUID, c.Value.Revision)
		if held, ok := specs[k]; ok && held != c.Value.Spec.Compute && reflect.DeepEqual(held, c.Value.Spec.Compute) {
			h.t.Errorf("replicas of %s hold two equal compute specs; want one shared", k)
		}
		specs[k] = c.Value.Spec.Compute
	}
}

func (h *harness) eventually(what string, cond func() error) {
	h.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.t.Fatalf("%s: %v", what, err)
}

func (h *harness) readyWith(name string, n int) func() error {
	return func() error {
		s := h.share(name)
		if s == nil {
			return fmt.Errorf("no share")
		}
		run, dying := h.replicas(name)
		if s.Phase != api.PhaseReady || s.Ready != n || len(run) != n || len(dying) != 0 {
			return fmt.Errorf("share %s %d/%d ready (%s); running %d, destroying %d; want ready %d/%d, none destroying",
				s.Phase, s.Ready, s.Replicas, s.Reason, len(run), len(dying), n, n)
		}
		return nil
	}
}

func TestCreateScaleDelete(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1", "a", api.HealthUp)
	h.addNode("n2", "b", api.HealthUp)
	h.place("web", 3, 1)
	h.eventually("3 ready", h.readyWith("web", 3))

	run, _ := h.replicas("web")
	perNode := map[string]int{}
	for _, a := range run {
		perNode[a.Node]++
	}
	if perNode["n1"] == 0 || perNode["n2"] == 0 {
		t.Errorf("placement: got %v; want replicas on both nodes (zone spread)", perNode)
	}

	h.place("web", 1, 1)
	h.eventually("scaled to 1", h.readyWith("web", 1))

	pl, _ := h.caches.Placements.Get("t/web")
	del := *pl.Value
	now := time.Now()
	del.Resource.DeletionRequestedAt = &now
	if _, err := h.st.Placements.Put(context.Background(), "t/web", &del); err != nil {
		t.Fatal(err)
	}
	h.eventually("placement, share and replicas gone", func() error {
		run, dying := h.replicas("web")
		_, havePl := h.caches.Placements.Get("t/web")
		if len(run)+len(dying) > 0 || havePl || h.share("web") != nil {
			return fmt.Errorf("running %d, destroying %d, placement %v, share %v", len(run), len(dying), havePl, h.share("web") != nil)
		}
		if n := h.caches.Statuses.Len(); n != 0 {
			return fmt.Errorf("%d statuses left", n)
		}
		return nil
	})
}

// TestPlacementSeesNodesWrittenBeforeIt: nodes registered just before a
// resource are there when its replicas are placed, although each
// collection has a watch of its own and the placements' may run ahead.
// Every round registers two nodes in two zones and, right after (without
// waiting for any cache, unlike addNode), a resource pinned to them: its
// two replicas must spread over both.
func TestPlacementSeesNodesWrittenBeforeIt(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	for round := range 20 {
		sel := map[string]string{"round": fmt.Sprint(round)}
		for _, zone := range []string{"a", "b"} {
			name := fmt.Sprintf("r%d-%s", round, zone)
			n := newNode(name, zone)
			n.Labels = sel
			if _, err := h.st.Nodes.Put(ctx, name, n); err != nil {
				t.Fatal(err)
			}
			if _, err := h.st.NodeStatus.Put(ctx, name, &api.NodeStatus{Health: api.HealthUp, Since: time.Now()}); err != nil {
				t.Fatal(err)
			}
		}
		name := fmt.Sprintf("web%d", round)
		h.place(name, 2, 1, func(p *api.Placement) { p.Resource.Schedule.NodeSelector = sel })
		h.eventually(name+" ready", h.readyWith(name, 2))
		run, _ := h.replicas(name)
		perNode := map[string]int{}
		for _, a := range run {
			perNode[a.Node]++
		}
		if len(perNode) != 2 {
			t.Fatalf("round %d: placement: got %v; want one replica on each new node", round, perNode)
		}
	}
}

func TestUnschedulableThenNodeArrives(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1", "a", api.HealthUp)
	h.place("big", 2, 1, func(p *api.Placement) { p.Flavor.Spec.MemoryMiB = 10000 })
	h.eventually("unschedulable reason", func() error {
		s := h.share("big")
		if s == nil || s.Phase != api.PhaseCreated || s.Reason != "unschedulable: 0/1 nodes fit: 1 insufficient memory" || s.Unplaced != 1 {
			return fmt.Errorf("share %+v; want phase created with the filter's reason, 1 unplaced (the other fits on n1)", s)
		}
		return nil
	})
	h.addNode("n2", "b", api.HealthUp)
	h.eventually("both placed", h.readyWith("big", 2))
	if s := h.share("big"); s.Unplaced != 0 {
		t.Errorf("placed share says %d unplaced; want 0", s.Unplaced)
	}
}

func TestRollingUpdateKeepsReplicasReady(t *testing.T) {
	h := newHarness(t)
	for i := range 3 {
		h.addNode(fmt.Sprintf("n%d", i), "a", api.HealthUp)
	}
	h.place("web", 4, 1)
	h.eventually("4 ready", h.readyWith("web", 4))

	// Watch readiness through the rollout: never fewer than 4 ready.
	stop := make(chan struct{})
	minReady := make(chan int, 1)
	go func() {
		low := 4
		for {
			select {
			case <-stop:
				minReady <- low
				return
			default:
			}
			if s := h.share("web"); s != nil && s.Ready < low {
				low = s.Ready
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	h.place("web", 4, 2)
	h.eventually("rolled to revision 2", func() error {
		if err := h.readyWith("web", 4)(); err != nil {
			return err
		}
		run, _ := h.replicas("web")
		for _, a := range run {
			if a.Revision != 2 {
				return fmt.Errorf("replica %s still at revision %d", a.ID, a.Revision)
			}
		}
		return nil
	})
	close(stop)
	if low := <-minReady; low < 4 {
		t.Errorf("ready replicas during the rollout: got a low of %d; want never below 4", low)
	}
	h.checkCachedAssignments()
}

// TestChaosRegressionRolloutSurge is what e2e/chaos found under load: with
// maxSurge 0 a rollout started a replacement while the replica it
// replaced was still stopping, one more running than asked.
func TestChaosRegressionRolloutSurge(t *testing.T) {
	h := newHarness(t)
	for i := range 3 {
		h.addNode(fmt.Sprintf("n%d", i), "a", api.HealthUp)
	}
	noSurge := func(pl *api.Placement) { pl.Resource.Rollout = api.RolloutPolicy{MaxSurge: 0, MaxUnavailable: 1} }
	h.place("web", 3, 1, noSurge)
	h.eventually("3 ready", h.readyWith("web", 3))
	h.set(h.slowDestroy, "t/web", true)

	// Watch what exists through the rollout: replicas asked to run and
	// those asked to go that have not confirmed it.
	stop := make(chan struct{})
	most := make(chan int, 1)
	go func() {
		high := 0
		for {
			select {
			case <-stop:
				most <- high
				return
			default:
			}
			run, dying := h.replicas("web")
			n := len(run)
			for _, a := range dying {
				if st, ok := h.caches.Statuses.Get(a.ID); !ok || st.Value.Phase != api.PhaseDestroyed {
					n++
				}
			}
			high = max(high, n)
			time.Sleep(2 * time.Millisecond)
		}
	}()
	h.place("web", 3, 2, noSurge, func(pl *api.Placement) { pl.Resource.Spec.Compute.Env = map[string]string{"V": "2"} })
	h.eventually("rolled to revision 2", func() error {
		if err := h.readyWith("web", 3)(); err != nil {
			return err
		}
		run, _ := h.replicas("web")
		for _, a := range run {
			if a.Revision != 2 {
				return fmt.Errorf("replica %s still at revision %d", a.ID, a.Revision)
			}
		}
		return nil
	})
	close(stop)
	if high := <-most; high > 3 {
		t.Errorf("replicas existing during a rollout with maxSurge 0: got up to %d; want at most 3", high)
	}
}

func TestNodeDownReschedules(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1", "a", api.HealthUp)
	h.addNode("n2", "a", api.HealthUp)
	h.place("web", 4, 1)
	h.eventually("4 ready", h.readyWith("web", 4))

	h.set(h.down, "n1", true)
	h.setHealth("n1", api.HealthDown)
	h.eventually("all running on n2", func() error {
		run, _ := h.replicas("web")
		for _, a := range run {
			if a.Node != "n2" {
				return fmt.Errorf("replica %s on %s", a.ID, a.Node)
			}
		}
		if s := h.share("web"); s == nil || s.Ready != 4 {
			return fmt.Errorf("share %+v; want 4 ready", s)
		}
		return nil
	})
	// The lost replicas wait in destroy for the node: it returns, its
	// agent reports them destroyed, and they are gone.
	_, dying := h.replicas("web")
	if len(dying) == 0 {
		t.Fatalf("destroying: got 0; want the lost replicas waiting for n1")
	}
	h.set(h.down, "n1", false)
	h.setHealth("n1", api.HealthUp)
	h.eventually("stale replicas removed", h.readyWith("web", 4))
}

func TestFailedReplicaReplacedWithBackoff(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1", "a", api.HealthUp)
	h.set(h.fail, "t/crash", true)
	h.place("crash", 1, 1)
	h.eventually("error with reason", func() error {
		s := h.share("crash")
		if s == nil || s.Phase != api.PhaseError {
			return fmt.Errorf("share %+v; want phase error", s)
		}
		return nil
	})
	h.eventually("replaced at least twice", func() error {
		got, _ := h.ev.Range(context.Background(), events.Query{Reason: "ReplicaReplaced"})
		if len(got) < 2 {
			return fmt.Errorf("%d replacements", len(got))
		}
		return nil
	})
	h.set(h.fail, "t/crash", false)
	h.eventually("recovered", h.readyWith("crash", 1))
}

func TestProvisionDeadline(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.ProvisionTimeout = 300 * time.Millisecond })
	h.addNode("n1", "a", api.HealthUp)
	h.set(h.hold, "t/slow", true)
	h.place("slow", 1, 1)
	h.eventually("deadline event", func() error {
		got, _ := h.ev.Range(context.Background(), events.Query{Reason: "DeadlineExceeded"})
		if len(got) == 0 {
			return fmt.Errorf("no DeadlineExceeded event")
		}
		return nil
	})
	h.set(h.hold, "t/slow", false)
	h.eventually("ready after release", h.readyWith("slow", 1))
}

func TestDrainMovesEverythingMakeBeforeBreak(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1", "a", api.HealthUp)
	h.addNode("n2", "a", api.HealthUp)
	// Put all 10 replicas on n1 first: cordon n2 while they are placed.
	n2, _ := h.st.Nodes.Get(context.Background(), "n2")
	n2.Value.Schedulable = false
	h.putNode(n2.Value)
	for i := range 5 {
		h.place(fmt.Sprintf("app%d", i), 2, 1, func(p *api.Placement) {
			p.Flavor.Spec.VCPUs = 0.5
		})
	}
	for i := range 5 {
		h.eventually("app ready", h.readyWith(fmt.Sprintf("app%d", i), 2))
	}
	// The drain below must find n2 open in the controller's cache, as
	// it would after the API's uncordon: putNode waits for the cache.
	n2.Value.Schedulable = true
	h.putNode(n2.Value)

	// Watch every resource's ready count while the drain runs.
	stop := make(chan struct{})
	low := make(chan int, 1)
	go func() {
		m := 2
		for {
			select {
			case <-stop:
				low <- m
				return
			default:
			}
			for i := range 5 {
				if s := h.share(fmt.Sprintf("app%d", i)); s != nil && s.Ready < m {
					m = s.Ready
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	n1, _ := h.st.Nodes.Get(context.Background(), "n1")
	n1.Value.Schedulable = false
	h.putNode(n1.Value)
	d := &api.DrainStatus{Node: "n1", State: api.DrainRunning, StartedAt: time.Now(), Deadline: time.Now().Add(time.Minute), MaxParallel: 2}
	if _, err := h.st.Drains.Create(context.Background(), "n1", d); err != nil {
		t.Fatal(err)
	}
	h.eventually("drain succeeded", func() error {
		it, ok := h.caches.Drains.Get("n1")
		if !ok || it.Value.State != api.DrainSucceeded {
			return fmt.Errorf("drain %+v", it.Value)
		}
		if it.Value.Moved != 10 || it.Value.Total != 10 || it.Value.Remaining != 0 {
			return fmt.Errorf("drain counts total %d moved %d remaining %d; want 10, 10, 0", it.Value.Total, it.Value.Moved, it.Value.Remaining)
		}
		return nil
	})
	close(stop)
	if m := <-low; m < 2 {
		t.Errorf("ready replicas of a resource during the drain: got a low of %d; want never below 2", m)
	}
	for i := range 5 {
		h.eventually("app ready on n2", func() error {
			run, _ := h.replicas(fmt.Sprintf("app%d", i))
			for _, a := range run {
				if a.Node != "n2" {
					return fmt.Errorf("replica %s on %s", a.ID, a.Node)
				}
			}
			return h.readyWith(fmt.Sprintf("app%d", i), 2)()
		})
	}
	it, _ := h.caches.Drains.Get("n1")
	moved := 0
	for _, s := range it.Value.Steps {
		if s.State == "moved" {
			moved++
		}
	}
	if moved != 10 {
		t.Errorf("drain steps: got %d moved steps; want 10 (one per replica)", moved)
	}
}

func TestDeposedLeaderIsFenced(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1", "a", api.HealthUp)
	// Lose leadership: the guard key is replaced.
	if _, err := h.st.Store.Client().Delete(context.Background(), "/test/leader"); err != nil {
		t.Fatal(err)
	}
	p := newPlan(h.st)
	p.putShare("t/x", &state.Share{Tenant: "t", Name: "x"})
	_, err := p.commit(context.Background(), h.guard)
	if err == nil || !isFenced(err) {
		t.Fatalf("commit after losing leadership: got %v; want ErrFenced", err)
	}
}

// Two controllers that both believe they lead (a leader change caught in
// the middle, before fencing catches up) must still never hand one
// address to two replicas: the address is the Port record's key, created
// only if absent.
func TestIPAMNeverDuplicatesAcrossLeaders(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.addNetwork("10.77.0.0/24", 26)
	for i := range 4 {
		h.addNode(fmt.Sprintf("n%d", i), "a", api.HealthUp)
	}
	// A second controller over the same store, leading at the same time.
	second := New(Options{Region: "r1", State: h.st, Caches: h.caches, Events: emitFunc(func(events.Event) {}), Resync: 100 * time.Millisecond})
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = second.Lead(cctx, h.guard); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	for i := range 5 {
		h.place(fmt.Sprintf("app%d", i), 20, 1, func(p *api.Placement) { p.Flavor.Spec.VCPUs = 0.1; p.Flavor.Spec.MemoryMiB = 64 })
	}
	h.eventually("every replica addressed and recorded", func() error {
		byAddr := map[string]string{}
		n := 0
		for _, it := range h.caches.Assignments.List() {
			a := it.Value
			if a.Node == "" {
				return fmt.Errorf("replica %s not placed yet", a.ID)
			}
			if a.Network == nil {
				return fmt.Errorf("replica %s has no address", a.ID)
			}
			if other, dup := byAddr[a.Network.Address]; dup {
				t.Fatalf("address %s given to both %s and %s", a.Network.Address, other, a.ID)
			}
			byAddr[a.Network.Address] = a.ID
			port, ok := h.caches.Ports.Get(state.PortName("default", a.Network.Address))
			if !ok || port.Value.Assignment != a.ID {
				return fmt.Errorf("replica %s: no port record naming it for %s", a.ID, a.Network.Address)
			}
			n++
		}
		if n < 100 {
			return fmt.Errorf("%d replicas", n)
		}
		return nil
	})
}

func TestLoadbalancerEndpointsFollowReadyReplicas(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.addNetwork("10.66.0.0/24", 24)
	n := &api.Node{
		Name: "n1", Region: "r1", Zone: "a", Schedulable: true,
		Providers: []api.NodeProvider{{Name: "fake", Kinds: []api.ProviderKind{api.ProviderContainer, api.ProviderLoadbalancer}}},
		Capacity:  api.Capacity{MilliCPU: 8000, MemoryMiB: 16384},
	}
	h.putNode(n)
	h.setHealth("n1", api.HealthUp)
	h.place("web", 3, 1, func(p *api.Placement) { p.Resource.Labels = map[string]string{"app": "web"} })
	lb := &api.Placement{Region: "r1", Resource: api.Resource{
		Name: "front", Tenant: "t", UID: "uid-front", Kind: api.KindLoadbalancer, Replicas: 1, Revision: 1, Generation: 1,
		Spec: api.ResourceSpec{Loadbalancer: &api.LoadbalancerSpec{
			Listeners: []api.Listener{{Port: 8080, Protocol: "http", TargetPort: 80}}, Selector: map[string]string{"app": "web"},
		}},
	}}
	if _, err := h.st.Placements.Put(ctx, "t/front", lb); err != nil {
		t.Fatal(err)
	}
	backends := func(want int) func() error {
		return func() error {
			run, _ := h.replicas("front")
			if len(run) != 1 {
				return fmt.Errorf("%d load balancer replicas", len(run))
			}
			webRun, _ := h.replicas("web")
			addrs := map[string]bool{}
			for _, a := range webRun {
				if a.Network != nil {
					addrs[a.Network.Address] = true
				}
			}
			eps := run[0].Endpoints
			if len(eps) != want {
				return fmt.Errorf("endpoints %v; want %d", eps, want)
			}
			for _, e := range eps {
				if !addrs[e.Address] {
					return fmt.Errorf("endpoint %s is not a web replica's address (%v)", e.Address, addrs)
				}
			}
			return nil
		}
	}
	h.eventually("3 backends", backends(3))
	first, _ := h.replicas("front")
	gen := first[0].Generation
	h.place("web", 4, 1, func(p *api.Placement) { p.Resource.Labels = map[string]string{"app": "web"} })
	h.eventually("4 backends", backends(4))
	now, _ := h.replicas("front")
	if now[0].ID != first[0].ID || now[0].Generation <= gen {
		t.Errorf("load balancer replica: got %s generation %d; want the same replica %s at a generation above %d", now[0].ID, now[0].Generation, first[0].ID, gen)
	}
}

// TestPassLargerThanOneTransaction is the agent that comes back from an
// outage: its node's replicas were replaced elsewhere, and it reports all
// of them destroyed at once, so one pass removes three records for each
// (assignment, status, address), well over etcd's --max-txn-ops. The
// limits are the stock one and one configured above etcd's, which the
// store lowers after the first refusal.
func TestPassLargerThanOneTransaction(t *testing.T) {
	for _, c := range []struct {
		name  string
		limit int
	}{
		{"stock limit", 0},
		{"limit above the server's", 1000},
	} {
		t.Run(c.name, func(t *testing.T) {
			const n = 60 // 60 × 3 records, and 60 × (port + assignment) to replace them
			h := newHarnessWith(t, etcdtest.Embedded(t), []store.Option{store.WithMaxTxnOps(c.limit)})
			h.addNetwork("10.55.0.0/22", 24)
			h.addNode("n1", "a", api.HealthUp)
			h.place("web", n, 1, func(p *api.Placement) { p.Flavor.Spec.VCPUs = 0.1; p.Flavor.Spec.MemoryMiB = 64 })
			h.eventually("all on n1", h.readyWith("web", n))

			h.addNode("n2", "a", api.HealthUp)
			h.set(h.down, "n1", true)
			h.setHealth("n1", api.HealthDown)
			h.eventually("replaced on n2", func() error {
				run, dying := h.replicas("web")
				for _, a := range run {
					if a.Node != "n2" {
						return fmt.Errorf("replica %s on %s", a.ID, a.Node)
					}
				}
				if len(dying) != n {
					return fmt.Errorf("%d replicas waiting for n1; want %d", len(dying), n)
				}
				return h.shareReady("web", n)
			})
			// n1 returns and reports its 60 replicas destroyed in one
			// batch: one pass deletes 180 records.
			h.set(h.down, "n1", false)
			h.setHealth("n1", api.HealthUp)
			h.eventually("n1's records removed", h.readyWith("web", n))
			// The removals of a replica's assignment, status and address
			// are one transaction, but each cache has its own watch:
			// count in the other two once they are as current.
			wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := store.WaitForRev(wctx, h.caches.Assignments.Rev(), h.caches.Ports, h.caches.Statuses); err != nil {
				t.Fatal(err)
			}
			if got := h.caches.Ports.Len(); got != n {
				t.Errorf("ports: got %d; want %d (one per running replica)", got, n)
			}
			if got := h.caches.Statuses.Len(); got != n {
				t.Errorf("statuses: got %d; want %d", got, n)
			}
			if c.limit > 0 {
				if got := h.st.Store.MaxTxnOps(); got > store.DefaultMaxTxnOps {
					t.Errorf("store limit after etcd refused: got %d; want at most %d", got, store.DefaultMaxTxnOps)
				}
			}
		})
	}
}

// TestUnwritableResourceSurfacesAndStops gives the store a limit too small
// for a replica's step (guard, address, assignment): the resource's share
// says why nothing is written, and once the resource is deleted the
// controller's passes stop failing.
func TestUnwritableResourceSurfacesAndStops(t *testing.T) {
	var passes atomic.Int64
	h := newHarnessWith(t, etcdtest.Embedded(t), []store.Option{store.WithMaxTxnOps(2)}, func(o *Options) {
		o.Clock = func() time.Time { passes.Add(1); return time.Now() }
		o.Resync = 200 * time.Millisecond // the resyncs after the deletion are what is checked
	})
	h.addNetwork("10.56.0.0/24", 24)
	h.addNode("n1", "a", api.HealthUp)
	// An image has only a share to write: it keeps the passes going.
	h.place("img", 0, 1, func(p *api.Placement) { p.Resource.Kind = api.KindImage })
	h.place("web", 3, 1)
	h.eventually("reason on the share", func() error {
		s := h.share("web")
		if s == nil || !strings.Contains(s.Reason, "could not store") || !strings.Contains(s.Reason, "limit of 2 operations") {
			return fmt.Errorf("share %+v; want a reason naming the failed write", s)
		}
		return nil
	})
	// Replicas may be recorded unplaced (a step that fits) if a pass ran
	// before the node was cached; none may be placed.
	if run, _ := h.replicas("web"); len(run) > 0 && run[0].Node != "" {
		t.Fatalf("replica %s placed on %s; want none placed", run[0].ID, run[0].Node)
	}
	if n := h.caches.Ports.Len(); n != 0 {
		t.Fatalf("ports: got %d; want none", n)
	}

	pl, _ := h.caches.Placements.Get("t/web")
	del := *pl.Value
	now := time.Now()
	del.Resource.DeletionRequestedAt = &now
	if _, err := h.st.Placements.Put(context.Background(), "t/web", &del); err != nil {
		t.Fatal(err)
	}
	h.eventually("placement and share gone", func() error {
		if _, ok := h.caches.Placements.Get("t/web"); ok || h.share("web") != nil {
			return fmt.Errorf("placement %v, share %+v", ok, h.share("web"))
		}
		return nil
	})
	if err := h.shareReady("img", 0); err != nil {
		t.Errorf("image: %v", err)
	}
	// Let a few resyncs pass: none may fail.
	failures := h.failedPasses()
	start := passes.Load()
	h.eventually("three more passes", func() error {
		if got := passes.Load(); got < start+3 {
			return fmt.Errorf("%d passes since the deletion", got-start)
		}
		return nil
	})
	if got := h.failedPasses(); got != failures {
		t.Errorf("failed passes after the deletion: got %d more; want none", got-failures)
	}
}

// TestAddressesComeFromTheNodeBlock checks that a replica's address, subnet
// and gateway are those of the block of the node it is placed on, with the
// node's bridge and MTU; that a block holding addresses the scheduler did
// not count (another node's replicas) is ruled out once found full; that
// replicas beyond the blocks' room stay unplaced saying so; and that a
// replica rescheduled to another node gets an address there.
func TestAddressesComeFromTheNodeBlock(t *testing.T) {
	h := newHarness(t)
	h.addNetwork("10.44.0.0/24", 26) // 61 addresses a block
	h.addNode("n1", "a", api.HealthUp)
	n2 := &api.Node{
		Name: "n2", Region: "r1", Zone: "a", Schedulable: true,
		Providers: []api.NodeProvider{{Name: "fake", Kinds: []api.ProviderKind{api.ProviderContainer}}},
		Capacity:  api.Capacity{MilliCPU: 8000, MemoryMiB: 16384, DiskMiB: 100000},
		Network:   &api.NodeNetwork{Bridge: "own0", MTU: 9000},
	}
	h.putNode(n2)
	h.setHealth("n2", api.HealthUp)
	blocks := map[string]netip.Prefix{}
	for _, name := range []string{"n1", "n2"} {
		it, _ := h.caches.Nodes.Get(name)
		blocks[name] = netip.MustParsePrefix(it.Value.Network.Block)
	}
	// Every address of n2's block is held already, by replicas of a
	// node the scheduler does not count them against.
	txn := h.st.Store.Txn()
	for a := blocks["n2"].Addr(); blocks["n2"].Contains(a); a = a.Next() {
		h.st.Ports.TxnCreate(txn, state.PortName("default", a.String()), &api.Port{Network: "default", Address: a.String(), Assignment: "gone-" + a.String()})
	}
	if _, err := txn.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}

	small := func(p *api.Placement) { p.Flavor.Spec.VCPUs = 0.01; p.Flavor.Spec.MemoryMiB = 16 }
	h.place("web", 4, 1, small)
	h.eventually("4 web replicas ready", h.readyWith("web", 4))
	check := func(a *api.Assignment) {
		t.Helper()
		block := blocks[a.Node]
		n := a.Network
		if n == nil {
			t.Fatalf("replica %s on %s: no address", a.ID, a.Node)
		}
		addr := netip.MustParseAddr(n.Address)
		wantBridge, wantMTU := "st0", 1450
		if a.Node == "n2" {
			wantBridge, wantMTU = "own0", 8950
		}
		if !block.Contains(addr) || n.Subnet != block.String() || n.Gateway != block.Addr().Next().String() || n.Bridge != wantBridge || n.MTU != wantMTU {
			t.Fatalf("replica %s on %s: got %+v; want an address of %s, gateway %s, bridge %s, MTU %d",
				a.ID, a.Node, *n, block, block.Addr().Next(), wantBridge, wantMTU)
		}
	}
	run, _ := h.replicas("web")
	for _, a := range run {
		if a.Node != "n1" {
			t.Fatalf("replica %s on %s; want n1, the only node with a free address", a.ID, a.Node)
		}
		check(a)
	}

	// 61 addresses in n1's block, 4 taken: 57 more fit, 3 do not.
	h.place("big", 60, 1, small)
	h.eventually("57 of 60 placed, 3 without an address", func() error {
		run, _ := h.replicas("big")
		placed := 0
		for _, a := range run {
			if a.Node != "" {
				placed++
				check(a)
			}
		}
		s := h.share("big")
		if placed != 57 || s == nil || !strings.Contains(s.Reason, "no free address in the node's block") {
			return fmt.Errorf("%d placed, share %+v", placed, s)
		}
		return nil
	})

	// n2's block freed: n1 goes down, its replicas move to n2 with
	// addresses there.
	txn = h.st.Store.Txn()
	for a := blocks["n2"].Addr(); blocks["n2"].Contains(a); a = a.Next() {
		h.st.Ports.TxnDelete(txn, state.PortName("default", a.String()), 0)
	}
	if _, err := txn.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.place("big", 0, 1, small)
	h.eventually("big scaled to 0", h.readyWith("big", 0))
	h.set(h.down, "n1", true)
	h.setHealth("n1", api.HealthDown)
	h.eventually("web moved to n2 with n2's addresses", func() error {
		run, _ := h.replicas("web")
		if len(run) != 4 {
			return fmt.Errorf("%d running", len(run))
		}
		for _, a := range run {
			if a.Node != "n2" {
				return fmt.Errorf("replica %s on %s", a.ID, a.Node)
			}
			check(a)
		}
		return h.shareReady("web", 4)
	})
}
