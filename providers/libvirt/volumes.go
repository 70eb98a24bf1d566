package libvirt

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"libvirt.org/go/libvirt"

	"github.com/stratahq/strata/internal/api"
)

// volumeRecord says that a pool volume is a Volume replica of this node.
// libvirt keeps no metadata on volumes, and the pool may be shared by the
// agents of one libvirtd, so the record lives in this provider's DataDir.
type volumeRecord struct {
	ID         string           `json:"id"`
	Node       string           `json:"node"`
	Generation int64            `json:"generation"`
	Format     api.VolumeFormat `json:"format"`
	SizeMiB    int64            `json:"sizeMiB"`
	Created    time.Time        `json:"created"`
}

// volumes owns the Volume replicas: a pool volume each, named by its
// id, and their records under dir, which say which of the pool's
// volumes are this node's.
type volumes struct {
	dir    string
	node   string
	pool   *storagePool
	phases *phases
	log    *slog.Logger
	// kick tells the watches to look at a replica.
	kick func(id string)
}

func (v *volumes) recordPath(id string) string {
	return filepath.Join(v.dir, id+".json")
}

func (v *volumes) record(id string) (volumeRecord, bool, error) {
	b, err := os.ReadFile(v.recordPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return volumeRecord{}, false, nil
	}
	if err != nil {
		return volumeRecord{}, false, fmt.Errorf("volume record %s: %w", id, err)
	}
	var r volumeRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return volumeRecord{}, false, fmt.Errorf("volume record %s: %w", id, err)
	}
	return r, true, nil
}

func (v *volumes) writeRecord(r volumeRecord) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("volume record %s: %w", r.ID, err)
	}
	tmp := v.recordPath(r.ID) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("volume record %s: %w", r.ID, err)
	}
	if err := os.Rename(tmp, v.recordPath(r.ID)); err != nil {
		return fmt.Errorf("volume record %s: %w", r.ID, err)
	}
	return nil
}

func (v *volumes) records() ([]volumeRecord, error) {
	entries, err := os.ReadDir(v.dir)
	if err != nil {
		return nil, fmt.Errorf("volume records: %w", err)
	}
	var out []volumeRecord
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		r, ok, err := v.record(id)
		if err != nil {
			v.log.Warn("skipping unreadable volume record", "id", id, "err", err)
			continue
		}
		if ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// apply makes a Volume replica: a volume named by its id.
func (v *volumes) apply(c *libvirt.Connect, a *api.Assignment) (api.AssignmentStatus, error) {
	spec := a.Spec.Volume
	if spec == nil || spec.SizeMiB <= 0 {
		return v.phases.rejected(a, badSpec("a Volume needs spec.volume.sizeMiB")), nil
	}
	format, err := vmVolumeFormat(spec.Format)
	if err != nil {
		return v.phases.rejected(a, err), nil
	}
	rec, ok, err := v.record(a.ID)
	if err != nil {
		return api.AssignmentStatus{}, err
	}
	if ok && a.Generation < rec.Generation {
		return v.status(c, rec), nil // a stale Apply
	}
	pool, err := v.pool.ensure(c)
	if err != nil {
		return api.AssignmentStatus{}, err
	}
	defer pool.Free()
	vol, err := createVolume(pool, volXML{
		Name:       a.ID,
		Capacity:   sizeXML{Unit: "MiB", Value: spec.SizeMiB},
		Allocation: &sizeXML{Unit: "MiB", Value: 0}, // sparse
		Format:     formatXML{Type: string(format)},
	})
	if err != nil {
		if callFailed(err) {
			return api.AssignmentStatus{}, err
		}
		return v.phases.rejected(a, badSpec("%s", message(err))), nil
	}
	defer vol.Free()
	v.grow(vol, a.ID, spec.SizeMiB)
	if !ok {
		rec = volumeRecord{ID: a.ID, Node: v.node, Created: time.Now().UTC()}
	}
	rec.Generation, rec.Format, rec.SizeMiB = a.Generation, format, spec.SizeMiB
	if err := v.writeRecord(rec); err != nil {
		return api.AssignmentStatus{}, err
	}
	v.kick(a.ID)
	return v.status(c, rec), nil
}

// vmVolumeFormat is the format of a VM volume: qcow2 (by default) or raw.
func vmVolumeFormat(f api.VolumeFormat) (api.VolumeFormat, error) {
	switch f {
	case "":
		return api.VolumeQcow2, nil
	case api.VolumeQcow2, api.VolumeRaw:
		return f, nil
	}
	return "", badSpec("volume format %q: a VM volume is qcow2 or raw", f)
}

// grow grows vol to sizeMiB if it is smaller. Volumes only grow:
// shrinking would cut the guest's filesystem.
func (v *volumes) grow(vol *libvirt.StorageVol, id string, sizeMiB int64) {
	if info, err := vol.GetInfo(); err == nil && info.Capacity < uint64(sizeMiB)<<20 {
		if err := vol.Resize(uint64(sizeMiB)<<20, 0); err != nil {
			v.log.Warn("grow volume", "id", id, "sizeMiB", sizeMiB, "err", err)
		}
	}
}

// status is ready while the volume is in the pool.
func (v *volumes) status(c *libvirt.Connect, rec volumeRecord) api.AssignmentStatus {
	st := api.AssignmentStatus{
		ID:                 rec.ID,
		Node:               v.node,
		ObservedGeneration: rec.Generation,
		Phase:              api.PhaseReady,
		Since:              rec.Created,
		UpdatedAt:          time.Now(),
	}
	pool, err := v.pool.ensure(c)
	if err != nil {
		return v.phases.observe(st, api.PhaseError, message(err))
	}
	defer pool.Free()
	vol, err := pool.LookupStorageVolByName(rec.ID)
	if err != nil {
		return v.phases.observe(st, api.PhaseError, fmt.Sprintf("volume %s is gone from pool %s", rec.ID, v.pool.name))
	}
	defer vol.Free()
	if path, err := vol.GetPath(); err == nil {
		st.ProviderID = path
	}
	return v.phases.observe(st, api.PhaseReady, "")
}

// delete removes a Volume replica's volume and record.
func (v *volumes) delete(c *libvirt.Connect, id string) error {
	pool, err := v.pool.ensure(c)
	if err != nil {
		return err
	}
	defer pool.Free()
	if err := deleteVolume(pool, id); err != nil {
		return err
	}
	if err := os.Remove(v.recordPath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("volume record %s: %w", id, err)
	}
	return nil
}
