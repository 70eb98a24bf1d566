package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/devcluster"
	"github.com/stratahq/strata/e2e/framework"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/testkit/testenv"
)

// ctl runs bin/stratactl in a private home, against one config file.
type ctl struct {
	t      *testing.T
	bin    string
	config string
	home   string
}

type run struct {
	code           int
	stdout, stderr string
}

func (c *ctl) run(stdin string, args ...string) run {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, append([]string{"--config", c.config}, args...)...)
	// Nothing of the developer's environment leaks in: no STRATA_URL, no
	// ~/.config/strata.
	cmd.Env = []string{"HOME=" + c.home, "XDG_CONFIG_HOME=" + filepath.Join(c.home, "xdg"), "PATH=" + os.Getenv("PATH")}
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		c.t.Fatalf("stratactl %s: %v", strings.Join(args, " "), err)
	}
	return run{code: code, stdout: out.String(), stderr: errb.String()}
}

// must runs stratactl and fails the test unless it exits 0.
func (c *ctl) must(stdin string, args ...string) string {
	c.t.Helper()
	r := c.run(stdin, args...)
	if r.code != 0 {
		c.t.Fatalf("stratactl %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// TestE2E drives a real `strata dev` with the real stratactl: the example
// manifests applied, ready, applied again without a change, a node drained
// (and one whose drain must fail), errors with their exit codes, and
// everything deleted.
func TestE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the dev cluster (not with -short)")
	}
	c, dev, _ := startDev(t, "fake")
	examples := filepath.Join(testenv.RepoRoot(), "deploy", "examples")
	applied := c.must("", "apply", "-f", examples)
	for _, want := range []string{"flavor/small created", "image/busybox created", "volume/scratch created", "compute/site created", "compute/web created", "loadbalancer/web-lb created"} {
		if !strings.Contains(applied, want+"\n") {
			t.Errorf("apply: got\n%s\nwant a line %q", applied, want)
		}
	}
	waitAllReady(t, c, 5, 90*time.Second)

	again := c.must("", "apply", "-f", examples)
	for _, line := range strings.Split(strings.TrimSpace(again), "\n") {
		if !strings.HasSuffix(line, " unchanged") {
			t.Errorf("a second apply: got %q; want only unchanged", line)
		}
	}
	exported := c.must("", "get", "resources", "-o", "yaml")
	if got := c.must(exported, "apply", "-f", "-"); strings.Count(got, " unchanged\n") != 5 {
		t.Errorf("get -o yaml | apply -f -: got\n%s\nwant five unchanged", got)
	}

	drained := c.run("", "nodes", "drain", "dev-1/dev-1-a", "--deadline", "2m", "--wait")
	if drained.code != 0 || !strings.Contains(drained.stdout, "drain of dev-1/dev-1-a succeeded in ") {
		t.Fatalf("drain: got exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit 0 and a summary", drained.code, drained.stdout, drained.stderr)
	}
	if !strings.Contains(drained.stderr, "moved ") {
		t.Errorf("drain: got stderr %q; want progress lines (stderr is not a terminal)", drained.stderr)
	}
	c.must("", "nodes", "uncordon", "dev-1/dev-1-a")
	// dev-1-b holds the volume, whose data cannot move: that drain fails.
	failed := c.run("", "nodes", "drain", "dev-1/dev-1-b", "--deadline", "1m", "--wait")
	if failed.code != 1 || !strings.Contains(failed.stdout, "drain of dev-1/dev-1-b failed in ") {
		t.Errorf("a drain that must fail: got exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit 1 and a summary", failed.code, failed.stdout, failed.stderr)
	}
	c.must("", "nodes", "uncordon", "dev-1/dev-1-b")
	framework.Eventually(t, 60*time.Second, "web ready again after the drains", func() error {
		var r api.Resource
		if err := decode(c.run("", "get", "resources", "web", "-o", "json"), &r); err != nil {
			return err
		}
		if r.Status == nil || r.Status.Ready != 3 {
			return fmt.Errorf("status %+v", r.Status)
		}
		return nil
	})
	if out := c.must("", "describe", "resource", "web"); !strings.Contains(out, "Replicas:") || !strings.Contains(out, "dev-2") {
		t.Errorf("describe: got\n%s", out)
	}

	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"a server-side refusal names the field", []string{"scale", "web", "--replicas", "-1"}, 1, "error: replicas: must not be negative (got -1) (field replicas)\n"},
		{"not found", []string{"get", "resources", "nope"}, 3, "error: resource \"nope\" not found\n"},
		{"a wrong token", []string{"--token", "strata_00000000_00", "get", "resources"}, 4, "unauthenticated"},
		{"nothing listens", []string{"--url", fmt.Sprintf("http://127.0.0.1:%d", framework.FreePort(t)), "get", "resources"}, 5, "cannot connect"},
		{"usage", []string{"get", "resources", "--kind"}, 2, "flag needs an argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.run("", tc.args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.msg) {
				t.Errorf("got exit %d, stderr %q; want %d and %q", r.code, r.stderr, tc.code, tc.msg)
			}
		})
	}

	deleted := c.must("", "delete", "-f", examples)
	if !strings.Contains(deleted, "compute/web deleted\n") || !strings.Contains(deleted, "flavor/small deleted\n") {
		t.Errorf("delete -f: got\n%s", deleted)
	}
	if out := c.must("", "get", "resources", "-o", "json"); !strings.Contains(out, `"items": []`) {
		t.Errorf("after delete: got %s; want no resources", out)
	}
	if dev.Exited() {
		t.Errorf("strata dev exited during the test (see its log)")
	}
}

// TestExamplesOnRealProviders follows deploy/examples/README.md on what
// `make dev` runs: `strata dev` started from the repository's root, with
// containerd and HAProxy, the busybox archive of deploy/dev/images.sh in
// .cache/images. The manifests are applied as they are written, every
// resource must become ready, the load balancer must answer with a
// replica's hostname, and everything must go on delete: the examples work
// verbatim after `make dev`. The providers are named, not detected, so
// that a machine without containerd or HAProxy fails (CI) or skips rather
// than passing on the fake provider. The manifests name the dev
// cluster's regions, so the agents take the dev cluster's names on the
// host (containerd namespaces strata-dev-*, bridges strata0a..., nftables
// tables strata-dev-*), and deploy/dev/clean.sh removes them at the end:
// do not run it next to a `make dev` on the same machine.
func TestExamplesOnRealProviders(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the dev cluster on containerd and HAProxy (not with -short)")
	}
	framework.RequireContainerd(t)
	testenv.LookPath(t, "haproxy")
	framework.BusyboxArchive(t)
	root := testenv.RepoRoot()
	// After the cluster is stopped (clean-ups run last first): what
	// agents never remove by themselves, since an agent restart must
	// lose nothing. The data directory goes with it.
	dir := t.TempDir()
	t.Cleanup(func() {
		out, err := exec.Command(filepath.Join(root, "deploy", "dev", "clean.sh"), dir).CombinedOutput()
		if err != nil {
			t.Errorf("deploy/dev/clean.sh: %v\n%s", err, out)
		}
	})
	// strata dev lets tenants name the images of .cache/images in the
	// directory it runs in: make dev runs it at the repository's root.
	t.Chdir(root)
	c, dev, _ := startDevIn(t, dir, "containerd,haproxy,fake")

	examples := "deploy/examples/"
	applied := c.must("", "apply", "-f", examples)
	for _, want := range []string{"flavor/small created", "flavor/lb-small created", "image/busybox created", "volume/scratch created", "compute/site created", "compute/web created", "loadbalancer/web-lb created"} {
		if !strings.Contains(applied, want+"\n") {
			t.Errorf("apply: got\n%s\nwant a line %q", applied, want)
		}
	}
	waitAllReady(t, c, 5, 3*time.Minute)
	if again := c.must("", "apply", "-f", examples); strings.Count(again, " unchanged\n") != 7 {
		t.Errorf("a second apply: got\n%s\nwant seven lines unchanged", again)
	}
	// site is a pod: its init container wrote the page its sidecar
	// serves on the pod's localhost, and the main container's log shows
	// what it read from there.
	framework.Eventually(t, 30*time.Second, "site's main container read the page from its sidecar", func() error {
		if out := c.run("", "logs", "site"); !strings.Contains(out.stdout, "hello from the init container") {
			return fmt.Errorf("stratactl logs site: exit %d, %q %q", out.code, out.stdout, out.stderr)
		}
		return nil
	})

	// web-lb listens on port 30081 of the load balancer address of every
	// node (127.0.0.1 in the dev cluster), in front of web's replicas of
	// its region; each answers with its hostname.
	var web struct{ Items []api.Replica }
	if err := decode(c.run("", "get", "replicas", "web", "-o", "json"), &web); err != nil {
		t.Fatal(err)
	}
	hosts := map[string]bool{}
	for _, r := range web.Items {
		hosts[r.ID] = true
	}
	framework.Eventually(t, 30*time.Second, "web-lb answers with a replica's hostname", func() error {
		resp, err := httpGet("http://127.0.0.1:30081/")
		if err != nil {
			return err
		}
		if got := strings.TrimSpace(resp); !hosts[got] {
			return fmt.Errorf("got %q; want the hostname of one of %v", got, web.Items)
		}
		return nil
	})
	c.must("", "describe", "resource", "web")

	deleted := c.must("", "delete", "-f", examples)
	for _, want := range []string{"loadbalancer/web-lb deleted", "compute/web deleted", "compute/site deleted", "volume/scratch deleted", "image/busybox deleted", "flavor/small deleted", "flavor/lb-small deleted"} {
		if !strings.Contains(deleted, want+"\n") {
			t.Errorf("delete -f: got\n%s\nwant a line %q", deleted, want)
		}
	}
	framework.Eventually(t, 2*time.Minute, "every replica gone from the nodes", func() error {
		if out := c.must("", "get", "resources", "-o", "json"); !strings.Contains(out, `"items": []`) {
			return fmt.Errorf("resources left: %s", out)
		}
		for _, region := range []string{"dev-1", "dev-2"} {
			for i := range 2 {
				node := devcluster.NodeName(region, i)
				ns := "strata-" + node
				if ids, err := framework.CtrContainers(ns); err != nil || len(ids) > 0 {
					return fmt.Errorf("containers %v in %s (%v)", ids, ns, err)
				}
				cfg := filepath.Join(dir, "agents", node, "providers", "haproxy", "haproxy.cfg")
				if pids := framework.PidsWithArg(cfg); len(pids) > 0 {
					return fmt.Errorf("haproxy processes %v of %s", pids, node)
				}
			}
		}
		return nil
	})
	if dev.Exited() {
		t.Errorf("strata dev exited during the test (see its log)")
	}
}

// startDev runs `strata dev` with the providers named (a --providers
// list) in a temporary directory, and a stratactl configured for it once
// both regions have registered.
func startDev(t *testing.T, providers string) (*ctl, *framework.Proc, string) {
	t.Helper()
	return startDevIn(t, t.TempDir(), providers)
}

func startDevIn(t *testing.T, dir, providers string) (*ctl, *framework.Proc, string) {
	t.Helper()
	strata, bin := framework.Bin(t, "strata"), framework.Bin(t, "stratactl")
	// Region i serves on the ports after the global ones: reserve them all.
	httpPort, grpcPort := framework.FreePorts(t, 3), framework.FreePorts(t, 3)
	dev := framework.Start(t, "strata-dev", strata, []string{"dev", "--data-dir", dir, "--providers", providers,
		"--http-port", fmt.Sprint(httpPort), "--grpc-port", fmt.Sprint(grpcPort)})
	url := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	framework.WaitHTTP(t, url+"/readyz", 90*time.Second)
	token, err := os.ReadFile(filepath.Join(dir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}

	home := t.TempDir()
	c := &ctl{t: t, bin: bin, config: filepath.Join(home, "stratactl.yaml"), home: home}
	c.must("", "config", "set-context", "e2e", "--url", url, "--token", strings.TrimSpace(string(token)))
	framework.Eventually(t, 60*time.Second, "both regions registered", func() error {
		var regions struct{ Items []api.Region }
		if err := decode(c.run("", "get", "regions", "-o", "json"), &regions); err != nil {
			return err
		}
		if len(regions.Items) != 2 {
			return fmt.Errorf("%d regions", len(regions.Items))
		}
		return nil
	})
	return c, dev, url
}

// waitAllReady waits until there are n resources, each ready with all its
// replicas.
func waitAllReady(t *testing.T, c *ctl, n int, timeout time.Duration) {
	t.Helper()
	framework.Eventually(t, timeout, "every resource ready", func() error {
		var list struct{ Items []api.Resource }
		if err := decode(c.run("", "get", "resources", "-o", "json"), &list); err != nil {
			return err
		}
		if len(list.Items) != n {
			return fmt.Errorf("%d resources; want %d", len(list.Items), n)
		}
		for _, r := range list.Items {
			if s := r.Status; s == nil || s.Phase != api.PhaseReady || s.Ready != r.Replicas {
				return fmt.Errorf("%s %s is not ready: %+v", r.Kind, r.Name, s)
			}
		}
		return nil
	})
}

func httpGet(url string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s %s", url, resp.Status, body)
	}
	return string(body), nil
}

func decode(r run, v any) error {
	if r.code != 0 {
		return fmt.Errorf("exit %d: %s", r.code, r.stderr)
	}
	return json.Unmarshal([]byte(r.stdout), v)
}
