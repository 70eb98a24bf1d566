// Package testenv decides what a test does when a real dependency
// (etcd binary, redis-server, containerd, libvirtd, haproxy) is missing.
//
// On a laptop such a test skips with the reason; under CI=true it fails,
// so that CI can never pass by silently skipping the tests that matter.
package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// InCI reports whether the tests run in CI (CI=true or CI=1).
func InCI() bool {
	v, _ := strconv.ParseBool(os.Getenv("CI"))
	return v
}

// Missing stops the test because a dependency is missing: a skip on a
// developer machine, a failure in CI.
func Missing(t testing.TB, what string, err error) {
	t.Helper()
	if InCI() {
		t.Fatalf("CI=true and %s is unavailable: %v", what, err)
	}
	t.Skipf("%s is unavailable (CI would fail here): %v", what, err)
}

// LookPath finds a binary or calls Missing.
func LookPath(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, name, err)
	}
	return p
}

// RequireRoot calls Missing unless the test runs as root.
func RequireRoot(t testing.TB, what string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, what, errNotRoot)
	}
}

// RepoRoot returns the directory holding go.mod, or "" if not found.
func RepoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// Binary finds a binary built by `make build` in the repository's bin/
// directory, or names it through the environment variable env.
func Binary(t testing.TB, env, name string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		return p
	}
	root := RepoRoot()
	p := filepath.Join(root, "bin", name)
	if _, err := os.Stat(p); err != nil {
		Missing(t, name+" (run `make build`, or set "+env+")", err)
	}
	return p
}

type notRoot struct{}

func (notRoot) Error() string { return "not running as root" }

var errNotRoot error = notRoot{}
