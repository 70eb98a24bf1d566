package containerd

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
	"github.com/stratahq/strata/testkit/testenv"
)

// waitFor bounds every poll of the tests.
const waitFor = 60 * time.Second

// busyboxRef is the name deploy/dev/images.sh gives its image.
const busyboxRef = "docker.io/library/busybox:latest"

// serveForever is a command that runs until SIGTERM and then exits at
// once: busybox sh as pid 1 ignores signals it does not trap.
func serveForever() []string {
	return []string{"sh", "-c", `trap 'exit 0' TERM; echo "started $(hostname)"; sleep 3600 & wait`}
}

// requireContainerd skips (fails under CI=true) unless the tests run as
// root with containerd answering on its default socket.
func requireContainerd(t testing.TB) {
	t.Helper()
	testenv.RequireRoot(t, "containerd (root)")
	if _, err := os.Stat(DefaultAddress); err != nil {
		testenv.Missing(t, "containerd", err)
	}
	c, err := client.New(DefaultAddress)
	if err != nil {
		testenv.Missing(t, "containerd", err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Version(ctx); err != nil {
		testenv.Missing(t, "containerd", err)
	}
}

// busyboxArchive builds the image archive with deploy/dev/images.sh into
// a cache shared by test runs (the script skips an up-to-date archive).
func busyboxArchive(t testing.TB) string {
	t.Helper()
	return imageArchive(t)
}

// busyboxUserRef is the name deploy/dev/images.sh gives its image whose
// USER is user.
func busyboxUserRef(user string) string {
	return "docker.io/library/busybox:user-" + strings.ReplaceAll(user, ":", "-")
}

// busyboxUserArchive builds, as busyboxArchive, the image whose config
// says USER user (busyboxUserRef).
func busyboxUserArchive(t testing.TB, user string) string {
	t.Helper()
	return imageArchive(t, user)
}

// imageArchive runs deploy/dev/images.sh with args after the cache
// directory and returns the archive it built.
func imageArchive(t testing.TB, args ...string) string {
	t.Helper()
	root := testenv.RepoRoot()
	if root == "" {
		t.Fatal("repository root not found")
	}
	if _, err := os.Stat("/bin/busybox"); err != nil {
		testenv.Missing(t, "busybox-static", err)
	}
	dir := filepath.Join(os.TempDir(), "strata-test-images")
	var stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(root, "deploy", "dev", "images.sh"), append([]string{dir}, args...)...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("deploy/dev/images.sh: %v: %s", err, stderr.String())
	}
	path := strings.TrimSpace(string(out))
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("deploy/dev/images.sh printed %q: %v", path, err)
	}
	return path
}

// randomSuffix is 8 random hex digits.
func randomSuffix(t testing.TB) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// testEnv is a provider on a namespace of its own, cleaned up with
// everything in it when the test ends.
type testEnv struct {
	p       *Provider
	ns      string
	dataDir string
	archive string
	// opened are closed after the replicas' clean-ups, before the
	// namespace's.
	opened []*Provider
}

type envOption func(*Config)

// newEnv makes a provider on a fresh namespace and data directory.
// Cleanup deletes every replica, image, snapshot and namespace left, and
// checks that no network namespace or CNI attachment remains.
func newEnv(t testing.TB, opts ...envOption) *testEnv {
	t.Helper()
	requireContainerd(t)
	e := &testEnv{
		ns:      "strata-test-" + randomSuffix(t),
		dataDir: t.TempDir(),
		archive: busyboxArchive(t),
	}
	// The bridge locks are host-wide in production; a test's are its own.
	// The test archive's directory is the one image directory allowed.
	cfg := Config{
		Namespace: e.ns, LockDir: t.TempDir(), RestartBackoff: 50 * time.Millisecond, RestartBackoffMax: time.Second,
		ImageDirs: []string{filepath.Dir(e.archive)},
	}
	for _, o := range opts {
		o(&cfg)
	}
	t.Cleanup(func() {
		for _, p := range e.opened {
			if err := p.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		}
		cleanupNamespace(t, e.ns)
		for _, p := range e.opened {
			// The pins' directory is a mount point (see
			// createUsernsNetNS), which the data directory's removal
			// would trip on; it must hold no pin any more.
			dir := filepath.Dir(p.network.usernsPath("x"))
			if pins, _ := os.ReadDir(dir); len(pins) > 0 {
				t.Errorf("clean-up: user namespaces left pinned in %s: %d", dir, len(pins))
			}
			if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				t.Errorf("clean-up: unmount %s: %v", dir, err)
			}
		}
	})
	e.p = e.open(t, cfg)
	return e
}

// open makes another provider on the env's namespace and data directory
// (an agent restarting), closed when the test ends, after the clean-ups
// of the replicas. Close the one before first (see reopen).
func (e *testEnv) open(t testing.TB, cfg Config) *Provider {
	t.Helper()
	if cfg.Namespace == "" {
		cfg.Namespace = e.ns
	}
	level := slog.LevelDebug
	if _, bench := t.(*testing.B); bench {
		level = slog.LevelWarn // a log line per iteration would drown the results
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: level}))
	p, err := New(context.Background(), cfg, WithNode("node-test"), WithDataDir(e.dataDir), WithLogger(log))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e.opened = append(e.opened, p)
	return p
}

// reopen closes e's provider and makes another on its namespace and data
// directory, with cfg (an agent restarting, maybe reconfigured); it is
// e.p from then on. One provider supervises a namespace at a time, as one
// agent does: two would each restart a task the other stops to delete
// it, under replica locks the other does not see.
func (e *testEnv) reopen(t testing.TB, cfg Config) *Provider {
	t.Helper()
	if err := e.p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	e.p = e.open(t, cfg)
	return e.p
}

// testWriter sends the provider's log to the test's.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// assignment is a busybox Compute replica from the test archive running
// command, with a 1s stop grace period.
func (e *testEnv) assignment(id string, command ...string) *api.Assignment {
	if len(command) == 0 {
		command = serveForever()
	}
	return &api.Assignment{
		ID:         id,
		Tenant:     "acme",
		Resource:   "web",
		Kind:       api.KindCompute,
		Provider:   api.ProviderContainer,
		Desired:    api.DesiredRunning,
		Generation: 1,
		Spec: api.ResourceSpec{Compute: &api.ComputeSpec{
			Image:           "busybox",
			Command:         command,
			RestartPolicy:   api.RestartAlways,
			StopGracePeriod: api.D(time.Second),
		}},
		Flavor: api.FlavorSpec{VCPUs: 0.5, MemoryMiB: 64},
		Image:  &api.ImageSpec{Ref: busyboxRef, Archive: e.archive},
	}
}

// watch watches e's provider, waiting for its supervisor to follow
// containerd's events (until then Watch is unavailable).
func (e *testEnv) watch(t testing.TB, ctx context.Context) <-chan api.AssignmentStatus {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		ch, err := e.p.Watch(ctx)
		if err == nil {
			return ch
		}
		if !errors.Is(err, api.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("Watch: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *testEnv) ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	t.Cleanup(cancel)
	return ctx
}

// apply applies a, failing the test on error, and deletes the replica
// when the test ends.
func (e *testEnv) apply(t testing.TB, a *api.Assignment) api.AssignmentStatus {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		if err := e.p.Delete(ctx, &api.Assignment{ID: a.ID}, time.Second); err != nil {
			t.Errorf("clean-up: Delete %s: %v", a.ID, err)
		}
	})
	st, err := e.p.Apply(e.ctx(t), a)
	if err != nil {
		t.Fatalf("Apply %s: %v", a.ID, err)
	}
	return st
}

// eventually polls cond until it holds or waitFor passes.
func eventually(t testing.TB, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	pause := 10 * time.Millisecond
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not done after %v: %s", what, waitFor, state)
		}
		time.Sleep(pause)
		pause = min(2*pause, 250*time.Millisecond)
	}
}

// waitStatus polls Status of id until ok holds and returns it.
func (e *testEnv) waitStatus(t testing.TB, id, what string, ok func(api.AssignmentStatus) bool) api.AssignmentStatus {
	t.Helper()
	var st api.AssignmentStatus
	eventually(t, id+" "+what, func() (bool, string) {
		var err error
		st, err = e.p.Status(e.ctx(t), id)
		if err != nil {
			return false, err.Error()
		}
		return ok(st), fmt.Sprintf("phase %s (%s), restarts %d", st.Phase, st.Reason, st.Restarts)
	})
	return st
}

// logs returns the replica's whole log.
func (e *testEnv) logs(t testing.TB, id string) string {
	t.Helper()
	var b bytes.Buffer
	if err := e.p.Logs(e.ctx(t), id, provider.LogOptions{}, &b); err != nil {
		t.Fatalf("Logs %s: %v", id, err)
	}
	return b.String()
}

// waitLogs polls the replica's log until it contains all of want.
func (e *testEnv) waitLogs(t testing.TB, id string, want ...string) string {
	t.Helper()
	var got string
	eventually(t, fmt.Sprintf("logs of %s contain %q", id, want), func() (bool, string) {
		got = e.logs(t, id)
		for _, w := range want {
			if !strings.Contains(got, w) {
				return false, fmt.Sprintf("got %q", got)
			}
		}
		return true, ""
	})
	return got
}

// cleanupNamespace removes whatever a test left in its namespace (also
// after a failure), checks that the provider cleaned up its network
// namespaces, and deletes the namespace.
func cleanupNamespace(t testing.TB, ns string) {
	t.Helper()
	c, err := client.New(DefaultAddress, client.WithDefaultNamespace(ns))
	if err != nil {
		t.Errorf("clean-up: %v", err)
		return
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(namespaces.WithNamespace(context.Background(), ns), waitFor)
	defer cancel()
	cs, err := c.Containers(ctx)
	if err != nil {
		t.Errorf("clean-up: list containers: %v", err)
	}
	for _, ctr := range cs {
		t.Errorf("clean-up: container %s left in %s", ctr.ID(), ns)
		if task, err := ctr.Task(ctx, nil); err == nil {
			task.Delete(ctx, client.WithProcessKill) //nolint:errcheck // best effort after a failure
		}
		if err := ctr.Delete(ctx, client.WithSnapshotCleanup); err != nil {
			t.Errorf("clean-up: delete container %s: %v", ctr.ID(), err)
		}
	}
	if leftovers, _ := filepath.Glob(filepath.Join(DefaultNetNSDir, ns+"-*")); len(leftovers) > 0 {
		t.Errorf("clean-up: network namespaces left: %v", leftovers)
		for _, l := range leftovers {
			removeNetNS(l) //nolint:errcheck // best effort
		}
	}
	is := c.ImageService()
	imgs, err := is.List(ctx)
	if err != nil {
		t.Errorf("clean-up: list images: %v", err)
	}
	for i, img := range imgs {
		var opts []images.DeleteOpt
		if i == len(imgs)-1 {
			// Collect the content and snapshots before the namespace
			// goes: it must be empty.
			opts = append(opts, images.SynchronousDelete())
		}
		if err := is.Delete(ctx, img.Name, opts...); err != nil {
			t.Errorf("clean-up: delete image %s: %v", img.Name, err)
		}
	}
	sn := c.SnapshotService(DefaultSnapshotter)
	var snaps []string
	if err := sn.Walk(ctx, func(_ context.Context, info snapshots.Info) error {
		snaps = append(snaps, info.Name)
		return nil
	}); err != nil {
		t.Errorf("clean-up: walk snapshots: %v", err)
	}
	// Image layers are collected in the background after the delete.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err = c.NamespaceService().Delete(ctx, ns)
		if isNotFound(err) {
			err = nil // the test created nothing in it
		}
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Errorf("clean-up: delete namespace %s: %v (snapshots %v)", ns, err, snaps)
	}
	// containerd keeps an empty state directory per namespace that ran
	// tasks; Remove takes only empty ones. A task's bundle in it goes
	// once its shim has exited, which may follow the task's deletion by
	// a moment: an error only if it stays.
	for _, dir := range []string{
		"/run/containerd/io.containerd.runtime.v2.task", "/run/containerd/runc", "/var/lib/containerd/io.containerd.runtime.v2.task",
	} {
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := os.Remove(filepath.Join(dir, ns))
			if err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) {
				entries, _ := os.ReadDir(filepath.Join(dir, ns))
				var left []string
				for _, e := range entries {
					left = append(left, e.Name())
				}
				t.Errorf("clean-up: %v (holding %v)", err, left)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// activeSnapshots lists the snapshots of the env's namespace that are
// not image layers (those are committed).
func (e *testEnv) activeSnapshots(t testing.TB) []string {
	t.Helper()
	var out []string
	err := e.p.client.SnapshotService(e.p.cfg.Snapshotter).Walk(e.p.nsCtx(e.ctx(t)), func(_ context.Context, info snapshots.Info) error {
		if info.Kind == snapshots.KindActive {
			out = append(out, info.Name)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk snapshots: %v", err)
	}
	return out
}

// checkGone checks that nothing of replica id remains in containerd or
// on the host.
func (e *testEnv) checkGone(t testing.TB, id string) {
	t.Helper()
	ctx := e.p.nsCtx(e.ctx(t))
	if _, err := e.p.client.LoadContainer(ctx, id); !isNotFound(err) {
		t.Errorf("container %s: got %v; want not found", id, err)
	}
	if ti, err := e.p.tasks.task(ctx, id); err != nil || ti != nil {
		t.Errorf("task %s: got %+v, %v; want none", id, ti, err)
	}
	if _, err := e.p.client.SnapshotService(e.p.cfg.Snapshotter).Stat(ctx, id); !isNotFound(err) {
		t.Errorf("snapshot %s: got %v; want not found", id, err)
	}
	for _, path := range []string{e.p.network.netnsPath(id), e.p.network.conflistPath(id), e.p.network.hostsPath(id), e.p.network.resolvPath(id), e.p.tasks.logPath(id)} {
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: got %v; want it removed", path, err)
		}
	}
	// libcni caches each attachment's result (the IP) per network and id.
	cached, _ := filepath.Glob(filepath.Join(e.p.network.cniCacheDir(), "results", "*-"+id+"-*"))
	if len(cached) > 0 {
		t.Errorf("CNI cache: got %v; want no result of %s", cached, id)
	}
}
