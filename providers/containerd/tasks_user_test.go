package containerd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/snapshots"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
)

// idProbe prints the ids a replica runs with and the secret of
// probeSecret, then serves until SIGTERM.
var idProbe = []string{"sh", "-c", `trap 'exit 0' TERM; echo "ids uid=$(id -u) gid=$(id -g) groups=$(id -G)"; echo "secret $(cat /run/secrets/db/password 2>&1)"; sleep 3600 & wait`}

// probeSecret is a Secret mounted as a file (mode 0400).
var probeSecret = &provider.ConfigData{Files: []provider.File{{Dir: "/run/secrets/db", Name: "password", Data: []byte("pw-7"), Secret: true}}}

// hostIDs reads the real, effective, saved and filesystem uids and gids
// of pid from the host's /proc.
func hostIDs(t *testing.T, pid uint32) (uids, gids string) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("process of the replica: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Uid:"); ok {
			uids = strings.Join(strings.Fields(v), " ")
		}
		if v, ok := strings.CutPrefix(line, "Gid:"); ok {
			gids = strings.Join(strings.Fields(v), " ")
		}
	}
	return uids, gids
}

// TestRunAsUser checks the user a replica runs as, seen inside (id) and
// from the host (/proc/<pid>/status): the image's USER, by name or
// number, replaced by runAsUser and runAsGroup as in Kubernetes; root
// when neither says otherwise. Whoever it is reads its secrets.
func TestRunAsUser(t *testing.T) {
	e := newEnv(t)
	nobody := busyboxUserArchive(t, "nobody")
	numeric := busyboxUserArchive(t, "1000:1000")
	id := func(v int64) *int64 { return &v }
	tests := []struct {
		name    string
		archive string // "" the root image
		ref     string
		sc      *api.SecurityContext
		// uid and gid in the container and on the host (no user
		// namespace: the same); groups as id -G prints them.
		uid, gid, groups string
	}{
		{"root image", "", busyboxRef, nil, "0", "0", "0"},
		{"runAsUser", "", busyboxRef, &api.SecurityContext{RunAsUser: id(1000)}, "1000", "0", "0"},
		{"runAsUser and runAsGroup", "", busyboxRef, &api.SecurityContext{RunAsUser: id(1000), RunAsGroup: id(2000), RunAsNonRoot: true}, "1000", "2000", "2000"},
		{"runAsUser of /etc/passwd", "", busyboxRef, &api.SecurityContext{RunAsUser: id(65534)}, "65534", "65534", "65534"},
		{"image USER by name", nobody, busyboxUserRef("nobody"), &api.SecurityContext{RunAsNonRoot: true}, "65534", "65534", "65534"},
		{"image USER by number", numeric, busyboxUserRef("1000:1000"), nil, "1000", "1000", "1000"},
		{"runAsUser over the image's USER", nobody, busyboxUserRef("nobody"), &api.SecurityContext{RunAsUser: id(4242)}, "4242", "0", "0"},
		{"runAsGroup over the image's USER", nobody, busyboxUserRef("nobody"), &api.SecurityContext{RunAsGroup: id(1234)}, "65534", "1234", "1234"},
		{"runAsUser 0 over the image's USER", numeric, busyboxUserRef("1000:1000"), &api.SecurityContext{RunAsUser: id(0)}, "0", "0", "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := e.assignment("user-"+randomSuffix(t), idProbe...)
			a.Spec.Compute.SecurityContext = tt.sc
			if tt.archive != "" {
				a.Image = &api.ImageSpec{Ref: tt.ref, Archive: tt.archive}
			}
			t.Cleanup(func() { e.p.Delete(e.ctx(t), &api.Assignment{ID: a.ID}, time.Second) }) //nolint:errcheck // checked by the namespace clean-up
			if st, err := e.p.ApplyConfig(e.ctx(t), a, probeSecret); err != nil || st.Phase != api.PhaseReady {
				t.Fatalf("ApplyConfig: got %s (%s), %v; want ready", st.Phase, st.Reason, err)
			}
			got := e.waitLogs(t, a.ID, "secret ")
			for _, want := range []string{fmt.Sprintf("ids uid=%s gid=%s groups=%s", tt.uid, tt.gid, tt.groups), "secret pw-7"} {
				if !strings.Contains(got, want) {
					t.Errorf("in the container: got %q; want %q", strings.TrimSpace(got), want)
				}
			}
			uids, gids := hostIDs(t, e.pid(t, a.ID))
			if w := strings.Repeat(tt.uid+" ", 3) + tt.uid; uids != w {
				t.Errorf("on the host, Uid: got %q; want %q", uids, w)
			}
			if w := strings.Repeat(tt.gid+" ", 3) + tt.gid; gids != w {
				t.Errorf("on the host, Gid: got %q; want %q", gids, w)
			}
		})
	}
}

// TestRunAsNonRoot checks that a replica that would run as root is
// failed with the reason, not started: runAsNonRoot with an image whose
// user is root, and any root replica on a node with refuseRoot. The
// same specs with a user other than root start. (And an image USER
// that names no user fails too, rather than running as root.)
func TestRunAsNonRoot(t *testing.T) {
	e := newEnv(t)
	nobody := busyboxUserArchive(t, "nobody")
	root := busyboxUserArchive(t, "0")
	unknown := busyboxUserArchive(t, "app") // not in the image's /etc/passwd
	id := func(v int64) *int64 { return &v }
	type spec struct {
		archive, ref string
		sc           *api.SecurityContext
	}
	rootImage := spec{"", busyboxRef, nil}
	tests := []struct {
		name       string
		refuseRoot bool
		spec       spec
		want       *regexp.Regexp // nil: ready
	}{
		{"runAsNonRoot, image without USER", false, spec{"", busyboxRef, &api.SecurityContext{RunAsNonRoot: true}},
			regexp.MustCompile(`^securityContext: container has runAsNonRoot and image will run as root \(uid 0\)`)},
		{"runAsNonRoot, image USER 0", false, spec{root, busyboxUserRef("0"), &api.SecurityContext{RunAsNonRoot: true}},
			regexp.MustCompile(`^securityContext: container has runAsNonRoot and image will run as root`)},
		{"runAsNonRoot, runAsGroup only, image without USER", false, spec{"", busyboxRef, &api.SecurityContext{RunAsNonRoot: true, RunAsGroup: id(100)}},
			regexp.MustCompile(`^securityContext: container has runAsNonRoot and image will run as root`)},
		{"runAsNonRoot, image USER nobody", false, spec{nobody, busyboxUserRef("nobody"), &api.SecurityContext{RunAsNonRoot: true}}, nil},
		{"runAsNonRoot, runAsUser 1000", false, spec{"", busyboxRef, &api.SecurityContext{RunAsNonRoot: true, RunAsUser: id(1000)}}, nil},
		{"root image on a node that allows root", false, rootImage, nil},
		{"refuseRoot, image without USER", true, rootImage,
			regexp.MustCompile(`^securityContext: container would run as root \(the image's user is uid 0\) and this node refuses root containers \(refuseRoot\)`)},
		{"refuseRoot, runAsUser 0", true, spec{nobody, busyboxUserRef("nobody"), &api.SecurityContext{RunAsUser: id(0)}},
			regexp.MustCompile(`^securityContext: container's runAsUser 0 breaks this node's non-root policy \(refuseRoot\)`)},
		{"refuseRoot, runAsUser 1000", true, spec{"", busyboxRef, &api.SecurityContext{RunAsUser: id(1000)}}, nil},
		{"refuseRoot, image USER nobody", true, spec{nobody, busyboxUserRef("nobody"), nil}, nil},
		{"image USER not in /etc/passwd", false, spec{unknown, busyboxUserRef("app"), nil}, regexp.MustCompile(`^create container: no users found`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if e.p.cfg.RefuseRoot != tt.refuseRoot {
				cfg := e.p.cfg
				cfg.RefuseRoot = tt.refuseRoot
				e.reopen(t, cfg)
			}
			a := e.assignment("nonroot-"+randomSuffix(t), serveForever()...)
			a.Spec.Compute.SecurityContext = tt.spec.sc
			if tt.spec.archive != "" {
				a.Image = &api.ImageSpec{Ref: tt.spec.ref, Archive: tt.spec.archive}
			}
			st := e.apply(t, a)
			if tt.want == nil {
				if st.Phase != api.PhaseReady {
					t.Fatalf("Apply: got %s (%s); want ready", st.Phase, st.Reason)
				}
				return
			}
			if st.Phase != api.PhaseError || !tt.want.MatchString(st.Reason) {
				t.Fatalf("Apply: got %s (%s); want error matching %q", st.Phase, st.Reason, tt.want)
			}
			// Nothing ran, and Status, as after an agent restart, says
			// the same.
			if ti, err := e.p.tasks.task(e.p.nsCtx(e.ctx(t)), a.ID); err != nil || ti != nil {
				t.Errorf("task of a refused replica: got %+v, %v; want none", ti, err)
			}
			if again, err := e.p.Status(e.ctx(t), a.ID); err != nil || again.Phase != api.PhaseError || again.Reason != st.Reason {
				t.Errorf("Status: got %s (%s), %v; want the same error", again.Phase, again.Reason, err)
			}
		})
	}
}

// usernsProbe prints what a replica in a user namespace sees and can do:
// its ids and mapping, its network interfaces through /sys (its own
// network namespace's), writes to its root filesystem and a volume, and
// a secret; then it serves until SIGTERM.
const usernsProbe = `
echo "ids uid=$(id -u) gid=$(id -g)"
echo map $(cat /proc/self/uid_map)
echo "sysnet $(ls /sys/class/net | tr '\n' ' ')"
if echo x > /root/x && echo x > /tmp/x; then echo rootfs=rw; else echo rootfs=ro; fi
if echo x > /data/x; then echo volume=rw; else echo volume=ro; fi
echo "secret $(cat /run/secrets/db/password)"
trap 'exit 0' TERM; sleep 3600 & wait`

// TestUserNamespace runs replicas on a node with user namespaces (and
// refuseRoot, which their root passes): root in the container is the
// range's first id on the host, /sys shows the replica's own network,
// the root filesystem, a volume and a secret are its own; a restart
// joins the namespaces again; a user outside the range is refused; and
// deleting leaves no namespace, pin or snapshot.
func TestUserNamespace(t *testing.T) {
	const (
		bridge = "st-test6"
		hostID = DefaultUserNamespaceHostID
	)
	freshBridge(t, bridge)
	e := newEnv(t, func(c *Config) { c.UserNamespace, c.RefuseRoot = true, true })
	vol := &api.Assignment{ID: "vol-" + randomSuffix(t), Kind: api.KindVolume, Provider: api.ProviderContainer, Generation: 1,
		Spec: api.ResourceSpec{Volume: &api.VolumeSpec{SizeMiB: 8}}}
	e.apply(t, vol)
	id := func(v int64) *int64 { return &v }
	for i, tt := range []struct {
		name     string
		sc       *api.SecurityContext
		uid, gid uint32 // in the container
	}{
		{"root", nil, 0, 0},
		{"runAsUser", &api.SecurityContext{RunAsUser: id(1000), RunAsGroup: id(1000)}, 1000, 1000},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := e.assignment("userns-"+randomSuffix(t), "sh", "-c", usernsProbe)
			a.Spec.Compute.SecurityContext = tt.sc
			a.Network = &api.NetworkAttachment{Network: "userns", Bridge: bridge, Subnet: "10.213.6.0/24", Address: fmt.Sprintf("10.213.6.%d", 11+i)}
			a.Volumes = []api.VolumeAttachment{{Name: "data", VolumeID: vol.ID, Path: "/data"}}
			t.Cleanup(func() { e.p.Delete(e.ctx(t), &api.Assignment{ID: a.ID}, time.Second) }) //nolint:errcheck // checked below and by the namespace clean-up
			st, err := e.p.ApplyConfig(e.ctx(t), a, probeSecret)
			if err != nil || st.Phase != api.PhaseReady {
				t.Fatalf("ApplyConfig: %s (%s), %v; want ready", st.Phase, st.Reason, err)
			}
			want := []string{
				fmt.Sprintf("ids uid=%d gid=%d", tt.uid, tt.gid),
				fmt.Sprintf("map %d %d %d", 0, hostID, DefaultUserNamespaceSize),
				"sysnet eth0 lo ",
				"secret pw-7",
			}
			if tt.uid == 0 {
				// The volume and the root filesystem are root's: the
				// namespace's, not the host's.
				want = append(want, "rootfs=rw", "volume=rw")
			}
			got := e.waitLogs(t, a.ID, "secret ")
			for _, w := range want {
				if !strings.Contains(got, w) {
					t.Errorf("in the container: got %q; want %q", got, w)
				}
			}
			uids, gids := hostIDs(t, e.pid(t, a.ID))
			if w := strings.TrimSpace(strings.Repeat(fmt.Sprint(hostID+tt.uid)+" ", 4)); uids != w {
				t.Errorf("on the host, Uid: got %q; want %q", uids, w)
			}
			if w := strings.TrimSpace(strings.Repeat(fmt.Sprint(hostID+tt.gid)+" ", 4)); gids != w {
				t.Errorf("on the host, Gid: got %q; want %q", gids, w)
			}

			// A crash: the new task joins the same namespaces.
			pid := e.pid(t, a.ID)
			if err := syscall.Kill(int(pid), syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			e.waitStatus(t, a.ID, "restarted", func(st api.AssignmentStatus) bool { return st.Phase == api.PhaseReady && st.Restarts == 1 })
			eventually(t, "the new task's probe", func() (bool, string) {
				logs := e.logs(t, a.ID)
				return strings.Count(logs, "sysnet eth0 lo ") == 2 && strings.Count(logs, "secret pw-7") == 2, logs
			})

			if err := e.p.Delete(e.ctx(t), a, time.Second); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			e.checkGone(t, a.ID)
			if _, err := os.Stat(e.p.network.usernsPath(a.ID)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("pinned user namespace: got %v; want it removed", err)
			}
		})
	}
	t.Run("namespaces restored after a reboot", func(t *testing.T) {
		a := e.assignment("userns-boot-"+randomSuffix(t), "sh", "-c", usernsProbe)
		a.Network = &api.NetworkAttachment{Network: "userns", Bridge: bridge, Subnet: "10.213.6.0/24", Address: "10.213.6.21"}
		a.Volumes = []api.VolumeAttachment{{Name: "data", VolumeID: vol.ID, Path: "/data"}}
		t.Cleanup(func() { e.p.Delete(e.ctx(t), &api.Assignment{ID: a.ID}, time.Second) }) //nolint:errcheck // checked by the namespace clean-up
		if st, err := e.p.ApplyConfig(e.ctx(t), a, probeSecret); err != nil || st.Phase != api.PhaseReady {
			t.Fatalf("ApplyConfig: %s (%s), %v; want ready", st.Phase, st.Reason, err)
		}
		e.waitLogs(t, a.ID, "sysnet eth0 lo ")
		cfg := e.p.cfg
		if err := e.p.Close(); err != nil {
			t.Fatal(err)
		}
		// The reboot: the task and both namespaces go; containerd keeps
		// the container. The next provider, even with user namespaces
		// turned off, makes them again as the container was made.
		ctx := e.p.nsCtx(e.ctx(t))
		c, err := client.New(DefaultAddress, client.WithDefaultNamespace(e.ns))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ctr, err := c.LoadContainer(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		task, err := ctr.Task(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := task.Delete(ctx, client.WithProcessKill); err != nil {
			t.Fatalf("delete task: %v", err)
		}
		if err := e.p.network.removeNamespaces(a.ID); err != nil {
			t.Fatal(err)
		}
		cfg.UserNamespace = false
		e.p = e.open(t, cfg)
		e.waitStatus(t, a.ID, "restarted", func(st api.AssignmentStatus) bool { return st.Phase == api.PhaseReady && st.Restarts == 1 })
		eventually(t, "the new task's probe", func() (bool, string) {
			logs := e.logs(t, a.ID)
			return strings.Count(logs, "sysnet eth0 lo ") == 2 && strings.Count(logs, "map 0 1073741824 65536") == 2, logs
		})
		uids, _ := hostIDs(t, e.pid(t, a.ID))
		if w := strings.TrimSpace(strings.Repeat(fmt.Sprint(hostID)+" ", 4)); uids != w {
			t.Errorf("on the host, Uid: got %q; want %q", uids, w)
		}
		cfg.UserNamespace = true
		e.reopen(t, cfg)
	})
	t.Run("user outside the range", func(t *testing.T) {
		a := e.assignment("userns-out-"+randomSuffix(t), serveForever()...)
		a.Spec.Compute.SecurityContext = &api.SecurityContext{RunAsUser: id(DefaultUserNamespaceSize)}
		st := e.apply(t, a)
		if want := "securityContext: user 65536:0 is outside this node's user namespace (ids 0-65535)"; st.Phase != api.PhaseError || st.Reason != want {
			t.Errorf("Apply: got %s (%s); want error %q", st.Phase, st.Reason, want)
		}
	})
	// The image's remapped root filesystem is kept for the next replica
	// while the image is: one snapshot per image and range.
	var remapped []string
	if err := e.p.client.SnapshotService(e.p.cfg.Snapshotter).Walk(e.p.nsCtx(e.ctx(t)), func(_ context.Context, info snapshots.Info) error {
		if strings.HasPrefix(info.Name, "strata-userns-") {
			remapped = append(remapped, info.Name+" ("+info.Kind.String()+")")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(remapped) != 1 || !strings.HasSuffix(remapped[0], "(Committed)") {
		t.Errorf("remapped snapshots: got %v; want one, committed", remapped)
	}
}
