package provider_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
	"github.com/stratahq/strata/providers/provider/providertest"
	"github.com/stratahq/strata/testkit/testenv"
)

// buildFakePlugin builds providers/fake/fakeplugin, the fake served by
// PluginMain, into a temporary directory.
func buildFakePlugin(t *testing.T) string {
	t.Helper()
	goTool := testenv.LookPath(t, "go")
	bin := filepath.Join(t.TempDir(), "fakeplugin")
	cmd := exec.CommandContext(t.Context(), goTool, "build", "-o", bin, "github.com/stratahq/strata/providers/fake/fakeplugin")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build fakeplugin: %v\n%s", err, out)
	}
	return bin
}

func startPlugin(t *testing.T, cfg provider.PluginConfig, opts ...provider.PluginOption) *provider.Plugin {
	t.Helper()
	p, err := provider.StartPlugin(t.Context(), cfg, testLogger(t), opts...)
	if err != nil {
		t.Fatalf("StartPlugin: %v", err)
	}
	t.Cleanup(func() {
		pid := p.PID()
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if pid != 0 && alive(pid) {
			t.Errorf("plugin process %d: still there after Close; want it gone", pid)
		}
	})
	return p
}

// alive reports whether a process with this pid runs. A zombie does not:
// an orphaned plugin is reaped by whatever is PID 1, which in a container
// may never do it.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, fs.ErrNotExist)
	}
	// pid (comm) state ...; comm may hold spaces and parentheses.
	_, rest, _ := strings.Cut(string(stat[bytes.LastIndexByte(stat, ')')+1:]), " ")
	return !strings.HasPrefix(rest, "Z")
}

func TestPlugin(t *testing.T) {
	bin := buildFakePlugin(t)
	dir := t.TempDir()

	t.Run("Conformance", func(t *testing.T) {
		p := startPlugin(t, provider.PluginConfig{
			Name:    "fake",
			Binary:  bin,
			Socket:  filepath.Join(dir, "conf.sock"),
			Options: map[string]any{"applyLatency": "5ms", "deleteLatency": "1ms"},
			Node:    "n1",
		})
		providertest.Run(t, providertest.Harness{
			New:          func(*testing.T) provider.Provider { return p },
			Kinds:        api.ProviderKinds,
			Assignment:   pluginAssignment,
			ReadyTimeout: waitFor,
			SupportsLogs: true,
			// The fake lives in the plugin's process, out of the test's
			// reach: testPluginWatch has its replica exit instead.
			Watches: true,
		})
	})

	t.Run("Crash", func(t *testing.T) { testPluginCrash(t, bin, dir) })

	t.Run("Watch", func(t *testing.T) { testPluginWatch(t, bin, dir) })

	t.Run("DiesWithAgent", func(t *testing.T) { testPluginDiesWithAgent(t, bin) })

	t.Run("CloseWhileFollowingLogs", func(t *testing.T) {
		const grace = 5 * time.Second
		p := startPlugin(t, provider.PluginConfig{Name: "follow", Binary: bin, DataDir: dir}, provider.WithStopGrace(grace))
		a := pluginAssignment(t, api.ProviderContainer, "c1")
		if _, err := p.Apply(t.Context(), a); err != nil {
			t.Fatalf("Apply: %v", err)
		}
		following := make(chan error, 1)
		started := make(chan struct{})
		go func() {
			following <- p.Logs(t.Context(), a.ID, provider.LogOptions{Follow: true}, writerFunc(func(b []byte) (int, error) {
				select {
				case <-started:
				default:
					close(started)
				}
				return len(b), nil
			}))
		}()
		select {
		case <-started:
		case err := <-following:
			t.Fatalf("following Logs ended before Close: %v", err)
		case <-time.After(waitFor):
			t.Fatalf("following Logs wrote nothing within %v", waitFor)
		}
		start := time.Now()
		if err := p.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		// The plugin stops serving once its streams end; Close ends them
		// instead of letting the plugin wait the grace out.
		if took := time.Since(start); took > grace/2 {
			t.Errorf("Close with a following Logs: took %v; want well under the %v grace", took, grace)
		}
		select {
		case err := <-following:
			if !errors.Is(err, api.ErrUnavailable) {
				t.Errorf("following Logs across Close: got %v; want api.ErrUnavailable", err)
			}
		case <-time.After(waitFor):
			t.Fatalf("following Logs did not end within %v of Close", waitFor)
		}
	})

	t.Run("StartFails", func(t *testing.T) {
		tests := []struct {
			name    string
			cfg     provider.PluginConfig
			want    error
			errHave string
		}{
			{
				name:    "unknown option",
				cfg:     provider.PluginConfig{Name: "fake", Binary: bin, DataDir: filepath.Join(dir, "bad"), Options: map[string]any{"bogus": 1}},
				want:    api.ErrUnavailable,
				errHave: "unknown option bogus",
			},
			{
				name:    "missing binary",
				cfg:     provider.PluginConfig{Name: "fake", Binary: filepath.Join(dir, "nope"), DataDir: dir},
				errHave: "nope",
			},
			{name: "no name", cfg: provider.PluginConfig{Binary: bin, DataDir: dir}, want: api.ErrInvalid},
			{name: "no binary", cfg: provider.PluginConfig{Name: "fake", DataDir: dir}, want: api.ErrInvalid},
			{name: "no socket", cfg: provider.PluginConfig{Name: "fake", Binary: bin}, want: api.ErrInvalid},
			{
				name: "socket path too long",
				cfg:  provider.PluginConfig{Name: "fake", Binary: bin, Socket: "/tmp/" + strings.Repeat("s", 120)},
				want: api.ErrInvalid,
			},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), waitFor)
				defer cancel()
				p, err := provider.StartPlugin(ctx, tc.cfg, testLogger(t))
				if err == nil {
					p.Close()
					t.Fatalf("StartPlugin: got nil error; want one")
				}
				if tc.want != nil && !errors.Is(err, tc.want) {
					t.Errorf("StartPlugin: got %v; want an error wrapping %v", err, tc.want)
				}
				if !strings.Contains(err.Error(), tc.errHave) {
					t.Errorf("StartPlugin: got %v; want it to mention %q", err, tc.errHave)
				}
			})
		}
	})
}

func pluginAssignment(_ *testing.T, kind api.ProviderKind, id string) *api.Assignment {
	a := &api.Assignment{ID: id, Kind: api.KindCompute, Provider: kind, Generation: 1}
	if kind == api.ProviderLoadbalancer {
		a.Kind = api.KindLoadbalancer
	}
	return a
}

// testPluginCrash kills the plugin and follows the supervisor: Health in
// Error with the reason and calls failing fast while it is down, then a
// restarted plugin that works.
func testPluginCrash(t *testing.T, bin, dir string) {
	const name = "crashy"
	// A restart delay long enough to observe the plugin down.
	p := startPlugin(t, provider.PluginConfig{Name: name, Binary: bin, DataDir: dir, Node: "n1"},
		provider.WithRestartBackoff(2*time.Second, 4*time.Second))
	a := pluginAssignment(t, api.ProviderContainer, "c1")
	if _, err := p.Apply(t.Context(), a); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	health := func() api.Condition {
		t.Helper()
		cs, err := p.Health(t.Context())
		if err != nil {
			t.Fatalf("Health: got %v; want conditions, never an error", err)
		}
		for _, c := range cs {
			if c.Type == provider.ConditionType(name) {
				return c
			}
		}
		t.Fatalf("Health: got %+v; want a %s condition", cs, provider.ConditionType(name))
		return api.Condition{}
	}
	if c := health(); c.Status != api.ConditionReady {
		t.Fatalf("Health before the crash: got %+v; want Ready", c)
	}

	first := p.PID()
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatalf("kill plugin: %v", err)
	}
	// Until the supervisor has reaped it, a Health call may just fail.
	eventually(t, "Health reports the crash with its reason", func() (bool, string) {
		c := health()
		return c.Status == api.ConditionError && c.Reason == "plugin exited: signal: killed; restarting",
			string(c.Status) + ": " + c.Reason
	})

	// Calls fail at once, never wait for the plugin: a short deadline
	// would otherwise show as DeadlineExceeded.
	calls := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"Info", func(ctx context.Context) error { _, err := p.Info(ctx); return err }},
		{"Apply", func(ctx context.Context) error { _, err := p.Apply(ctx, a); return err }},
		{"Status", func(ctx context.Context) error { _, err := p.Status(ctx, a.ID); return err }},
		{"List", func(ctx context.Context) error { _, err := p.List(ctx); return err }},
		{"Delete", func(ctx context.Context) error { return p.Delete(ctx, a, 0) }},
		{"Logs", func(ctx context.Context) error { return p.Logs(ctx, a.ID, provider.LogOptions{}, nil) }},
	}
	for _, tc := range calls {
		t.Run("down/"+tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			if err := tc.call(ctx); !errors.Is(err, api.ErrUnavailable) {
				t.Errorf("%s while the plugin is down: got %v; want api.ErrUnavailable", tc.name, err)
			}
		})
	}
	if alive(first) {
		t.Errorf("killed plugin %d: still there; want it reaped", first)
	}

	eventually(t, "plugin restarted and Ready", func() (bool, string) {
		c := health()
		return c.Status == api.ConditionReady, c.Reason
	})
	if got := p.Restarts(); got != 1 {
		t.Errorf("Restarts: got %d; want 1", got)
	}
	if pid := p.PID(); pid == 0 || pid == first {
		t.Errorf("PID after the restart: got %d; want a new process (not %d)", pid, first)
	}
	st, err := p.Apply(t.Context(), a)
	if err != nil {
		t.Fatalf("Apply after the restart: %v", err)
	}
	if st.Phase != api.PhaseReady {
		t.Errorf("Apply after the restart: got phase %q; want ready", st.Phase)
	}

	last := p.PID()
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if alive(last) {
		t.Errorf("plugin %d: running after Close; want it gone", last)
	}
	if pid := p.PID(); pid != 0 {
		t.Errorf("PID after Close: got %d; want 0", pid)
	}
	if _, err := p.Status(t.Context(), a.ID); !errors.Is(err, api.ErrUnavailable) {
		t.Errorf("Status after Close: got %v; want api.ErrUnavailable", err)
	}
	if c := health(); c.Status != api.ConditionError {
		t.Errorf("Health after Close: got %+v; want Error", c)
	}
}

// testPluginDiesWithAgent runs the test binary as an agent (TestHelperAgent)
// that starts a plugin, SIGKILLs that agent, and expects the kernel to
// kill the plugin too.
func testPluginDiesWithAgent(t *testing.T, bin string) {
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	agent := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperAgent$")
	agent.Env = append(os.Environ(), helperPluginEnv+"="+bin, helperDirEnv+"="+t.TempDir())
	agent.Stderr = t.Output()
	out, err := agent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Start(); err != nil {
		t.Fatalf("start helper agent: %v", err)
	}
	defer agent.Wait()
	defer agent.Process.Kill()
	pid := 0
	lines := bufio.NewScanner(out)
	for pid == 0 && lines.Scan() {
		fmt.Sscanf(lines.Text(), "plugin pid %d", &pid)
	}
	if pid == 0 {
		t.Fatalf("helper agent: got no plugin pid (%v)", lines.Err())
	}
	if !alive(pid) {
		t.Fatalf("plugin %d: not running before its agent is killed", pid)
	}
	t.Cleanup(func() {
		if alive(pid) { // the test failed: leave nothing behind
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if err := agent.Process.Kill(); err != nil {
		t.Fatalf("kill helper agent: %v", err)
	}
	eventually(t, "plugin dies with its agent", func() (bool, string) {
		return !alive(pid), fmt.Sprintf("plugin %d still running", pid)
	})
}

const (
	helperPluginEnv = "STRATA_TEST_HELPER_AGENT_PLUGIN"
	helperDirEnv    = "STRATA_TEST_HELPER_AGENT_DIR"
)

// TestHelperAgent is not a test but the agent process of
// TestPlugin/DiesWithAgent: it starts the plugin, prints its pid and waits
// to be killed.
func TestHelperAgent(t *testing.T) {
	bin := os.Getenv(helperPluginEnv)
	if bin == "" {
		t.Skip("not a test on its own: the helper process of TestPlugin/DiesWithAgent, which CI runs")
	}
	p, err := provider.StartPlugin(t.Context(), provider.PluginConfig{Name: "orphan", Binary: bin, DataDir: os.Getenv(helperDirEnv)}, nil)
	if err != nil {
		t.Fatalf("StartPlugin: %v", err)
	}
	fmt.Printf("plugin pid %d\n", p.PID())
	// Bounded, in case the test that runs this dies before killing it.
	time.Sleep(waitFor)
	p.Close()
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
