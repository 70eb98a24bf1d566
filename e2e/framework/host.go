package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// This file looks at what the real providers leave on the host: the
// containers, tasks and snapshots of a containerd namespace (through
// ctr, as an operator would), network namespaces, links and processes.

// Ctr runs `ctr -n ns args...` and returns its standard output.
func Ctr(ns string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"-n", ns}, args...)...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("ctr -n %s %s: %w: %s", ns, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// CtrContainers lists the ids of the containers of namespace ns, sorted
// (`ctr containers ls -q`).
func CtrContainers(ns string) ([]string, error) {
	out, err := Ctr(ns, "containers", "ls", "-q")
	if err != nil {
		return nil, err
	}
	ids := strings.Fields(out)
	slices.Sort(ids)
	return ids, nil
}

// CtrTask is a row of `ctr tasks ls`.
type CtrTask struct {
	ID     string
	PID    int
	Status string
}

// CtrTasks lists the tasks of namespace ns by container id.
func CtrTasks(ns string) (map[string]CtrTask, error) {
	out, err := Ctr(ns, "tasks", "ls")
	if err != nil {
		return nil, err
	}
	tasks := map[string]CtrTask{}
	for i, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) < 3 {
			continue // the header
		}
		pid, err := strconv.Atoi(f[1])
		if err != nil {
			return nil, fmt.Errorf("ctr tasks ls: line %q: %w", line, err)
		}
		tasks[f[0]] = CtrTask{ID: f[0], PID: pid, Status: f[2]}
	}
	return tasks, nil
}

// CtrSnapshot is a row of `ctr snapshots ls`.
type CtrSnapshot struct {
	Key, Parent, Kind string
}

// CtrSnapshots lists the snapshots of namespace ns (default snapshotter).
func CtrSnapshots(ns string) ([]CtrSnapshot, error) {
	out, err := Ctr(ns, "snapshots", "ls")
	if err != nil {
		return nil, err
	}
	var snaps []CtrSnapshot
	for i, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) < 2 {
			continue
		}
		s := CtrSnapshot{Key: f[0], Kind: f[len(f)-1]}
		if len(f) >= 3 {
			s.Parent = f[1]
		}
		snaps = append(snaps, s)
	}
	return snaps, nil
}

// CtrActiveSnapshots lists the keys of the snapshots of ns that are not
// committed image layers: containers' root filesystems.
func CtrActiveSnapshots(ns string) ([]string, error) {
	snaps, err := CtrSnapshots(ns)
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, s := range snaps {
		if s.Kind != "Committed" {
			keys = append(keys, s.Key)
		}
	}
	return keys, nil
}

// CtrNamespaceExists reports whether containerd has namespace ns.
func CtrNamespaceExists(ns string) (bool, error) {
	out, err := Ctr("default", "namespaces", "ls", "-q")
	if err != nil {
		return false, err
	}
	return slices.Contains(strings.Fields(out), ns), nil
}

// RemoveCtrNamespace removes everything in containerd namespace ns
// (tasks killed, containers with their snapshots, images) and the
// namespace itself. It returns what it found left over besides images,
// which a provider legitimately caches; removing a namespace that does
// not exist is not an error.
func RemoveCtrNamespace(ns string) (leftovers []string, err error) {
	ok, err := CtrNamespaceExists(ns)
	if err != nil || !ok {
		return nil, err
	}
	var errs []error
	tasks, err := CtrTasks(ns)
	errs = append(errs, err)
	for id := range tasks {
		leftovers = append(leftovers, "task "+id)
		_, err := Ctr(ns, "tasks", "rm", "-f", id)
		errs = append(errs, err)
	}
	ids, err := CtrContainers(ns)
	errs = append(errs, err)
	for _, id := range ids {
		leftovers = append(leftovers, "container "+id)
		_, err := Ctr(ns, "containers", "rm", id)
		errs = append(errs, err)
	}
	if out, err := Ctr(ns, "images", "ls", "-q"); err == nil {
		for _, img := range strings.Fields(out) {
			_, err := Ctr(ns, "images", "rm", "--sync", img)
			errs = append(errs, err)
		}
	} else {
		errs = append(errs, err)
	}
	if snaps, err := CtrActiveSnapshots(ns); err == nil {
		for _, s := range snaps {
			leftovers = append(leftovers, "snapshot "+s)
			_, err := Ctr(ns, "snapshots", "rm", s)
			errs = append(errs, err)
		}
	}
	// Content and committed snapshots go with the images, in the
	// background: retry the namespace for a while.
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err = Ctr("default", "namespaces", "rm", ns)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	errs = append(errs, err)
	// containerd keeps an empty state directory per namespace that ran
	// tasks; Remove takes only empty ones.
	for _, dir := range []string{"/run/containerd/io.containerd.runtime.v2.task", "/run/containerd/runc", "/var/lib/containerd/io.containerd.runtime.v2.task"} {
		_ = os.Remove(filepath.Join(dir, ns))
	}
	return leftovers, errors.Join(errs...)
}

// NetNSDir is where the containerd provider binds replicas' network
// namespaces.
const NetNSDir = "/var/run/netns"

// NetNSWithPrefix lists the network namespaces under NetNSDir whose
// name starts with prefix.
func NetNSWithPrefix(prefix string) []string {
	ents, _ := os.ReadDir(NetNSDir)
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// RemoveNetNS unmounts and removes a network namespace of NetNSDir.
func RemoveNetNS(name string) error {
	p := filepath.Join(NetNSDir, name)
	if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("unmount %s: %w", p, err)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// LinkExists reports whether the host has a network interface name.
func LinkExists(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", name))
	return err == nil
}

// LinkPorts lists the interfaces enslaved to bridge name.
func LinkPorts(name string) []string {
	ents, _ := os.ReadDir(filepath.Join("/sys/class/net", name, "brif"))
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// LinkHasAddr reports whether interface name holds address ip.
func LinkHasAddr(name, ip string) (bool, error) {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return false, err
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return false, err
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.String() == ip {
			return true, nil
		}
	}
	return false, nil
}

// DeleteLink deletes a network interface (`ip link del`); absent is fine.
func DeleteLink(name string) error {
	if !LinkExists(name) {
		return nil
	}
	out, err := exec.Command("ip", "link", "del", name).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip link del %s: %w: %s", name, err, out)
	}
	return nil
}

// PidsWithArg lists the live processes one of whose arguments is arg.
func PidsWithArg(arg string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !slices.Contains(strings.Split(string(b), "\x00"), arg) {
			continue
		}
		if ProcAlive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// ProcAlive reports whether pid is a live process (a zombie is dead).
func ProcAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	s := stat[i+2]
	return s != 'Z' && s != 'X'
}

// NATRulesMentioning returns the lines of `iptables-save -t nat` that
// contain s (the CNI bridge plugin's masquerading rules name the
// container id in a comment); nil when iptables-save is missing.
func NATRulesMentioning(s string) ([]string, error) {
	if _, err := exec.LookPath("iptables-save"); err != nil {
		return nil, nil
	}
	out, err := exec.Command("iptables-save", "-t", "nat").Output()
	if err != nil {
		return nil, fmt.Errorf("iptables-save: %w", err)
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, s) {
			lines = append(lines, l)
		}
	}
	return lines, nil
}
