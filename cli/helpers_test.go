package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratahq/strata/cli"
	"github.com/stratahq/strata/cli/clitest"
	"github.com/stratahq/strata/internal/api"
)

var update = flag.Bool("update", false, "rewrite the golden files from the current output")

// now is the fixed clock of these tests.
var now = time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)

func clock() time.Time { return now }

// result is one run of stratactl.
type result struct {
	code   int
	stdout string
	stderr string
}

// env is a test's environment: a private config directory, and the fake
// server through STRATA_URL and STRATA_TOKEN unless a test says otherwise.
type env struct {
	t    *testing.T
	srv  *clitest.Server
	vars map[string]string
	// terminal makes stdout and stderr look like a terminal.
	terminal bool
}

func newEnv(t *testing.T) *env {
	t.Helper()
	srv := clitest.New(t, clock)
	srv.Token = "test-token"
	home := t.TempDir()
	return &env{t: t, srv: srv, vars: map[string]string{
		"HOME":            home,
		"XDG_CONFIG_HOME": filepath.Join(home, "xdg"),
		"STRATA_URL":      srv.URL,
		"STRATA_TOKEN":    "test-token",
	}}
}

// run runs stratactl with args and stdin to its end.
func (e *env) run(stdin string, args ...string) result {
	e.t.Helper()
	return e.runCtx(context.Background(), stdin, nil, nil, args...)
}

// runCtx runs stratactl with ctx; out, when set, receives stdout as it is
// written (for commands that run until cancelled).
func (e *env) runCtx(ctx context.Context, stdin string, out, errw io.Writer, args ...string) result {
	e.t.Helper()
	var stdout, stderr syncBuffer
	o, ew := io.Writer(&stdout), io.Writer(&stderr)
	if out != nil {
		o = io.MultiWriter(&stdout, out)
	}
	if errw != nil {
		ew = io.MultiWriter(&stderr, errw)
	}
	code := cli.Main(ctx, args, cli.IO{In: strings.NewReader(stdin), Out: o, Err: ew},
		cli.WithEnv(func(k string) string { return e.vars[k] }),
		cli.WithClock(clock),
		cli.WithTerminal(func(io.Writer) bool { return e.terminal }),
		cli.WithPollInterval(10*time.Millisecond),
	)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// must runs stratactl and fails the test unless it exits 0.
func (e *env) must(stdin string, args ...string) string {
	e.t.Helper()
	r := e.run(stdin, args...)
	if r.code != 0 {
		e.t.Fatalf("stratactl %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// syncBuffer is written by a command while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after 10s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s: got\n%s\nwant\n%s", name, got, want)
	}
}

// load fills the fake server from the printers' fixtures.
func (e *env) load() {
	e.t.Helper()
	read := func(name string, v any) {
		b, err := os.ReadFile(filepath.Join("printers", "testdata", "fixtures", name))
		if err != nil {
			e.t.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			e.t.Fatalf("%s: %v", name, err)
		}
	}
	var flavors struct{ Items []api.Flavor }
	var resources struct{ Items []api.Resource }
	var regions struct{ Items []api.Region }
	var nodes struct{ Items []api.Node }
	var replicas struct{ Items []api.Replica }
	var revisions struct{ Items []api.Revision }
	var events struct{ Items []api.Event }
	read("flavors.json", &flavors)
	read("resources.json", &resources)
	read("regions.json", &regions)
	read("nodes.json", &nodes)
	read("replicas.json", &replicas)
	read("revisions.json", &revisions)
	read("events.json", &events)

	s := e.srv
	s.Mu.Lock()
	defer s.Mu.Unlock()
	for _, f := range flavors.Items {
		s.Flavors[f.Name] = f
	}
	for _, r := range resources.Items {
		s.Resources[r.Tenant+"/"+r.Name] = r
	}
	s.Regions = map[string]api.Region{}
	for _, r := range regions.Items {
		s.Regions[r.Name] = r
	}
	s.Nodes = nodes.Items
	s.Replicas["web"] = replicas.Items
	s.Revisions["default/web"] = revisions.Items
	s.Events = events.Items
}
