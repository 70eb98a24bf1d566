package libvirt

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"libvirt.org/go/libvirt"

	"github.com/stratahq/strata/internal/api"
)

// ensurePool returns the storage pool, defining it as a directory pool
// under DataDir/pool and starting it when needed. The caller frees it.
func (p *Provider) ensurePool(c *libvirt.Connect) (*libvirt.StoragePool, error) {
	p.poolMu.Lock()
	defer p.poolMu.Unlock()
	pool, err := c.LookupStoragePoolByName(p.cfg.Pool)
	if hasCode(err, libvirt.ERR_NO_STORAGE_POOL) {
		path := filepath.Join(p.dataDir, "pool")
		p.log.Info("defining storage pool", "pool", p.cfg.Pool, "path", path)
		def := poolXML{Type: "dir", Name: p.cfg.Pool, Path: path}
		b, merr := xml.Marshal(def)
		if merr != nil {
			return nil, fmt.Errorf("pool %s: %w", p.cfg.Pool, merr)
		}
		pool, err = c.StoragePoolDefineXML(string(b), 0)
		if err != nil {
			// Another agent on the same libvirtd may have won the race.
			if again, lerr := c.LookupStoragePoolByName(p.cfg.Pool); lerr == nil {
				pool, err = again, nil
			}
		} else if aerr := pool.SetAutostart(true); aerr != nil {
			p.log.Debug("pool autostart", "pool", p.cfg.Pool, "err", aerr)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("storage pool %s: %w", p.cfg.Pool, err)
	}
	active, err := pool.IsActive()
	if err != nil {
		pool.Free()
		return nil, fmt.Errorf("storage pool %s: %w", p.cfg.Pool, err)
	}
	if !active {
		// Build makes the directory if it went missing; it fails
		// harmlessly when it exists.
		_ = pool.Build(libvirt.STORAGE_POOL_BUILD_NEW)
		if err := pool.Create(0); err != nil {
			pool.Free()
			return nil, fmt.Errorf("start storage pool %s: %w", p.cfg.Pool, err)
		}
	}
	return pool, nil
}

type poolXML struct {
	XMLName xml.Name `xml:"pool"`
	Type    string   `xml:"type,attr"`
	Name    string   `xml:"name"`
	Path    string   `xml:"target>path"`
}

type volXML struct {
	XMLName    xml.Name    `xml:"volume"`
	Name       string      `xml:"name"`
	Capacity   sizeXML     `xml:"capacity"`
	Allocation *sizeXML    `xml:"allocation"`
	Format     formatXML   `xml:"target>format"`
	Backing    *backingXML `xml:"backingStore"`
}

type formatXML struct {
	Type string `xml:"type,attr"`
}

type backingXML struct {
	Path   string    `xml:"path"`
	Format formatXML `xml:"format"`
}

// createVolume makes a volume in pool; a volume of that name already
// there is returned as is.
func createVolume(pool *libvirt.StoragePool, def volXML) (*libvirt.StorageVol, error) {
	b, err := xml.Marshal(def)
	if err != nil {
		return nil, fmt.Errorf("volume %s: %w", def.Name, err)
	}
	vol, err := pool.StorageVolCreateXML(string(b), 0)
	if hasCode(err, libvirt.ERR_STORAGE_VOL_EXIST) {
		return pool.LookupStorageVolByName(def.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("create volume %s: %w", def.Name, err)
	}
	return vol, nil
}

// volumeFormat reads a volume's format (qcow2, raw) from libvirt.
func volumeFormat(vol *libvirt.StorageVol) (string, error) {
	s, err := vol.GetXMLDesc(0)
	if err != nil {
		return "", err
	}
	var v volXML
	if err := xml.Unmarshal([]byte(s), &v); err != nil {
		return "", fmt.Errorf("parse volume XML: %w", err)
	}
	return v.Format.Type, nil
}

// volumeBacking reads a volume's backing file, "" if none.
func volumeBacking(vol *libvirt.StorageVol) (string, error) {
	s, err := vol.GetXMLDesc(0)
	if err != nil {
		return "", err
	}
	var v volXML
	if err := xml.Unmarshal([]byte(s), &v); err != nil {
		return "", fmt.Errorf("parse volume XML: %w", err)
	}
	if v.Backing == nil {
		return "", nil
	}
	return v.Backing.Path, nil
}

// deleteVolume removes a volume from the pool; a missing one is fine.
func deleteVolume(pool *libvirt.StoragePool, name string) error {
	vol, err := pool.LookupStorageVolByName(name)
	if hasCode(err, libvirt.ERR_NO_STORAGE_VOL) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	defer vol.Free()
	if err := vol.Delete(0); err != nil && !hasCode(err, libvirt.ERR_NO_STORAGE_VOL) {
		return fmt.Errorf("delete volume %s: %w", name, err)
	}
	return nil
}

// poolPath is the directory of the storage pool, "" when the pool does
// not exist yet (it will be made under DataDir, which is denied anyway).
func (p *Provider) poolPath(c *libvirt.Connect) (string, error) {
	pool, err := c.LookupStoragePoolByName(p.cfg.Pool)
	if hasCode(err, libvirt.ERR_NO_STORAGE_POOL) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("storage pool %s: %w", p.cfg.Pool, err)
	}
	defer pool.Free()
	s, err := pool.GetXMLDesc(0)
	if err != nil {
		return "", fmt.Errorf("storage pool %s: %w", p.cfg.Pool, err)
	}
	var x poolXML
	if err := xml.Unmarshal([]byte(s), &x); err != nil {
		return "", fmt.Errorf("parse pool XML: %w", err)
	}
	return x.Path, nil
}

// ensureOverlay makes the replica's copy-on-write root disk over the
// image's qcow2 disk and returns its path. An overlay over another
// backing file (the image changed) is made again.
func (p *Provider) ensureOverlay(pool *libvirt.StoragePool, id, backing string, sizeMiB int64) (string, error) {
	name := overlayName(id)
	if vol, err := pool.LookupStorageVolByName(name); err == nil {
		b, berr := volumeBacking(vol)
		path, perr := vol.GetPath()
		vol.Free()
		if berr == nil && perr == nil && b == backing {
			return path, nil
		}
		if err := deleteVolume(pool, name); err != nil {
			return "", err
		}
	}
	def := volXML{
		Name: name,
		// Capacity 0 takes the backing image's size.
		Capacity: sizeXML{Unit: "MiB", Value: max(sizeMiB, 0)},
		Format:   formatXML{Type: "qcow2"},
		Backing:  &backingXML{Path: backing, Format: formatXML{Type: "qcow2"}},
	}
	vol, err := createVolume(pool, def)
	if err != nil {
		if callFailed(err) {
			return "", err
		}
		return "", badSpec("root disk over %s: %s", backing, message(err))
	}
	defer vol.Free()
	path, err := vol.GetPath()
	if err != nil {
		return "", fmt.Errorf("volume %s: %w", name, err)
	}
	return path, nil
}

// ---- Volume replicas ----

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

func (p *Provider) volumeRecordDir() string { return filepath.Join(p.dataDir, "volumes") }

func (p *Provider) volumeRecordPath(id string) string {
	return filepath.Join(p.volumeRecordDir(), id+".json")
}

func (p *Provider) readVolumeRecord(id string) (volumeRecord, bool, error) {
	b, err := os.ReadFile(p.volumeRecordPath(id))
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

func (p *Provider) writeVolumeRecord(r volumeRecord) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("volume record %s: %w", r.ID, err)
	}
	tmp := p.volumeRecordPath(r.ID) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("volume record %s: %w", r.ID, err)
	}
	if err := os.Rename(tmp, p.volumeRecordPath(r.ID)); err != nil {
		return fmt.Errorf("volume record %s: %w", r.ID, err)
	}
	return nil
}

func (p *Provider) volumeRecords() ([]volumeRecord, error) {
	entries, err := os.ReadDir(p.volumeRecordDir())
	if err != nil {
		return nil, fmt.Errorf("volume records: %w", err)
	}
	var out []volumeRecord
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		r, ok, err := p.readVolumeRecord(id)
		if err != nil {
			p.log.Warn("skipping unreadable volume record", "id", id, "err", err)
			continue
		}
		if ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// applyVolume makes a Volume replica: a volume named by its id.
func (p *Provider) applyVolume(c *libvirt.Connect, a *api.Assignment) (api.AssignmentStatus, error) {
	v := a.Spec.Volume
	if v == nil || v.SizeMiB <= 0 {
		return p.rejected(a, badSpec("a Volume needs spec.volume.sizeMiB")), nil
	}
	format, err := vmVolumeFormat(v.Format)
	if err != nil {
		return p.rejected(a, err), nil
	}
	rec, ok, err := p.readVolumeRecord(a.ID)
	if err != nil {
		return api.AssignmentStatus{}, err
	}
	if ok && a.Generation < rec.Generation {
		return p.volumeStatus(c, rec), nil // a stale Apply
	}
	pool, err := p.ensurePool(c)
	if err != nil {
		return api.AssignmentStatus{}, err
	}
	defer pool.Free()
	vol, err := createVolume(pool, volXML{
		Name:       a.ID,
		Capacity:   sizeXML{Unit: "MiB", Value: v.SizeMiB},
		Allocation: &sizeXML{Unit: "MiB", Value: 0}, // sparse
		Format:     formatXML{Type: string(format)},
	})
	if err != nil {
		if callFailed(err) {
			return api.AssignmentStatus{}, err
		}
		return p.rejected(a, badSpec("%s", message(err))), nil
	}
	defer vol.Free()
	p.grow(vol, a.ID, v.SizeMiB)
	if !ok {
		rec = volumeRecord{ID: a.ID, Node: p.node, Created: time.Now().UTC()}
	}
	rec.Generation, rec.Format, rec.SizeMiB = a.Generation, format, v.SizeMiB
	if err := p.writeVolumeRecord(rec); err != nil {
		return api.AssignmentStatus{}, err
	}
	p.kick(a.ID)
	return p.volumeStatus(c, rec), nil
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
func (p *Provider) grow(vol *libvirt.StorageVol, id string, sizeMiB int64) {
	if info, err := vol.GetInfo(); err == nil && info.Capacity < uint64(sizeMiB)<<20 {
		if err := vol.Resize(uint64(sizeMiB)<<20, 0); err != nil {
			p.log.Warn("grow volume", "id", id, "sizeMiB", sizeMiB, "err", err)
		}
	}
}

// volumeStatus is ready while the volume is in the pool.
func (p *Provider) volumeStatus(c *libvirt.Connect, rec volumeRecord) api.AssignmentStatus {
	st := api.AssignmentStatus{
		ID:                 rec.ID,
		Node:               p.node,
		ObservedGeneration: rec.Generation,
		Phase:              api.PhaseReady,
		Since:              rec.Created,
		UpdatedAt:          time.Now(),
	}
	pool, err := p.ensurePool(c)
	if err != nil {
		return p.observe(st, api.PhaseError, message(err))
	}
	defer pool.Free()
	vol, err := pool.LookupStorageVolByName(rec.ID)
	if err != nil {
		return p.observe(st, api.PhaseError, fmt.Sprintf("volume %s is gone from pool %s", rec.ID, p.cfg.Pool))
	}
	defer vol.Free()
	if path, err := vol.GetPath(); err == nil {
		st.ProviderID = path
	}
	return p.observe(st, api.PhaseReady, "")
}

// deleteVolumeReplica removes a Volume replica's volume and record.
func (p *Provider) deleteVolumeReplica(c *libvirt.Connect, id string) error {
	pool, err := p.ensurePool(c)
	if err != nil {
		return err
	}
	defer pool.Free()
	if err := deleteVolume(pool, id); err != nil {
		return err
	}
	if err := os.Remove(p.volumeRecordPath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("volume record %s: %w", id, err)
	}
	return nil
}
