package libvirt

import (
	"errors"
	"fmt"
	"log/slog"

	"libvirt.org/go/libvirt"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/hostpolicy"
)

// images owns where a VM's image may come from and what is made of it:
// the image's kernel, initrd and disk resolved to real files of
// Config.ImageDirs (dirs), and each replica's copy-on-write root disk,
// the overlay in the pool over the image's qcow2 disk.
type images struct {
	dirs hostpolicy.Dirs
	pool *storagePool
	log  *slog.Logger
}

// files returns the image with its kernel, initrd and disk resolved
// to real files of Config.ImageDirs, never in the storage pool (other
// replicas' disks and volumes), the data or the console directory. A
// refusal says only which file, whatever the cause (which host files
// exist is none of a tenant's business); the log says why.
func (m *images) files(c *libvirt.Connect, img *api.ImageSpec) (api.ImageSpec, error) {
	if img == nil || (img.Kernel == "" && img.Disk == "") {
		return api.ImageSpec{}, badSpec("the image has neither a kernel nor a disk to boot")
	}
	out := *img
	dirs := m.dirs
	if pool, err := m.pool.path(c); err != nil {
		return api.ImageSpec{}, err
	} else if pool != "" {
		dirs = dirs.Deny(pool)
	}
	for _, f := range []struct {
		field string
		path  *string
	}{{"kernel", &out.Kernel}, {"initrd", &out.Initrd}, {"disk", &out.Disk}} {
		if *f.path == "" {
			continue
		}
		real, err := dirs.Resolve(*f.path)
		if err != nil {
			m.log.Warn("image file refused", "field", f.field, "path", *f.path, "err", err)
			return api.ImageSpec{}, badSpec("image %s %s", f.field, errImageRefused)
		}
		*f.path = real
	}
	return out, nil
}

// errImageRefused is all a tenant learns of an image file it may not
// have.
var errImageRefused = errors.New("not allowed or not found")

// rootDisk makes the replica's copy-on-write root disk over the
// image's qcow2 disk and returns its path. An overlay over another
// backing file (the image changed) is made again.
func (m *images) rootDisk(pool *libvirt.StoragePool, id, backing string, sizeMiB int64) (string, error) {
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

// removeRootDisk removes the replica's root disk; a missing one is fine.
func (m *images) removeRootDisk(pool *libvirt.StoragePool, id string) error {
	return deleteVolume(pool, overlayName(id))
}
