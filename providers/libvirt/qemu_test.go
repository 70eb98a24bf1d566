package libvirt

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"libvirt.org/go/libvirt"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
	"github.com/stratahq/strata/providers/provider/providertest"
	"github.com/stratahq/strata/testkit/testenv"
)

// The tests against a real libvirtd boot the kernel and initramfs of
// deploy/dev/vm-image.sh. STRATA_LIBVIRT_URI picks the daemon (default
// qemu:///system), STRATA_VM_IMAGE_DIR the image directory (default
// .cache/vm, built when missing).

// markerPrefix starts the line the test VM prints once its network is
// configured.
const markerPrefix = "STRATA-VM-READY"

// qemuEnv is a real libvirtd with a pool, a bridge and the test VM image,
// all of the test's own, removed when it ends.
type qemuEnv struct {
	uri    string
	p      *Provider
	kernel string
	initrd string
	base   string // an empty qcow2 image, the root disk's backing file
	bridge string
	subnet string // 10.213.N.0/24

	mu    sync.Mutex
	hosts int // the last host address handed out
}

func newQEMUEnv(t *testing.T) *qemuEnv {
	t.Helper()
	testenv.RequireRoot(t, "libvirtd (qemu:///system)")
	uri := os.Getenv("STRATA_LIBVIRT_URI")
	if uri == "" {
		uri = "qemu:///system"
	}
	c, err := libvirt.NewConnect(uri)
	if err != nil {
		testenv.Missing(t, "libvirtd at "+uri+" (deploy/dev/deps.sh starts it)", err)
	}
	_, _ = c.Close()
	qemuImg := testenv.LookPath(t, "qemu-img")
	testenv.LookPath(t, "ip")

	images := os.Getenv("STRATA_VM_IMAGE_DIR")
	if images == "" {
		images = filepath.Join(testenv.RepoRoot(), ".cache", "vm")
	}
	script := filepath.Join(testenv.RepoRoot(), "deploy", "dev", "vm-image.sh")
	if out, err := exec.CommandContext(t.Context(), script, images).CombinedOutput(); err != nil {
		testenv.Missing(t, "the test VM image (deploy/dev/vm-image.sh)", fmt.Errorf("%w: %s", err, out))
	}

	// QEMU runs as its own user: everything it opens must be reachable,
	// which a t.TempDir (0700) is not.
	dir, err := os.MkdirTemp("", "strata-libvirt-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(dir, "base.qcow2")
	if out, err := exec.CommandContext(t.Context(), qemuImg, "create", "-q", "-f", "qcow2", base, "64M").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img create: %v: %s", err, out)
	}

	suffix := randomHex(t, 2)
	e := &qemuEnv{
		uri:    uri,
		kernel: filepath.Join(images, "vmlinuz"),
		initrd: filepath.Join(images, "initramfs.gz"),
		base:   base,
		bridge: "stratat" + suffix,
		subnet: fmt.Sprintf("10.213.%d", 1+int(suffix[0])%250),
	}
	pool := "strata-test-" + suffix
	// An hour between rescans: what watches see comes from lifecycle
	// events.
	// The pool is under dir/data, which the provider denies although dir
	// is an image directory.
	p, err := New(t.Context(), Config{URI: uri, Pool: pool, ImageDirs: []string{images, dir}},
		WithNode("test-"+suffix), WithDataDir(filepath.Join(dir, "data")), WithLogger(testLogger(t)),
		WithRescanInterval(time.Hour))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e.p = p
	// The domain type choice (trying KVM) is not part of any timing.
	accel, err := p.accel.domainType(t.Context(), e.kernel)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("domain type %s: %s", accel.Type, accel.Reason)
	t.Cleanup(func() {
		deleteAll(t, p)
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		removePool(t, uri, pool)
		if _, err := os.Stat("/sys/class/net/" + e.bridge); err == nil {
			if out, err := exec.Command("ip", "link", "del", e.bridge).CombinedOutput(); err != nil {
				t.Errorf("clean-up: remove bridge %s: %v: %s", e.bridge, err, out)
			}
		}
	})
	return e
}

// vm returns a Compute assignment booting the test VM on the env's bridge
// with the next address.
func (e *qemuEnv) vm(t *testing.T, tag string) *api.Assignment {
	return e.vmWithID(tag + "-" + randomHex(t, 3))
}

func (e *qemuEnv) vmWithID(id string) *api.Assignment {
	e.mu.Lock()
	e.hosts++
	host := 10 + e.hosts%240
	e.mu.Unlock()
	return &api.Assignment{
		ID:         id,
		Kind:       api.KindCompute,
		Provider:   api.ProviderVM,
		Generation: 1,
		Spec:       api.ResourceSpec{Compute: &api.ComputeSpec{Image: "strata-test-vm"}},
		Flavor:     api.FlavorSpec{VCPUs: 1, MemoryMiB: 256},
		Image:      &api.ImageSpec{Kernel: e.kernel, Initrd: e.initrd},
		Network: &api.NetworkAttachment{
			Network: "test",
			Bridge:  e.bridge,
			Subnet:  e.subnet + ".0/24",
			Gateway: e.subnet + ".1",
			Address: fmt.Sprintf("%s.%d", e.subnet, host),
		},
	}
}

// TestQEMU runs VMs on a real libvirtd: booting with the region's address,
// volumes surviving their VM, clean deletion, and the boot time.
func TestQEMU(t *testing.T) {
	e := newQEMUEnv(t)
	t.Run("Boot", e.testBoot)
	t.Run("StoppedAndCrashed", e.testStoppedAndCrashed)
	t.Run("Volume", e.testVolume)
	t.Run("ReadyMarker", e.testReadyMarker)
	t.Run("BootTime", e.testBootTime)
	t.Run("ConfigDrive", e.testConfigDrive)
	t.Run("Conformance", func(t *testing.T) {
		providertest.Run(t, providertest.Harness{
			New:   func(*testing.T) provider.Provider { return e.p },
			Kinds: []api.ProviderKind{api.ProviderVM},
			Assignment: func(_ *testing.T, _ api.ProviderKind, id string) *api.Assignment {
				return e.vmWithID(id)
			},
			ReadyTimeout: time.Minute,
			SupportsLogs: true,
			Watches:      true,
			Kill:         func(t *testing.T, id string) { destroyDomain(t, e.uri, id) },
			// The guest's init runs the command from the config drive
			// and powers off (configdrive.go).
			Exit: func(a *api.Assignment, code int32) {
				a.Spec.Compute.Command = []string{"sh", "-c", fmt.Sprintf("echo done; exit %d", code)}
				a.Spec.Compute.RestartPolicy = api.RestartNever
			},
		})
	})
}

// testBoot boots a VM with a copy-on-write root disk and checks that its
// console shows the address, then that Delete leaves nothing behind.
func (e *qemuEnv) testBoot(t *testing.T) {
	a := e.vm(t, "boot")
	a.Image.Disk = e.base
	start := time.Now()
	st, err := e.p.Apply(t.Context(), a)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	applied := time.Since(start)
	if st.Phase != api.PhaseReady {
		t.Fatalf("Apply: got phase %q (%s); want ready", st.Phase, st.Reason)
	}
	log := e.waitMarker(t, a.ID, 3*time.Minute)
	t.Logf("Apply returned (domain running) after %v; marker after %v", applied.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))

	want := fmt.Sprintf("%s %s %s", markerPrefix, hostname(a.ID), a.Network.Address)
	if !strings.Contains(log, want) {
		t.Errorf("console: got no line %q in\n%s", want, log)
	}
	if inet := "inet " + a.Network.Address + "/24"; !strings.Contains(log, inet) {
		t.Errorf("console: got no %q in the guest's ip addr output:\n%s", inet, log)
	}
	if !strings.Contains(log, "disks: vda") {
		t.Errorf("console: got no root disk vda in\n%s", log)
	}
	st, err = e.p.Status(t.Context(), a.ID)
	if err != nil || st.Phase != api.PhaseReady || st.Address != a.Network.Address || st.ProviderID != domainUUID(a.ID) {
		t.Errorf("Status: got %+v, %v; want ready at %s with UUID %s", st, err, a.Network.Address, domainUUID(a.ID))
	}
	taps := bridgePorts(t, e.bridge)
	if len(taps) != 1 {
		t.Errorf("bridge %s ports: got %v; want the VM's tap device", e.bridge, taps)
	}
	if !poolHas(t, e.p, overlayName(a.ID)) {
		t.Errorf("pool: got no %s; want the root disk overlay", overlayName(a.ID))
	}

	start = time.Now()
	if err := e.p.Delete(t.Context(), a, 30*time.Second); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	t.Logf("Delete took %v (ACPI shutdown)", time.Since(start).Round(time.Millisecond))
	e.checkGone(t, a.ID, taps)
}

// testStoppedAndCrashed checks the phase, reason and watch event of a VM
// shut down behind the provider's back and of a guest kernel panic, and
// that applying again restarts the VM.
func (e *qemuEnv) testStoppedAndCrashed(t *testing.T) {
	ch, err := e.p.Watch(t.Context())
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	tests := []struct {
		name       string
		kernelArgs string
		stop       func(d *libvirt.Domain) error
		reason     string
	}{
		{"guest shut down", "", func(d *libvirt.Domain) error { return d.Shutdown() }, "shut down by the guest"},
		{"guest kernel panic", "strata.panic", nil, "crashed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := e.vm(t, "stop")
			a.Spec.Compute.KernelArgs = tc.kernelArgs
			t.Cleanup(func() { _ = e.p.Delete(context.WithoutCancel(t.Context()), &api.Assignment{ID: a.ID}, 0) })
			if _, err := e.p.Apply(t.Context(), a); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			e.waitMarker(t, a.ID, 3*time.Minute)
			if tc.stop != nil {
				withDomain(t, e.p, a.ID, tc.stop)
			}
			for {
				st := next(t, ch, a.ID)
				if st.Phase == api.PhaseProvision || st.Phase == api.PhaseReady {
					continue // the start, reported before the stop
				}
				if st.Phase != api.PhaseError {
					t.Fatalf("watch: got phase %q (%s); want error", st.Phase, st.Reason)
				}
				break
			}
			// libvirt may settle the reason a moment after the stop.
			eventually(t, 10*time.Second, "the reason of the stop", func() (bool, string) {
				st, err := e.p.Status(t.Context(), a.ID)
				if err != nil {
					return false, err.Error()
				}
				return st.Phase == api.PhaseError && st.Reason == tc.reason, fmt.Sprintf("phase %q (%s)", st.Phase, st.Reason)
			})
			if tc.kernelArgs != "" {
				return // it would only panic again
			}
			st, err := e.p.Apply(t.Context(), a)
			if err != nil || st.Phase != api.PhaseReady || st.Restarts != 1 {
				t.Fatalf("Apply again: got %+v, %v; want ready with 1 restart", st, err)
			}
			// The console keeps the first boot; the second adds its own.
			e.waitMarkers(t, a.ID, 2, 3*time.Minute)
		})
	}
}

// testVolume checks that a Volume outlives the VMs that mount it and goes
// with its own assignment.
// TestSecurityVMImageFiles replays the VM image attacks of a review on
// the real libvirtd: a kernel, initrd or disk that is a host file outside
// the image directories (by path, with .., through a link), and a disk
// that is another replica's volume. Each is the replica's error, one
// reason per field whatever the cause, before anything boots.
func TestSecurityVMImageFiles(t *testing.T) {
	e := newQEMUEnv(t)
	vol := &api.Assignment{
		ID: "vol-victim-" + randomHex(t, 3), Kind: api.KindVolume, Provider: api.ProviderVM, Generation: 1,
		Spec: api.ResourceSpec{Volume: &api.VolumeSpec{SizeMiB: 16, Format: api.VolumeQcow2, Provider: api.ProviderVM}},
	}
	st, err := e.p.Apply(t.Context(), vol)
	if err != nil || st.Phase != api.PhaseReady {
		t.Fatalf("Apply volume: got %+v, %v; want ready", st, err)
	}
	t.Cleanup(func() { _ = e.p.Delete(context.WithoutCancel(t.Context()), vol, 0) })
	victim := st.ProviderID
	imageDir := filepath.Dir(e.base)
	link := filepath.Join(imageDir, "escape.qcow2")
	if err := os.Symlink("/etc/shadow", link); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "outside.qcow2")
	if err := os.WriteFile(outside, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		image api.ImageSpec
		field string
	}{
		{"kernel /etc/shadow", api.ImageSpec{Kernel: "/etc/shadow"}, "kernel"},
		{"kernel missing", api.ImageSpec{Kernel: "/boot/no-such-kernel"}, "kernel"},
		{"initrd with ..", api.ImageSpec{Kernel: e.kernel, Initrd: imageDir + "/../../etc/shadow"}, "initrd"},
		{"initrd relative", api.ImageSpec{Kernel: e.kernel, Initrd: "../../x"}, "initrd"},
		{"disk outside the image directories", api.ImageSpec{Disk: outside}, "disk"},
		{"disk through a link out", api.ImageSpec{Disk: link}, "disk"},
		{"disk that is another replica's volume", api.ImageSpec{Disk: victim}, "disk"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := e.vm(t, "attack")
			a.Image = &tt.image
			t.Cleanup(func() { _ = e.p.Delete(context.WithoutCancel(t.Context()), &api.Assignment{ID: a.ID}, 0) })
			st, err := e.p.Apply(t.Context(), a)
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			want := "image " + tt.field + " not allowed or not found"
			if st.Phase != api.PhaseError || !strings.HasSuffix(st.Reason, want) {
				t.Errorf("Apply with image %+v: got %s (%s); want error ending %q", tt.image, st.Phase, st.Reason, want)
			}
			c, err := e.p.conn.connect()
			if err != nil {
				t.Fatal(err)
			}
			if dom, err := c.LookupDomainByName(domainName(a.ID)); err == nil {
				dom.Free()
				t.Errorf("domain %s was defined; want nothing made of a refused image", domainName(a.ID))
			}
		})
	}
}

func (e *qemuEnv) testVolume(t *testing.T) {
	vol := &api.Assignment{
		ID:         "vol-" + randomHex(t, 3),
		Kind:       api.KindVolume,
		Provider:   api.ProviderVM,
		Generation: 1,
		Spec:       api.ResourceSpec{Volume: &api.VolumeSpec{SizeMiB: 16, Format: api.VolumeQcow2, Provider: api.ProviderVM}},
	}
	st, err := e.p.Apply(t.Context(), vol)
	if err != nil || st.Phase != api.PhaseReady {
		t.Fatalf("Apply volume: got %+v, %v; want ready", st, err)
	}
	path := st.ProviderID
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("volume file: %v", err)
	}

	// The first VM, then its replacement, mount the volume.
	for i, tag := range []string{"vol-user", "vol-user-next"} {
		a := e.vm(t, tag)
		a.Volumes = []api.VolumeAttachment{{Name: "data", VolumeID: vol.ID, Format: api.VolumeQcow2}}
		if st, err := e.p.Apply(t.Context(), a); err != nil || st.Phase != api.PhaseReady {
			t.Fatalf("Apply VM %d: got %+v, %v; want ready", i, st, err)
		}
		log := e.waitMarker(t, a.ID, 3*time.Minute)
		// No root disk: the volume is the guest's first virtio disk,
		// while libvirt calls it vdb.
		if !strings.Contains(log, "disks: vda") {
			t.Errorf("VM %d console: got no volume disk in\n%s", i, log)
		}
		if err := e.p.Delete(t.Context(), &api.Assignment{ID: a.ID}, 30*time.Second); err != nil {
			t.Fatalf("Delete VM %d: %v", i, err)
		}
		if st, err := e.p.Status(t.Context(), vol.ID); err != nil || st.Phase != api.PhaseReady {
			t.Fatalf("volume after VM %d was deleted: got %+v, %v; want ready", i, st, err)
		}
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("volume file after VM %d was deleted: %v", i, err)
		}
	}

	if err := e.p.Delete(t.Context(), &api.Assignment{ID: vol.ID}, time.Second); err != nil {
		t.Fatalf("Delete volume: %v", err)
	}
	if poolHas(t, e.p, vol.ID) {
		t.Errorf("pool after deleting the volume: got %s; want it gone", vol.ID)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("volume file after deleting the volume: got %v; want it gone", err)
	}
}

// testReadyMarker: with the image's ready marker, a running domain is
// provisioning until its guest prints the marker, then ready.
func (e *qemuEnv) testReadyMarker(t *testing.T) {
	a := e.vm(t, "marker")
	a.Image.ReadyMarker = markerPrefix
	t.Cleanup(func() { _ = e.p.Delete(context.WithoutCancel(t.Context()), &api.Assignment{ID: a.ID}, 0) })
	st, err := e.p.Apply(t.Context(), a)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if st.Phase != api.PhaseProvision || !strings.Contains(st.Reason, markerPrefix) {
		t.Fatalf("Apply: got phase %s (%s); want provision, waiting for %s", st.Phase, st.Reason, markerPrefix)
	}
	eventually(t, 3*time.Minute, "ready once the guest printed its marker", func() (bool, string) {
		st, err := e.p.Status(t.Context(), a.ID)
		if err != nil {
			return false, err.Error()
		}
		return st.Phase == api.PhaseReady, string(st.Phase) + ": " + st.Reason
	})
	log, _ := os.ReadFile(e.p.console.path(a.ID))
	if !strings.Contains(string(log), markerPrefix) {
		t.Errorf("ready before the marker appeared in the console")
	}
}

// testBootTime compares the provider's Apply with a bare `virsh create`
// of the same domain XML, from the call to the guest's marker. The two
// take turns at going first, so that neither always boots on a host
// still busy with the other's teardown (or with cold caches).
func (e *qemuEnv) testBootTime(t *testing.T) {
	virsh := testenv.LookPath(t, "virsh")
	const rounds = 2
	for round := 1; round <= rounds; round++ {
		var applyCall, applyMarker, createCall, createMarker time.Duration
		viaProvider := func() { applyCall, applyMarker = e.bootViaProvider(t) }
		viaVirsh := func() { createCall, createMarker = e.bootViaVirsh(t, virsh) }
		first, second := viaProvider, viaVirsh
		if round%2 == 0 {
			first, second = viaVirsh, viaProvider
		}
		first()
		second()
		t.Logf("boot time, round %d/%d (domain type %s): provider Apply %v (call %v); virsh create %v (call %v)",
			round, rounds, e.accelType(t), applyMarker.Round(time.Millisecond), applyCall.Round(time.Millisecond),
			createMarker.Round(time.Millisecond), createCall.Round(time.Millisecond))
	}
}

// bootViaProvider applies a VM, waits for its marker and deletes it; it
// returns the Apply call's time and the time to the marker.
func (e *qemuEnv) bootViaProvider(t *testing.T) (call, marker time.Duration) {
	a := e.vm(t, "time")
	start := time.Now()
	if _, err := e.p.Apply(t.Context(), a); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	call = time.Since(start)
	e.waitMarker(t, a.ID, 3*time.Minute)
	marker = time.Since(start)
	if err := e.p.Delete(t.Context(), &api.Assignment{ID: a.ID}, 0); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	return call, marker
}

// bootViaVirsh boots the domain the provider would define for a VM with
// `virsh create` of its XML, waits for its marker and destroys it; it
// returns the create call's time and the time to the marker.
func (e *qemuEnv) bootViaVirsh(t *testing.T, virsh string) (call, marker time.Duration) {
	b := e.vm(t, "time-base")
	c, err := e.p.conn.connect()
	if err != nil {
		t.Fatal(err)
	}
	img, err := e.p.images.files(c, b.Image)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := e.p.resolve(t.Context(), c, b, img, e.accelType(t))
	if err != nil {
		t.Fatalf("resolve: %v", err)
	}
	x, err := spec.render(nil)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "domain.xml")
	if err := os.WriteFile(file, []byte(x), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = exec.Command(virsh, "-c", e.uri, "destroy", domainName(b.ID)).Run()
		_ = os.Remove(spec.Console)
		e.p.console.removeQEMULog(domainName(b.ID))
	})
	start := time.Now()
	if out, err := exec.CommandContext(t.Context(), virsh, "-c", e.uri, "create", file).CombinedOutput(); err != nil {
		t.Fatalf("virsh create: %v: %s", err, out)
	}
	call = time.Since(start)
	waitFile(t, spec.Console, markerPrefix, 3*time.Minute)
	marker = time.Since(start)
	if out, err := exec.Command(virsh, "-c", e.uri, "destroy", domainName(b.ID)).CombinedOutput(); err != nil {
		t.Errorf("virsh destroy: %v: %s", err, out)
	}
	return call, marker
}

// accelType is the domain type the provider chose (cached since
// newQEMUEnv).
func (e *qemuEnv) accelType(t *testing.T) string {
	accel, err := e.p.accel.domainType(t.Context(), e.kernel)
	if err != nil {
		t.Fatal(err)
	}
	return accel.Type
}

// waitMarker waits for the guest's marker line and returns the console.
func (e *qemuEnv) waitMarker(t *testing.T, id string, timeout time.Duration) string {
	t.Helper()
	return waitFile(t, e.p.console.path(id), markerPrefix, timeout)
}

// waitMarkers waits for n marker lines: n boots.
func (e *qemuEnv) waitMarkers(t *testing.T, id string, n int, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, fmt.Sprintf("%d boots of %s", n, id), func() (bool, string) {
		b, _ := os.ReadFile(e.p.console.path(id))
		got := strings.Count(string(b), markerPrefix)
		return got >= n, fmt.Sprintf("%d markers", got)
	})
}

// checkGone checks that nothing of a deleted VM is left: no domain, no
// root disk, no tap device, no console log.
func (e *qemuEnv) checkGone(t *testing.T, id string, taps []string) {
	t.Helper()
	c, err := libvirt.NewConnect(e.uri)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer c.Close()
	if d, err := c.LookupDomainByName(domainName(id)); err == nil {
		d.Free()
		t.Errorf("libvirt after Delete: got domain %s; want none", domainName(id))
	}
	if poolHas(t, e.p, overlayName(id)) {
		t.Errorf("pool after Delete: got %s; want it gone", overlayName(id))
	}
	if ports := bridgePorts(t, e.bridge); len(ports) != 0 {
		t.Errorf("bridge %s after Delete: got ports %v; want none", e.bridge, ports)
	}
	for _, tap := range taps {
		if _, err := os.Stat("/sys/class/net/" + tap); err == nil {
			t.Errorf("after Delete: got tap device %s; want it gone", tap)
		}
	}
	if out, err := exec.Command("ip", "-o", "link", "show", "master", e.bridge).CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) != 0 {
		t.Errorf("ip link show master %s after Delete: got %q, %v; want nothing", e.bridge, out, err)
	}
	if _, err := os.Stat(e.p.console.path(id)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("console log after Delete: got %v; want it gone", err)
	}
	if e.uri == "qemu:///system" {
		qemuLog := filepath.Join(systemQEMULogDir, domainName(id)+".log")
		if _, err := os.Stat(qemuLog); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("libvirtd's log %s after Delete: got %v; want it gone", qemuLog, err)
		}
	}
}

// bridgePorts lists the interfaces enslaved to bridge.
func bridgePorts(t *testing.T, bridge string) []string {
	t.Helper()
	entries, err := os.ReadDir("/sys/class/net/" + bridge + "/brif")
	if err != nil {
		t.Fatalf("bridge %s: %v", bridge, err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	slices.Sort(out)
	return out
}

// waitFile polls path until it holds want and returns its content.
func waitFile(t *testing.T, path, want string, timeout time.Duration) string {
	t.Helper()
	var s string
	deadline := time.Now().Add(timeout)
	for {
		b, _ := os.ReadFile(path)
		if s = string(b); strings.Contains(s, want) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no %q after %v; got:\n%s", path, want, timeout, s)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("%s: test ended before %q", path, want)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// removePool destroys and undefines a pool the test made, with its
// directory.
func removePool(t *testing.T, uri, name string) {
	t.Helper()
	c, err := libvirt.NewConnect(uri)
	if err != nil {
		t.Errorf("clean-up: connect: %v", err)
		return
	}
	defer c.Close()
	pool, err := c.LookupStoragePoolByName(name)
	if err != nil {
		return
	}
	defer pool.Free()
	if active, _ := pool.IsActive(); active {
		if err := pool.Destroy(); err != nil {
			t.Errorf("clean-up: stop pool %s: %v", name, err)
		}
	}
	if err := pool.Delete(libvirt.STORAGE_POOL_DELETE_NORMAL); err != nil {
		t.Logf("clean-up: pool %s directory: %v", name, err)
	}
	if err := pool.Undefine(); err != nil {
		t.Errorf("clean-up: undefine pool %s: %v", name, err)
	}
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// testLogger sends the provider's log to the test's output.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
}
