package libvirt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"libvirt.org/go/libvirt"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
	"github.com/stratahq/strata/providers/provider/providertest"
)

// testURI is libvirt's test driver: domains and pools in memory, shared by
// the connections of one process, and no daemon.
const testURI = "test:///default"

// testImageDir holds the (empty) kernel and initramfs of vmAssignment: the
// test driver reads no files, but the provider checks that they are in
// an image directory.
var testImageDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "strata-libvirt-images-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testImageDir = dir
	for _, f := range []string{"vmlinuz", "initramfs.gz", "disk.qcow2"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// newTestProvider returns a provider of the test driver for node (within
// the test's name, since tests share the driver), closed when the test
// ends.
func newTestProvider(t *testing.T, node string, opts ...Option) *Provider {
	t.Helper()
	opts = append([]Option{WithNode(t.Name() + "/" + node), WithDataDir(t.TempDir()), WithRescanInterval(100 * time.Millisecond)}, opts...)
	p, err := New(t.Context(), Config{URI: testURI, ImageDirs: []string{testImageDir}}, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

// vmAssignment is a Compute replica the test driver accepts: it reads no
// files, so they are empty.
func vmAssignment(id string) *api.Assignment {
	return &api.Assignment{
		ID:         id,
		Kind:       api.KindCompute,
		Provider:   api.ProviderVM,
		Generation: 1,
		Spec:       api.ResourceSpec{Compute: &api.ComputeSpec{Image: "tiny", KernelArgs: "quiet"}},
		Flavor:     api.FlavorSpec{VCPUs: 1, MemoryMiB: 128},
		Image:      &api.ImageSpec{Kernel: filepath.Join(testImageDir, "vmlinuz"), Initrd: filepath.Join(testImageDir, "initramfs.gz")},
		Network: &api.NetworkAttachment{
			Network: "default", Bridge: "strata0", Subnet: "10.88.0.0/16", Gateway: "10.88.0.1", Address: "10.88.0.7",
		},
	}
}

func volumeAssignment(id string, sizeMiB int64) *api.Assignment {
	return &api.Assignment{
		ID:         id,
		Kind:       api.KindVolume,
		Provider:   api.ProviderVM,
		Generation: 1,
		Spec:       api.ResourceSpec{Volume: &api.VolumeSpec{SizeMiB: sizeMiB, Format: api.VolumeQcow2, Provider: api.ProviderVM}},
	}
}

func TestConformance(t *testing.T) {
	// An hour between rescans: a kill must be reported by its event.
	p := newTestProvider(t, "node-a", WithRescanInterval(time.Hour))
	// The suite leaves the replicas of its concurrent Applies.
	t.Cleanup(func() { deleteAll(t, p) })
	providertest.Run(t, providertest.Harness{
		New:   func(*testing.T) provider.Provider { return p },
		Kinds: []api.ProviderKind{api.ProviderVM},
		Assignment: func(_ *testing.T, _ api.ProviderKind, id string) *api.Assignment {
			return vmAssignment(id)
		},
		ReadyTimeout: 10 * time.Second,
		SupportsLogs: true,
		Watches:      true,
		Kill:         func(t *testing.T, id string) { destroyDomain(t, testURI, id) },
	})
}

func TestFactory(t *testing.T) {
	tests := []struct {
		name    string
		options map[string]any
		wantErr bool
	}{
		{"defaults but the test driver", map[string]any{"uri": testURI}, false},
		{"keys as viper folds them", map[string]any{"uri": testURI, "pool": "vms", "domaintype": "qemu"}, false},
		{"unknown key", map[string]any{"uri": testURI, "bridge": "br0"}, true},
		{"bad domain type", map[string]any{"uri": testURI, "domainType": "xen"}, true},
		{"relative log dir", map[string]any{"uri": testURI, "logDir": "console"}, true},
		{"rescan interval", map[string]any{"uri": testURI, "rescanInterval": "1h"}, false},
		{"negative rescan interval", map[string]any{"uri": testURI, "rescanInterval": "-1s"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Factory(t.Context(), provider.Options{Name: "vms", Node: "n1", DataDir: t.TempDir(), Config: tc.options})
			if tc.wantErr {
				if !errors.Is(err, api.ErrInvalid) {
					t.Fatalf("Factory: got %v; want an error wrapping api.ErrInvalid", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Factory: %v", err)
			}
			defer p.(provider.Closer).Close()
			info, err := p.Info(t.Context())
			if err != nil || info.Name != "vms" || len(info.Kinds) != 1 || info.Kinds[0] != api.ProviderVM {
				t.Errorf("Info: got %+v, %v; want name vms serving vm", info, err)
			}
		})
	}
}

func TestHealth(t *testing.T) {
	tests := []struct {
		name       string
		cfg        Config
		wantStatus api.ConditionStatus
		wantText   string
	}{
		{"test driver", Config{URI: testURI}, api.ConditionReady, "test driver"},
		{"configured type", Config{URI: testURI, DomainType: DomainTypeQEMU}, api.ConditionReady, "domain type qemu: configured"},
		{"libvirtd unreachable", Config{URI: "qemu:///system?socket=/nonexistent/libvirt-sock"}, api.ConditionError, "LibvirtdUnreachable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(t.Context(), tc.cfg, WithDataDir(t.TempDir()))
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			defer p.Close()
			var c api.Condition
			eventually(t, 10*time.Second, "the domain type is decided", func() (bool, string) {
				cs, err := p.Health(t.Context())
				if err != nil || len(cs) == 0 {
					return false, fmt.Sprintf("Health: %v, %v", cs, err)
				}
				c = cs[0]
				return !strings.Contains(c.Message, "deciding"), c.Message
			})
			if c.Type != "provider/libvirt" || c.Status != tc.wantStatus || !strings.Contains(c.Reason+" "+c.Message, tc.wantText) {
				t.Errorf("Health: got %+v; want provider/libvirt %s mentioning %q", c, tc.wantStatus, tc.wantText)
			}
		})
	}
}

// TestApplyRejects checks that assignments the provider cannot run fail
// in their status, not as failed calls.
func TestApplyRejects(t *testing.T) {
	p := newTestProvider(t, "node-a")
	tests := []struct {
		name   string
		change func(a *api.Assignment)
		want   string
	}{
		{"no image", func(a *api.Assignment) { a.Image = nil }, "neither a kernel nor a disk"},
		{"a kernel name in no image directory", func(a *api.Assignment) { a.Image.Kernel = "missing-vmlinuz" }, "image kernel not allowed or not found"},
		{"a relative kernel with ..", func(a *api.Assignment) { a.Image.Kernel = "../vmlinuz" }, "image kernel not allowed or not found"},
		{"address outside subnet", func(a *api.Assignment) { a.Network.Address = "10.99.0.7" }, "not in subnet"},
		{"IPv6 address", func(a *api.Assignment) { a.Network.Address, a.Network.Subnet = "fd00::7", "fd00::/64" }, "IPv4 only"},
		{"missing volume", func(a *api.Assignment) {
			a.Volumes = []api.VolumeAttachment{{Name: "data", VolumeID: "vol-missing"}}
		}, "not in pool"},
		{"volume without size", func(a *api.Assignment) { *a = *volumeAssignment(a.ID, 0) }, "sizeMiB"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := vmAssignment(fmt.Sprintf("rej-%d", i))
			tc.change(a)
			t.Cleanup(func() { _ = p.Delete(context.WithoutCancel(t.Context()), &api.Assignment{ID: a.ID}, 0) })
			st, err := p.Apply(t.Context(), a)
			if err != nil {
				t.Fatalf("Apply: got error %v; want a status in phase error", err)
			}
			if st.Phase != api.PhaseError || !strings.Contains(st.Reason, tc.want) {
				t.Errorf("Apply: got phase %q (%s); want error mentioning %q", st.Phase, st.Reason, tc.want)
			}
		})
	}
	t.Run("other provider kind", func(t *testing.T) {
		a := vmAssignment("rej-container")
		a.Provider = api.ProviderContainer
		if _, err := p.Apply(t.Context(), a); !errors.Is(err, provider.ErrUnsupported) {
			t.Errorf("Apply of a container: got %v; want provider.ErrUnsupported", err)
		}
	})
}

// TestDomainStates checks the phase and reason of domains that stopped
// behind the provider's back, and that applying again restarts them.
func TestDomainStates(t *testing.T) {
	p := newTestProvider(t, "node-a")
	tests := []struct {
		name   string
		stop   func(d *libvirt.Domain) error
		reason string
	}{
		{"guest shut down", func(d *libvirt.Domain) error { return d.Shutdown() }, "shut down by the guest"},
		{"destroyed", func(d *libvirt.Domain) error { return d.Destroy() }, "destroyed"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := vmAssignment(fmt.Sprintf("state-%d", i))
			applyReady(t, p, a)
			withDomain(t, p, a.ID, tc.stop)
			st := waitPhase(t, p, a.ID, api.PhaseError)
			if st.Reason != tc.reason {
				t.Errorf("stopped domain: got reason %q; want %q", st.Reason, tc.reason)
			}
			again, err := p.Apply(t.Context(), a)
			if err != nil {
				t.Fatalf("Apply again: %v", err)
			}
			if again.Phase != api.PhaseReady || again.Restarts != 1 {
				t.Errorf("Apply of a stopped domain: got phase %q, %d restarts; want ready, 1 restart", again.Phase, again.Restarts)
			}
		})
	}
}

// TestSpecChange checks that a higher generation that changes the domain
// redefines and restarts it, while one that does not only records it.
func TestSpecChange(t *testing.T) {
	p := newTestProvider(t, "node-a")
	a := vmAssignment("spec-change")
	first := applyReady(t, p, a)

	same := *a
	same.Generation = 2
	st, err := p.Apply(t.Context(), &same)
	if err != nil {
		t.Fatalf("Apply generation 2: %v", err)
	}
	if st.ObservedGeneration != 2 || !st.Since.Equal(first.Since) {
		t.Errorf("same domain, generation 2: got generation %d since %v; want 2 since %v (not restarted)", st.ObservedGeneration, st.Since, first.Since)
	}

	bigger := same
	bigger.Generation, bigger.Flavor.MemoryMiB = 3, 512
	if _, err := p.Apply(t.Context(), &bigger); err != nil {
		t.Fatalf("Apply generation 3: %v", err)
	}
	st = waitPhase(t, p, a.ID, api.PhaseReady)
	if st.ObservedGeneration != 3 || !st.Since.After(first.Since) {
		t.Errorf("new flavor, generation 3: got generation %d since %v; want 3, restarted after %v", st.ObservedGeneration, st.Since, first.Since)
	}
	var mem uint64
	withDomain(t, p, a.ID, func(d *libvirt.Domain) error {
		info, err := d.GetInfo()
		if err == nil {
			mem = info.MaxMem
		}
		return err
	})
	if mem != 512<<10 {
		t.Errorf("domain memory after the new flavor: got %d KiB; want %d", mem, 512<<10)
	}
}

// TestNodesShareLibvirtd checks that two agents on one libvirtd each list
// and delete only their own domains.
func TestNodesShareLibvirtd(t *testing.T) {
	a, b := newTestProvider(t, "node-a"), newTestProvider(t, "node-b")
	applyReady(t, a, vmAssignment("shared-a"))
	applyReady(t, b, vmAssignment("shared-b"))
	tests := []struct {
		name    string
		p       *Provider
		mine    string
		notMine string
	}{
		{"node-a", a, "shared-a", "shared-b"},
		{"node-b", b, "shared-b", "shared-a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ls, err := tc.p.List(t.Context())
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			var ids []string
			for _, l := range ls {
				ids = append(ids, l.ID)
			}
			if len(ids) != 1 || ids[0] != tc.mine {
				t.Errorf("List: got %v; want only %s", ids, tc.mine)
			}
			if _, err := tc.p.Status(t.Context(), tc.notMine); !errors.Is(err, api.ErrNotFound) {
				t.Errorf("Status of the other node's %s: got %v; want not found", tc.notMine, err)
			}
			if err := tc.p.Delete(t.Context(), &api.Assignment{ID: tc.notMine}, 0); err != nil {
				t.Fatalf("Delete of the other node's replica: %v", err)
			}
			st, err := tc.p.Status(t.Context(), tc.mine)
			if err != nil || st.Node != tc.p.node {
				t.Errorf("Status of %s: got %+v, %v; want it on %s", tc.mine, st, err, tc.p.node)
			}
		})
	}
	for _, tc := range tests {
		if _, err := tc.p.Status(t.Context(), tc.mine); err != nil {
			t.Errorf("%s after the other node's Delete: %v; want it still there", tc.mine, err)
		}
	}
}

// TestVolumes checks Volume replicas in the pool, their attachment as
// virtio disks, and that only deleting the Volume removes them.
func TestVolumes(t *testing.T) {
	p := newTestProvider(t, "node-a")
	vol := volumeAssignment("vol-data", 64)
	if st, err := p.Apply(t.Context(), vol); err != nil || st.Phase != api.PhaseReady || st.ProviderID == "" {
		t.Fatalf("Apply volume: got %+v, %v; want ready with a path", st, err)
	}
	t.Cleanup(func() { _ = p.Delete(context.WithoutCancel(t.Context()), vol, 0) })

	vm := vmAssignment("vol-user")
	vm.Volumes = []api.VolumeAttachment{{Name: "data", VolumeID: vol.ID, Format: api.VolumeQcow2}}
	applyReady(t, p, vm)
	var domXML string
	withDomain(t, p, vm.ID, func(d *libvirt.Domain) (err error) {
		domXML, err = d.GetXMLDesc(0)
		return err
	})
	if !strings.Contains(domXML, "/vol-data'") || !strings.Contains(domXML, "dev='vdb'") {
		t.Errorf("domain XML: got\n%s\nwant the volume attached as vdb", domXML)
	}

	ls, err := p.List(t.Context())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	kinds := map[string]api.ResourceKind{}
	for _, l := range ls {
		kinds[l.ID] = l.Kind
	}
	if kinds[vol.ID] != api.KindVolume || kinds[vm.ID] != api.KindCompute {
		t.Errorf("List kinds: got %v; want %s Volume and %s Compute", kinds, vol.ID, vm.ID)
	}

	if err := p.Delete(t.Context(), &api.Assignment{ID: vm.ID}, time.Second); err != nil {
		t.Fatalf("Delete VM: %v", err)
	}
	if st, err := p.Status(t.Context(), vol.ID); err != nil || st.Phase != api.PhaseReady {
		t.Fatalf("volume after its VM was deleted: got %+v, %v; want it ready", st, err)
	}
	if err := p.Delete(t.Context(), &api.Assignment{ID: vol.ID}, time.Second); err != nil {
		t.Fatalf("Delete volume by id: %v", err)
	}
	if _, err := p.Status(t.Context(), vol.ID); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("Status of a deleted volume: got %v; want not found", err)
	}
	if exists := poolHas(t, p, vol.ID); exists {
		t.Errorf("pool after deleting the volume: got %s; want it gone", vol.ID)
	}
}

// TestWatch checks that Watch reports a domain stopping behind the
// provider's back and a deletion.
func TestWatch(t *testing.T) {
	// A long poll interval: only lifecycle events can be this quick.
	p := newTestProvider(t, "node-a", WithRescanInterval(time.Hour))
	a := vmAssignment("watched")
	applyReady(t, p, a)
	ch, err := p.Watch(t.Context())
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	withDomain(t, p, a.ID, func(d *libvirt.Domain) error { return d.Destroy() })
	if st := next(t, ch, a.ID); st.Phase != api.PhaseError || st.Reason != "destroyed" {
		t.Errorf("after destroy: got phase %q (%s); want error (destroyed)", st.Phase, st.Reason)
	}
	if err := p.Delete(t.Context(), a, 0); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if st := next(t, ch, a.ID); st.Phase != api.PhaseDestroyed {
		t.Errorf("after Delete: got phase %q (%s); want destroyed", st.Phase, st.Reason)
	}
}

func TestLogsTail(t *testing.T) {
	p := newTestProvider(t, "node-a")
	a := vmAssignment("logs-tail")
	applyReady(t, p, a)
	// Three boots, three start lines.
	for range 2 {
		withDomain(t, p, a.ID, func(d *libvirt.Domain) error { return d.Destroy() })
		if _, err := p.Apply(t.Context(), a); err != nil {
			t.Fatalf("Apply: %v", err)
		}
	}
	tests := []struct {
		tail      int
		wantLines int
		wantLast  string
	}{
		{0, 3, "restarts 2"},
		{1, 1, "restarts 2"},
		{2, 2, "restarts 2"},
		{10, 3, "restarts 2"},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint("tail ", tc.tail), func(t *testing.T) {
			var buf bytes.Buffer
			if err := p.Logs(t.Context(), a.ID, provider.LogOptions{TailLines: tc.tail}, &buf); err != nil {
				t.Fatalf("Logs: %v", err)
			}
			lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
			if len(lines) != tc.wantLines || !strings.Contains(lines[len(lines)-1], tc.wantLast) {
				t.Errorf("Logs tail %d: got %q; want %d lines ending with %q", tc.tail, lines, tc.wantLines, tc.wantLast)
			}
		})
	}
	if err := p.Logs(t.Context(), "no-such-replica", provider.LogOptions{}, &bytes.Buffer{}); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("Logs of an unknown replica: got %v; want not found", err)
	}
}

// ---- helpers ----

// deleteAll deletes every replica p lists.
func deleteAll(t *testing.T, p provider.Provider) {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	ls, err := p.List(ctx)
	if err != nil {
		t.Errorf("clean-up: List: %v", err)
		return
	}
	for _, l := range ls {
		if err := p.Delete(ctx, &api.Assignment{ID: l.ID, Kind: l.Kind}, 0); err != nil {
			t.Errorf("clean-up: Delete %s: %v", l.ID, err)
		}
	}
}

func applyReady(t *testing.T, p *Provider, a *api.Assignment) api.AssignmentStatus {
	t.Helper()
	t.Cleanup(func() {
		if err := p.Delete(context.WithoutCancel(t.Context()), &api.Assignment{ID: a.ID}, 0); err != nil {
			t.Errorf("clean-up: Delete %s: %v", a.ID, err)
		}
	})
	if _, err := p.Apply(t.Context(), a); err != nil {
		t.Fatalf("Apply %s: %v", a.ID, err)
	}
	return waitPhase(t, p, a.ID, api.PhaseReady)
}

func waitPhase(t *testing.T, p *Provider, id string, phase api.Phase) api.AssignmentStatus {
	t.Helper()
	var st api.AssignmentStatus
	eventually(t, 10*time.Second, fmt.Sprintf("%s in phase %s", id, phase), func() (bool, string) {
		var err error
		st, err = p.Status(t.Context(), id)
		if err != nil {
			return false, err.Error()
		}
		return st.Phase == phase, fmt.Sprintf("phase %q (%s)", st.Phase, st.Reason)
	})
	return st
}

// withDomain runs fn on replica id's domain, behind the provider's back.
func withDomain(t *testing.T, p *Provider, id string, fn func(*libvirt.Domain) error) {
	t.Helper()
	c, err := p.conn.connect()
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	d, err := c.LookupDomainByName(domainName(id))
	if err != nil {
		t.Fatalf("domain of %s: %v", id, err)
	}
	defer d.Free()
	if err := fn(d); err != nil {
		t.Fatalf("domain of %s: %v", id, err)
	}
}

// destroyDomain destroys replica id's domain on its own connection to
// uri, as `virsh destroy` does: nothing of the provider is involved.
func destroyDomain(t *testing.T, uri, id string) {
	t.Helper()
	c, err := libvirt.NewConnect(uri)
	if err != nil {
		t.Fatalf("connect to %s: %v", uri, err)
	}
	defer c.Close()
	d, err := c.LookupDomainByName(domainName(id))
	if err != nil {
		t.Fatalf("domain of %s: %v", id, err)
	}
	defer d.Free()
	if err := d.Destroy(); err != nil {
		t.Fatalf("destroy domain of %s: %v", id, err)
	}
}

func poolHas(t *testing.T, p *Provider, name string) bool {
	t.Helper()
	c, err := p.conn.connect()
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	pool, err := p.pool.ensure(c)
	if err != nil {
		t.Fatalf("pool: %v", err)
	}
	defer pool.Free()
	vol, err := pool.LookupStorageVolByName(name)
	if err != nil {
		return false
	}
	vol.Free()
	return true
}

// next returns the next status of id from a watch.
func next(t *testing.T, ch <-chan api.AssignmentStatus, id string) api.AssignmentStatus {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case st, ok := <-ch:
			if !ok {
				t.Fatalf("watch closed before a status of %s", id)
			}
			if st.ID == id {
				return st
			}
		case <-deadline:
			t.Fatalf("no status of %s within 10s", id)
		}
	}
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	pause := 10 * time.Millisecond
	for {
		done, state := cond()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not done after %v: %s", what, timeout, state)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("%s: test ended: %s", what, state)
		case <-time.After(pause):
		}
		pause = min(pause*2, 500*time.Millisecond)
	}
}
