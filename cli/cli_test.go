package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/testkit/testenv/ports"
)

// closedPort is a reserved port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	return "http://" + ports.Addr(t)
}

func TestExitCodes(t *testing.T) {
	tests := []struct {
		name  string
		setup func(e *env)
		stdin string
		args  []string
		code  int
		// stderr is the whole of stderr when it starts with "=", else a part.
		stderr string
	}{
		{name: "ok", args: []string{"get", "flavors"}, code: 0},
		{name: "unknown command", args: []string{"frobnicate"}, code: 2, stderr: `unknown command "frobnicate"`},
		{name: "unknown flag", args: []string{"get", "res", "--bogus"}, code: 2, stderr: "unknown flag: --bogus"},
		{name: "unknown type", args: []string{"get", "widgets"}, code: 2, stderr: `unknown type "widgets"`},
		{name: "missing argument", args: []string{"get"}, code: 2, stderr: "accepts between 1 and 2 arg(s)"},
		{name: "bad output format", args: []string{"get", "res", "-o", "xml"}, code: 2, stderr: `output format "xml" is not one of`},
		{name: "a flag for another type", args: []string{"get", "flavors", "--kind", "Compute"}, code: 2, stderr: "--kind applies to resources"},
		{name: "a bad selector", args: []string{"get", "res", "-l", "a=b=c"}, code: 2, stderr: "--selector"},
		{name: "a selector with an empty term", args: []string{"get", "res", "-l", "app=web,"}, code: 2, stderr: "is empty: remove the stray comma"},
		{name: "a required flag", args: []string{"scale", "web"}, code: 2, stderr: "scale needs --replicas N"},
		{name: "a plan without an action", args: []string{"plan"}, code: 2, stderr: "plan needs an action: --lose-region, --scale or -f"},
		{name: "a plan with a bad scale", args: []string{"plan", "--scale", "web"}, code: 2, stderr: `--scale "web" is not RESOURCE=N`},
		{name: "unknown subcommand of a group", args: []string{"config", "bogus"}, code: 2, stderr: `unknown command "bogus" for "stratactl config"`},
		{name: "a bad manifest", stdin: "kind: Nope\nname: x\n", args: []string{"apply", "-f", "-"}, code: 2, stderr: `unknown kind "Nope"`},
		{name: "a missing manifest", args: []string{"apply", "-f", "/nonexistent/x.yaml"}, code: 2, stderr: "no such file"},
		{name: "no context", setup: func(e *env) { delete(e.vars, "STRATA_URL") }, args: []string{"get", "res"}, code: 2,
			stderr: "=error: no context: run `stratactl config set-context dev --url http://127.0.0.1:8080 --token $(cat .dev/admin-token)` or set STRATA_URL and STRATA_TOKEN\n"},
		{name: "not found", args: []string{"get", "res", "nope"}, code: 3, stderr: "=error: resource \"nope\" not found\n"},
		{name: "a node not found", args: []string{"describe", "node", "dev-1/nope"}, code: 3, stderr: "not found"},
		{name: "an unknown context", args: []string{"config", "use-context", "nope"}, code: 3, stderr: `context "nope": unknown context`},
		{name: "a wrong token", setup: func(e *env) { e.vars["STRATA_TOKEN"] = "wrong" }, args: []string{"get", "res"}, code: 4,
			stderr: "=error: a bearer token is required: unauthenticated\nhint: check the token: --token, STRATA_TOKEN or the context's (stratactl config get-contexts)\n"},
		{name: "cannot connect", setup: func(e *env) { e.vars["STRATA_URL"] = closedPort(t) }, args: []string{"get", "res"}, code: 5, stderr: "cannot connect to http://127.0.0.1:"},
		{name: "a server-side failure names the field", setup: func(e *env) { e.must(flavorDoc+"---\n"+webDoc, "apply", "-f", "-") },
			args: []string{"scale", "web", "--replicas", "-1"}, code: 1,
			stderr: "=error: replicas: must not be negative (got -1) (field replicas)\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if tc.setup != nil {
				tc.setup(e)
			}
			r := e.run(tc.stdin, tc.args...)
			if r.code != tc.code {
				t.Errorf("got exit %d; want %d\nstderr: %s", r.code, tc.code, r.stderr)
			}
			if want, whole := strings.CutPrefix(tc.stderr, "="); whole && r.stderr != want {
				t.Errorf("got stderr %q; want %q", r.stderr, want)
			} else if !whole && !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("got stderr %q; want it to contain %q", r.stderr, tc.stderr)
			}
		})
	}
}

func TestContexts(t *testing.T) {
	e := newEnv(t)
	url := e.vars["STRATA_URL"]
	delete(e.vars, "STRATA_URL")
	delete(e.vars, "STRATA_TOKEN")
	path := filepath.Join(e.vars["XDG_CONFIG_HOME"], "strata", "config.yaml")

	got := e.must("", "config", "set-context", "dev", "--url", url, "--token", "test-token")
	if want := fmt.Sprintf("context \"dev\" created in %s\nswitched to context \"dev\"\n", path); got != want {
		t.Errorf("set-context: got %q; want %q", got, want)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatalf("the contexts file is not where XDG_CONFIG_HOME says: %v", err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("got mode %04o; want 0600", st.Mode().Perm())
	}
	e.must("", "get", "flavors") // through the context

	e.must("", "config", "set-context", "broken", "--url", closedPort(t), "--token", "x")
	if got := e.must("", "config", "current-context"); got != "dev\n" {
		t.Errorf("a second context must not become current: got %q", got)
	}
	e.must("", "config", "use-context", "broken")
	if r := e.run("", "get", "flavors"); r.code != 5 {
		t.Errorf("through the broken context: got exit %d; want 5", r.code)
	}
	e.must("", "--context", "dev", "get", "flavors")
	e.vars["STRATA_URL"], e.vars["STRATA_TOKEN"] = url, "test-token"
	e.must("", "get", "flavors") // the environment beats the current context
	if r := e.run("", "--context", "broken", "get", "flavors"); r.code != 5 {
		t.Errorf("--context beats the environment: got exit %d; want 5", r.code)
	}
	if r := e.run("", "--url", closedPort(t), "get", "flavors"); r.code != 5 {
		t.Errorf("--url beats the environment: got exit %d; want 5", r.code)
	}

	table := e.must("", "config", "get-contexts")
	want := fmt.Sprintf("CURRENT   NAME     URL%s   TOKEN   CA\n", strings.Repeat(" ", len(url)-3))
	if !strings.HasPrefix(table, want) || !strings.Contains(table, "*         broken") || strings.Contains(table, "test-token") {
		t.Errorf("get-contexts: got\n%s\nwant the current one starred and no token", table)
	}

	t.Run("a CA file", func(t *testing.T) {
		ca := filepath.Join(t.TempDir(), "ca.pem")
		if err := os.WriteFile(ca, []byte("not a certificate"), 0o600); err != nil {
			t.Fatal(err)
		}
		if r := e.run("", "config", "set-context", "tls", "--url", "https://x", "--ca", ca); r.code != 2 || !strings.Contains(r.stderr, "holds no PEM certificate") {
			t.Errorf("got exit %d, %q; want 2 and a PEM error", r.code, r.stderr)
		}
	})
	t.Run("a file others can read is warned about", func(t *testing.T) {
		if err := os.Chmod(path, 0o644); err != nil {
			t.Fatal(err)
		}
		r := e.run("", "config", "current-context")
		if r.code != 0 || !strings.Contains(r.stderr, "chmod 600") {
			t.Errorf("got exit %d, %q; want a warning", r.code, r.stderr)
		}
	})
	t.Run("--config names another file", func(t *testing.T) {
		other := filepath.Join(t.TempDir(), "c.yaml")
		e.must("", "--config", other, "config", "set-context", "x", "--url", url)
		if _, err := os.Stat(other); err != nil {
			t.Error(err)
		}
	})
}

func TestGet(t *testing.T) {
	e := newEnv(t)
	e.load()
	var b strings.Builder
	for _, args := range [][]string{
		{"get", "flavors"},
		{"get", "fl", "small"},
		{"get", "resources", "--kind", "Compute"},
		{"get", "res", "-l", "app=web", "-o", "wide"},
		{"get", "regions"},
		{"regions", "dev-1"},
		{"get", "nodes", "--region", "dev-1"},
		{"nodes", "dev-2-a"},
		{"get", "replicas", "web", "--region", "dev-2"},
		{"get", "rev", "web"},
		{"get", "events"},
	} {
		r := e.run("", args...)
		fmt.Fprintf(&b, "$ stratactl %s\n%s%s(exit %d)\n\n", strings.Join(args, " "), r.stdout, r.stderr, r.code)
	}
	golden(t, "get.txt", b.String())
}

func TestDescribe(t *testing.T) {
	e := newEnv(t)
	e.load()
	for _, tc := range []struct{ name, typ, arg string }{
		{"resource", "resource", "web"},
		{"node", "node", "dev-1/dev-1-a"},
		{"flavor", "flavor", "small"},
		{"region", "region", "dev-2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			golden(t, "describe-"+tc.name+".txt", e.must("", "describe", tc.typ, tc.arg))
		})
	}
	t.Run("TYPE/NAME and JSON", func(t *testing.T) {
		out := e.must("", "describe", "res/web", "-o", "json")
		if !strings.Contains(out, `"resource": {`) || !strings.Contains(out, `"replicas": [`) {
			t.Errorf("got %s; want the resource and its replicas", out)
		}
		if strings.Contains(out, `"names"`) {
			t.Errorf("web is on no region network; got names in %s", out)
		}
	})
}

// TestDescribeNames: a container resource on the region network shows
// its names, each region's with the ready replicas it answers, in text
// and JSON.
func TestDescribeNames(t *testing.T) {
	e := newEnv(t)
	addNetworkResource(e)
	golden(t, "describe-resource-names.txt", e.must("", "describe", "resource", "db"))
	t.Run("JSON", func(t *testing.T) {
		var d struct {
			Names struct {
				Zone, Name string
				Regions    []struct {
					Region, Name string
					Endpoints    []struct{ Replica, Name, Address string }
				}
			}
		}
		if err := json.Unmarshal([]byte(e.must("", "describe", "res/db", "-o", "json")), &d); err != nil {
			t.Fatal(err)
		}
		n := d.Names
		if n.Zone != "strata.internal" || n.Name != "db.default.strata.internal" || len(n.Regions) != 2 ||
			n.Regions[0].Name != "db.default.dev-1.strata.internal" || len(n.Regions[0].Endpoints) != 2 || len(n.Regions[1].Endpoints) != 0 ||
			n.Regions[0].Endpoints[0] != (struct{ Replica, Name, Address string }{"db-2", "db-2.db.default.dev-1.strata.internal", "10.88.1.5"}) {
			t.Errorf("describe db -o json: names %+v", n)
		}
	})
}

// addNetworkResource adds db, a container resource on the region network
// with named ports: two ready replicas and one starting in dev-1, one
// starting in dev-2.
func addNetworkResource(e *env) {
	e.srv.Mu.Lock()
	defer e.srv.Mu.Unlock()
	created := now.Add(-5 * time.Minute)
	e.srv.Resources["default/db"] = api.Resource{Name: "db", Tenant: "default", Kind: api.KindCompute, Replicas: 4, CreatedAt: created,
		Schedule: api.ScheduleRule{Regions: []api.RegionTarget{{Name: "dev-2"}, {Name: "dev-1"}}},
		Spec: api.ResourceSpec{Flavor: "small", Compute: &api.ComputeSpec{Image: "postgres:16",
			Ports: []api.PortSpec{{Name: "pg", ContainerPort: 5432}, {ContainerPort: 9187}, {Name: "stats", ContainerPort: 8125, Protocol: "UDP"}}}}}
	rep := func(id, region string, phase api.Phase, addr string) api.Replica {
		return api.Replica{Assignment: api.Assignment{ID: id, Tenant: "default", Resource: "db", Kind: api.KindCompute, Provider: api.ProviderContainer,
			Node: region + "-a", Revision: 1, CreatedAt: created, Network: &api.NetworkAttachment{Network: "default", Address: addr}},
			Region: region, Phase: phase}
	}
	e.srv.Replicas["db"] = []api.Replica{
		rep("db-1", "dev-1", api.PhaseReady, "10.88.1.7"),
		rep("db-2", "dev-1", api.PhaseReady, "10.88.1.5"),
		rep("db-3", "dev-1", api.PhaseProvision, "10.88.1.6"),
		rep("db-4", "dev-2", api.PhaseProvision, "10.88.2.5"),
	}
}

func TestDrain(t *testing.T) {
	running := func(moved, failed int) api.DrainStatus {
		return api.DrainStatus{Node: "dev-1-a", State: api.DrainRunning, StartedAt: now.Add(-2 * time.Minute), Deadline: now.Add(8 * time.Minute),
			Total: 2, Moved: moved, Failed: failed, Remaining: 2 - moved - failed}
	}
	done := func(state string, moved, failed int, msg string) api.DrainStatus {
		d := running(moved, failed)
		d.State, d.FinishedAt, d.Message = state, now.Add(-30*time.Second), msg
		d.Steps = []api.DrainStep{
			{Replica: "web-1", Resource: "default/web", To: "dev-1-b", State: "moved", Message: "replacement web-3 is ready", At: now.Add(-90 * time.Second)},
			{Replica: "web-2", Resource: "default/web", State: failedOr(failed), Message: "no node fits", At: now.Add(-60 * time.Second)},
		}
		return d
	}
	tests := []struct {
		name     string
		script   []api.DrainStatus
		terminal bool
		args     []string
		code     int
		stdout   string
		stderr   string
	}{
		{
			name:   "succeeds",
			script: []api.DrainStatus{running(0, 0), running(1, 0), running(1, 0), done(api.DrainSucceeded, 2, 0, "2 moved")},
			args:   []string{"--wait"},
			stdout: "drain of dev-1/dev-1-a succeeded in 1m30s: moved 2/2, failed 0, remaining 0\nmessage: 2 moved\nsteps:\n" +
				"  REPLICA   RESOURCE      STATE   TO        MESSAGE                      AGE\n" +
				"  web-1     default/web   moved   dev-1-b   replacement web-3 is ready   90s\n" +
				"  web-2     default/web   moved   -         no node fits                 60s\n",
			stderr: "moved 0/2, remaining 2, failed 0\nmoved 1/2, remaining 1, failed 0\nmoved 2/2, remaining 0, failed 0\n",
		},
		{
			name:   "fails",
			script: []api.DrainStatus{running(0, 0), done(api.DrainFailed, 1, 1, "1 replica could not move")},
			args:   []string{"--wait"},
			code:   1,
			stdout: "drain of dev-1/dev-1-a failed in 1m30s: moved 1/2, failed 1, remaining 0\nmessage: 1 replica could not move\nsteps:\n" +
				"  REPLICA   RESOURCE      STATE    TO        MESSAGE                      AGE\n" +
				"  web-1     default/web   moved    dev-1-b   replacement web-3 is ready   90s\n" +
				"  web-2     default/web   failed   -         no node fits                 60s\n",
			stderr: "moved 0/2, remaining 2, failed 0\nmoved 1/2, remaining 0, failed 1\nerror: drain of dev-1/dev-1-a failed: 1 replica could not move\n",
		},
		{
			name:   "without --wait",
			script: []api.DrainStatus{running(0, 0)},
			stdout: "node/dev-1/dev-1-a draining: 2 replicas to move, deadline " + now.Add(8*time.Minute).Local().Format(time.RFC3339) +
				"\nfollow it with `stratactl describe node dev-1/dev-1-a`\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.load()
			e.terminal = tc.terminal
			e.srv.Drains["dev-1/dev-1-a"] = tc.script
			r := e.run("", append([]string{"nodes", "drain", "dev-1/dev-1-a", "--deadline", "10m"}, tc.args...)...)
			if r.code != tc.code || r.stdout != tc.stdout || r.stderr != tc.stderr {
				t.Errorf("got exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit %d\nstdout:\n%s\nstderr:\n%s",
					r.code, r.stdout, r.stderr, tc.code, tc.stdout, tc.stderr)
			}
		})
	}
	t.Run("a progress bar on a terminal", func(t *testing.T) {
		e := newEnv(t)
		e.load()
		e.terminal = true
		e.srv.Drains["dev-1/dev-1-a"] = []api.DrainStatus{running(0, 0), running(1, 0), done(api.DrainSucceeded, 2, 0, "")}
		r := e.run("", "nodes", "drain", "dev-1-a", "--wait") // a bare node name is looked up
		if r.code != 0 || !strings.Contains(r.stderr, "draining dev-1/dev-1-a") || !strings.Contains(r.stderr, "(2/2") {
			t.Errorf("got exit %d, stderr %q; want a bar at 2/2", r.code, r.stderr)
		}
	})
}

func failedOr(failed int) string {
	if failed > 0 {
		return "failed"
	}
	return "moved"
}

func TestCordon(t *testing.T) {
	e := newEnv(t)
	e.load()
	if got := e.must("", "nodes", "cordon", "dev-1/dev-1-b", "--reason", "disk"); got != "node/dev-1/dev-1-b cordoned\n" {
		t.Errorf("got %q", got)
	}
	if n := e.srv.Nodes[1]; n.Schedulable || n.CordonReason != "disk" {
		t.Errorf("got schedulable %v, reason %q; want cordoned for disk", n.Schedulable, n.CordonReason)
	}
	if got := e.must("", "nodes", "uncordon", "dev-1/dev-1-b"); got != "node/dev-1/dev-1-b uncordoned\n" {
		t.Errorf("got %q", got)
	}
	if r := e.run("", "nodes", "cordon", "dev-1/"); r.code != 2 {
		t.Errorf("a malformed REGION/NODE: got exit %d; want 2", r.code)
	}
}

func TestScaleAndRollback(t *testing.T) {
	e := newEnv(t)
	e.must(flavorDoc+"---\n"+webDoc, "apply", "-f", "-")
	if got := e.must("", "scale", "web", "--replicas", "4"); got != "compute/web scaled to 4 replicas\n" {
		t.Errorf("scale: got %q", got)
	}
	e.must(strings.Replace(webDoc, "image: busybox", "image: nginx", 1), "apply", "-f", "-")
	if got := e.must("", "rollback", "web", "--to", "1"); got != "compute/web rolled back to the spec of revision 1, as revision 3\n" {
		t.Errorf("rollback: got %q", got)
	}
	if got := e.must("", "rollback", "web", "--to", "1"); got != "compute/web unchanged: revision 3 already has the spec of revision 1\n" {
		t.Errorf("rollback again: got %q", got)
	}
	if r := e.run("", "rollback", "web", "--to", "9"); r.code != 3 {
		t.Errorf("an unknown revision: got exit %d; want 3", r.code)
	}
}

func TestEvents(t *testing.T) {
	e := newEnv(t)
	e.load()
	t.Run("for a resource", func(t *testing.T) {
		got := e.must("", "events", "--for", "resource/web")
		if !strings.Contains(got, "PlacementApplied") || strings.Contains(got, "NodeDown") {
			t.Errorf("got\n%s\nwant only web's events", got)
		}
	})
	t.Run("for a node", func(t *testing.T) {
		got := e.must("", "events", "--for", "node/dev-2/dev-2-a")
		if !strings.Contains(got, "NodeDown") || strings.Contains(got, "Cordoned") {
			t.Errorf("got\n%s\nwant only dev-2-a's events", got)
		}
	})
	t.Run("watch", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var out syncBuffer
		done := make(chan result, 1)
		go func() { done <- e.runCtx(ctx, "", &out, nil, "events", "-w", "--region", "dev-1") }()
		eventually(t, "the first events", func() bool { return strings.Contains(out.String(), "Cordoned") })
		e.srv.AddEvent(api.Event{ID: "4", Time: now, Type: "Normal", Reason: "Uncordoned", Object: "node/dev-1-a", Region: "dev-1", Message: "uncordoned"})
		e.srv.AddEvent(api.Event{ID: "5", Time: now, Type: "Normal", Reason: "Elsewhere", Object: "node/dev-2-a", Region: "dev-2", Message: "not dev-1"})
		eventually(t, "the new event", func() bool { return strings.Contains(out.String(), "Uncordoned") })
		cancel()
		r := <-done
		want := "LAST SEEN   TYPE      REASON             OBJECT                 REGION   MESSAGE\n" +
			"10m         Normal    PlacementApplied   resource/default/web   dev-1    placement applied: 2 replicas, epoch 5\n" +
			"2m          Normal    Cordoned           node/dev-1-a           dev-1    cordoned by operator: drain\n" +
			"0s          Normal    Uncordoned         node/dev-1-a           dev-1    uncordoned\n"
		if r.code != 0 || r.stdout != want {
			t.Errorf("got exit %d\n%s\nwant exit 0\n%s", r.code, r.stdout, want)
		}
	})
	t.Run("watch a server that cannot stream", func(t *testing.T) {
		e := newEnv(t)
		e.load()
		e.srv.NoStreaming = true
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var out, errw syncBuffer
		done := make(chan result, 1)
		go func() { done <- e.runCtx(ctx, "", &out, &errw, "events", "-w", "--for", "node/dev-1-a") }()
		eventually(t, "the warning", func() bool { return strings.Contains(errw.String(), "the server cannot stream events") })
		e.srv.AddEvent(api.Event{ID: "4", Time: now, Type: "Normal", Reason: "Uncordoned", Object: "node/dev-1-a", Region: "dev-1"})
		eventually(t, "the new event, polled", func() bool { return strings.Contains(out.String(), "Uncordoned") })
		cancel()
		reasons := map[string]int{}
		r := <-done
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n")[1:] {
			reasons[strings.Fields(line)[2]]++
		}
		if r.code != 0 || reasons["Cordoned"] != 1 || reasons["Uncordoned"] != 1 {
			t.Errorf("got exit %d\n%s\nwant 0 and each event once", r.code, r.stdout)
		}
	})
	t.Run("watch as JSON lines", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var out syncBuffer
		done := make(chan result, 1)
		go func() { done <- e.runCtx(ctx, "", &out, nil, "events", "-w", "-o", "json", "--for", "node/dev-2-a") }()
		eventually(t, "the first event", func() bool { return strings.Contains(out.String(), "NodeDown") })
		cancel()
		r := <-done
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if r.code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], `{"id":"3"`) {
			t.Errorf("got exit %d\n%s\nwant one JSON line per event", r.code, r.stdout)
		}
	})
}

func TestLogs(t *testing.T) {
	e := newEnv(t)
	e.must(flavorDoc+"---\n"+webDoc, "apply", "-f", "-")
	e.srv.Logs["web"] = "one\ntwo\nthree\n"
	if got := e.must("", "logs", "web", "--tail", "2"); got != "two\nthree\n" {
		t.Errorf("--tail 2: got %q", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	done := make(chan result, 1)
	go func() { done <- e.runCtx(ctx, "", &out, nil, "logs", "web", "-f") }()
	eventually(t, "the logs", func() bool { return strings.Contains(out.String(), "three") })
	cancel()
	if r := <-done; r.code != 0 || r.stderr != "" {
		t.Errorf("-f stopped by Ctrl-C: got exit %d, %q; want 0 and nothing on stderr", r.code, r.stderr)
	}
	if r := e.run("", "logs", "nope"); r.code != 3 {
		t.Errorf("an unknown resource: got exit %d; want 3", r.code)
	}
	// -c sends the container; the server's 404 for one the pod lacks
	// comes through.
	e.srv.Logs["web.side"] = "from the sidecar\n"
	for _, args := range [][]string{{"logs", "web", "-c", "side"}, {"logs", "web", "--container", "side"}} {
		if got := e.must("", args...); got != "from the sidecar\n" {
			t.Errorf("%q: got %q; want the sidecar's output", args, got)
		}
	}
	if r := e.run("", "logs", "web", "-c", "nope"); r.code != 3 || !strings.Contains(r.stderr, `no container "nope"`) {
		t.Errorf("an unknown container: got exit %d, %q; want 3 naming it", r.code, r.stderr)
	}
}

// TestGetWatch renders once per change: on a terminal each rendering
// clears the screen first (redrawn in place), elsewhere renderings follow
// each other after a blank line, with no escape codes.
func TestGetWatch(t *testing.T) {
	const clear = "\x1b[H\x1b[2J"
	for _, tc := range []struct {
		name     string
		terminal bool
		clears   int
		between  string
	}{
		{name: "a terminal", terminal: true, clears: 2, between: clear + "NAME"},
		{name: "a pipe", terminal: false, clears: 0, between: "\n\nNAME"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.terminal = tc.terminal
			e.must(flavorDoc+"---\n"+webDoc, "apply", "-f", "-")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var out syncBuffer
			done := make(chan result, 1)
			go func() { done <- e.runCtx(ctx, "", &out, nil, "get", "res", "-w") }()
			eventually(t, "the first table", func() bool { return strings.Contains(out.String(), "0/1") })
			time.Sleep(50 * time.Millisecond) // a few polls without a change
			e.srv.Mu.Lock()
			web := e.srv.Resources["default/web"]
			web.Status.Phase, web.Status.Ready = api.PhaseReady, 1
			e.srv.Resources["default/web"] = web
			e.srv.Mu.Unlock()
			eventually(t, "the second table", func() bool { return strings.Contains(out.String(), "1/1") })
			cancel()
			r := <-done
			if r.code != 0 {
				t.Errorf("got exit %d; want 0 on Ctrl-C", r.code)
			}
			if n := strings.Count(r.stdout, "NAME"); n != 2 {
				t.Errorf("got %d tables; want 2, one per change:\n%s", n, r.stdout)
			}
			if n := strings.Count(r.stdout, clear); n != tc.clears || !strings.Contains(r.stdout, tc.between) {
				t.Errorf("got %d screen clears in %q; want %d, and %q between the tables", n, r.stdout, tc.clears, tc.between)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	e := newEnv(t)
	got := e.must("", "version")
	if !strings.HasPrefix(got, "Client: stratactl ") || !strings.Contains(got, "Server: strata v0.0.0-test at "+e.srv.URL+" (replica global-0, leader global-0)") {
		t.Errorf("got %q", got)
	}
	e.vars["STRATA_URL"] = closedPort(t)
	r := e.run("", "version")
	if r.code != 0 || strings.Contains(r.stdout, "Server:") || !strings.Contains(r.stderr, "server version unknown: cannot connect") {
		t.Errorf("an unreachable server: got exit %d, %q, %q; want the client's version alone", r.code, r.stdout, r.stderr)
	}
}

func TestCompletion(t *testing.T) {
	e := newEnv(t)
	for _, shell := range []string{"bash", "zsh", "fish"} {
		if out := e.must("", "completion", shell); !strings.Contains(out, "stratactl") {
			t.Errorf("%s: got no completion script", shell)
		}
	}
}
