package fake_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/fake"
	"github.com/stratahq/strata/providers/provider"
	"github.com/stratahq/strata/providers/provider/providertest"
)

const waitFor = 10 * time.Second

// harness runs the suite against newProvider, which serves f; kills go
// to f, behind the provider's back. Without logs, f is served hiding its
// Logger and Watcher (noLogs).
func harness(f *fake.Fake, newProvider func(t *testing.T) provider.Provider, logs bool) providertest.Harness {
	h := providertest.Harness{
		New:          newProvider,
		Kinds:        api.ProviderKinds,
		Assignment:   assignment,
		ReadyTimeout: waitFor,
		SupportsLogs: logs,
		Watches:      logs,
		Exit: func(a *api.Assignment, code int32) {
			a.Spec.Compute = &api.ComputeSpec{Image: "busybox", RestartPolicy: api.RestartNever, Env: map[string]string{
				fake.EnvFail: fake.FailExit, fake.EnvExitCode: fmt.Sprint(code),
			}}
		},
	}
	if logs {
		h.Kill = func(t *testing.T, id string) {
			if !f.Kill(id) {
				t.Fatalf("Kill %s: the fake does not hold it", id)
			}
		}
	}
	return h
}

// assignment is a valid assignment of kind for the fake: anything goes,
// but a load balancer gets endpoints and everything an address, so that
// the paths that copy them run.
func assignment(_ *testing.T, kind api.ProviderKind, id string) *api.Assignment {
	a := &api.Assignment{
		ID:         id,
		Tenant:     "acme",
		Resource:   "web",
		Kind:       api.KindCompute,
		Provider:   kind,
		Desired:    api.DesiredRunning,
		Generation: 1,
		Network:    &api.NetworkAttachment{Network: "default", Address: "10.0.0.7"},
	}
	if kind == api.ProviderLoadbalancer {
		a.Kind = api.KindLoadbalancer
		a.Endpoints = []api.Endpoint{{Replica: "r1", Address: "10.0.0.8", Port: 80}}
	}
	return a
}

func TestConformance(t *testing.T) {
	f := fake.New(fake.Config{ApplyLatency: 5 * time.Millisecond, DeleteLatency: time.Millisecond})
	providertest.Run(t, harness(f, func(*testing.T) provider.Provider { return f }, true))
}

// TestConformanceOverWire runs the same suite against the fake served on
// a unix socket, through the client an agent uses for plugins.
func TestConformanceOverWire(t *testing.T) {
	f := fake.New(fake.Config{ApplyLatency: 5 * time.Millisecond, DeleteLatency: time.Millisecond})
	c := serve(t, f)
	providertest.Run(t, harness(f, func(*testing.T) provider.Provider { return c }, true))
}

// noLogs hides the fake's Logger and Watcher, as a provider without them.
type noLogs struct{ provider.Provider }

func TestConformanceOverWireWithoutLogs(t *testing.T) {
	f := fake.New(fake.Config{})
	c := serve(t, noLogs{f})
	providertest.Run(t, harness(f, func(*testing.T) provider.Provider { return c }, false))
}

// serve serves p on a unix socket until the test ends and returns a client
// of it once it answers.
func serve(t *testing.T, p provider.Provider) *provider.Client {
	t.Helper()
	socket := filepath.Join(t.TempDir(), "p.sock")
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- provider.Serve(ctx, p, socket, slog.New(slog.DiscardHandler)) }()
	c, conn, err := provider.Dial(socket)
	if err != nil {
		cancel()
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() {
		conn.Close()
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: got %v; want nil after its context ended", err)
		}
	})
	deadline := time.Now().Add(waitFor)
	for {
		_, err := c.Info(t.Context())
		if err == nil {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("server on %s not answering after %v: %v", socket, waitFor, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		done, state := cond()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not done after %v: %s", what, waitFor, state)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestApplyStatus(t *testing.T) {
	f := fake.New(fake.Config{}, fake.WithNode("n1"))
	tests := []struct {
		name      string
		a         *api.Assignment
		wantPhase api.Phase
		wantAddr  string
		wantBack  []api.BackendStatus
		wantWhy   string
	}{
		{
			name:      "container",
			a:         assignment(t, api.ProviderContainer, "c1"),
			wantPhase: api.PhaseReady,
			wantAddr:  "10.0.0.7",
		},
		{
			name:      "load balancer",
			a:         assignment(t, api.ProviderLoadbalancer, "lb1"),
			wantPhase: api.PhaseReady,
			wantAddr:  "10.0.0.7",
			wantBack:  []api.BackendStatus{{Replica: "r1", Address: "10.0.0.8", Port: 80, Health: "up"}},
		},
		{
			name:      "no network",
			a:         &api.Assignment{ID: "bare", Kind: api.KindCompute, Generation: 3},
			wantPhase: api.PhaseReady,
		},
		{
			name: "fail label",
			a: func() *api.Assignment {
				a := assignment(t, api.ProviderVM, "vm-fail")
				a.Labels = map[string]string{fake.LabelFail: fake.FailApply}
				return a
			}(),
			wantPhase: api.PhaseError,
			wantAddr:  "10.0.0.7",
			wantWhy:   fake.LabelFail,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, err := f.Apply(t.Context(), tc.a)
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if st.Phase != tc.wantPhase {
				t.Errorf("phase: got %q; want %q", st.Phase, tc.wantPhase)
			}
			if st.ID != tc.a.ID || st.Node != "n1" || st.ObservedGeneration != tc.a.Generation {
				t.Errorf("id, node, generation: got %q %q %d; want %q %q %d",
					st.ID, st.Node, st.ObservedGeneration, tc.a.ID, "n1", tc.a.Generation)
			}
			if want := "fake-" + tc.a.ID; st.ProviderID != want {
				t.Errorf("ProviderID: got %q; want %q", st.ProviderID, want)
			}
			if st.Address != tc.wantAddr {
				t.Errorf("address: got %q; want %q", st.Address, tc.wantAddr)
			}
			if fmt.Sprint(st.Backends) != fmt.Sprint(tc.wantBack) {
				t.Errorf("backends: got %v; want %v", st.Backends, tc.wantBack)
			}
			if !strings.Contains(st.Reason, tc.wantWhy) {
				t.Errorf("reason: got %q; want it to mention %q", st.Reason, tc.wantWhy)
			}
		})
	}
}

func TestApplyInvalid(t *testing.T) {
	f := fake.New(fake.Config{Kinds: []api.ProviderKind{api.ProviderContainer}})
	tests := []struct {
		name string
		a    *api.Assignment
		want error
	}{
		{"nil", nil, api.ErrInvalid},
		{"no id", &api.Assignment{Provider: api.ProviderContainer}, api.ErrInvalid},
		{"kind not served", &api.Assignment{ID: "v", Provider: api.ProviderVM}, provider.ErrUnsupported},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := f.Apply(t.Context(), tc.a); !errors.Is(err, tc.want) {
				t.Errorf("Apply: got %v; want %v", err, tc.want)
			}
		})
	}
	if f.Len() != 0 {
		t.Errorf("Len: got %d; want 0", f.Len())
	}
}

func TestApplySameGenerationDoesNotSleep(t *testing.T) {
	f := fake.New(fake.Config{ApplyLatency: 50 * time.Millisecond})
	a := assignment(t, api.ProviderContainer, "c1")
	if _, err := f.Apply(t.Context(), a); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	// With its context already cancelled, an Apply that had to sleep
	// would fail: success shows it did not.
	done, cancel := context.WithCancel(t.Context())
	cancel()
	st, err := f.Apply(done, a)
	if err != nil {
		t.Fatalf("second Apply: got %v; want the status at once", err)
	}
	if st.Phase != api.PhaseReady {
		t.Errorf("second Apply: got phase %q; want ready", st.Phase)
	}
	next := *a
	next.Generation++
	if _, err := f.Apply(done, &next); !errors.Is(err, context.Canceled) {
		t.Errorf("Apply of a new generation with a cancelled context: got %v; want context.Canceled", err)
	}
	if got := f.Applies(); got != 3 {
		t.Errorf("Applies: got %d; want 3", got)
	}
}

func TestLatencyHonoursContext(t *testing.T) {
	f := fake.New(fake.Config{ApplyLatency: time.Hour, DeleteLatency: time.Hour})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := f.Apply(ctx, assignment(t, api.ProviderVM, "slow")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Apply: got %v; want context.DeadlineExceeded", err)
	}
	if f.Len() != 0 {
		t.Errorf("Len after an interrupted Apply: got %d; want 0", f.Len())
	}
}

func TestFailureRate(t *testing.T) {
	tests := []struct {
		rate      float64
		wantError int
	}{
		{0, 0},
		{1, 20},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.rate), func(t *testing.T) {
			f := fake.New(fake.Config{FailureRate: tc.rate})
			if got := phases(t, f, 20)[api.PhaseError]; got != tc.wantError {
				t.Errorf("replicas in error: got %d; want %d", got, tc.wantError)
			}
		})
	}
	t.Run("seeded", func(t *testing.T) {
		a := phaseList(t, fake.New(fake.Config{FailureRate: 0.5, Seed: 7}), 64)
		b := phaseList(t, fake.New(fake.Config{FailureRate: 0.5, Seed: 7}), 64)
		if a != b {
			t.Errorf("two fakes with the same seed: got %s and %s; want the same failures", a, b)
		}
		if !strings.Contains(a, "e") || !strings.Contains(a, "r") {
			t.Errorf("failure rate 0.5: got %s; want both failures and successes", a)
		}
	})
}

func phases(t *testing.T, f *fake.Fake, n int) map[api.Phase]int {
	t.Helper()
	out := map[api.Phase]int{}
	for i := range n {
		st, err := f.Apply(t.Context(), assignment(t, api.ProviderContainer, fmt.Sprint("r", i)))
		if err != nil {
			t.Fatalf("Apply: %v", err)
		}
		out[st.Phase]++
	}
	return out
}

func phaseList(t *testing.T, f *fake.Fake, n int) string {
	t.Helper()
	var b strings.Builder
	for i := range n {
		st, err := f.Apply(t.Context(), assignment(t, api.ProviderContainer, fmt.Sprint("r", i)))
		if err != nil {
			t.Fatalf("Apply: %v", err)
		}
		b.WriteString(string(st.Phase[:1]))
	}
	return b.String()
}

func TestExitLabel(t *testing.T) {
	f := fake.New(fake.Config{}, fake.WithExitDelay(20*time.Millisecond))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	events, err := f.Watch(ctx)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	a := assignment(t, api.ProviderContainer, "crashy")
	a.Labels = map[string]string{fake.LabelFail: fake.FailExit}
	st, err := f.Apply(t.Context(), a)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if st.Phase != api.PhaseReady {
		t.Fatalf("Apply: got phase %q; want ready before the exit", st.Phase)
	}
	exited := next(t, events, func(st api.AssignmentStatus) bool { return st.Phase == api.PhaseError })
	if exited.ExitCode == nil || *exited.ExitCode != 1 {
		t.Errorf("exit code: got %v; want 1", exited.ExitCode)
	}
	if got, _ := f.Status(t.Context(), a.ID); got.Phase != api.PhaseError || got.Reason == "" {
		t.Errorf("Status after the exit: got phase %q reason %q; want error with a reason", got.Phase, got.Reason)
	}

	// Applying the same generation again retries, like a restart.
	st, err = f.Apply(t.Context(), a)
	if err != nil {
		t.Fatalf("Apply after the exit: %v", err)
	}
	if st.Phase != api.PhaseReady || st.Restarts != 1 || st.ExitCode != nil {
		t.Errorf("Apply after the exit: got phase %q, %d restarts, exit code %v; want ready, 1, none",
			st.Phase, st.Restarts, st.ExitCode)
	}

	// A deletion before the next exit stops it, and is watched too.
	if err := f.Delete(t.Context(), &api.Assignment{ID: a.ID}, 0); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	next(t, events, func(st api.AssignmentStatus) bool { return st.Phase == api.PhaseDestroyed })

	cancel()
	eventually(t, "watch channel closed", func() (bool, string) {
		for {
			select {
			case _, ok := <-events:
				if !ok {
					return true, ""
				}
			default:
				return false, "still open"
			}
		}
	})
}

// next returns the first watched status of which match holds.
func next(t *testing.T, events <-chan api.AssignmentStatus, match func(api.AssignmentStatus) bool) api.AssignmentStatus {
	t.Helper()
	timeout := time.After(waitFor)
	for {
		select {
		case st, ok := <-events:
			if !ok {
				t.Fatalf("watch closed early")
			}
			if match(st) {
				return st
			}
		case <-timeout:
			t.Fatalf("no matching watched status after %v", waitFor)
		}
	}
}

func TestHealth(t *testing.T) {
	f := fake.New(fake.Config{}, fake.WithName("fake-a"))
	tests := []struct {
		name string
		set  []api.Condition
		want []api.Condition
	}{
		{"default", nil, []api.Condition{{Type: "provider/fake-a", Status: api.ConditionReady}}},
		{
			"injected",
			[]api.Condition{{Type: "CRI", Status: api.ConditionWarning, Reason: "slow"}},
			[]api.Condition{{Type: "CRI", Status: api.ConditionWarning, Reason: "slow"}},
		},
		{"reset", nil, []api.Condition{{Type: "provider/fake-a", Status: api.ConditionReady}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f.SetHealth(tc.set)
			got, err := f.Health(t.Context())
			if err != nil {
				t.Fatalf("Health: %v", err)
			}
			for i := range got {
				got[i].Since = time.Time{}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("Health: got %v; want %v", got, tc.want)
			}
		})
	}
}

func TestLogs(t *testing.T) {
	f := fake.New(fake.Config{}, fake.WithLogInterval(5*time.Millisecond))
	if _, err := f.Apply(t.Context(), assignment(t, api.ProviderContainer, "c1")); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	t.Run("all", func(t *testing.T) {
		var buf bytes.Buffer
		if err := f.Logs(t.Context(), "c1", provider.LogOptions{}, &buf); err != nil {
			t.Fatalf("Logs: %v", err)
		}
		if n := strings.Count(buf.String(), "c1"); n < 3 {
			t.Errorf("Logs: got %q; want at least 3 lines mentioning c1", buf.String())
		}
	})
	t.Run("tail", func(t *testing.T) {
		var buf bytes.Buffer
		if err := f.Logs(t.Context(), "c1", provider.LogOptions{TailLines: 1}, &buf); err != nil {
			t.Fatalf("Logs: %v", err)
		}
		if got := strings.Count(buf.String(), "\n"); got != 1 {
			t.Errorf("Logs with TailLines 1: got %d lines; want 1", got)
		}
	})
	t.Run("follow", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		var buf bytes.Buffer
		if err := f.Logs(ctx, "c1", provider.LogOptions{Follow: true, TailLines: 1}, &buf); err != nil {
			t.Fatalf("following Logs: got %v; want nil when its context ends", err)
		}
		if got := strings.Count(buf.String(), "\n"); got < 3 {
			t.Errorf("following Logs for 100ms at 5ms: got %d lines; want more", got)
		}
	})
	t.Run("unknown", func(t *testing.T) {
		if err := f.Logs(t.Context(), "nope", provider.LogOptions{}, &bytes.Buffer{}); !errors.Is(err, api.ErrNotFound) {
			t.Errorf("Logs of an unknown replica: got %v; want api.ErrNotFound", err)
		}
	})
}

func TestCounters(t *testing.T) {
	f := fake.New(fake.Config{})
	for i := range 3 {
		if _, err := f.Apply(t.Context(), assignment(t, api.ProviderVM, fmt.Sprint("v", i))); err != nil {
			t.Fatalf("Apply: %v", err)
		}
	}
	for _, id := range []string{"v0", "v0", "missing"} {
		if err := f.Delete(t.Context(), &api.Assignment{ID: id}, 0); err != nil {
			t.Fatalf("Delete %s: %v", id, err)
		}
	}
	if f.Applies() != 3 || f.Deletes() != 3 || f.Len() != 2 {
		t.Errorf("Applies, Deletes, Len: got %d, %d, %d; want 3, 3, 2", f.Applies(), f.Deletes(), f.Len())
	}
}

func TestFactory(t *testing.T) {
	tests := []struct {
		name    string
		cfg     map[string]any
		wantErr error
		errHas  string
		check   func(t *testing.T, f *fake.Fake)
	}{
		{
			name: "keys as viper gives them",
			cfg: map[string]any{
				"applylatency":  "30ms",
				"DeleteLatency": "1s",
				"failurerate":   1.0,
				"kinds":         []any{"vm"},
				"seed":          42,
			},
			check: func(t *testing.T, f *fake.Fake) {
				info, _ := f.Info(t.Context())
				if fmt.Sprint(info.Kinds) != "[vm]" {
					t.Errorf("kinds: got %v; want [vm]", info.Kinds)
				}
				start := time.Now()
				st, err := f.Apply(t.Context(), assignment(t, api.ProviderVM, "v"))
				if err != nil {
					t.Fatalf("Apply: %v", err)
				}
				if took := time.Since(start); took < 30*time.Millisecond {
					t.Errorf("Apply took %v; want at least the 30ms applyLatency", took)
				}
				if st.Phase != api.PhaseError {
					t.Errorf("phase with failureRate 1: got %q; want error", st.Phase)
				}
			},
		},
		{name: "empty", cfg: nil},
		{name: "unknown option", cfg: map[string]any{"applyLatncy": "1s"}, wantErr: api.ErrInvalid, errHas: "applyLatncy"},
		{name: "bad duration", cfg: map[string]any{"applyLatency": "soon"}, wantErr: api.ErrInvalid, errHas: "ApplyLatency"},
		{name: "negative jitter", cfg: map[string]any{"applyJitter": "-1s"}, wantErr: api.ErrInvalid, errHas: "applyJitter"},
		{name: "rate above 1", cfg: map[string]any{"failureRate": 2}, wantErr: api.ErrInvalid, errHas: "failureRate"},
		{name: "unknown kind", cfg: map[string]any{"kinds": []any{"gpu"}}, wantErr: api.ErrInvalid, errHas: "gpu"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := fake.Factory(t.Context(), provider.Options{Name: "f", Node: "n1", Config: tc.cfg})
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("Factory: got %v; want %v naming %q", err, tc.wantErr, tc.errHas)
				}
				return
			}
			if err != nil {
				t.Fatalf("Factory: %v", err)
			}
			if tc.check != nil {
				tc.check(t, p.(*fake.Fake))
			}
		})
	}
}

// BenchmarkFakeApply measures creating a replica, then applying it again
// unchanged (what an agent's resync does most).
func BenchmarkFakeApply(b *testing.B) {
	ctx := context.Background()
	b.Run("create", func(b *testing.B) {
		f := fake.New(fake.Config{})
		a := &api.Assignment{Kind: api.KindCompute, Provider: api.ProviderContainer, Generation: 1}
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			a.ID = fmt.Sprint("r", i)
			i++
			if _, err := f.Apply(ctx, a); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unchanged", func(b *testing.B) {
		f := fake.New(fake.Config{})
		a := &api.Assignment{ID: "r", Kind: api.KindCompute, Provider: api.ProviderContainer, Generation: 1}
		if _, err := f.Apply(ctx, a); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := f.Apply(ctx, a); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

// TestHealthFile injects conditions through the healthFile option, as a
// test does into a fake running inside an agent process.
func TestHealthFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "health.json")
	p, err := fake.Factory(t.Context(), provider.Options{Name: "fake-h", Node: "n1", Config: map[string]any{"healthFile": path}})
	if err != nil {
		t.Fatalf("Factory: %v", err)
	}
	f := p.(*fake.Fake)
	ready := []api.Condition{{Type: "provider/fake-h", Status: api.ConditionReady}}
	injected := []api.Condition{{Type: "CRI", Status: api.ConditionError, Reason: "RuntimeDown", Message: "injected"}}
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		prepare func()
		want    []api.Condition
		wantErr bool
	}{
		{"no file", func() {}, ready, false},
		{"conditions", func() {
			write(`[{"type":"CRI","status":"Error","reason":"RuntimeDown","message":"injected"}]`)
		}, injected, false},
		{"read on every call", func() { write(`[{"type":"CNI","status":"Warning"}]`) },
			[]api.Condition{{Type: "CNI", Status: api.ConditionWarning}}, false},
		{"empty array", func() { write(`[]`) }, []api.Condition{}, false},
		{"SetHealth wins", func() { f.SetHealth(injected) }, injected, false},
		{"SetHealth reset", func() { f.SetHealth(nil) }, []api.Condition{}, false},
		{"malformed", func() { write(`[{"type":`) }, nil, true},
		{"removed", func() {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}, ready, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.prepare()
			got, err := f.Health(t.Context())
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), path) {
					t.Fatalf("Health: got %v, %v; want an error naming %s", got, err, path)
				}
				return
			}
			if err != nil {
				t.Fatalf("Health: %v", err)
			}
			for i := range got {
				got[i].Since = time.Time{}
			}
			if got == nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("Health: got %#v; want %#v", got, tc.want)
			}
		})
	}
}

// TestApplyLatencyOf checks that the jitter spreads latencies over
// [ApplyLatency, ApplyLatency+ApplyJitter), the same for the same ID.
func TestApplyLatencyOf(t *testing.T) {
	cfg := fake.Config{ApplyLatency: 50 * time.Millisecond, ApplyJitter: 150 * time.Millisecond}
	seen := map[time.Duration]bool{}
	for i := range 200 {
		id := fmt.Sprintf("r-%d", i)
		got := cfg.ApplyLatencyOf(id)
		if got < 50*time.Millisecond || got >= 200*time.Millisecond {
			t.Fatalf("ApplyLatencyOf(%s): got %v; want in [50ms, 200ms)", id, got)
		}
		if again := cfg.ApplyLatencyOf(id); again != got {
			t.Fatalf("ApplyLatencyOf(%s): got %v, then %v; want the same", id, got, again)
		}
		seen[got.Truncate(10*time.Millisecond)] = true
	}
	if len(seen) < 10 {
		t.Errorf("200 IDs fell in %d 10ms buckets; want a spread over at least 10 of 15", len(seen))
	}
	if got := (fake.Config{ApplyLatency: time.Second}).ApplyLatencyOf("x"); got != time.Second {
		t.Errorf("without jitter: got %v; want 1s", got)
	}
}

// FailUnready keeps a replica running but never ready: phase provision,
// its main container running and not ready.
func TestUnreadyKnob(t *testing.T) {
	f := fake.New(fake.Config{})
	a := assignment(t, api.ProviderContainer, "unready")
	a.Labels = map[string]string{fake.LabelFail: fake.FailUnready}
	st, err := f.Apply(t.Context(), a)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if st.Phase != api.PhaseProvision || len(st.Containers) != 1 || st.Containers[0].State != api.ContainerRunning || st.Containers[0].Ready {
		t.Fatalf("Apply: got phase %q, containers %+v; want provision, main running and not ready", st.Phase, st.Containers)
	}
	if got, _ := f.Status(t.Context(), a.ID); got.Phase != api.PhaseProvision {
		t.Errorf("Status: got phase %q; want provision", got.Phase)
	}
}

// TestUsage checks that Usage reports what SetUsage set, for replicas
// the fake holds only: not before they are applied, nor after they are
// deleted (a new replica of the same id starts unmeasured).
func TestUsage(t *testing.T) {
	f := fake.New(fake.Config{})
	web := api.Usage{CPUSeconds: 12.5, MemoryMiB: 64}
	if f.SetUsage("web-1", web) {
		t.Errorf("SetUsage of a replica not held: got true; want false")
	}
	for _, id := range []string{"web-1", "web-2", "lb-1"} {
		if _, err := f.Apply(t.Context(), assignment(t, api.ProviderContainer, id)); err != nil {
			t.Fatalf("Apply %s: %v", id, err)
		}
	}
	lb := api.Usage{Requests: 1000, Sessions: 3}
	if !f.SetUsage("web-1", web) || !f.SetUsage("lb-1", lb) {
		t.Fatalf("SetUsage of held replicas: got false; want true")
	}
	usage := func() map[string]api.Usage {
		u, err := f.Usage(t.Context())
		if err != nil {
			t.Fatalf("Usage: %v", err)
		}
		return u
	}
	if got := usage(); len(got) != 2 || got["web-1"] != web || got["lb-1"] != lb {
		t.Errorf("Usage: got %+v; want web-1 %+v and lb-1 %+v (web-2 unmeasured)", got, web, lb)
	}
	if err := f.Delete(t.Context(), &api.Assignment{ID: "web-1"}, 0); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := f.Apply(t.Context(), assignment(t, api.ProviderContainer, "web-1")); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if got := usage(); len(got) != 1 || got["lb-1"] != lb {
		t.Errorf("Usage after web-1 was deleted and applied again: got %+v; want lb-1 alone", got)
	}
}
