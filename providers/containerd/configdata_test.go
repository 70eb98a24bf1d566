package containerd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
)

// TestConfigFiles runs a container with a Config and a Secret mounted
// as files and a variable from each: it reads them, cannot write them,
// and the node holds them root-only (0444, 0400) until the replica is
// deleted; new data recreates the container.
func TestConfigFiles(t *testing.T) {
	e := newEnv(t)
	a := e.assignment("cfg-"+randomSuffix(t), "sh", "-c",
		`cat /etc/app/app.conf; cat /run/secrets/db/password; echo; echo "env $MODE $DB_PASSWORD"; echo x > /etc/app/new || echo read-only; trap 'exit 0' TERM; sleep 3600 & wait`)
	d := func(mode string) *provider.ConfigData {
		return &provider.ConfigData{
			Env: map[string]string{"MODE": mode, "DB_PASSWORD": "pw-1"},
			Files: []provider.File{
				{Dir: "/etc/app", Name: "app.conf", Data: []byte("listen 8080 " + mode + "\n")},
				{Dir: "/run/secrets/db", Name: "password", Data: []byte("pw-1"), Secret: true},
			},
		}
	}
	st, err := e.p.ApplyConfig(e.ctx(t), a, d("prod"))
	if err != nil || st.Phase != api.PhaseReady {
		t.Fatalf("ApplyConfig: %s (%s), %v; want ready", st.Phase, st.Reason, err)
	}
	e.waitLogs(t, a.ID, "listen 8080 prod", "pw-1", "env prod pw-1", "read-only")

	for _, f := range []struct {
		path string
		mode os.FileMode
	}{{"0/app.conf", 0o444}, {"1/password", 0o400}} {
		fi, err := os.Stat(filepath.Join(e.p.configs.containerDir(a.ID, api.MainContainer), f.path))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != f.mode {
			t.Errorf("%s: mode %v; want %v", f.path, fi.Mode().Perm(), f.mode)
		}
	}

	// The same data keeps the container; other data replaces it.
	before := e.containerLabels(t, a.ID)[labelSpec]
	if _, err := e.p.ApplyConfig(e.ctx(t), a, d("prod")); err != nil {
		t.Fatal(err)
	}
	if got := e.containerLabels(t, a.ID)[labelSpec]; got != before {
		t.Fatalf("the same data recreated the container (spec %s -> %s)", before, got)
	}
	a.Generation++
	if st, err := e.p.ApplyConfig(e.ctx(t), a, d("dev")); err != nil || st.Phase != api.PhaseReady {
		t.Fatalf("ApplyConfig with new data: %s (%s), %v", st.Phase, st.Reason, err)
	}
	e.waitLogs(t, a.ID, "listen 8080 dev", "env dev pw-1")

	if err := e.p.Delete(e.ctx(t), a, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(e.p.configs.dir(a.ID)); !os.IsNotExist(err) {
		t.Errorf("configs directory after Delete: %v; want it removed", err)
	}
}

// containerLabels are the labels of replica id's container.
func (e *testEnv) containerLabels(t *testing.T, id string) map[string]string {
	t.Helper()
	c, err := e.p.tasks.container(e.p.nsCtx(e.ctx(t)), id)
	if err != nil || c == nil {
		t.Fatalf("container %s: %v", id, err)
	}
	return c.Labels
}

// TestConfigFilesService checks the files of a replica's Configs and
// Secrets as the config service writes them, without containerd: one
// read-only mount per directory, Secrets readable by their owner only,
// keys that are not file names refused, each pod container's in a
// directory of its own, and removal of all of them with the replica.
func TestConfigFilesService(t *testing.T) {
	cf := &configFiles{root: t.TempDir()}
	files := []provider.File{
		{Dir: "/etc/app", Name: "app.conf", Data: []byte("a=1")},
		{Dir: "/etc/app", Name: "token", Data: []byte("s3cret"), Secret: true},
		{Dir: "/etc/other", Name: "x", Data: []byte("x")},
	}
	mounts, err := cf.mounts("r1", api.MainContainer, files)
	if err != nil {
		t.Fatal(err)
	}
	if len(mounts) != 2 || mounts[0].Destination != "/etc/app" || mounts[1].Destination != "/etc/other" {
		t.Fatalf("mounts: got %+v; want /etc/app and /etc/other", mounts)
	}
	for _, m := range mounts {
		if !slices.Contains(m.Options, "ro") {
			t.Errorf("mount %s: got options %v; want read-only", m.Destination, m.Options)
		}
	}
	for name, want := range map[string]os.FileMode{"app.conf": 0o444, "token": 0o400} {
		fi, err := os.Stat(filepath.Join(mounts[0].Source, name))
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: got %v, %v; want mode %v", name, fi.Mode().Perm(), err, want)
		}
	}
	if _, err := cf.mounts("r2", api.MainContainer, []provider.File{{Dir: "/etc", Name: "../passwd"}}); err == nil {
		t.Error("a key with a slash: got no error")
	}

	// A sidecar's files are its own: another directory, untouched by a
	// rewrite of the main container's.
	side, err := cf.mounts("r1", "side", []provider.File{{Dir: "/etc/app", Name: "app.conf", Data: []byte("side")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(side) != 1 || side[0].Source == mounts[0].Source || filepath.Dir(filepath.Dir(side[0].Source)) != cf.dir("r1") {
		t.Fatalf("sidecar mounts %+v (main's %+v); want one of its own under %s", side, mounts, cf.dir("r1"))
	}
	if b, err := os.ReadFile(filepath.Join(side[0].Source, "app.conf")); err != nil || string(b) != "side" {
		t.Errorf("sidecar's app.conf: %q, %v", b, err)
	}

	// No files: no mounts, and nothing left of earlier ones.
	if mounts, err := cf.mounts("r1", api.MainContainer, nil); err != nil || len(mounts) != 0 {
		t.Errorf("mounts without data: got %+v, %v; want none", mounts, err)
	}
	if _, err := os.Stat(cf.containerDir("r1", api.MainContainer)); !os.IsNotExist(err) {
		t.Errorf("files without data: %v; want the directory gone", err)
	}
	if b, err := os.ReadFile(filepath.Join(side[0].Source, "app.conf")); err != nil || string(b) != "side" {
		t.Errorf("sidecar's app.conf after the main container's rewrite: %q, %v", b, err)
	}
	if _, err := cf.mounts("r1", api.MainContainer, files); err != nil {
		t.Fatal(err)
	}
	if err := cf.remove("r1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cf.dir("r1")); !os.IsNotExist(err) {
		t.Errorf("after remove: %v; want the directory gone", err)
	}
}

// TestPodMemberConfigs runs a pod whose init container mounts a Config
// and whose sidecar, running as another user, mounts a Config and a
// Secret and takes a variable from the Secret: each reads its own files
// (read-only, the sidecar's secret readable by its user) and none of
// the main container's; new data for the sidecar recreates the pod; the
// replica's Delete removes every container's files.
func TestPodMemberConfigs(t *testing.T) {
	e := newEnv(t)
	id := "podcfg-" + randomSuffix(t)
	a := e.assignment(id, "sh", "-c", `trap 'exit 0' TERM
echo "main $(cat /etc/main/app.conf) env=$MODE side-env=${DB_PASSWORD:-unset}"
[ -e /etc/side ] || echo "main has no sidecar files"
sleep 3600 & wait`)
	uid := int64(1000)
	a.Spec.Compute.InitContainers = []api.Container{{Name: "prep", Image: "busybox", Command: []string{"sh", "-c",
		`echo "prep $(cat /etc/prep/app.conf)"; [ -e /etc/main ] || echo "prep has no main files"; echo x > /etc/prep/new 2>/dev/null || echo "prep read-only"`}}}
	a.Spec.Compute.Containers = []api.Container{{Name: "side", Image: "busybox",
		SecurityContext: &api.SecurityContext{RunAsUser: &uid},
		Command: []string{"sh", "-c", `trap 'exit 0' TERM
echo "side $(cat /etc/side/app.conf) secret=$(cat /run/secrets/db/password) env=$DB_PASSWORD uid=$(id -u)"
[ -e /etc/main ] || echo "side has no main files"
sleep 3600 & wait`}}}
	d := func(pw string) *provider.ConfigData {
		return &provider.ConfigData{
			Env:   map[string]string{"MODE": "main-mode"},
			Files: []provider.File{{Dir: "/etc/main", Name: "app.conf", Data: []byte("main-conf")}},
			Containers: map[string]provider.ContainerData{
				"prep": {Files: []provider.File{{Dir: "/etc/prep", Name: "app.conf", Data: []byte("prep-conf")}}},
				"side": {
					Env: map[string]string{"DB_PASSWORD": pw},
					Files: []provider.File{
						{Dir: "/etc/side", Name: "app.conf", Data: []byte("side-conf")},
						{Dir: "/run/secrets/db", Name: "password", Data: []byte(pw), Secret: true},
					},
				},
			},
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		if err := e.p.Delete(ctx, &api.Assignment{ID: id}, time.Second); err != nil {
			t.Errorf("clean-up: Delete %s: %v", id, err)
		}
	})
	if _, err := e.p.ApplyConfig(e.ctx(t), a, d("pw-1")); err != nil {
		t.Fatalf("ApplyConfig: %v", err)
	}
	e.waitLogs(t, id, "main main-conf env=main-mode side-env=unset", "main has no sidecar files")
	e.waitContainerLogs(t, id, "prep", "prep prep-conf", "prep has no main files", "prep read-only")
	e.waitContainerLogs(t, id, "side", "side side-conf secret=pw-1 env=pw-1 uid=1000", "side has no main files")
	e.waitStatus(t, id, "ready, prep completed", func(st api.AssignmentStatus) bool {
		return st.Phase == api.PhaseReady && len(st.Containers) == 3 && st.Containers[0].Reason == api.ReasonCompleted
	})
	fi, err := os.Stat(filepath.Join(e.p.configs.containerDir(id, "side"), "1", "password"))
	if err != nil || fi.Mode().Perm() != 0o400 {
		t.Errorf("sidecar's secret on the node: %v, %v; want mode 0400", fi, err)
	}

	// The same data keeps the pod; new data for the sidecar replaces it.
	before := e.containerLabels(t, id)[labelSpec]
	if _, err := e.p.ApplyConfig(e.ctx(t), a, d("pw-1")); err != nil {
		t.Fatal(err)
	}
	if got := e.containerLabels(t, id)[labelSpec]; got != before {
		t.Fatalf("the same data recreated the pod (spec %s -> %s)", before, got)
	}
	a.Generation++
	if _, err := e.p.ApplyConfig(e.ctx(t), a, d("pw-2")); err != nil {
		t.Fatal(err)
	}
	if got := e.containerLabels(t, id)[labelSpec]; got == before {
		t.Fatalf("new data for the sidecar kept the pod (spec %s)", got)
	}
	e.waitContainerLogs(t, id, "side", "secret=pw-2 env=pw-2")

	if err := e.p.Delete(e.ctx(t), &api.Assignment{ID: id}, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(e.p.configs.dir(id)); !os.IsNotExist(err) {
		t.Errorf("configs directory after Delete: %v; want it removed", err)
	}
}

// waitContainerLogs waits for the log of container name of replica id
// to hold each of want.
func (e *testEnv) waitContainerLogs(t testing.TB, id, name string, want ...string) {
	t.Helper()
	eventually(t, fmt.Sprintf("logs of %s -c %s contain %q", id, name, want), func() (bool, string) {
		// Its log may not be there yet: a sidecar's task starts after
		// the init containers.
		var b strings.Builder
		if err := e.p.Logs(e.ctx(t), id, provider.LogOptions{Container: name}, &b); err != nil {
			return false, err.Error()
		}
		got := b.String()
		for _, w := range want {
			if !strings.Contains(got, w) {
				return false, fmt.Sprintf("got %q", got)
			}
		}
		return true, ""
	})
}
