package containerd

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
)

// newTestVolumes is a volume service on a directory of its own, with the
// statuses it pushes.
func newTestVolumes(t *testing.T) (*volumeService, *[]api.AssignmentStatus) {
	t.Helper()
	cfg := Config{VolumeRoot: t.TempDir(), Namespace: "strata-test"}
	var pushed []api.AssignmentStatus
	vm := newVolumeService(cfg, "node-1", slog.New(slog.DiscardHandler), func(st api.AssignmentStatus) { pushed = append(pushed, st) })
	return vm, &pushed
}

// TestVolumeService drives the volume service alone: apply, a stale
// apply, list, the mounts of a replica, delete.
func TestVolumeService(t *testing.T) {
	vm, pushed := newTestVolumes(t)
	a := &api.Assignment{ID: "vol-1", Kind: api.KindVolume, Generation: 2, Spec: api.ResourceSpec{Volume: &api.VolumeSpec{SizeMiB: 16}}}
	st, err := vm.apply(t.Context(), a)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if st.Phase != api.PhaseReady || st.ObservedGeneration != 2 || st.Node != "node-1" || st.ProviderID != vm.dir("vol-1") {
		t.Errorf("status: got %+v; want ready at generation 2 on node-1, provider id %s", st, vm.dir("vol-1"))
	}
	if fi, err := os.Stat(vm.dir("vol-1")); err != nil || !fi.IsDir() {
		t.Fatalf("volume directory: %v", err)
	}
	if len(*pushed) != 1 || (*pushed)[0].Phase != api.PhaseReady {
		t.Errorf("pushed: got %+v; want one ready status", *pushed)
	}

	// An older generation changes nothing and pushes nothing.
	stale := *a
	stale.Generation = 1
	if st, err := vm.apply(t.Context(), &stale); err != nil || st.ObservedGeneration != 2 {
		t.Errorf("stale apply: got %+v, %v; want generation 2 kept", st, err)
	}
	if len(*pushed) != 1 {
		t.Errorf("stale apply pushed %d statuses; want none", len(*pushed)-1)
	}
	vs, err := vm.list()
	if err != nil || len(vs) != 1 || vs[0].ID != "vol-1" || vs[0].SizeMiB != 16 {
		t.Fatalf("list: got %+v, %v; want vol-1 of 16 MiB", vs, err)
	}

	mounts, err := vm.mounts(&api.Assignment{Volumes: []api.VolumeAttachment{{Name: "data", VolumeID: "vol-1", Path: "/data", ReadOnly: true}}})
	if err != nil || len(mounts) != 1 || mounts[0].Source != vm.dir("vol-1") || mounts[0].Destination != "/data" || mounts[0].Options[1] != "ro" {
		t.Errorf("mounts: got %+v, %v; want vol-1 read-only at /data", mounts, err)
	}
	if _, err := vm.mounts(&api.Assignment{Volumes: []api.VolumeAttachment{{Name: "other", VolumeID: "vol-2", Path: "/x"}}}); err == nil {
		t.Error("mounts of a volume not on the node: got no error")
	}

	if done, err := vm.deleteOf(a); !done || err != nil {
		t.Fatalf("delete: got %v, %v; want done", done, err)
	}
	if _, err := os.Stat(vm.dir("vol-1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("volume directory after delete: %v; want it gone", err)
	}
	if v, err := vm.read("vol-1"); v != nil || err != nil {
		t.Errorf("record after delete: got %+v, %v; want none", v, err)
	}
	if last := (*pushed)[len(*pushed)-1]; last.Phase != api.PhaseDestroyed {
		t.Errorf("last push: got %s; want destroyed", last.Phase)
	}
	// Deleting what a Compute replica names is not the volume service's.
	if done, err := vm.deleteOf(&api.Assignment{ID: "ctr-1", Kind: api.KindCompute}); done || err != nil {
		t.Errorf("delete of a compute id: got %v, %v; want not done", done, err)
	}
}

func TestVolumeServiceRefusesFormats(t *testing.T) {
	vm, _ := newTestVolumes(t)
	a := &api.Assignment{ID: "vol-1", Kind: api.KindVolume, Spec: api.ResourceSpec{Volume: &api.VolumeSpec{Format: "qcow2"}}}
	if _, err := vm.apply(t.Context(), a); !errors.Is(err, provider.ErrUnsupported) {
		t.Errorf("apply of a qcow2 volume: got %v; want ErrUnsupported", err)
	}
	if _, err := os.Stat(filepath.Join(vm.cfg.VolumeRoot, "vol-1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("refused volume's directory: %v; want none", err)
	}
}
