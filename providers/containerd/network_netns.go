package containerd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"

	"github.com/containerd/containerd/v2/pkg/sys"
	"golang.org/x/sys/unix"
)

// usernsPath is where the user namespace owning replica id's network
// namespace is pinned (bind-mounted), for its container to join.
func (nw *networkService) usernsPath(id string) string {
	return filepath.Join(nw.cfg.StateDir, "userns", nw.netnsName(id))
}

// createUsernsNetNS makes replica id's network namespace, whose empty
// file exists, inside a new user namespace of r, and pins that user
// namespace.
func (nw *networkService) createUsernsNetNS(id string, r idRange) (err error) {
	path, pin := nw.netnsPath(id), nw.usernsPath(id)
	defer func() {
		if err != nil {
			err = errors.Join(fmt.Errorf("netns %s in a user namespace: %w", path, err), nw.removeNamespaces(id))
		}
	}()
	nw.usernsDirOnce.Do(func() { nw.usernsDirErr = makeSharedDir(filepath.Dir(pin)) })
	if nw.usernsDirErr != nil {
		return nw.usernsDirErr
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

// createNetNS creates the network namespace of replica id bound to its
// path, as `ip netns add` does: a thread unshares its network namespace
// and bind-mounts it onto an empty file, which keeps it alive without a
// process. With userns, the namespace is made inside a new user
// namespace of that range instead (see createUsernsNetNS).
func (nw *networkService) createNetNS(id string, userns *idRange) error {
	if err := nw.prepareNetNSDir(); err != nil {
		return err
	}
	path := nw.netnsPath(id)
	if err := createEmpty(path); err != nil {
		return fmt.Errorf("netns %s: %w", path, err)
	}
	if userns != nil {
		return nw.createUsernsNetNS(id, *userns)
	}
	errc := make(chan error, 1)
	go func() {
		// The thread's namespace changes, so it must never run another
		// goroutine: staying locked makes the runtime end the thread
		// with this goroutine. The main thread is not ended but parked,
		// so the thread also returns to its namespace: parked in the
		// new one, it would keep that alive after its unmount.
		runtime.LockOSThread()
		orig, err := os.Open(fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid()))
		if err != nil {
			errc <- fmt.Errorf("current namespace: %w", err)
			return
		}
		defer orig.Close()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("unshare: %w", err)
			return
		}
		self := fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid())
		err = unix.Mount(self, path, "none", unix.MS_BIND, "")
		if err != nil {
			err = fmt.Errorf("bind mount: %w", err)
		}
		if serr := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); serr != nil {
			err = errors.Join(err, fmt.Errorf("return to the host namespace: %w", serr))
		}
		errc <- err
	}()
	if err := <-errc; err != nil {
		removeNetNS(path) //nolint:errcheck // the error that matters is err
		return fmt.Errorf("netns %s: %w", path, err)
	}
	return nil
}

// createEmpty creates the empty file a namespace is bind-mounted on.
func createEmpty(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return err
	}
	return f.Close()
}

// prepareNetNSDir makes NetNSDir a shared mount point, as iproute2 does,
// so that namespaces mounted later propagate into mount namespaces
// copied before (and their unmounts too).
func (nw *networkService) prepareNetNSDir() error {
	nw.netnsDirOnce.Do(func() { nw.netnsDirErr = makeSharedDir(nw.cfg.NetNSDir) })
	return nw.netnsDirErr
}

// makeSharedDir makes dir a shared mount point (see prepareNetNSDir).
func makeSharedDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("namespace dir: %w", err)
	}
	err := unix.Mount("", dir, "none", unix.MS_SHARED|unix.MS_REC, "")
	if errors.Is(err, unix.EINVAL) {
		// Not a mount point yet: make it one.
		if err = unix.Mount(dir, dir, "none", unix.MS_BIND|unix.MS_REC, ""); err == nil {
			err = unix.Mount("", dir, "none", unix.MS_SHARED|unix.MS_REC, "")
		}
	}
	if err != nil {
		return fmt.Errorf("namespace dir %s: make shared mount: %w", dir, err)
	}
	return nil
}

// removeNetNS unmounts and removes a namespace file; absent is fine.
func removeNetNS(path string) error {
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount netns %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove netns %s: %w", path, err)
	}
	return nil
}

// isNetNS reports whether path is a mounted network namespace.
func isNetNS(path string) bool { return isNS(path) }

// isNS reports whether path is a mounted namespace.
func isNS(path string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return false
	}
	return st.Type == unix.NSFS_MAGIC
}
