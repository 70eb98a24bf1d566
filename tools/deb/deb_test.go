package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stratahq/strata/testkit/testenv"
)

const testVersion = "0.0.0~test1"

// TestPackagesInstall builds the three packages from the binaries `make
// build` made (strata-agent in the strata package), installs them with dpkg into a throwaway root (maintainer
// scripts run against that root through DPKG_ROOT), and checks what an
// operator gets: files with their owners and modes, the strata user,
// units that systemd accepts, nothing enabled or started, and a purge
// that keeps the data.
func TestPackagesInstall(t *testing.T) {
	testenv.RequireRoot(t, "dpkg --root (chown to the strata user)")
	for _, tool := range []string{"dpkg", "dpkg-deb", "systemd-sysusers", "systemd-analyze"} {
		testenv.LookPath(t, tool)
	}
	bin := t.TempDir()
	for _, name := range []string{"strata", "strata-agent", "stratactl", "strata-provider-libvirt"} {
		src := testenv.Binary(t, "STRATA_BIN_"+strings.ToUpper(strings.ReplaceAll(name, "-", "_")), name)
		// A copy, not a symlink: nfpm packages a symlink as one.
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bin, name), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out := t.TempDir()
	if err := run(testenv.RepoRoot(), bin, out, testVersion, "amd64", nil); err != nil {
		t.Fatalf("building the packages: %v", err)
	}
	debs, _ := filepath.Glob(filepath.Join(out, "*.deb"))
	if len(debs) != 3 {
		t.Fatalf("packages built: %v; want 3", debs)
	}
	if got, want := field(t, filepath.Join(out, "strata-provider-libvirt_"+testVersion+"_amd64.deb"), "Depends"), "strata (= "+testVersion+")"; !strings.Contains(got, want) {
		t.Errorf("strata-provider-libvirt Depends: got %q; want it to contain %q", got, want)
	}

	root := newRoot(t)
	root.dpkg(t, append([]string{"--force-depends", "-i"}, debs...)...)
	// A second install (an upgrade to the same version) changes nothing.
	root.dpkg(t, append([]string{"--force-depends", "-i"}, debs...)...)

	uid, gid := root.user(t, "strata")
	for _, f := range []struct {
		path       string
		mode       fs.FileMode
		uid, gid   int
		dir, empty bool
	}{
		{path: "usr/bin/strata", mode: 0o755},
		{path: "usr/bin/strata-agent", mode: 0o755},
		{path: "usr/bin/stratactl", mode: 0o755},
		{path: "usr/bin/strata-provider-libvirt", mode: 0o755},
		{path: "usr/lib/systemd/system/strata-global.service", mode: 0o644},
		{path: "usr/lib/systemd/system/strata-region@.service", mode: 0o644},
		{path: "usr/lib/systemd/system/strata-agent.service", mode: 0o644},
		{path: "usr/lib/sysusers.d/strata.conf", mode: 0o644},
		{path: "usr/share/doc/strata/examples/global.yaml", mode: 0o644},
		{path: "etc/strata", mode: 0o750, gid: gid, dir: true, empty: true},
		{path: "var/lib/strata", mode: 0o750, uid: uid, gid: gid, dir: true},
	} {
		fi, err := os.Stat(filepath.Join(root.dir, f.path))
		if err != nil {
			t.Errorf("/%s: %v", f.path, err)
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().Perm() != f.mode || fi.IsDir() != f.dir || int(st.Uid) != f.uid || int(st.Gid) != f.gid {
			t.Errorf("/%s: got %v %d:%d; want %v (dir %v) %d:%d", f.path, fi.Mode(), st.Uid, st.Gid, f.mode, f.dir, f.uid, f.gid)
		}
		if f.empty {
			if ents, _ := os.ReadDir(filepath.Join(root.dir, f.path)); len(ents) != 0 {
				t.Errorf("/%s: got %d entries; want none (no configuration is installed, only examples)", f.path, len(ents))
			}
		}
	}
	if home, shell := root.passwd(t, "strata")[5], root.passwd(t, "strata")[6]; home != "/var/lib/strata" || shell != "/usr/sbin/nologin" {
		t.Errorf("strata user: home %q shell %q; want /var/lib/strata, /usr/sbin/nologin", home, shell)
	}
	if calls := root.systemctlCalls(); strings.Contains(calls, "start") || strings.Contains(calls, "enable") {
		t.Errorf("maintainer scripts ran %q; want nothing enabled or started", calls)
	}
	root.verifyUnits(t, "strata-global.service", "strata-agent.service", "strata-region@eu-west-1.service")
	// The agent's unit runs the agent's own binary, which the package
	// installs (verify above fails on a missing executable).
	if unit, err := os.ReadFile(filepath.Join(root.dir, "usr/lib/systemd/system/strata-agent.service")); err != nil || !strings.Contains(string(unit), "\nExecStart=/usr/bin/strata-agent ") {
		t.Errorf("strata-agent.service: %v; want ExecStart=/usr/bin/strata-agent ...", err)
	}

	// Purge: programs and units go, the empty configuration directory
	// goes, the data stays.
	root.dpkg(t, "--purge", "strata-provider-libvirt", "stratactl", "strata")
	for _, gone := range []string{"usr/bin/strata", "usr/bin/strata-agent", "usr/lib/systemd/system/strata-agent.service", "etc/strata"} {
		if _, err := os.Stat(filepath.Join(root.dir, gone)); err == nil {
			t.Errorf("/%s after purge: present; want gone", gone)
		}
	}
	if _, err := os.Stat(filepath.Join(root.dir, "var/lib/strata")); err != nil {
		t.Errorf("/var/lib/strata after purge: %v; want kept", err)
	}
}

// field reads one control field of a package.
func field(t *testing.T, deb, name string) string {
	t.Helper()
	b, err := exec.Command("dpkg-deb", "-f", deb, name).CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg-deb -f %s %s: %v: %s", deb, name, err, b)
	}
	return strings.TrimSpace(string(b))
}

// testRoot is a throwaway root dpkg installs into, with a systemctl on
// PATH that only records how it was called.
type testRoot struct {
	dir, shims string
}

func newRoot(t *testing.T) *testRoot {
	t.Helper()
	r := &testRoot{dir: t.TempDir(), shims: t.TempDir()}
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates", "etc"} {
		if err := os.MkdirAll(filepath.Join(r.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(r.dir, "var/lib/dpkg/status"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	shim := fmt.Sprintf("#!/bin/sh\necho \"$*\" >> %q\n", filepath.Join(r.shims, "calls"))
	if err := os.WriteFile(filepath.Join(r.shims, "systemctl"), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	return r
}

// dpkg runs dpkg on the root; maintainer scripts run outside a chroot
// with DPKG_ROOT set, as the packages' scripts expect.
func (r *testRoot) dpkg(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command("dpkg", append([]string{"--root=" + r.dir, "--force-script-chrootless", "--log=" + filepath.Join(r.shims, "dpkg.log")}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+r.shims+":"+os.Getenv("PATH"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("dpkg %s: %v\n%s", strings.Join(args, " "), err, b)
	}
}

// passwd returns the root's /etc/passwd fields of user.
func (r *testRoot) passwd(t *testing.T, user string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(r.dir, "etc/passwd"))
	if err != nil {
		t.Fatalf("the root's passwd: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Split(sc.Text(), ":"); len(fields) == 7 && fields[0] == user {
			return fields
		}
	}
	t.Fatalf("no user %s in the root's /etc/passwd", user)
	return nil
}

// user returns user's ids in the root.
func (r *testRoot) user(t *testing.T, user string) (uid, gid int) {
	t.Helper()
	p := r.passwd(t, user)
	uid, err1 := strconv.Atoi(p[2])
	gid, err2 := strconv.Atoi(p[3])
	if err1 != nil || err2 != nil || uid == 0 || gid == 0 {
		t.Fatalf("user %s: ids %q:%q; want a system user's", user, p[2], p[3])
	}
	return uid, gid
}

func (r *testRoot) systemctlCalls() string {
	b, _ := os.ReadFile(filepath.Join(r.shims, "calls"))
	return string(b)
}

// verifyUnits runs systemd-analyze verify on the installed units inside
// the root, next to this machine's own units (the targets they order
// after); any complaint fails the test, warnings included.
func (r *testRoot) verifyUnits(t *testing.T, units ...string) {
	t.Helper()
	if _, err := os.Stat("/usr/lib/systemd/system/sysinit.target"); err != nil {
		testenv.Missing(t, "systemd's own units (package systemd)", err)
	}
	unitDir := filepath.Join(r.dir, "usr/lib/systemd/system")
	if b, err := exec.Command("cp", "-an", "/usr/lib/systemd/system/.", unitDir).CombinedOutput(); err != nil {
		t.Fatalf("copying systemd's units: %v: %s", err, b)
	}
	cmd := exec.Command("systemd-analyze", append([]string{"verify", "--man=no", "--root=" + r.dir}, units...)...)
	cmd.Dir = unitDir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil || out.Len() > 0 {
		t.Errorf("systemd-analyze verify %s: %v\n%s", strings.Join(units, " "), err, out.String())
	}
}
