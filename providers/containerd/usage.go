package containerd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	tasktypes "github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/core/containers"

	"github.com/stratahq/strata/internal/api"
)

// cgroupRoot is where the cgroup file systems are mounted: the v2
// hierarchy itself, or a directory of v1 hierarchies (and, on a hybrid
// host, of the v2 one as "unified").
const cgroupRoot = "/sys/fs/cgroup"

// Usage implements provider.Meter from the cgroups of the replicas'
// running tasks. It costs two containerd calls for the whole namespace
// (the containers, whose labels tie pod members to their replica, and
// the tasks), then two small cgroup files per running container, however
// many replicas the node runs. A replica is the sum of its pod's
// containers; one without a running task, or whose cgroups cannot be
// read, is left out. CPU seconds count from a task's start: a restarted
// container starts again from zero, as a counter after a reset.
func (p *Provider) Usage(ctx context.Context) (map[string]api.Usage, error) {
	ctx = p.nsCtx(ctx)
	cs, err := p.client.ContainerService().List(ctx, fmt.Sprintf("labels.%q", LabelAssignment), fmt.Sprintf("labels.%q", labelPod))
	if err != nil {
		return nil, fmt.Errorf("containerd: usage: %w", err)
	}
	ts, err := p.tasks.all(ctx)
	if err != nil {
		return nil, fmt.Errorf("containerd: usage: %w", err)
	}
	return replicaUsage(cs, ts, func(id string) (api.Usage, bool) {
		return cgroupUsage(cgroupRoot, cgroupPath(p.cfg.Namespace, id))
	}), nil
}

// replicaUsage sums, by replica, the usage read (by container id) of the
// containers cs whose task in ts runs: a pod's sidecars and init
// containers count towards their replica (ownerOf).
func replicaUsage(cs []containers.Container, ts map[string]*taskInfo, read func(id string) (api.Usage, bool)) map[string]api.Usage {
	out := map[string]api.Usage{}
	for _, c := range cs {
		if t := ts[c.ID]; t == nil || t.status != tasktypes.Status_RUNNING {
			continue
		}
		u, ok := read(c.ID)
		if !ok {
			continue
		}
		replica, _ := ownerOf(c)
		sum := out[replica]
		sum.CPUSeconds += u.CPUSeconds
		sum.MemoryMiB += u.MemoryMiB
		out[replica] = sum
	}
	return out
}

// cgroupUsage reads the CPU time and the memory of the cgroup path under
// root: cgroup v2's cpu.stat usage_usec and memory.current, else v1's
// cpuacct.usage (nanoseconds) and memory.usage_in_bytes in their own
// hierarchies. Memory is what the cgroup is charged, page cache
// included; 0 when its controller is not there. It reports false when
// no CPU time can be read (the task is gone, or its cgroup is elsewhere).
func cgroupUsage(root, path string) (api.Usage, bool) {
	if usec, ok := readCounter(filepath.Join(root, path, "cpu.stat"), "usage_usec"); ok {
		mem, _ := readValue(filepath.Join(root, path, "memory.current"))
		return api.Usage{CPUSeconds: float64(usec) / 1e6, MemoryMiB: float64(mem) / (1 << 20)}, true
	}
	if nsec, ok := readValue(filepath.Join(root, "cpuacct", path, "cpuacct.usage")); ok {
		mem, _ := readValue(filepath.Join(root, "memory", path, "memory.usage_in_bytes"))
		return api.Usage{CPUSeconds: float64(nsec) / 1e9, MemoryMiB: float64(mem) / (1 << 20)}, true
	}
	return api.Usage{}, false
}

// readValue reads a cgroup file holding one number.
func readValue(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n, err == nil
}
