package containerd

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
)

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

func (p *Provider) volumeDir(id string) string { return filepath.Join(p.cfg.VolumeRoot, id) }

func (p *Provider) volumeRecordPath(id string) string {
	return filepath.Join(p.cfg.VolumeRoot, metaDir, id+".json")
}

// readVolume returns the record of volume id, or nil without error.
func (p *Provider) readVolume(id string) (*volumeRecord, error) {
	b, err := os.ReadFile(p.volumeRecordPath(id))
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

func (p *Provider) writeVolume(v *volumeRecord) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(p.volumeRecordPath(v.ID), b)
}

func (p *Provider) listVolumes() ([]*volumeRecord, error) {
	ents, err := os.ReadDir(filepath.Join(p.cfg.VolumeRoot, metaDir))
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
		v, err := p.readVolume(id)
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

func (p *Provider) volumeStatus(v *volumeRecord) api.AssignmentStatus {
	st := api.AssignmentStatus{
		ID:                 v.ID,
		Node:               p.node,
		ObservedGeneration: v.Generation,
		Phase:              api.PhaseReady,
		ProviderID:         p.volumeDir(v.ID),
		Since:              v.CreatedAt,
		UpdatedAt:          time.Now(),
	}
	if v.SizeMiB > 0 && !v.Enforced {
		st.Reason = fmt.Sprintf("size %d MiB recorded, not enforced (no project quota on the volume filesystem)", v.SizeMiB)
	}
	return st
}

// makeVolumeDir makes a volume's directory. A new one belongs to its
// replicas' root, which is not the host's in a user namespace.
func (p *Provider) makeVolumeDir(dir string, created bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if r := p.userns; created && r != nil {
		return os.Chown(dir, int(r.hostID), int(r.hostID))
	}
	return nil
}

// applyVolume creates or updates a Volume replica: a directory with a
// project quota of its size where the filesystem has project quotas.
// The caller holds the replica's lock.
func (p *Provider) applyVolume(_ context.Context, a *api.Assignment) (api.AssignmentStatus, error) {
	var size int64
	if vs := a.Spec.Volume; vs != nil {
		if vs.Format != "" && vs.Format != api.VolumeDir {
			return api.AssignmentStatus{}, fmt.Errorf("containerd: volume %s: format %q: %w", a.ID, vs.Format, provider.ErrUnsupported)
		}
		size = vs.SizeMiB
	}
	v, err := p.readVolume(a.ID)
	if err != nil {
		return api.AssignmentStatus{}, fmt.Errorf("containerd: %w", err)
	}
	if v != nil && a.Generation <= v.Generation {
		return p.volumeStatus(v), nil
	}
	now := time.Now()
	created := v == nil
	if created {
		v = &volumeRecord{ID: a.ID, CreatedAt: now}
	}
	dir := p.volumeDir(a.ID)
	if err := p.makeVolumeDir(dir, created); err != nil {
		return api.AssignmentStatus{}, fmt.Errorf("containerd: volume %s: %w", a.ID, err)
	}
	v.Generation, v.SizeMiB, v.UpdatedAt, v.Labels = a.Generation, size, now, a.Labels
	if q := p.quotaMount(); q != nil {
		if v.ProjectID == 0 {
			v.ProjectID = p.projectID(a.ID)
		}
		if err := q.limit(dir, v.ProjectID, size); err != nil {
			// The volume works without its limit; say so.
			p.log.Warn("volume quota not set", "id", a.ID, "err", err)
			v.Enforced = false
		} else {
			v.Enforced = size > 0
		}
	}
	if err := p.writeVolume(v); err != nil {
		return api.AssignmentStatus{}, fmt.Errorf("containerd: volume %s: %w", a.ID, err)
	}
	st := p.volumeStatus(v)
	p.notify(st)
	return st, nil
}

// deleteVolume removes a volume's directory, quota and record.
func (p *Provider) deleteVolume(v *volumeRecord) error {
	if v.Enforced && v.ProjectID != 0 {
		if q := p.quotaMount(); q != nil {
			if err := q.setLimit(v.ProjectID, 0); err != nil {
				p.log.Warn("clear volume quota", "id", v.ID, "err", err)
			}
		}
	}
	if err := os.RemoveAll(p.volumeDir(v.ID)); err != nil {
		return fmt.Errorf("volume %s: %w", v.ID, err)
	}
	if err := os.Remove(p.volumeRecordPath(v.ID)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("volume %s: %w", v.ID, err)
	}
	now := time.Now()
	p.notify(api.AssignmentStatus{ID: v.ID, Node: p.node, ObservedGeneration: v.Generation, Phase: api.PhaseDestroyed, Since: now, UpdatedAt: now})
	return nil
}

// projectID derives a volume's quota project from its id, avoiding the
// projects of other volumes.
func (p *Provider) projectID(id string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(p.cfg.Namespace + "/" + id))
	pid := h.Sum32()%(1<<30) + 1<<20 // clear of small, hand-made project ids
	used := map[uint32]bool{}
	if vs, err := p.listVolumes(); err == nil {
		for _, v := range vs {
			used[v.ProjectID] = true
		}
	}
	for used[pid] {
		pid++
	}
	return pid
}

// quotaFS is a filesystem with project quotas on.
type quotaFS struct {
	device     string
	mountPoint string
	fsType     string
}

// quotaMount returns the filesystem of VolumeRoot when it enforces
// project quotas (ext4 or XFS mounted with prjquota), else nil.
func (p *Provider) quotaMount() *quotaFS {
	m, err := mountOf(p.cfg.VolumeRoot)
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
func (p *Provider) quotaMode() string {
	if q := p.quotaMount(); q != nil {
		return fmt.Sprintf("volume sizes enforced by %s project quotas on %s", q.fsType, q.device)
	}
	m, _ := mountOf(p.cfg.VolumeRoot)
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
