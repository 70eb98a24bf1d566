package containerd

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	tasktypes "github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/core/containers"

	"github.com/stratahq/strata/internal/api"
)

// writeCgroup writes files (name: content) into dir under root, as the
// kernel shows a cgroup.
func writeCgroup(t *testing.T, root, dir string, files map[string]string) {
	t.Helper()
	d := filepath.Join(root, dir)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(d, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCgroupUsage reads fake cgroup v2 and v1 trees, laid out and
// filled as the kernel does.
func TestCgroupUsage(t *testing.T) {
	const path = "/ns/web-1"
	tests := []struct {
		name   string
		layout func(t *testing.T, root string)
		want   api.Usage
		wantOK bool
	}{
		{name: "v2", layout: func(t *testing.T, root string) {
			writeCgroup(t, root, path, map[string]string{
				"cpu.stat":       "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n",
				"memory.current": "50331648\n",
			})
		}, want: api.Usage{CPUSeconds: 2.5, MemoryMiB: 48}, wantOK: true},
		{name: "v2 without the memory controller", layout: func(t *testing.T, root string) {
			writeCgroup(t, root, path, map[string]string{"cpu.stat": "usage_usec 1000\nuser_usec 1000\nsystem_usec 0\n"})
		}, want: api.Usage{CPUSeconds: 0.001}, wantOK: true},
		{name: "v1", layout: func(t *testing.T, root string) {
			writeCgroup(t, root, "cpuacct"+path, map[string]string{"cpuacct.usage": "1750000000\n"})
			writeCgroup(t, root, "memory"+path, map[string]string{"memory.usage_in_bytes": "3145728\n"})
		}, want: api.Usage{CPUSeconds: 1.75, MemoryMiB: 3}, wantOK: true},
		{name: "hybrid: v1 controllers, v2 elsewhere", layout: func(t *testing.T, root string) {
			writeCgroup(t, root, "unified"+path, map[string]string{"cpu.stat": "usage_usec 9\n"})
			writeCgroup(t, root, "cpuacct"+path, map[string]string{"cpuacct.usage": "4000000000\n"})
			writeCgroup(t, root, "memory"+path, map[string]string{"memory.usage_in_bytes": "1048576\n"})
		}, want: api.Usage{CPUSeconds: 4, MemoryMiB: 1}, wantOK: true},
		{name: "no cgroup", layout: func(*testing.T, string) {}},
		{name: "garbage", layout: func(t *testing.T, root string) {
			writeCgroup(t, root, path, map[string]string{"cpu.stat": "usage_usec lots\n"})
			writeCgroup(t, root, "cpuacct"+path, map[string]string{"cpuacct.usage": "max\n"})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			tc.layout(t, root)
			got, ok := cgroupUsage(root, path)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("cgroupUsage: got %+v, %v; want %+v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// TestReplicaUsage checks that a pod's running containers add up to
// their replica, and that what does not run, or cannot be read, is left
// out.
func TestReplicaUsage(t *testing.T) {
	running := &taskInfo{status: tasktypes.Status_RUNNING}
	stopped := &taskInfo{status: tasktypes.Status_STOPPED, exitedAt: time.Now()}
	member := func(id, pod, name string) containers.Container {
		return containers.Container{ID: id, Labels: map[string]string{labelPod: pod, labelContainer: name}}
	}
	cs := []containers.Container{
		{ID: "pod-1", Labels: map[string]string{LabelAssignment: "pod-1"}},
		member("pod-1.web", "pod-1", "web"),
		member("pod-1.init-setup", "pod-1", "setup"),
		member("pod-1.log", "pod-1", "log"),
		{ID: "alone-1", Labels: map[string]string{LabelAssignment: "alone-1"}},
		{ID: "exited-1", Labels: map[string]string{LabelAssignment: "exited-1"}},
		{ID: "unread-1", Labels: map[string]string{LabelAssignment: "unread-1"}},
		{ID: "created-1", Labels: map[string]string{LabelAssignment: "created-1"}},
	}
	ts := map[string]*taskInfo{
		"pod-1": running, "pod-1.web": running, "pod-1.init-setup": running,
		// pod-1.log has no task.
		"alone-1": running, "exited-1": stopped, "unread-1": running,
		"created-1": {status: tasktypes.Status_CREATED},
	}
	cgroups := map[string]api.Usage{
		"pod-1":            {CPUSeconds: 1, MemoryMiB: 10},
		"pod-1.web":        {CPUSeconds: 2, MemoryMiB: 20},
		"pod-1.init-setup": {CPUSeconds: 0.5, MemoryMiB: 1},
		"pod-1.log":        {CPUSeconds: 100, MemoryMiB: 100},
		"alone-1":          {CPUSeconds: 3, MemoryMiB: 30},
		"exited-1":         {CPUSeconds: 100, MemoryMiB: 100},
		"created-1":        {CPUSeconds: 100, MemoryMiB: 100},
	}
	got := replicaUsage(cs, ts, func(id string) (api.Usage, bool) {
		u, ok := cgroups[id]
		return u, ok
	})
	want := map[string]api.Usage{
		"pod-1":   {CPUSeconds: 3.5, MemoryMiB: 31},
		"alone-1": {CPUSeconds: 3, MemoryMiB: 30},
	}
	if len(got) != len(want) {
		t.Errorf("replicaUsage: got %+v; want %+v", got, want)
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("replicaUsage of %s: got %+v; want %+v", id, got[id], w)
		}
	}
}

// TestUsage runs a pod whose main container and sidecar both burn CPU:
// Usage reports the replica alone (not its sidecar as one), with CPU
// seconds that grow between two samples, memory above zero, and the sum
// of its two containers' cgroups.
func TestUsage(t *testing.T) {
	e := newEnv(t)
	burn := []string{"sh", "-c", `trap 'exit 0' TERM; while :; do :; done`}
	id := "usage-" + randomSuffix(t)
	a := e.assignment(id, burn...)
	a.Spec.Compute.Containers = []api.Container{{Name: "burn", Image: "busybox", Command: burn,
		Resources: &api.ContainerResources{MilliCPU: 200, MemoryMiB: 32}}}
	e.apply(t, a)
	e.waitStatus(t, id, "ready", func(st api.AssignmentStatus) bool { return st.Phase == api.PhaseReady })

	usage := func() (api.Usage, string) {
		all, err := e.p.Usage(e.ctx(t))
		if err != nil {
			t.Fatalf("Usage: %v", err)
		}
		if len(all) > 1 {
			t.Fatalf("Usage: got %+v; want %s alone", all, id)
		}
		return all[id], fmt.Sprintf("got %+v", all)
	}
	var first api.Usage
	eventually(t, "usage of "+id, func() (bool, string) {
		var state string
		first, state = usage()
		return first.CPUSeconds > 0 && first.MemoryMiB > 0, state
	})
	eventually(t, "CPU seconds of "+id+" grow", func() (bool, string) {
		u, state := usage()
		return u.CPUSeconds > first.CPUSeconds, fmt.Sprintf("first %+v, %s", first, state)
	})

	// Between reads of each container's cgroup, before and after, the
	// replica's sample is their sum: counters only grow. The sidecar
	// burns long enough first that leaving it out would show.
	own := func(container string) api.Usage {
		u, ok := cgroupUsage(cgroupRoot, cgroupPath(e.ns, container))
		if !ok {
			t.Fatalf("cgroup of %s: not readable", container)
		}
		return u
	}
	side := sidecarID(id, "burn")
	eventually(t, "sidecar burns", func() (bool, string) {
		u := own(side)
		return u.CPUSeconds > 0.1, fmt.Sprintf("got %+v", u)
	})
	main1, side1 := own(id), own(side)
	u, _ := usage()
	main2, side2 := own(id), own(side)
	if lo, hi := main1.CPUSeconds+side1.CPUSeconds, main2.CPUSeconds+side2.CPUSeconds; u.CPUSeconds < lo || u.CPUSeconds > hi {
		t.Errorf("CPU seconds of %s: got %v; want between %v and %v, its containers' sums before and after", id, u.CPUSeconds, lo, hi)
	}
}
