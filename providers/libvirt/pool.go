package libvirt

import (
	"encoding/xml"
	"fmt"
	"log/slog"
	"sync"

	"libvirt.org/go/libvirt"

	"github.com/stratahq/strata/internal/api"
)

// storagePool owns the storage pool that holds root disks and volumes
// (Config.Pool): its definition, as a directory pool under
// DataDir/pool, and the volumes VMs attach from it. mu serialises the
// pool's definition, which agents of one libvirtd may race to make.
type storagePool struct {
	name string
	dir  string
	log  *slog.Logger
	mu   sync.Mutex
}

// ensure returns the storage pool, defining it and starting it when
// needed. The caller frees it.
func (sp *storagePool) ensure(c *libvirt.Connect) (*libvirt.StoragePool, error) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	pool, err := c.LookupStoragePoolByName(sp.name)
	if hasCode(err, libvirt.ERR_NO_STORAGE_POOL) {
		path := sp.dir
		sp.log.Info("defining storage pool", "pool", sp.name, "path", path)
		def := poolXML{Type: "dir", Name: sp.name, Path: path}
		b, merr := xml.Marshal(def)
		if merr != nil {
			return nil, fmt.Errorf("pool %s: %w", sp.name, merr)
		}
		pool, err = c.StoragePoolDefineXML(string(b), 0)
		if err != nil {
			// Another agent on the same libvirtd may have won the race.
			if again, lerr := c.LookupStoragePoolByName(sp.name); lerr == nil {
				pool, err = again, nil
			}
		} else if aerr := pool.SetAutostart(true); aerr != nil {
			sp.log.Debug("pool autostart", "pool", sp.name, "err", aerr)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("storage pool %s: %w", sp.name, err)
	}
	active, err := pool.IsActive()
	if err != nil {
		pool.Free()
		return nil, fmt.Errorf("storage pool %s: %w", sp.name, err)
	}
	if !active {
		// Build makes the directory if it went missing; it fails
		// harmlessly when it exists.
		_ = pool.Build(libvirt.STORAGE_POOL_BUILD_NEW)
		if err := pool.Create(0); err != nil {
			pool.Free()
			return nil, fmt.Errorf("start storage pool %s: %w", sp.name, err)
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

// volumeDesc reads a volume's definition from libvirt.
func volumeDesc(vol *libvirt.StorageVol) (volXML, error) {
	s, err := vol.GetXMLDesc(0)
	if err != nil {
		return volXML{}, err
	}
	var v volXML
	if err := xml.Unmarshal([]byte(s), &v); err != nil {
		return volXML{}, fmt.Errorf("parse volume XML: %w", err)
	}
	return v, nil
}

// volumeFormat reads a volume's format (qcow2, raw) from libvirt.
func volumeFormat(vol *libvirt.StorageVol) (string, error) {
	v, err := volumeDesc(vol)
	if err != nil {
		return "", err
	}
	return v.Format.Type, nil
}

// volumeBacking reads a volume's backing file, "" if none.
func volumeBacking(vol *libvirt.StorageVol) (string, error) {
	v, err := volumeDesc(vol)
	if err != nil || v.Backing == nil {
		return "", err
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

// path is the directory of the storage pool, "" when the pool does
// not exist yet (it will be made under DataDir, which is denied anyway).
func (sp *storagePool) path(c *libvirt.Connect) (string, error) {
	pool, err := c.LookupStoragePoolByName(sp.name)
	if hasCode(err, libvirt.ERR_NO_STORAGE_POOL) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("storage pool %s: %w", sp.name, err)
	}
	defer pool.Free()
	s, err := pool.GetXMLDesc(0)
	if err != nil {
		return "", fmt.Errorf("storage pool %s: %w", sp.name, err)
	}
	var x poolXML
	if err := xml.Unmarshal([]byte(s), &x); err != nil {
		return "", fmt.Errorf("parse pool XML: %w", err)
	}
	return x.Path, nil
}

// attachment resolves a volume a VM mounts to its file in the pool.
func (sp *storagePool) attachment(pool *libvirt.StoragePool, v api.VolumeAttachment, target string) (disk, error) {
	if v.VolumeID == "" {
		return disk{}, badSpec("volume %q has no volume id", v.Name)
	}
	vol, err := pool.LookupStorageVolByName(v.VolumeID)
	if hasCode(err, libvirt.ERR_NO_STORAGE_VOL) {
		return disk{}, badSpec("volume %s (%s) is not in pool %s yet", v.Name, v.VolumeID, sp.name)
	}
	if err != nil {
		return disk{}, fmt.Errorf("volume %s: %w", v.VolumeID, err)
	}
	defer vol.Free()
	path, err := vol.GetPath()
	if err != nil {
		return disk{}, fmt.Errorf("volume %s: %w", v.VolumeID, err)
	}
	// The volume's own format wins over what the attachment says.
	format, err := volumeFormat(vol)
	if err != nil || format == "" {
		format = string(v.Format)
	}
	if format != string(api.VolumeQcow2) {
		format = string(api.VolumeRaw)
	}
	return disk{Path: path, Format: format, Target: target, ReadOnly: v.ReadOnly}, nil
}
