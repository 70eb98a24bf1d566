package framework

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/testkit/testenv"
)

// A Lab is a set of test hosts, each a network namespace with its own
// address on one bridge, so that a test can cut the network between two
// of them for real (see Partition). The bridge lives in a namespace of
// its own (the hub): nothing of the lab touches the root namespace's
// links, routes or firewall. The test process stays in the root
// namespace and reaches the hosts through Host.DialContext, which opens
// its sockets inside a host's namespace.
//
// Namespaces are named <prefix><pid>-<host>: a lab removes its own when
// the test ends, and NewLab first sweeps those of the prefix whose test
// process is gone (a test binary killed before its cleanups ran).
type Lab struct {
	t      testing.TB
	prefix string // <prefix><pid>-
	hub    string
	subnet string // the /24's first three octets, "10.251.0"

	mu    sync.Mutex
	hosts []*Host
}

// Host is one test host of a Lab.
type Host struct {
	lab  *Lab
	Name string
	// NS is the network namespace's name (under /var/run/netns).
	NS string
	// IP is the host's address on the lab's bridge.
	IP string
}

// NewLab creates the hub namespace and its bridge. Hosts get addresses
// subnet.2 and up ("10.251.0" gives 10.251.0.2, ...). It needs root, ip,
// iptables and nsenter; under CI=true their absence fails the test.
func NewLab(t testing.TB, prefix, subnet string) *Lab {
	t.Helper()
	testenv.RequireRoot(t, "network namespaces")
	for _, bin := range []string{"ip", "iptables", "nsenter"} {
		if _, err := exec.LookPath(bin); err != nil {
			testenv.Missing(t, bin, err)
		}
	}
	SweepLabs(prefix)
	l := &Lab{t: t, prefix: fmt.Sprintf("%s%d-", prefix, os.Getpid()), subnet: subnet}
	l.hub = l.prefix + "hub"
	t.Cleanup(l.Close)
	l.must("ip", "netns", "add", l.hub)
	l.must("ip", "-n", l.hub, "link", "add", "br0", "type", "bridge")
	l.must("ip", "-n", l.hub, "link", "set", "br0", "up")
	l.must("ip", "-n", l.hub, "link", "set", "lo", "up")
	return l
}

// AddHost creates a host namespace with the next address of the subnet,
// linked to the bridge by a veth pair (eth0 in the host).
func (l *Lab) AddHost(name string) *Host {
	l.t.Helper()
	l.mu.Lock()
	idx := len(l.hosts)
	h := &Host{lab: l, Name: name, NS: l.prefix + name, IP: fmt.Sprintf("%s.%d", l.subnet, idx+2)}
	l.hosts = append(l.hosts, h)
	l.mu.Unlock()
	if idx+2 > 254 {
		l.t.Fatalf("lab: more than 253 hosts")
	}
	port := fmt.Sprintf("p%d", idx)
	l.must("ip", "netns", "add", h.NS)
	l.must("ip", "-n", l.hub, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", h.NS)
	l.must("ip", "-n", l.hub, "link", "set", port, "master", "br0", "up")
	l.must("ip", "-n", h.NS, "addr", "add", h.IP+"/24", "dev", "eth0")
	l.must("ip", "-n", h.NS, "link", "set", "eth0", "up")
	l.must("ip", "-n", h.NS, "link", "set", "lo", "up")
	// The partition chain: Partition adds DROP rules to it, Heal
	// flushes it.
	for _, hook := range []string{"INPUT", "OUTPUT"} {
		chain := "LAB-" + hook
		l.must("ip", "netns", "exec", h.NS, "iptables", "-w", "-N", chain)
		l.must("ip", "netns", "exec", h.NS, "iptables", "-w", "-I", hook, "-j", chain)
	}
	return h
}

// Partition drops every packet between the hosts of a and those of b,
// in both directions, with iptables rules inside a's namespaces (b's
// are left alone, so that a host may be on the b side of several
// partitions). Heal undoes it.
func (l *Lab) Partition(a, b []*Host) {
	l.t.Helper()
	for _, x := range a {
		for _, y := range b {
			l.must("ip", "netns", "exec", x.NS, "iptables", "-w", "-A", "LAB-INPUT", "-s", y.IP, "-j", "DROP")
			l.must("ip", "netns", "exec", x.NS, "iptables", "-w", "-A", "LAB-OUTPUT", "-d", y.IP, "-j", "DROP")
		}
	}
}

// Heal removes every partition rule of the hosts.
func (l *Lab) Heal(hosts []*Host) {
	l.t.Helper()
	for _, x := range hosts {
		l.must("ip", "netns", "exec", x.NS, "iptables", "-w", "-F", "LAB-INPUT")
		l.must("ip", "netns", "exec", x.NS, "iptables", "-w", "-F", "LAB-OUTPUT")
	}
}

// Close kills what still runs in the lab's namespaces and removes them.
func (l *Lab) Close() {
	l.mu.Lock()
	hosts := l.hosts
	l.hosts = nil
	l.mu.Unlock()
	for _, h := range hosts {
		removeNS(h.NS)
	}
	removeNS(l.hub)
}

func (l *Lab) must(args ...string) {
	l.t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		l.t.Fatalf("lab: %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
}

// SweepLabs removes the namespaces named <prefix><pid>-* whose pid is
// no longer a live process, with whatever still runs in them.
func SweepLabs(prefix string) {
	ents, _ := os.ReadDir(NetNSDir)
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok {
			continue
		}
		pidStr, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if !ok || err != nil || ProcAlive(pid) {
			continue
		}
		removeNS(e.Name())
	}
}

// removeNS kills the processes of namespace ns and deletes it (its
// veths go with it).
func removeNS(ns string) {
	if out, err := exec.Command("ip", "netns", "pids", ns).Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	_ = exec.Command("ip", "netns", "del", ns).Run()
}

// Start runs bin with args on the host; see the package's Start.
func (h *Host) Start(t testing.TB, name, bin string, args []string, env ...string) *Proc {
	t.Helper()
	return Start(t, name, "nsenter", h.nsenter(bin, args), env...)
}

// StartAgent runs a node agent reading cfg (see AgentCommand) on the host.
func (h *Host) StartAgent(t testing.TB, name, cfg string) *Proc {
	t.Helper()
	bin, args := AgentCommand(t, cfg)
	return h.Start(t, name, bin, args)
}

// nsenter is the command line that runs bin in the host's network
// namespace only: nsenter execs bin (signals reach it directly), and
// unlike `ip netns exec` it leaves the mount namespace alone, so that
// the network namespaces a containerd agent bind-mounts for its
// containers are visible to containerd and runc.
func (h *Host) nsenter(bin string, args []string) []string {
	return append([]string{"--net=" + filepath.Join(NetNSDir, h.NS), "--", bin}, args...)
}

// Addr is the host's ip:port.
func (h *Host) Addr(port int) string { return net.JoinHostPort(h.IP, strconv.Itoa(port)) }

// Exec runs a command on the host and returns its combined output.
func (h *Host) Exec(ctx context.Context, bin string, args ...string) ([]byte, error) {
	out, err := exec.CommandContext(ctx, "nsenter", h.nsenter(bin, args)...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s on %s: %w: %s", bin, h.Name, err, bytes.TrimSpace(out))
	}
	return out, nil
}

// DialContext opens a connection from inside the host's namespace: the
// socket is created on an OS thread switched into it, and stays there
// whatever thread uses it afterwards.
func (h *Host) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := h.inNS(func() (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		})
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

// inNS runs f on this goroutine's thread switched into the host's
// namespace. A thread that cannot be switched back is never unlocked,
// so that it ends with the goroutine instead of serving others.
func (h *Host) inNS(f func() (net.Conn, error)) (net.Conn, error) {
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer orig.Close()
	target, err := os.Open(filepath.Join(NetNSDir, h.NS))
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("setns %s: %w", h.NS, err)
	}
	c, err := f()
	if unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil {
		runtime.UnlockOSThread()
	}
	return c, err
}

// Address is the host's IP address.
func (h *Host) Address() string { return h.IP }

// Command prepares bin with args to run on the host.
func (h *Host) Command(bin string, args ...string) *exec.Cmd {
	return exec.Command("nsenter", h.nsenter(bin, args)...)
}
