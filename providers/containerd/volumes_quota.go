package containerd

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// quotaFS is a filesystem with project quotas on.
type quotaFS struct {
	device     string
	mountPoint string
	fsType     string
}

// quotaMount returns the filesystem of VolumeRoot when it enforces
// project quotas (ext4 or XFS mounted with prjquota), else nil.
func (vm *volumeService) quotaMount() *quotaFS {
	m, err := mountOf(vm.cfg.VolumeRoot)
	if err != nil || m == nil {
		return nil
	}
	if m.fsType != "ext4" && m.fsType != "xfs" {
		return nil
	}
	for _, o := range m.options {
		if o == "prjquota" || o == "pquota" {
			return &quotaFS{device: m.source, mountPoint: m.mountPoint, fsType: m.fsType}
		}
	}
	return nil
}

// quotaMode describes how volume sizes are kept, for Health.
func (vm *volumeService) quotaMode() string {
	if q := vm.quotaMount(); q != nil {
		return fmt.Sprintf("volume sizes enforced by %s project quotas on %s", q.fsType, q.device)
	}
	m, _ := mountOf(vm.cfg.VolumeRoot)
	if m == nil {
		return "volume sizes recorded, not enforced (filesystem unknown)"
	}
	return fmt.Sprintf("volume sizes recorded, not enforced (%s at %s has no project quotas: mount ext4 or XFS with prjquota)", m.fsType, m.mountPoint)
}

// limit puts dir in project pid and limits the project to sizeMiB (0:
// no limit).
func (q *quotaFS) limit(dir string, pid uint32, sizeMiB int64) error {
	if err := setProject(dir, pid); err != nil {
		return err
	}
	return q.setLimit(pid, sizeMiB)
}

// Linux quota ABI (linux/quota.h, linux/fs.h); x/sys/unix has none of it.
const (
	qSetQuota          = 0x800008
	prjQuota           = 2
	qifBLimits         = 1
	fsIocFsGetXattr    = 0x801c581f
	fsIocFsSetXattr    = 0x401c5820
	fsXflagProjInherit = 0x200
)

// ifDqblk is struct if_dqblk.
type ifDqblk struct {
	BHardLimit uint64 // in 1 KiB blocks
	BSoftLimit uint64
	CurSpace   uint64
	IHardLimit uint64
	ISoftLimit uint64
	CurInodes  uint64
	BTime      uint64
	ITime      uint64
	Valid      uint32
	_          uint32
}

// fsxattr is struct fsxattr.
type fsxattr struct {
	XFlags     uint32
	ExtSize    uint32
	NExtents   uint32
	ProjID     uint32
	CowExtSize uint32
	_          [8]byte
}

func (q *quotaFS) setLimit(pid uint32, sizeMiB int64) error {
	dev, err := unix.BytePtrFromString(q.device)
	if err != nil {
		return err
	}
	d := ifDqblk{Valid: qifBLimits}
	if sizeMiB > 0 {
		d.BHardLimit = uint64(sizeMiB) * 1024
		d.BSoftLimit = d.BHardLimit
	}
	cmd := uintptr(qSetQuota<<8 | prjQuota)
	if _, _, errno := unix.Syscall6(unix.SYS_QUOTACTL, cmd, uintptr(unsafe.Pointer(dev)), uintptr(pid), uintptr(unsafe.Pointer(&d)), 0, 0); errno != 0 {
		return fmt.Errorf("quotactl project %d on %s: %w", pid, q.device, errno)
	}
	return nil
}

// setProject sets dir's project id, inherited by what is created in it.
func setProject(dir string, pid uint32) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	var x fsxattr
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), fsIocFsGetXattr, uintptr(unsafe.Pointer(&x))); errno != 0 {
		return fmt.Errorf("get project of %s: %w", dir, errno)
	}
	x.ProjID = pid
	x.XFlags |= fsXflagProjInherit
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), fsIocFsSetXattr, uintptr(unsafe.Pointer(&x))); errno != 0 {
		return fmt.Errorf("set project of %s: %w", dir, errno)
	}
	return nil
}

// mountInfo is one line of /proc/self/mountinfo.
type mountInfo struct {
	mountPoint string
	fsType     string
	source     string
	options    []string
}

// mountOf returns the mount holding path (the longest mount point that
// is a prefix of it).
func mountOf(path string) (*mountInfo, error) {
	abs, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, err
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var best *mountInfo
	s := bufio.NewScanner(f)
	for s.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(s.Text(), " - ")
		if !ok {
			continue
		}
		a, b := strings.Fields(pre), strings.Fields(post)
		if len(a) < 6 || len(b) < 3 {
			continue
		}
		mp := unescapeMount(a[4])
		if !within(abs, mp) || (best != nil && len(mp) < len(best.mountPoint)) {
			continue
		}
		opts := append(strings.Split(a[5], ","), strings.Split(b[2], ",")...)
		best = &mountInfo{mountPoint: mp, fsType: b[0], source: b[1], options: opts}
	}
	return best, s.Err()
}

func within(path, dir string) bool {
	return dir == "/" || path == dir || strings.HasPrefix(path, dir+"/")
}

// unescapeMount undoes mountinfo's octal escapes of spaces and tabs.
func unescapeMount(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}

// statfsFree returns free and total bytes of the filesystem at path.
func statfsFree(path string) (free, total uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, 0, err
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), nil
}
