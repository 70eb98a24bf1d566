package containerd

import (
	"os"
	"path/filepath"
	"slices"
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
		fi, err := os.Stat(filepath.Join(e.p.configs.dir(a.ID), f.path))
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
// keys that are not file names refused, and removal.
func TestConfigFilesService(t *testing.T) {
	cf := &configFiles{root: t.TempDir()}
	d := &provider.ConfigData{Files: []provider.File{
		{Dir: "/etc/app", Name: "app.conf", Data: []byte("a=1")},
		{Dir: "/etc/app", Name: "token", Data: []byte("s3cret"), Secret: true},
		{Dir: "/etc/other", Name: "x", Data: []byte("x")},
	}}
	mounts, err := cf.mounts("r1", d)
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
	if _, err := cf.mounts("r2", &provider.ConfigData{Files: []provider.File{{Dir: "/etc", Name: "../passwd"}}}); err == nil {
		t.Error("a key with a slash: got no error")
	}
	// No files: no mounts, and nothing left of earlier ones.
	if mounts, err := cf.mounts("r1", nil); err != nil || len(mounts) != 0 {
		t.Errorf("mounts without data: got %+v, %v; want none", mounts, err)
	}
	if _, err := os.Stat(cf.dir("r1")); !os.IsNotExist(err) {
		t.Errorf("files without data: %v; want the directory gone", err)
	}
	if _, err := cf.mounts("r1", d); err != nil {
		t.Fatal(err)
	}
	if err := cf.remove("r1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cf.dir("r1")); !os.IsNotExist(err) {
		t.Errorf("after remove: %v; want the directory gone", err)
	}
}
