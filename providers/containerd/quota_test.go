package containerd

import (
	"github.com/stratahq/strata/testkit/testenv"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// TestVolumeQuota checks that a volume on ext4 with project quotas is
// held to its size. It builds such a filesystem on a loop device, and
// skips where it cannot (no loop devices in the sandbox): quotas are an
// option of the node, not a requirement.
func TestVolumeQuota(t *testing.T) {
	requireContainerd(t)
	root := quotaFilesystem(t)
	e := newEnv(t, func(c *Config) { c.VolumeRoot = filepath.Join(root, "volumes") })

	vol := &api.Assignment{ID: "vol-" + randomSuffix(t), Kind: api.KindVolume, Provider: api.ProviderContainer, Generation: 1,
		Spec: api.ResourceSpec{Volume: &api.VolumeSpec{SizeMiB: 2}}}
	st := e.apply(t, vol)
	if st.Phase != api.PhaseReady || st.Reason != "" {
		t.Fatalf("Apply volume: got %s (%s); want ready with its size enforced", st.Phase, st.Reason)
	}
	cs, err := e.p.Health(e.ctx(t))
	if err != nil {
		t.Fatalf("Health: %v", err)
	}
	for _, c := range cs {
		if c.Type == api.ConditionCSI && !strings.Contains(c.Message, "enforced by ext4 project quotas") {
			t.Errorf("CSI condition: got %q; want it to say quotas are enforced", c.Message)
		}
	}

	// Containers lack CAP_SYS_RESOURCE, so the limit holds for them.
	a := e.assignment("filler-"+randomSuffix(t), "sh", "-c", `dd if=/dev/zero of=/data/big bs=1048576 count=1 && echo small-ok; dd if=/dev/zero of=/data/huge bs=1048576 count=4 || echo refused`)
	a.Spec.Compute.RestartPolicy = api.RestartNever
	a.Volumes = []api.VolumeAttachment{{Name: "data", VolumeID: vol.ID, Path: "/data"}}
	e.apply(t, a)
	e.waitStatus(t, a.ID, "exits", func(st api.AssignmentStatus) bool { return st.ExitCode != nil })
	e.waitLogs(t, a.ID, "small-ok", "refused", "Disk quota exceeded")

	// Growing the volume (a new generation) raises the limit.
	vol.Generation, vol.Spec.Volume.SizeMiB = 2, 16
	if st, err := e.p.Apply(e.ctx(t), vol); err != nil || st.ObservedGeneration != 2 {
		t.Fatalf("Apply volume generation 2: got %+v, %v", st, err)
	}
	b := e.assignment("grown-"+randomSuffix(t), "sh", "-c", `rm -f /data/huge; dd if=/dev/zero of=/data/huge bs=1048576 count=4 && echo fits`)
	b.Spec.Compute.RestartPolicy = api.RestartNever
	b.Volumes = a.Volumes
	e.apply(t, b)
	e.waitLogs(t, b.ID, "fits")

	for _, id := range []string{a.ID, b.ID, vol.ID} {
		if err := e.p.Delete(e.ctx(t), &api.Assignment{ID: id}, time.Second); err != nil {
			t.Fatalf("Delete %s: %v", id, err)
		}
	}
}

// quotaFilesystem mounts a small ext4 filesystem with project quotas and
// returns its mount point, unmounted when the test ends.
func quotaFilesystem(t *testing.T) string {
	t.Helper()
	for _, bin := range []string{"mkfs.ext4", "mount", "umount"} {
		if _, err := exec.LookPath(bin); err != nil {
			testenv.Missing(t, bin, err)
		}
	}
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "fs.img"), filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 64<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-O", "quota,project", img).CombinedOutput(); err != nil {
		// A kernel capability, not a package CI could install: the
		// provider reports quotas as not enforced there (CSI condition).
		t.Skipf("this kernel cannot make ext4 with project quotas, in CI as anywhere: %v: %s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop,prjquota", img, mnt).CombinedOutput(); err != nil {
		t.Skipf("this kernel cannot mount prjquota (no CONFIG_QFMT_V2), in CI as anywhere: %v: %s", err, out)
	}
	t.Cleanup(func() {
		// Lazy: the volume's directory may still be in a dying mount
		// namespace; the loop device is released with the last user.
		if out, err := exec.Command("umount", "-l", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	return mnt
}
