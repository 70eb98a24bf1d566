package containerd

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/opencontainers/image-spec/identity"
)

// remappedSnapshot makes replica id's root filesystem from img's
// layers with their owners moved into r (see remap).
func (im *imageService) remappedSnapshot(id string, img client.Image, r idRange) client.NewContainerOpts {
	return func(ctx context.Context, cl *client.Client, c *containers.Container) error {
		parent, err := im.remap(ctx, img, r)
		if err != nil {
			return err
		}
		if _, err := cl.SnapshotService(im.cfg.Snapshotter).Prepare(ctx, id, parent); err != nil {
			return err
		}
		c.Snapshotter, c.SnapshotKey, c.Image = im.cfg.Snapshotter, id, img.Name()
		return nil
	}
}

// remap returns the committed snapshot of img's layers chowned
// into r, making it the first time: once per image and range, however
// many replicas ask at once. The image's config references it (a
// containerd GC label), so that it goes with the image.
func (im *imageService) remap(ctx context.Context, img client.Image, r idRange) (string, error) {
	diffIDs, err := img.RootFS(ctx)
	if err != nil {
		return "", fmt.Errorf("image layers: %w", err)
	}
	chain := identity.ChainID(diffIDs).String()
	key := "strata-userns-" + strings.ReplaceAll(r.String(), ":", "-") + "-" + chain
	unlock, err := im.locks.lock(ctx, "remap:"+key)
	if err != nil {
		return "", err
	}
	defer unlock()
	if err := im.referenceFromImage(ctx, img, key); err != nil {
		return "", err
	}
	sn := im.client.SnapshotService(im.cfg.Snapshotter)
	if _, err := sn.Stat(ctx, key); err == nil {
		return key, nil
	} else if !isNotFound(err) {
		return "", err
	}
	work := key + "-remap"
	// A remap cut short (an agent killed during it) left its work.
	if err := sn.Remove(ctx, work); err != nil && !isNotFound(err) {
		return "", fmt.Errorf("remove unfinished remap: %w", err)
	}
	mounts, err := sn.Prepare(ctx, work, chain)
	if err != nil {
		return "", err
	}
	if err := mount.WithTempMount(ctx, mounts, func(root string) error { return chownInto(root, r) }); err != nil {
		if rerr := sn.Remove(ctx, work); rerr != nil {
			im.log.Warn("remove failed remap", "snapshot", work, "err", rerr)
		}
		return "", fmt.Errorf("remap the image's files into the user namespace: %w", err)
	}
	if err := sn.Commit(ctx, key, work); err != nil {
		return "", err
	}
	im.log.Info("image remapped into the user namespace range", "image", img.Name(), "range", r.String())
	return key, nil
}

// referenceFromImage labels img's config so that containerd's garbage
// collector keeps snapshot key while the image exists.
func (im *imageService) referenceFromImage(ctx context.Context, img client.Image, key string) error {
	desc, err := img.Config(ctx)
	if err != nil {
		return fmt.Errorf("image config: %w", err)
	}
	label := "containerd.io/gc.ref.snapshot." + im.cfg.Snapshotter + "/" + key
	cs := im.client.ContentStore()
	info, err := cs.Info(ctx, desc.Digest)
	if err != nil {
		return fmt.Errorf("image config: %w", err)
	}
	if info.Labels[label] == key {
		return nil
	}
	if info.Labels == nil {
		info.Labels = map[string]string{}
	}
	info.Labels[label] = key
	_, err = cs.Update(ctx, info, "labels."+label)
	return err
}

// chownInto moves the owner and group of every file under root into r,
// keeping the setuid, setgid and sticky bits that chown clears.
func chownInto(root string, r idRange) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%s: no owner", path)
		}
		uid, uok := r.toHost(st.Uid)
		gid, gok := r.toHost(st.Gid)
		if !uok || !gok {
			rel, _ := filepath.Rel(root, path)
			return fmt.Errorf("/%s is owned by %d:%d, outside the range's 0-%d", rel, st.Uid, st.Gid, r.size-1)
		}
		if err := os.Lchown(path, int(uid), int(gid)); err != nil {
			return err
		}
		if mode := info.Mode(); mode&fs.ModeSymlink == 0 && mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 {
			return os.Chmod(path, mode)
		}
		return nil
	})
}
