package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/transport"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	"github.com/stratahq/strata/proto/apiproto"
	"github.com/stratahq/strata/providers/fake"
	"github.com/stratahq/strata/providers/provider"
	"github.com/stratahq/strata/testkit/testenv"
	"github.com/stratahq/strata/testkit/testenv/ports"
)

const waitLong = 10 * time.Second

// eventually polls check until it passes or the deadline expires.
func eventually(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func testConfig(t *testing.T, endpoint string) *config.Agent {
	cfg := config.DefaultAgent()
	cfg.Node.Name = "node-1"
	cfg.Node.Zone = "z1"
	cfg.Node.Labels = map[string]string{"disk": "ssd"}
	cfg.Node.EnableAutoCordon = true
	cfg.Region.Endpoint = endpoint
	cfg.Listen.GRPC = "127.0.0.1:0"
	cfg.DataDir = t.TempDir()
	cfg.StatusInterval = 50 * time.Millisecond
	cfg.Concurrency = 4
	cfg.Providers = nil
	// These tests are about what the agent does with its assignments;
	// its links to the fake region are plaintext on loopback. Who may
	// call what over mutual TLS is TestSecurityNodeService's.
	cfg.Insecure = true
	cfg.Default()
	return cfg
}

// fast shortens the agent's delays so that retries happen within a test.
func fast(tm *timings) {
	tm.registerMin, tm.registerMax = 10*time.Millisecond, 100*time.Millisecond
	tm.retryMin, tm.retryMax = 50*time.Millisecond, 400*time.Millisecond
	tm.orphanSettle = 100 * time.Millisecond
	tm.fastPoll = 10 * time.Millisecond
	tm.regionCall = 2 * time.Second
	tm.shutdownFlush = time.Second
}

type testAgent struct {
	*Agent
	cancel context.CancelFunc
	done   chan error
}

type agentOption func(*Options, *timings)

func withProviders(ps map[string]provider.Provider) agentOption {
	return func(o *Options, _ *timings) { o.Providers = ps }
}

func withTimings(f func(*timings)) agentOption {
	return func(_ *Options, tm *timings) { f(tm) }
}

func withConfig(f func(*config.Agent)) agentOption {
	return func(o *Options, _ *timings) { f(o.Config) }
}

// startAgent runs an agent against region until the test ends.
func startAgent(t *testing.T, endpoint string, opts ...agentOption) *testAgent {
	t.Helper()
	o := Options{
		Config: testConfig(t, endpoint),
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
	tm := defaultTimings()
	fast(&tm)
	for _, f := range opts {
		f(&o, &tm)
	}
	a, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	a.t = tm
	ctx, cancel := context.WithCancel(context.Background())
	ta := &testAgent{Agent: a, cancel: cancel, done: make(chan error, 1)}
	go func() { ta.done <- a.Run(ctx) }()
	t.Cleanup(func() { ta.stop(t) })
	return ta
}

// stop cancels the agent and checks that Run returns promptly and cleanly.
func (ta *testAgent) stop(t *testing.T) {
	t.Helper()
	if ta.cancel == nil {
		return
	}
	ta.cancel()
	ta.cancel = nil
	select {
	case err := <-ta.done:
		if err != nil {
			t.Errorf("Run: got %v; want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("Run did not return within 5s of cancel")
	}
}

func (ta *testAgent) waitReady(t *testing.T) {
	t.Helper()
	select {
	case <-ta.Ready():
	case <-time.After(waitLong):
		t.Fatalf("agent not ready after %s", waitLong)
	}
}

// waitReadyWhile waits for Ready as long as progress (a count of work
// done, such as provider applies) keeps moving. Ready needs the first
// snapshot's work done, which takes as long as the machine makes it
// take; the test fails only when nothing moved for waitLong.
func (ta *testAgent) waitReadyWhile(t *testing.T, progress func() int64) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	last, moved := progress(), time.Now()
	for {
		select {
		case <-ta.Ready():
			return
		case <-tick.C:
		}
		if p := progress(); p != last {
			last, moved = p, time.Now()
			continue
		}
		if time.Since(moved) > waitLong {
			t.Fatalf("agent not ready: no progress for %s (progress %d)", waitLong, last)
		}
	}
}

func running(id string, gen int64) *api.Assignment {
	return &api.Assignment{
		ID:         id,
		Tenant:     "t1",
		Resource:   "web",
		Kind:       api.KindCompute,
		Provider:   api.ProviderContainer,
		Desired:    api.DesiredRunning,
		Generation: gen,
		Node:       "node-1",
		Flavor:     api.FlavorSpec{VCPUs: 0.5, MemoryMiB: 256},
		Spec:       api.ResourceSpec{Compute: &api.ComputeSpec{Image: "busybox"}},
	}
}

func destroyed(id string, gen int64, grace time.Duration) *api.Assignment {
	a := running(id, gen)
	a.Desired = api.DesiredDestroyed
	a.Spec.Compute.StopGracePeriod = api.D(grace)
	return a
}

func one(p provider.Provider) map[string]provider.Provider {
	return map[string]provider.Provider{"mem": p}
}

func phases(p api.Phase, ids ...string) map[string]api.Phase {
	m := map[string]api.Phase{}
	for _, id := range ids {
		m[id] = p
	}
	return m
}

func wantCount(p *memProvider, call string, want int) func() error {
	return func() error {
		if got := p.count(call); got != want {
			return fmt.Errorf("%s calls: got %d; want %d", call, got, want)
		}
		return nil
	}
}

func TestRegistersAndHeartbeatsWithConditions(t *testing.T) {
	region := newFakeRegion(t)
	good := newMemProvider("good", api.ProviderContainer)
	bad := newMemProvider("bad", api.ProviderVM)
	bad.setHealth(nil, errors.New("libvirt socket gone"))
	ta := startAgent(t, region.endpoint(), withProviders(map[string]provider.Provider{"good": good, "bad": bad}))

	eventually(t, waitLong, "heartbeats", func() error {
		if n := len(region.beats()); n < 3 {
			return fmt.Errorf("heartbeats: got %d; want >= 3", n)
		}
		return nil
	})
	regs := region.registered()
	if len(regs) != 1 {
		t.Fatalf("registrations: got %d; want 1", len(regs))
	}
	n := apiproto.NodeFromPB(regs[0])
	checks := []struct {
		name      string
		got, want any
	}{
		{"name", n.Name, "node-1"},
		{"region", n.Region, ""},
		{"zone", n.Zone, "z1"},
		{"label", n.Labels["disk"], "ssd"},
		{"address", n.Address, ta.Addr()},
		{"schedulable", n.Schedulable, true},
		{"autoCordon", n.EnableAutoCordon, true},
		{"version", n.AgentVersion, ta.agentVersion()},
		{"providers", len(n.Providers), 2},
		{"serves container", n.Serves(api.ProviderContainer), true},
		{"serves vm", n.Serves(api.ProviderVM), true},
		{"cpu detected", n.Capacity.MilliCPU > 0, true},
		{"memory detected", n.Capacity.MemoryMiB > 0, true},
		{"disk detected", n.Capacity.DiskMiB > 0, true},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("registered node %s: got %v; want %v", c.name, c.got, c.want)
		}
	}
	if ta.Addr() == "" || strings.HasSuffix(ta.Addr(), ":0") {
		t.Errorf("Addr: got %q; want the listener's address", ta.Addr())
	}

	beats := region.beats()
	for i := 1; i < len(beats); i++ {
		if beats[i].GetSeq() != beats[i-1].GetSeq()+1 {
			t.Errorf("heartbeat seq: got %d after %d; want +1", beats[i].GetSeq(), beats[i-1].GetSeq())
		}
	}
	last := beats[len(beats)-1]
	conds := map[string]api.Condition{}
	for _, c := range apiproto.ConditionsFromPB(last.GetConditions()) {
		conds[c.Type] = c
	}
	if c := conds[api.ConditionCRI]; c.Status != api.ConditionReady {
		t.Errorf("condition CRI: got %q; want Ready", c.Status)
	}
	if c := conds["provider/bad"]; c.Status != api.ConditionError || !strings.Contains(c.Message, "libvirt socket gone") {
		t.Errorf("condition provider/bad: got %+v; want Error with the health error", c)
	}
	if _, ok := last.GetMetrics()[MetricReplicas]; !ok {
		t.Errorf("heartbeat metrics: got %v; want %s", last.GetMetrics(), MetricReplicas)
	}

	// Health is refreshed every status interval, not per beat: a healed
	// provider clears its condition.
	bad.setHealth([]api.Condition{{Type: "provider/bad", Status: api.ConditionReady}}, nil)
	eventually(t, waitLong, "healed condition", func() error {
		beats := region.beats()
		for _, c := range apiproto.ConditionsFromPB(beats[len(beats)-1].GetConditions()) {
			if c.Type == "provider/bad" && c.Status != api.ConditionReady {
				return fmt.Errorf("provider/bad: got %s; want Ready", c.Status)
			}
		}
		return nil
	})
}

func TestSnapshotAppliesAndReportsInBatches(t *testing.T) {
	region := newFakeRegion(t)
	region.set(running("a", 1), running("b", 1), running("c", 1))
	p := newMemProvider("mem")
	ta := startAgent(t, region.endpoint(), withProviders(one(p)))

	ta.waitReady(t)
	eventually(t, waitLong, "ready statuses", func() error { return region.wantPhases(phases(api.PhaseReady, "a", "b", "c")) })
	if got := p.count("apply"); got != 3 {
		t.Errorf("apply calls: got %d; want 3", got)
	}
	if got := len(region.reportCalls()); got > 3 {
		t.Errorf("ReportStatus calls: got %d; want <= 3", got)
	}
	st, _ := region.status("a")
	if st.GetNode() != "node-1" || st.GetObservedGeneration() != 1 || st.GetProviderId() != "mem-a" || st.GetSince() == nil || st.GetUpdatedAt() == nil {
		t.Errorf("status of a: got %v; want node, generation 1, provider id, since, updatedAt", st)
	}
	beat := func() map[string]float64 { b := region.beats(); return b[len(b)-1].GetMetrics() }
	eventually(t, waitLong, "allocation metrics", func() error {
		m := beat()
		if m[MetricReplicas] != 3 || m[MetricMilliCPU] != 1500 || m[MetricMemoryMiB] != 768 {
			return fmt.Errorf("metrics: got %v; want 3 replicas, 1500 milli_cpu, 768 memory_mib", m)
		}
		return nil
	})
}

func TestDestroyDeletesWithGraceAndReports(t *testing.T) {
	tests := []struct {
		name      string
		grace     time.Duration
		wantGrace time.Duration
	}{
		{"spec grace", 3 * time.Second, 3 * time.Second},
		{"default grace", 0, defaultGrace},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			region := newFakeRegion(t)
			region.set(running("a", 1))
			p := newMemProvider("mem")
			ta := startAgent(t, region.endpoint(), withProviders(one(p)))
			ta.waitReady(t)
			eventually(t, waitLong, "ready", func() error { return region.wantPhases(phases(api.PhaseReady, "a")) })

			region.push([]*api.Assignment{destroyed("a", 2, tc.grace)})
			eventually(t, waitLong, "destroyed", func() error { return region.wantPhases(phases(api.PhaseDestroyed, "a")) })
			if got := p.count("delete"); got != 1 {
				t.Errorf("delete calls: got %d; want 1", got)
			}
			if g, _ := p.grace("a"); g != tc.wantGrace {
				t.Errorf("grace: got %s; want %s", g, tc.wantGrace)
			}
			if st, _ := region.status("a"); st.GetObservedGeneration() != 2 {
				t.Errorf("observed generation: got %d; want 2", st.GetObservedGeneration())
			}

			// The region deletes the record: nothing left to do.
			region.push(nil, "a")
			eventually(t, waitLong, "forgotten", func() error {
				ta.table.mu.Lock()
				defer ta.table.mu.Unlock()
				if _, ok := ta.table.replicas["a"]; ok {
					return errors.New("replica a still in the table")
				}
				return nil
			})
			if got := p.count("delete"); got != 1 {
				t.Errorf("delete calls after removal: got %d; want 1", got)
			}
		})
	}
}

func TestRemovedDeletesLocally(t *testing.T) {
	tests := []struct {
		name string
		push func(*fakeRegion)
	}{
		{"removed", func(r *fakeRegion) { r.push(nil, "a") }},
		{"moved to another node", func(r *fakeRegion) {
			moved := running("a", 2)
			moved.Node = "node-2"
			r.push([]*api.Assignment{moved})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			region := newFakeRegion(t)
			region.set(running("a", 1), running("b", 1))
			p := newMemProvider("mem")
			ta := startAgent(t, region.endpoint(), withProviders(one(p)))
			ta.waitReady(t)
			eventually(t, waitLong, "ready", func() error { return region.wantPhases(phases(api.PhaseReady, "a", "b")) })

			tc.push(region)
			eventually(t, waitLong, "deleted", wantCount(p, "delete", 1))
			if p.has("a") || !p.has("b") {
				t.Errorf("provider holds a=%v b=%v; want a deleted, b kept", p.has("a"), p.has("b"))
			}
			if got := p.count("apply"); got != 2 {
				t.Errorf("apply calls: got %d; want 2", got)
			}
		})
	}
}

func TestOrphansDeletedOnlyAfterSnapshot(t *testing.T) {
	region := newFakeRegion(t)
	p := newMemProvider("mem")
	p.hold("keep", 1, api.PhaseReady)
	p.hold("orphan", 1, api.PhaseReady)
	region.set(running("keep", 1))
	hold := make(chan struct{})
	region.configure(func(r *fakeRegion) { r.hold = hold })
	ta := startAgent(t, region.endpoint(), withProviders(one(p)))

	// Registered, heartbeating, stream open but no snapshot: nothing may
	// be touched.
	eventually(t, waitLong, "heartbeats before snapshot", func() error {
		if n := len(region.beats()); n < 5 {
			return fmt.Errorf("heartbeats: got %d; want >= 5", n)
		}
		return nil
	})
	for _, c := range []string{"delete", "apply"} {
		if got := p.count(c); got != 0 {
			t.Fatalf("%s calls before the snapshot: got %d; want 0", c, got)
		}
	}

	close(hold)
	ta.waitReady(t)
	eventually(t, waitLong, "orphan deleted", wantCount(p, "delete", 1))
	if p.has("orphan") || !p.has("keep") {
		t.Errorf("provider holds keep=%v orphan=%v; want keep only", p.has("keep"), p.has("orphan"))
	}
	eventually(t, waitLong, "adopted", func() error { return region.wantPhases(phases(api.PhaseReady, "keep")) })
	if got := p.count("apply"); got != 0 {
		t.Errorf("apply calls for an adopted replica: got %d; want 0", got)
	}

	// Region outage: the region's set changes (keep is gone) but the
	// agent cannot know; it must delete nothing while it cannot hear.
	region.stop()
	region.set()
	statusBefore := p.count("status")
	eventually(t, waitLong, "agent polling during the outage", func() error {
		if got := p.count("status"); got < statusBefore+5 {
			return fmt.Errorf("status polls during outage: got %d; want >= %d", got, statusBefore+5)
		}
		return nil
	})
	if got := p.count("delete"); got != 1 {
		t.Fatalf("delete calls during the outage: got %d; want 1 (the orphan only)", got)
	}

	// Back, with a snapshot that no longer has keep: now it goes.
	region.start(t)
	eventually(t, waitLong, "keep deleted after the new snapshot", wantCount(p, "delete", 2))
}

func TestSplitSnapshotKeepsLaterBatches(t *testing.T) {
	region := newFakeRegion(t)
	p := newMemProvider("mem")
	var asgs []*api.Assignment
	var ids []string
	for i := range 6 {
		id := fmt.Sprintf("r%d", i)
		p.hold(id, 1, api.PhaseReady)
		asgs = append(asgs, running(id, 1))
		ids = append(ids, id)
	}
	region.set(asgs...)
	// r0,r1 | r2,r3 | r4,r5: only the first batch is marked snapshot.
	region.configure(func(r *fakeRegion) { r.split = 2 })
	ta := startAgent(t, region.endpoint(), withProviders(one(p)))
	ta.waitReady(t)
	eventually(t, waitLong, "adopted", func() error { return region.wantPhases(phases(api.PhaseReady, ids...)) })
	// Ready waited past the orphan settle time, so a deletion would have
	// happened by now.
	if got := p.count("delete"); got != 0 {
		t.Errorf("delete calls: got %d; want 0 (later batches continue the snapshot)", got)
	}
	if got := p.count("apply"); got != 0 {
		t.Errorf("apply calls: got %d; want 0", got)
	}
}

func TestRestartAdoptsWithoutApplying(t *testing.T) {
	region := newFakeRegion(t)
	region.set(running("a", 1), running("b", 2), running("c", 3))
	p := newMemProvider("mem")
	first := startAgent(t, region.endpoint(), withProviders(one(p)))
	first.waitReady(t)
	eventually(t, waitLong, "first agent", func() error { return region.wantPhases(phases(api.PhaseReady, "a", "b", "c")) })
	first.stop(t)
	if got := p.count("delete"); got != 0 {
		t.Fatalf("delete calls on shutdown: got %d; want 0", got)
	}
	if p.isClosed() {
		t.Errorf("pre-built provider closed by the agent; want it left to its owner")
	}
	applies := p.count("apply")
	before := region.reportedIDs()

	second := startAgent(t, region.endpoint(), withProviders(one(p)))
	second.waitReady(t)
	eventually(t, waitLong, "statuses reported again", func() error {
		after := region.reportedIDs()
		for _, id := range []string{"a", "b", "c"} {
			if after[id] <= before[id] {
				return fmt.Errorf("%s: reported %d times; want more than %d", id, after[id], before[id])
			}
		}
		return region.wantPhases(phases(api.PhaseReady, "a", "b", "c"))
	})
	if got := p.count("apply") - applies; got != 0 {
		t.Errorf("apply calls after restart: got %d; want 0", got)
	}
	if got := p.count("delete"); got != 0 {
		t.Errorf("delete calls after restart: got %d; want 0", got)
	}
}

func TestRestartReappliesWhatChanged(t *testing.T) {
	tests := []struct {
		name  string
		held  api.Phase
		gen   int64
		apply bool
	}{
		{"same generation ready", api.PhaseReady, 1, false},
		{"older generation", api.PhaseReady, 0, true},
		{"same generation in error", api.PhaseError, 1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			region := newFakeRegion(t)
			region.set(running("a", 1))
			p := newMemProvider("mem")
			p.hold("a", tc.gen, tc.held)
			ta := startAgent(t, region.endpoint(), withProviders(one(p)))
			ta.waitReady(t)
			eventually(t, waitLong, "ready", func() error { return region.wantPhases(phases(api.PhaseReady, "a")) })
			want := 0
			if tc.apply {
				want = 1
			}
			if got := p.count("apply"); got != want {
				t.Errorf("apply calls: got %d; want %d", got, want)
			}
		})
	}
}

func TestApplyErrorRetriedWithBackoff(t *testing.T) {
	region := newFakeRegion(t)
	region.set(running("a", 1))
	p := newMemProvider("mem")
	p.setApplyErr(errors.New("containerd: connection refused"))
	startAgent(t, region.endpoint(), withProviders(one(p)))

	eventually(t, waitLong, "error reported", func() error {
		st, ok := region.status("a")
		if !ok || st.GetPhase() != string(api.PhaseError) || !strings.Contains(st.GetReason(), "connection refused") {
			return fmt.Errorf("status: got %v; want phase error with the apply error", st)
		}
		return nil
	})
	eventually(t, waitLong, "retries", func() error {
		if got := p.count("apply"); got < 4 {
			return fmt.Errorf("apply calls: got %d; want >= 4", got)
		}
		return nil
	})
	gaps := p.applyGaps()
	// retryMin 50ms doubling: 50, 100, 200 (jitter-free per-id backoff).
	for i, g := range gaps[:3] {
		want := 50 * time.Millisecond << i
		if g < want*9/10 {
			t.Errorf("gap before retry %d: got %s; want >= %s", i+1, g, want)
		}
	}
	p.setApplyErr(nil)
	eventually(t, waitLong, "healed", func() error { return region.wantPhases(phases(api.PhaseReady, "a")) })
}

func TestPollingReportsChanges(t *testing.T) {
	tests := []struct {
		name      string
		threshold int // above it the poller lists instead of calling Status
		wantCall  string
	}{
		{"status per replica", 16, "status"},
		{"list", 0, "list"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			region := newFakeRegion(t)
			region.set(running("a", 1), running("b", 1))
			p := newMemProvider("mem")
			ta := startAgent(t, region.endpoint(), withProviders(one(p)), withTimings(func(tm *timings) { tm.listThreshold = tc.threshold }))
			ta.waitReady(t)
			eventually(t, waitLong, "ready", func() error { return region.wantPhases(phases(api.PhaseReady, "a", "b")) })

			calls := p.count(tc.wantCall)
			p.setPhase("a", api.PhaseError, "exit code 137")
			eventually(t, waitLong, "error seen by polling", func() error {
				st, _ := region.status("a")
				if st.GetPhase() != string(api.PhaseError) || st.GetReason() != "exit code 137" {
					return fmt.Errorf("status: got %v; want error exit code 137", st)
				}
				return nil
			})
			if got := p.count(tc.wantCall); got <= calls {
				t.Errorf("%s calls: got %d; want more than %d", tc.wantCall, got, calls)
			}

			// A replica the provider lost is applied again.
			applies := p.count("apply")
			p.lose("b")
			eventually(t, waitLong, "lost replica re-applied", func() error {
				if got := p.count("apply"); got != applies+1 {
					return fmt.Errorf("apply calls: got %d; want %d", got, applies+1)
				}
				if !p.has("b") {
					return errors.New("b not back")
				}
				return region.wantPhases(phases(api.PhaseReady, "b"))
			})
		})
	}
}

func TestProvisionPolledFast(t *testing.T) {
	region := newFakeRegion(t)
	region.set(running("a", 1))
	p := newMemProvider("mem")
	p.provisionPolls = 3
	// A long status interval: only the fast poll can see ready in time.
	ta := startAgent(t, region.endpoint(), withProviders(one(p)), withConfig(func(c *config.Agent) { c.StatusInterval = time.Minute }))
	ta.waitReady(t)
	eventually(t, 5*time.Second, "ready by fast poll", func() error { return region.wantPhases(phases(api.PhaseReady, "a")) })
	if got := p.count("status"); got != 3 {
		t.Errorf("status calls: got %d; want 3", got)
	}
}

func TestWatcherPushesStatus(t *testing.T) {
	region := newFakeRegion(t)
	region.set(running("a", 1))
	p := newWatchProvider(newMemProvider("mem"))
	// An hour between polls: only a push can report in time.
	ta := startAgent(t, region.endpoint(), withProviders(map[string]provider.Provider{"mem": p}),
		withConfig(func(c *config.Agent) { c.StatusInterval = time.Hour }))
	ta.waitReady(t)
	eventually(t, waitLong, "ready", func() error { return region.wantPhases(phases(api.PhaseReady, "a")) })
	p.push(t, api.AssignmentStatus{ID: "a", Phase: api.PhaseError, Reason: "oom killed"})
	eventually(t, waitLong, "pushed status", func() error { return region.wantPhases(phases(api.PhaseError, "a")) })
}

// TestContainerChangeReported: a pod's sidecar restarted, its replica's
// own fields as they were (the provider's sweep pushes only the running
// pod it restarted): the new container status reaches the region.
func TestContainerChangeReported(t *testing.T) {
	region := newFakeRegion(t)
	region.set(running("a", 1))
	p := newWatchProvider(newMemProvider("mem"))
	ta := startAgent(t, region.endpoint(), withProviders(map[string]provider.Provider{"mem": p}),
		withConfig(func(c *config.Agent) { c.StatusInterval = time.Hour }))
	ta.waitReady(t)
	eventually(t, waitLong, "ready", func() error { return region.wantPhases(phases(api.PhaseReady, "a")) })
	pod := func(webRestarts int) api.AssignmentStatus {
		return api.AssignmentStatus{ID: "a", Phase: api.PhaseReady, ObservedGeneration: 1, Containers: []api.ContainerStatus{
			{Name: api.MainContainer, State: api.ContainerRunning, Ready: true},
			{Name: "web", State: api.ContainerRunning, Ready: true, Restarts: webRestarts},
		}}
	}
	for _, n := range []int{0, 1} {
		p.push(t, pod(n))
		eventually(t, waitLong, fmt.Sprintf("web restarted %d times at the region", n), func() error {
			st, _ := region.status("a")
			cs := st.GetContainers()
			if len(cs) != 2 || cs[1].GetName() != "web" || int(cs[1].GetRestarts()) != n {
				return fmt.Errorf("containers %v; want main and web restarted %d times", cs, n)
			}
			return nil
		})
	}
}

// TestWatchedProviderIsNotPolled checks that the poller stands by while
// the provider's watch is in place, and takes over when the watch ends.
func TestWatchedProviderIsNotPolled(t *testing.T) {
	region := newFakeRegion(t)
	region.set(running("a", 1))
	m := newMemProvider("mem")
	p := newWatchProvider(m)
	ta := startAgent(t, region.endpoint(), withProviders(map[string]provider.Provider{"mem": p}),
		withConfig(func(c *config.Agent) { c.StatusInterval = 20 * time.Millisecond }))
	ta.waitReady(t)
	// Taken only once the relist that starts a watch is done.
	p.push(t, api.AssignmentStatus{ID: "a", Phase: api.PhaseReady, Reason: "pushed"})
	eventually(t, waitLong, "pushed status", func() error {
		if st, _ := region.status("a"); st.GetReason() != "pushed" {
			return fmt.Errorf("status: got %v; want the pushed one", st)
		}
		return nil
	})

	// Health is refreshed every status interval, as the poller would
	// poll: five refreshes are five polls the poller stood by for.
	polls := m.count("status") + m.count("list")
	health := m.count("health")
	eventually(t, waitLong, "five status intervals", func() error {
		if got := m.count("health"); got < health+5 {
			return fmt.Errorf("health calls: got %d; want %d", got, health+5)
		}
		return nil
	})
	if got := m.count("status") + m.count("list"); got != polls {
		t.Errorf("status and list calls while watched: got %d; want %d (no polling)", got, polls)
	}

	// The watch ends and cannot be made again (a plugin down): polling
	// reports what nobody pushes.
	p.end(true)
	m.setPhase("a", api.PhaseError, "exit code 137")
	eventually(t, waitLong, "error seen by polling", func() error {
		if st, _ := region.status("a"); st.GetPhase() != string(api.PhaseError) || st.GetReason() != "exit code 137" {
			return fmt.Errorf("status: got %v; want error exit code 137", st)
		}
		return nil
	})
}

// TestWatchRelistsAfterBreak checks that what changed while there was no
// watch is found by the relist that starts the next one: nothing is
// missed, without polling.
func TestWatchRelistsAfterBreak(t *testing.T) {
	region := newFakeRegion(t)
	region.set(running("a", 1))
	m := newMemProvider("mem")
	p := newWatchProvider(m)
	ta := startAgent(t, region.endpoint(), withProviders(map[string]provider.Provider{"mem": p}),
		withConfig(func(c *config.Agent) { c.StatusInterval = time.Hour }))
	ta.waitReady(t)
	eventually(t, waitLong, "ready", func() error { return region.wantPhases(phases(api.PhaseReady, "a")) })

	p.end(true)
	// Changed while the agent cannot watch, so never pushed.
	m.setPhase("a", api.PhaseError, "exit code 137")
	p.setUnavailable(false)
	eventually(t, waitLong, "the change found by the relist of the next watch", func() error {
		if st, _ := region.status("a"); st.GetPhase() != string(api.PhaseError) || st.GetReason() != "exit code 137" {
			return fmt.Errorf("status: got %v; want error exit code 137", st)
		}
		return nil
	})
}

// TestPushDuringApplyRechecked checks that a push the agent cannot take,
// because the replica is being applied, makes it ask for the status once
// the Apply is done: the Apply's answer may be older than the push.
func TestPushDuringApplyRechecked(t *testing.T) {
	region := newFakeRegion(t)
	m := newMemProvider("mem")
	m.applyGate = make(chan struct{})
	m.diesAfterApply = "exit code 137"
	p := newWatchProvider(m)
	ta := startAgent(t, region.endpoint(), withProviders(map[string]provider.Provider{"mem": p}),
		withConfig(func(c *config.Agent) { c.StatusInterval = time.Hour }))
	ta.waitReady(t)
	// The second push is taken once the agent took the first, which is
	// after the relist that starts a watch: "a" comes after it, so that
	// only the push below can tell the agent to look again.
	p.push(t, api.AssignmentStatus{ID: "unknown-1"})
	p.push(t, api.AssignmentStatus{ID: "unknown-2"})
	region.push([]*api.Assignment{running("a", 1)})
	eventually(t, waitLong, "Apply called", wantCount(m, "apply", 1))
	p.push(t, api.AssignmentStatus{ID: "a", Phase: api.PhaseError, Reason: "exit code 137"})
	p.push(t, api.AssignmentStatus{ID: "unknown-3"}) // the agent took the one above
	close(m.applyGate)                               // Apply answers ready
	eventually(t, waitLong, "the status after the Apply", func() error {
		if st, _ := region.status("a"); st.GetPhase() != string(api.PhaseError) || st.GetReason() != "exit code 137" {
			return fmt.Errorf("status: got %v; want error exit code 137", st)
		}
		return nil
	})
}

// TestProgressDuringApplyReported checks that a provider's provision
// push while its Apply runs (an image pull's progress) reaches the
// region, and that the Apply's answer follows it.
func TestProgressDuringApplyReported(t *testing.T) {
	region := newFakeRegion(t)
	m := newMemProvider("mem")
	m.applyGate = make(chan struct{})
	p := newWatchProvider(m)
	ta := startAgent(t, region.endpoint(), withProviders(map[string]provider.Provider{"mem": p}),
		withConfig(func(c *config.Agent) { c.StatusInterval = time.Hour }))
	ta.waitReady(t)
	region.push([]*api.Assignment{running("a", 1)})
	eventually(t, waitLong, "Apply called", wantCount(m, "apply", 1))
	p.push(t, api.AssignmentStatus{ID: "a", ObservedGeneration: 1, Phase: api.PhaseProvision, Reason: "pulling image r/x:1: 1.0 of 4.0 MiB"})
	eventually(t, waitLong, "the progress reported", func() error {
		if st, _ := region.status("a"); st.GetPhase() != string(api.PhaseProvision) || st.GetReason() != "pulling image r/x:1: 1.0 of 4.0 MiB" {
			return fmt.Errorf("status: got %v; want provision with the pull's progress", st)
		}
		return nil
	})
	close(m.applyGate) // Apply answers ready
	eventually(t, waitLong, "the status after the Apply", func() error {
		if st, _ := region.status("a"); st.GetPhase() != string(api.PhaseReady) {
			return fmt.Errorf("status: got %v; want ready", st)
		}
		return nil
	})
}

func TestNoProviderForKind(t *testing.T) {
	region := newFakeRegion(t)
	vm := running("vm-1", 1)
	vm.Provider = api.ProviderVM
	region.set(vm, running("c-1", 1))
	p := newMemProvider("mem", api.ProviderContainer)
	ta := startAgent(t, region.endpoint(), withProviders(one(p)))
	ta.waitReady(t)
	eventually(t, waitLong, "statuses", func() error {
		if err := region.wantPhases(map[string]api.Phase{"vm-1": api.PhaseError, "c-1": api.PhaseReady}); err != nil {
			return err
		}
		st, _ := region.status("vm-1")
		if want := "no provider serves kind vm on this node"; st.GetReason() != want {
			return fmt.Errorf("reason: got %q; want %q", st.GetReason(), want)
		}
		return nil
	})
}

func TestNodeService(t *testing.T) {
	region := newFakeRegion(t)
	region.set(running("a", 1), running("b", 1), func() *api.Assignment {
		v := running("v", 1)
		v.Provider = api.ProviderVM
		return v
	}())
	logs := &logProvider{memProvider: newMemProvider("logs", api.ProviderContainer), logs: map[string]string{"a": "hello from a\n", "a.side": "hello from a's side\n"}}
	nologs := &errLogProvider{newMemProvider("nologs", api.ProviderVM)}
	ta := startAgent(t, region.endpoint(), withProviders(map[string]provider.Provider{"logs": logs, "nologs": nologs}))
	ta.waitReady(t)
	eventually(t, waitLong, "ready", func() error { return region.wantPhases(phases(api.PhaseReady, "a", "b", "v")) })

	cc, err := transport.Dial(ta.Addr(), transport.Insecure(), transport.AnyServer())
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := agentv1.NewNodeServiceClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()

	resp, err := client.Status(ctx, &agentv1.NodeStatusRequest{})
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	var ids []string
	for _, st := range resp.GetAssignments() {
		ids = append(ids, st.GetId()+"="+st.GetPhase())
	}
	if got, want := strings.Join(ids, ","), "a=ready,b=ready,v=ready"; got != want {
		t.Errorf("Status assignments: got %s; want %s", got, want)
	}
	if resp.GetNode() != "node-1" || resp.GetAgentVersion() == "" || resp.GetStartedAt() == nil || len(resp.GetConditions()) == 0 {
		t.Errorf("Status: got %v; want node, version, started_at and conditions", resp)
	}

	readLogs := func(id, container string) (string, error) {
		stream, err := client.Logs(ctx, &agentv1.NodeLogsRequest{AssignmentId: id, Container: container})
		if err != nil {
			return "", err
		}
		var b strings.Builder
		for {
			c, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				return b.String(), nil
			}
			if err != nil {
				return b.String(), err
			}
			b.Write(c.GetData())
		}
	}
	tests := []struct {
		id, container string
		want          string
		wantErr       error
		errText       string
	}{
		{id: "a", want: "hello from a\n"},
		{id: "a", container: "side", want: "hello from a's side\n"},
		{id: "a", container: "nope", wantErr: api.ErrNotFound, errText: "a.nope"},
		{id: "v", wantErr: api.ErrInvalid, errText: "provider nologs keeps no logs"},
		{id: "missing", wantErr: api.ErrNotFound},
	}
	for _, tc := range tests {
		got, err := readLogs(tc.id, tc.container)
		if tc.wantErr == nil {
			if err != nil || got != tc.want {
				t.Errorf("Logs(%s, container %q): got %q, %v; want %q", tc.id, tc.container, got, err, tc.want)
			}
			continue
		}
		if !errors.Is(err, tc.wantErr) || !strings.Contains(fmt.Sprint(err), tc.errText) {
			t.Errorf("Logs(%s, container %q): got error %v; want %v %q", tc.id, tc.container, err, tc.wantErr, tc.errText)
		}
	}
}

func TestReregistersOnRequest(t *testing.T) {
	region := newFakeRegion(t)
	startAgent(t, region.endpoint(), withProviders(one(newMemProvider("mem"))))
	eventually(t, waitLong, "registered", func() error {
		if n := len(region.beats()); n < 1 {
			return fmt.Errorf("heartbeats: got %d; want >= 1", n)
		}
		return nil
	})
	region.configure(func(r *fakeRegion) { r.reregister = true })
	eventually(t, waitLong, "registered again", func() error {
		if n := len(region.registered()); n != 2 {
			return fmt.Errorf("registrations: got %d; want 2", n)
		}
		return nil
	})
}

func TestStreamReconnects(t *testing.T) {
	region := newFakeRegion(t)
	region.set(running("a", 1))
	p := newMemProvider("mem")
	ta := startAgent(t, region.endpoint(), withProviders(one(p)))
	ta.waitReady(t)
	region.closeStreams()
	region.set(running("a", 1), running("b", 1))
	eventually(t, waitLong, "new snapshot applied", func() error { return region.wantPhases(phases(api.PhaseReady, "a", "b")) })
	if _, opened := region.openStreams(); opened < 2 {
		t.Errorf("streams opened: got %d; want >= 2", opened)
	}
	if got := p.count("apply"); got != 2 {
		t.Errorf("apply calls: got %d; want 2 (a adopted on the new snapshot)", got)
	}
}

func TestReportRetriedAfterFailure(t *testing.T) {
	region := newFakeRegion(t)
	region.configure(func(r *fakeRegion) { r.reportErr = fmt.Errorf("etcd down: %w", api.ErrUnavailable) })
	region.set(running("a", 1))
	p := newMemProvider("mem")
	ta := startAgent(t, region.endpoint(), withProviders(one(p)))
	ta.waitReady(t)
	eventually(t, waitLong, "report pending", func() error {
		if n := ta.reporter.len(); n == 0 {
			return errors.New("nothing pending")
		}
		return nil
	})
	region.configure(func(r *fakeRegion) { r.reportErr = nil })
	eventually(t, waitLong, "delivered after the failure", func() error { return region.wantPhases(phases(api.PhaseReady, "a")) })
}

// countingConn counts the calls to the region that a test cannot see on
// the server side (there is none).
type countingConn struct {
	grpc.ClientConnInterface
	registers atomic.Int64
}

func (c *countingConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	if method == agentv1.AgentService_Register_FullMethodName {
		c.registers.Add(1)
	}
	return c.ClientConnInterface.Invoke(ctx, method, args, reply, opts...)
}

func TestUnreachableRegionRetriesAndStopsPromptly(t *testing.T) {
	dead := ports.Addr(t) // reserved: nothing listens there
	cc, err := transport.Dial(dead, transport.Insecure(), transport.AnyServer())
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	conn := &countingConn{ClientConnInterface: cc}
	p := newMemProvider("mem")
	ta := startAgent(t, dead, withProviders(one(p)), func(o *Options, _ *timings) { o.RegionConn = conn })
	eventually(t, waitLong, "register retries", func() error {
		if n := conn.registers.Load(); n < 4 {
			return fmt.Errorf("register attempts: got %d; want >= 4", n)
		}
		return nil
	})
	start := time.Now()
	ta.stop(t)
	if d := time.Since(start); d > time.Second {
		t.Errorf("Run returned %s after cancel; want < 1s", d)
	}
	select {
	case <-ta.Ready():
		t.Errorf("Ready closed without a snapshot")
	default:
	}
}

func TestRegistryProvidersAreBuiltAndClosed(t *testing.T) {
	region := newFakeRegion(t)
	region.set(running("a", 1))
	built := newMemProvider("built")
	var gotOpts provider.Options
	reg := provider.NewRegistry()
	reg.Register("mem", func(_ context.Context, o provider.Options) (provider.Provider, error) {
		gotOpts = o
		return built, nil
	})
	ta := startAgent(t, region.endpoint(), func(o *Options, _ *timings) {
		o.Registry = reg
		o.Config.Providers = []config.Provider{{Name: "mem", Options: map[string]any{"k": "v"}}}
	})
	ta.waitReady(t)
	eventually(t, waitLong, "ready", func() error { return region.wantPhases(phases(api.PhaseReady, "a")) })
	ta.stop(t)
	if !built.isClosed() {
		t.Errorf("registry-built provider not closed on shutdown")
	}
	if got := built.count("delete"); got != 0 {
		t.Errorf("delete calls on shutdown: got %d; want 0", got)
	}
	if gotOpts.Name != "mem" || gotOpts.Node != "node-1" || gotOpts.Config["k"] != "v" || !strings.HasSuffix(gotOpts.DataDir, "providers/mem") || gotOpts.Logger == nil {
		t.Errorf("factory options: got %+v; want name, node, data dir <dataDir>/providers/mem, config, logger", gotOpts)
	}
}

func TestNewValidates(t *testing.T) {
	cfg := func(f func(*config.Agent)) *config.Agent {
		c := config.DefaultAgent()
		c.Node.Name = "n"
		c.Insecure = true
		f(c)
		return c
	}
	p := one(newMemProvider("mem"))
	tests := []struct {
		name    string
		o       Options
		wantErr string
	}{
		{"ok", Options{Config: cfg(func(*config.Agent) {}), Providers: p}, ""},
		{"no config", Options{}, "config is required"},
		{"no node name", Options{Config: cfg(func(c *config.Agent) { c.Node.Name = "" }), Providers: p}, "node.name"},
		{"in-process without registry", Options{Config: cfg(func(*config.Agent) {})}, "no registry"},
		{"no providers", Options{Config: cfg(func(c *config.Agent) { c.Providers = nil })}, "no providers"},
		{"no endpoint", Options{Config: cfg(func(c *config.Agent) { c.Region.Endpoint = "" }), Providers: p}, "region.endpoint"},
		{"no listen", Options{Config: cfg(func(c *config.Agent) { c.Listen.GRPC = "" }), Providers: p}, "listen.grpc"},
		{"no listen, node service off", Options{Config: cfg(func(c *config.Agent) { c.Listen.GRPC = "" }), Providers: p, DisableNodeService: true}, ""},
		{"negative concurrency", Options{Config: cfg(func(c *config.Agent) { c.Concurrency = -1 }), Providers: p}, "negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.o)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("New: got %v; want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("New: got %v; want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestManyAssignmentsReportedInBatches(t *testing.T) {
	const n, batch = 2000, 500
	mem := newMemProvider("mem")
	fk := fake.New(fake.Config{ApplyLatency: time.Millisecond}, fake.WithNode("node-1"))
	tests := []struct {
		name    string
		p       provider.Provider
		applies func() int64
	}{
		{"mem", mem, func() int64 { return int64(mem.count("apply")) }},
		{"fake", fk, fk.Applies},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The region holds every report until all n replicas are
			// applied: what gathers meanwhile must then go out in full
			// batches, whatever the speed of the machine.
			gate := make(chan struct{})
			region := newFakeRegion(t, func(r *fakeRegion) { r.reportGate = gate })
			asgs := make([]*api.Assignment, n)
			ids := make([]string, n)
			for i := range asgs {
				ids[i] = fmt.Sprintf("r%04d", i)
				asgs[i] = running(ids[i], 1)
			}
			region.set(asgs...)
			start := time.Now()
			ta := startAgent(t, region.endpoint(), withProviders(one(tc.p)),
				withConfig(func(c *config.Agent) { c.StatusInterval = time.Second; c.Concurrency = 8 }),
				// The held report waits for the region instead of timing
				// out and being sent again.
				withTimings(func(tm *timings) { tm.flushBatch, tm.regionCall = batch, time.Minute }))
			ta.waitReadyWhile(t, tc.applies)
			close(gate)
			eventually(t, 20*time.Second, "all ready", func() error { return region.wantPhases(phases(api.PhaseReady, ids...)) })
			elapsed := time.Since(start)
			calls := region.reportCalls()
			// At most one report was in flight while the replicas were
			// applied; everything else was pending at the release.
			if want := 1 + (n+batch-1)/batch; len(calls) > want {
				t.Errorf("ReportStatus calls: got %d; want <= %d (one held, the rest in batches of %d)", len(calls), want, batch)
			}
			for i, c := range calls {
				if len(c) > batch {
					t.Errorf("report %d: got %d statuses; want <= %d", i, len(c), batch)
				}
			}
			if got := tc.applies(); got != n {
				t.Errorf("apply calls: got %d; want %d", got, n)
			}
			t.Logf("%d assignments ready in %s with %d ReportStatus calls", n, elapsed, len(calls))
		})
	}
}

func TestRestartWithFakeProvider(t *testing.T) {
	region := newFakeRegion(t)
	var asgs []*api.Assignment
	var ids []string
	for i := range 20 {
		ids = append(ids, fmt.Sprintf("f%02d", i))
		asgs = append(asgs, running(ids[i], 1))
	}
	region.set(asgs...)
	f := fake.New(fake.Config{ApplyLatency: 5 * time.Millisecond}, fake.WithNode("node-1"))
	first := startAgent(t, region.endpoint(), withProviders(one(f)))
	first.waitReady(t)
	eventually(t, waitLong, "first agent", func() error { return region.wantPhases(phases(api.PhaseReady, ids...)) })
	first.stop(t)
	applies := f.Applies()

	// The region dropped one replica while the agent was down.
	region.set(asgs[1:]...)
	second := startAgent(t, region.endpoint(), withProviders(one(f)))
	second.waitReady(t)
	if got := f.Applies() - applies; got != 0 {
		t.Errorf("apply calls after restart: got %d; want 0", got)
	}
	if got := f.Deletes(); got != 1 {
		t.Errorf("delete calls: got %d; want 1 (the dropped replica)", got)
	}
	if got := f.Len(); got != len(ids)-1 {
		t.Errorf("replicas on the node: got %d; want %d", got, len(ids)-1)
	}
}

// buildFakePlugin builds the fake provider's plugin binary.
func buildFakePlugin(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		testenv.Missing(t, "the go tool (to build the fake plugin)", err)
	}
	bin := filepath.Join(t.TempDir(), "fakeplugin")
	cmd := exec.CommandContext(t.Context(), goTool, "build", "-o", bin, "github.com/stratahq/strata/providers/fake/fakeplugin")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build fakeplugin: %v\n%s", err, out)
	}
	return bin
}

// serveSocket serves p on a unix socket until the test ends.
func serveSocket(t *testing.T, p provider.Provider) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "mem.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- provider.Serve(ctx, p, sock, nil) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	eventually(t, waitLong, "socket", func() error {
		_, err := os.Stat(sock)
		return err
	})
	return sock
}

func TestConfiguredWireProviders(t *testing.T) {
	tests := []struct {
		name     string
		provider func(t *testing.T) config.Provider
		wantLogs bool
	}{
		{"socket", func(t *testing.T) config.Provider {
			return config.Provider{Name: "mem", Socket: serveSocket(t, newMemProvider("mem"))}
		}, false},
		{"plugin", func(t *testing.T) config.Provider {
			return config.Provider{Name: "fake", Plugin: buildFakePlugin(t), Options: map[string]any{"applyLatency": "5ms"}}
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			region := newFakeRegion(t)
			region.set(running("a", 1), running("b", 1))
			pc := tc.provider(t)
			ta := startAgent(t, region.endpoint(), withConfig(func(c *config.Agent) { c.Providers = []config.Provider{pc} }))
			ta.waitReady(t)
			eventually(t, waitLong, "ready through the wire", func() error { return region.wantPhases(phases(api.PhaseReady, "a", "b")) })
			regs := region.registered()
			if n := apiproto.NodeFromPB(regs[0]); len(n.Providers) != 1 || n.Providers[0].Name != pc.Name || !n.Serves(api.ProviderContainer) {
				t.Errorf("registered providers: got %+v; want %s serving container", n.Providers, pc.Name)
			}

			cc, err := transport.Dial(ta.Addr(), transport.Insecure(), transport.AnyServer())
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			stream, err := agentv1.NewNodeServiceClient(cc).Logs(t.Context(), &agentv1.NodeLogsRequest{AssignmentId: "a"})
			if err != nil {
				t.Fatal(err)
			}
			var got []byte
			for {
				c, err := stream.Recv()
				if err != nil {
					if tc.wantLogs && !errors.Is(err, io.EOF) {
						t.Errorf("Logs: got %v; want the plugin's output", err)
					}
					if !tc.wantLogs && !strings.Contains(fmt.Sprint(err), "keeps no logs") {
						t.Errorf("Logs: got %v; want keeps no logs", err)
					}
					break
				}
				got = append(got, c.GetData()...)
			}
			if tc.wantLogs && len(got) == 0 {
				t.Errorf("Logs: got nothing; want the plugin's lines")
			}
		})
	}
}

// TestPluginPushes runs the fake as a plugin binary with an hour between
// polls: a replica that fails after it was ready is reported by the
// plugin's push, and after the plugin is killed (and restarted empty by
// the agent) the relist of the next watch finds the replica gone and
// applies it again.
func TestPluginPushes(t *testing.T) {
	region := newFakeRegion(t)
	exits := running("exits", 1)
	exits.Labels = map[string]string{fake.LabelFail: fake.FailExit}
	region.set(running("stays", 1), exits)
	pc := config.Provider{Name: "fake", Plugin: buildFakePlugin(t), Options: map[string]any{"applyLatency": "1ms"}}
	ta := startAgent(t, region.endpoint(), withConfig(func(c *config.Agent) {
		c.Providers = []config.Provider{pc}
		c.StatusInterval = time.Hour
	}))
	ta.waitReady(t)
	eventually(t, waitLong, "the exit pushed through the plugin", func() error {
		return region.wantPhases(map[string]api.Phase{"stays": api.PhaseReady, "exits": api.PhaseError})
	})

	pl, ok := ta.provs.list[0].closer.(*provider.Plugin)
	if !ok {
		t.Fatalf("provider closer: got %T; want *provider.Plugin", ta.provs.list[0].closer)
	}
	first := pl.PID()
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatalf("kill plugin: %v", err)
	}
	// The restarted fake holds nothing: "stays" is lost, found so by the
	// relist, and applied again.
	eventually(t, waitLong, "stays applied again in the restarted plugin", func() error {
		if pid := pl.PID(); pid == 0 || pid == first {
			return fmt.Errorf("plugin pid %d; want a restarted one", pid)
		}
		ls, err := pl.List(t.Context())
		if err != nil {
			return err
		}
		for _, l := range ls {
			if l.ID == "stays" && l.Status.Phase == api.PhaseReady {
				return region.wantPhases(map[string]api.Phase{"stays": api.PhaseReady})
			}
		}
		return fmt.Errorf("replicas of the restarted plugin: %+v", ls)
	})
}

func TestManyAgentsShareOneConnection(t *testing.T) {
	const agents, each = 100, 10
	region := newFakeRegion(t)
	var asgs []*api.Assignment
	want := map[string]api.Phase{}
	for i := range agents {
		for j := range each {
			a := running(fmt.Sprintf("n%03d-r%d", i, j), 1)
			a.Node = fmt.Sprintf("n%03d", i)
			asgs = append(asgs, a)
			want[a.ID] = api.PhaseReady
		}
	}
	region.set(asgs...)
	cc, err := transport.Dial(region.endpoint(), transport.Insecure(), transport.AnyServer())
	if err != nil {
		t.Fatal(err)
	}
	// Closed after the agents stop (cleanups run last-in first-out).
	t.Cleanup(func() { cc.Close() })
	start := time.Now()
	var all []*testAgent
	var fakes []*fake.Fake
	for i := range agents {
		f := fake.New(fake.Config{})
		fakes = append(fakes, f)
		all = append(all, startAgent(t, region.endpoint(), withProviders(one(f)), func(o *Options, _ *timings) {
			o.Config.Node.Name = fmt.Sprintf("n%03d", i)
			o.Config.StatusInterval = time.Second
			o.RegionConn = cc
			o.DisableNodeService = true
			o.Logger = nil
		}))
	}
	// Starting a hundred agents is a hundred registrations and streams,
	// then a thousand applies: progress is counted on both.
	progress := func() int64 {
		var n int64
		for _, f := range fakes {
			n += f.Applies()
		}
		_, opened := region.openStreams()
		return n + int64(len(region.registered())+opened)
	}
	for _, ta := range all {
		ta.waitReadyWhile(t, progress)
	}
	eventually(t, 20*time.Second, "all ready", func() error { return region.wantPhases(want) })
	t.Logf("%d agents × %d assignments ready in %s", agents, each, time.Since(start))
	if n := len(region.registered()); n != agents {
		t.Errorf("registrations: got %d; want %d", n, agents)
	}
}
