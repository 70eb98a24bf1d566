package containerd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/containerd/v2/pkg/sys"
	"github.com/opencontainers/image-spec/identity"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// User namespaces (Config.UserNamespace). Every replica gets a user
// namespace of its own in which uids and gids 0 to size-1 are the
// host's hostID to hostID+size-1: root in the container is an
// unprivileged user on the node. The range is the node's, shared by
// its replicas (what differs per replica is the namespace).
//
// The network namespace is what makes it work with runc 1.1: mounting
// sysfs needs CAP_SYS_ADMIN over the user namespace that owns the
// network namespace, so a container in a new user namespace cannot
// mount /sys in a network namespace made by the host. As containerd 2's
// CRI plugin does, the provider makes the network namespace inside a
// new user namespace (a stopped process holds both while they are
// bind-mounted, see holdNamespaces), pins that user namespace, and the container joins both
// by path: its init, root in the namespace that owns the network, mounts
// sysfs as usual. The root filesystem is the image's chowned into the
// range once per image (runc 1.1 has no idmapped mounts): a committed
// snapshot that the image's config references, so that it lives as
// long as the image.

// labelUserns on a container is the range it was made with,
// "hostID:size": its restarts rebuild its namespaces alike whatever the
// configuration says now.
const labelUserns = "strata.io/userns"

// idRange is the host ids that ids 0 to size-1 of a user namespace are.
type idRange struct{ hostID, size uint32 }

func (r idRange) String() string { return fmt.Sprintf("%d:%d", r.hostID, r.size) }

// toHost maps id into the range; false when it is outside.
func (r idRange) toHost(id uint32) (uint32, bool) {
	if id >= r.size {
		return 0, false
	}
	return r.hostID + id, true
}

// mapping is the range as the OCI runtime spec (and /proc/pid/uid_map)
// says it.
func (r idRange) mapping() []specs.LinuxIDMapping {
	return []specs.LinuxIDMapping{{ContainerID: 0, HostID: r.hostID, Size: r.size}}
}

// usernsOfLabels reads labelUserns; nil when the container has no user
// namespace (or a label this provider cannot read, which it never
// writes).
func usernsOfLabels(labels map[string]string) *idRange {
	host, size, ok := strings.Cut(labels[labelUserns], ":")
	if !ok {
		return nil
	}
	h, err1 := strconv.ParseUint(host, 10, 32)
	s, err2 := strconv.ParseUint(size, 10, 32)
	if err1 != nil || err2 != nil {
		return nil
	}
	return &idRange{hostID: uint32(h), size: uint32(s)}
}

// usernsPath is where the user namespace owning replica id's network
// namespace is pinned (bind-mounted), for its container to join.
func (p *Provider) usernsPath(id string) string {
	return filepath.Join(p.cfg.StateDir, "userns", p.netnsName(id))
}

// createUsernsNetNS makes replica id's network namespace, whose empty
// file exists, inside a new user namespace of r, and pins that user
// namespace.
func (p *Provider) createUsernsNetNS(id string, r idRange) (err error) {
	path, pin := p.netnsPath(id), p.usernsPath(id)
	defer func() {
		if err != nil {
			err = errors.Join(fmt.Errorf("netns %s in a user namespace: %w", path, err), p.removeNamespaces(id))
		}
	}()
	p.usernsDirOnce.Do(func() { p.usernsDirErr = makeSharedDir(filepath.Dir(pin)) })
	if p.usernsDirErr != nil {
		return p.usernsDirErr
	}
	if err := createEmpty(pin); err != nil {
		return err
	}
	if err := holdNamespaces(r, func(pid int) error {
		return unix.Mount(fmt.Sprintf("/proc/%d/ns/net", pid), path, "none", unix.MS_BIND, "")
	}); err != nil {
		return err
	}
	// The owner of the network namespace, as the kernel says: the
	// holder process is gone, the namespace stays with its owner.
	netns, err := os.Open(path)
	if err != nil {
		return err
	}
	defer netns.Close()
	owner, err := sys.GetUsernsForNamespace(netns.Fd())
	if err != nil {
		return err
	}
	defer owner.Close()
	if err := unix.Mount(owner.Name(), pin, "none", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("pin user namespace: %w", err)
	}
	return nil
}

// holdNamespaces runs fn with the pid of a process in a new user
// namespace of r and a new network namespace owned by it, then ends the
// process. The process is the running binary, traced, so that it stops
// at its exec and runs nothing: what lives on is what fn bind-mounts.
// As containerd 2's pkg/sys.UnshareAfterEnterUserns, but the namespace
// belongs to the caller (root), as one runc makes would: runc's prlimit
// of the container's init needs CAP_SYS_RESOURCE over it otherwise,
// which a host that withholds that capability from its root (some VMs
// do) does not give.
func holdNamespaces(r idRange, fn func(pid int) error) error {
	if !sys.SupportsPidFD() {
		return errors.New("the kernel has no pidfd (5.3 or newer needed)")
	}
	ids := []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(r.hostID), Size: int(r.size)}}
	res := make(chan error, 1)
	go func() {
		// The holder dies with the thread that started it (its parent
		// death signal), which traces it: the goroutine keeps the
		// thread locked from the start to the holder's end, and the
		// thread ends with it, never serving another goroutine.
		runtime.LockOSThread()
		proc, err := os.StartProcess("/proc/self/exe", []string{"strata-userns-holder"}, &os.ProcAttr{
			Sys: &syscall.SysProcAttr{
				Cloneflags:                 syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
				UidMappings:                ids,
				GidMappings:                ids,
				GidMappingsEnableSetgroups: true,
				Ptrace:                     true,
				Pdeathsig:                  syscall.SIGKILL,
			},
		})
		if err != nil {
			res <- fmt.Errorf("start the namespaces' holder: %w", err)
			return
		}
		err = fn(proc.Pid)
		if kerr := proc.Kill(); kerr != nil && !errors.Is(kerr, os.ErrProcessDone) {
			err = errors.Join(err, kerr)
		}
		if _, werr := proc.Wait(); werr != nil {
			err = errors.Join(err, werr)
		}
		res <- err
	}()
	return <-res
}

// withUserns puts the container in the pinned user namespace of its
// network namespace, with r's mappings (which runc needs to know the
// host's view of ids).
func (p *Provider) withUserns(id string, r idRange) oci.SpecOpts {
	return oci.Compose(
		oci.WithUserNamespace(r.mapping(), r.mapping()),
		oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.UserNamespace, Path: p.usernsPath(id)}),
	)
}

// withRemappedSnapshot makes replica id's root filesystem from img's
// layers with their owners moved into r (see remapImage).
func (p *Provider) withRemappedSnapshot(id string, img client.Image, r idRange) client.NewContainerOpts {
	return func(ctx context.Context, cl *client.Client, c *containers.Container) error {
		parent, err := p.remapImage(ctx, img, r)
		if err != nil {
			return err
		}
		if _, err := cl.SnapshotService(p.cfg.Snapshotter).Prepare(ctx, id, parent); err != nil {
			return err
		}
		c.Snapshotter, c.SnapshotKey, c.Image = p.cfg.Snapshotter, id, img.Name()
		return nil
	}
}

// remapImage returns the committed snapshot of img's layers chowned
// into r, making it the first time: once per image and range, however
// many replicas ask at once. The image's config references it (a
// containerd GC label), so that it goes with the image.
func (p *Provider) remapImage(ctx context.Context, img client.Image, r idRange) (string, error) {
	diffIDs, err := img.RootFS(ctx)
	if err != nil {
		return "", fmt.Errorf("image layers: %w", err)
	}
	chain := identity.ChainID(diffIDs).String()
	key := "strata-userns-" + strings.ReplaceAll(r.String(), ":", "-") + "-" + chain
	unlock, err := p.imageLocks.lock(ctx, "remap:"+key)
	if err != nil {
		return "", err
	}
	defer unlock()
	if err := p.referenceFromImage(ctx, img, key); err != nil {
		return "", err
	}
	sn := p.client.SnapshotService(p.cfg.Snapshotter)
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
			p.log.Warn("remove failed remap", "snapshot", work, "err", rerr)
		}
		return "", fmt.Errorf("remap the image's files into the user namespace: %w", err)
	}
	if err := sn.Commit(ctx, key, work); err != nil {
		return "", err
	}
	p.log.Info("image remapped into the user namespace range", "image", img.Name(), "range", r.String())
	return key, nil
}

// referenceFromImage labels img's config so that containerd's garbage
// collector keeps snapshot key while the image exists.
func (p *Provider) referenceFromImage(ctx context.Context, img client.Image, key string) error {
	desc, err := img.Config(ctx)
	if err != nil {
		return fmt.Errorf("image config: %w", err)
	}
	label := "containerd.io/gc.ref.snapshot." + p.cfg.Snapshotter + "/" + key
	cs := p.client.ContentStore()
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
