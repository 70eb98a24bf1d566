package framework

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratahq/strata/testkit/testenv"
)

// RequireContainerd stops the test (a failure under CI=true) unless
// it runs as root with ctr and a containerd that answers.
func RequireContainerd(t *testing.T) {
	t.Helper()
	testenv.RequireRoot(t, "containerd (root)")
	testenv.LookPath(t, "ctr")
	if _, err := os.Stat("/run/containerd/containerd.sock"); err != nil {
		testenv.Missing(t, "containerd", err)
	}
	if _, err := Ctr("default", "version"); err != nil {
		testenv.Missing(t, "containerd", err)
	}
	for _, plugin := range []string{"bridge", "loopback", "static"} {
		if _, err := os.Stat(filepath.Join("/usr/lib/cni", plugin)); err != nil {
			testenv.Missing(t, "CNI plugins (containernetworking-plugins)", err)
		}
	}
}

// BusyboxArchive builds (or finds up to date) the busybox archive of
// `make images` and returns its absolute path.
func BusyboxArchive(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/bin/busybox"); err != nil {
		testenv.Missing(t, "busybox-static", err)
	}
	root := testenv.RepoRoot()
	if root == "" {
		t.Fatal("repository root not found")
	}
	cmd := exec.Command(filepath.Join(root, "deploy", "dev", "images.sh"), filepath.Join(root, ".cache", "images"))
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("deploy/dev/images.sh: %v: %s", err, ee.Stderr)
		}
		t.Fatalf("deploy/dev/images.sh: %v", err)
	}
	path := strings.TrimSpace(string(out))
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("deploy/dev/images.sh printed %q: %v", path, err)
	}
	return path
}
