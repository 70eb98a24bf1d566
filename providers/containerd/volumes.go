package containerd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
)

// volumeService owns the Volume replicas: a directory each under
// VolumeRoot, with a project quota of its size where the filesystem has
// them, and a JSON record beside it (VolumeRoot/.strata/<id>.json) that
// is all it knows of a volume. It keeps nothing in memory; calls for one
// volume are serialised by the provider's replica locks.
type volumeService struct {
	cfg  Config
	node string
	log  *slog.Logger
	// userns is the user namespace range of new replicas (nil: none):
	// new volumes belong to its root.
	userns *idRange
	// notify pushes a volume's new status to watchers.
	notify func(api.AssignmentStatus)
}

func newVolumeService(cfg Config, node string, log *slog.Logger, notify func(api.AssignmentStatus)) *volumeService {
	return &volumeService{cfg: cfg, node: node, log: log, userns: userRange(cfg), notify: notify}
}

// metaDir holds one JSON record per volume, beside the volumes.
const metaDir = ".strata"

// volumeRecord is what the provider knows of a volume; the directory is
// VolumeRoot/<ID>.
type volumeRecord struct {
	ID         string            `json:"id"`
	Generation int64             `json:"generation"`
	SizeMiB    int64             `json:"sizeMiB,omitempty"`
	ProjectID  uint32            `json:"projectID,omitempty"`
	Enforced   bool              `json:"enforced"`
	CreatedAt  time.Time         `json:"createdAt"`
	UpdatedAt  time.Time         `json:"updatedAt"`
	Labels     map[string]string `json:"labels,omitempty"`
}

func (vm *volumeService) dir(id string) string { return filepath.Join(vm.cfg.VolumeRoot, id) }

func (vm *volumeService) recordPath(id string) string {
	return filepath.Join(vm.cfg.VolumeRoot, metaDir, id+".json")
}

// read returns the record of volume id, or nil without error.
func (vm *volumeService) read(id string) (*volumeRecord, error) {
	b, err := os.ReadFile(vm.recordPath(id))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("volume %s: %w", id, err)
	}
	var v volumeRecord
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("volume %s: record: %w", id, err)
	}
	return &v, nil
}

func (vm *volumeService) write(v *volumeRecord) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(vm.recordPath(v.ID), b)
}

func (vm *volumeService) list() ([]*volumeRecord, error) {
	ents, err := os.ReadDir(filepath.Join(vm.cfg.VolumeRoot, metaDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("volumes: %w", err)
	}
	var out []*volumeRecord
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || e.IsDir() {
			continue
		}
		v, err := vm.read(id)
		if err != nil {
			return nil, err
		}
		if v != nil {
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (vm *volumeService) status(v *volumeRecord) api.AssignmentStatus {
	st := api.AssignmentStatus{
		ID:                 v.ID,
		Node:               vm.node,
		ObservedGeneration: v.Generation,
		Phase:              api.PhaseReady,
		ProviderID:         vm.dir(v.ID),
		Since:              v.CreatedAt,
		UpdatedAt:          time.Now(),
	}
	if v.SizeMiB > 0 && !v.Enforced {
		st.Reason = fmt.Sprintf("size %d MiB recorded, not enforced (no project quota on the volume filesystem)", v.SizeMiB)
	}
	return st
}

// makeDir makes a volume's directory. A new one belongs to its
// replicas' root, which is not the host's in a user namespace.
func (vm *volumeService) makeDir(dir string, created bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if r := vm.userns; created && r != nil {
		return os.Chown(dir, int(r.hostID), int(r.hostID))
	}
	return nil
}

// apply creates or updates a Volume replica: a directory with a
// project quota of its size where the filesystem has project quotas.
// The caller holds the replica's lock.
func (vm *volumeService) apply(_ context.Context, a *api.Assignment) (api.AssignmentStatus, error) {
	var size int64
	if vs := a.Spec.Volume; vs != nil {
		if vs.Format != "" && vs.Format != api.VolumeDir {
			return api.AssignmentStatus{}, fmt.Errorf("containerd: volume %s: format %q: %w", a.ID, vs.Format, provider.ErrUnsupported)
		}
		size = vs.SizeMiB
	}
	v, err := vm.read(a.ID)
	if err != nil {
		return api.AssignmentStatus{}, fmt.Errorf("containerd: %w", err)
	}
	if v != nil && a.Generation <= v.Generation {
		return vm.status(v), nil
	}
	now := time.Now()
	created := v == nil
	if created {
		v = &volumeRecord{ID: a.ID, CreatedAt: now}
	}
	dir := vm.dir(a.ID)
	if err := vm.makeDir(dir, created); err != nil {
		return api.AssignmentStatus{}, fmt.Errorf("containerd: volume %s: %w", a.ID, err)
	}
	v.Generation, v.SizeMiB, v.UpdatedAt, v.Labels = a.Generation, size, now, a.Labels
	if q := vm.quotaMount(); q != nil {
		if v.ProjectID == 0 {
			v.ProjectID = vm.projectID(a.ID)
		}
		if err := q.limit(dir, v.ProjectID, size); err != nil {
			// The volume works without its limit; say so.
			vm.log.Warn("volume quota not set", "id", a.ID, "err", err)
			v.Enforced = false
		} else {
			v.Enforced = size > 0
		}
	}
	if err := vm.write(v); err != nil {
		return api.AssignmentStatus{}, fmt.Errorf("containerd: volume %s: %w", a.ID, err)
	}
	st := vm.status(v)
	vm.notify(st)
	return st, nil
}

// remove removes a volume's directory, quota and record.
func (vm *volumeService) remove(v *volumeRecord) error {
	if v.Enforced && v.ProjectID != 0 {
		if q := vm.quotaMount(); q != nil {
			if err := q.setLimit(v.ProjectID, 0); err != nil {
				vm.log.Warn("clear volume quota", "id", v.ID, "err", err)
			}
		}
	}
	if err := os.RemoveAll(vm.dir(v.ID)); err != nil {
		return fmt.Errorf("volume %s: %w", v.ID, err)
	}
	if err := os.Remove(vm.recordPath(v.ID)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("volume %s: %w", v.ID, err)
	}
	now := time.Now()
	vm.notify(api.AssignmentStatus{ID: v.ID, Node: vm.node, ObservedGeneration: v.Generation, Phase: api.PhaseDestroyed, Since: now, UpdatedAt: now})
	return nil
}

// projectID derives a volume's quota project from its id, avoiding the
// projects of other volumes.
func (vm *volumeService) projectID(id string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(vm.cfg.Namespace + "/" + id))
	pid := h.Sum32()%(1<<30) + 1<<20 // clear of small, hand-made project ids
	used := map[uint32]bool{}
	if vs, err := vm.list(); err == nil {
		for _, v := range vs {
			used[v.ProjectID] = true
		}
	}
	for used[pid] {
		pid++
	}
	return pid
}

// mounts bind-mounts the replica's volumes, which must be on this
// node already.
func (vm *volumeService) mounts(a *api.Assignment) ([]specs.Mount, error) {
	var out []specs.Mount
	for _, v := range a.Volumes {
		if v.VolumeID == "" || v.Path == "" {
			return nil, fmt.Errorf("volume %q: needs a volume id and a path", v.Name)
		}
		if err := validIdentifier(v.VolumeID); err != nil {
			return nil, fmt.Errorf("volume %q: %w", v.Name, err)
		}
		dir := vm.dir(v.VolumeID)
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("volume %q (%s) is not on this node", v.Name, v.VolumeID)
		}
		mode := "rw"
		if v.ReadOnly {
			mode = "ro"
		}
		out = append(out, specs.Mount{Destination: v.Path, Type: "bind", Source: dir, Options: []string{"rbind", mode}})
	}
	return out, nil
}

// deleteOf deletes the volume a names, if there is one (done).
func (vm *volumeService) deleteOf(a *api.Assignment) (done bool, err error) {
	v, err := vm.read(a.ID)
	if err != nil {
		return false, fmt.Errorf("containerd: delete %s: %w", a.ID, err)
	}
	if v != nil {
		if err := vm.remove(v); err != nil {
			return false, fmt.Errorf("containerd: delete: %w", err)
		}
		vm.log.Info("volume deleted", "id", a.ID)
		return true, nil
	}
	if a.Kind != api.KindVolume {
		return false, nil
	}
	// A directory whose record was never written.
	if err := os.RemoveAll(vm.dir(a.ID)); err != nil {
		return false, fmt.Errorf("containerd: delete volume %s: %w", a.ID, err)
	}
	return true, nil
}

// condition is CSI: VolumeRoot can be written and has room, and how
// volume sizes are kept.
func (vm *volumeService) condition() api.Condition {
	root := vm.cfg.VolumeRoot
	f, err := os.CreateTemp(root, ".health-*")
	if err != nil {
		return api.Condition{Type: api.ConditionCSI, Status: api.ConditionError, Reason: "VolumeRootNotWritable",
			Message: fmt.Sprintf("volume root %s: %v", root, err)}
	}
	f.Close()
	os.Remove(f.Name())
	mode := vm.quotaMode()
	free, total, err := statfsFree(root)
	if err != nil {
		return api.Condition{Type: api.ConditionCSI, Status: api.ConditionWarning, Reason: "FreeSpaceUnknown",
			Message: fmt.Sprintf("volume root %s: %v; %s", root, err, mode)}
	}
	msg := fmt.Sprintf("volume root %s: %s free of %s; %s", root, mib(free), mib(total), mode)
	if lowSpace(free, total) {
		return api.Condition{Type: api.ConditionCSI, Status: api.ConditionWarning, Reason: "LowSpace", Message: msg}
	}
	return api.Condition{Type: api.ConditionCSI, Status: api.ConditionReady, Reason: "VolumesWritable", Message: msg}
}
