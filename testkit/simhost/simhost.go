// Package simhost simulates hosts on one machine for tests and
// benchmarks: each host is a network namespace with its own underlay
// address on a shared L2 segment (a bridge in a namespace of its own),
// and a replica is a namespace attached to a host's bridge by a veth pair,
// as the CNI bridge plugin attaches a container.
//
// Nothing here touches the machine's own namespace: every namespace is
// bound under /var/run/netns with the caller's prefix, and Close removes
// them all. Programs run inside a host with only its network namespace
// entered (nsenter --net), keeping the machine's mount namespace: the
// namespaces that containerd's runc must find stay visible.
package simhost

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/vishvananda/netns"
)

// NetNSDir is where namespaces are bound, as `ip netns` does.
const NetNSDir = "/var/run/netns"

// NS is a network namespace bound at Path.
type NS struct {
	Name string
	Path string
}

// NewNS creates the namespace name.
func NewNS(name string) (*NS, error) {
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ip netns add %s: %w: %s", name, err, strings.TrimSpace(string(out)))
	}
	ns := &NS{Name: name, Path: filepath.Join(NetNSDir, name)}
	if err := ns.IP("link", "set", "lo", "up"); err != nil {
		ns.Delete()
		return nil, err
	}
	return ns, nil
}

// Delete removes the namespace; its interfaces go with it.
func (n *NS) Delete() error {
	out, err := exec.Command("ip", "netns", "del", n.Name).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "No such file") {
		return fmt.Errorf("ip netns del %s: %w: %s", n.Name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// IP runs `ip -n <ns> args...`.
func (n *NS) IP(args ...string) error {
	_, err := n.IPOutput(args...)
	return err
}

// IPOutput runs `ip -n <ns> args...` and returns its output.
func (n *NS) IPOutput(args ...string) (string, error) {
	out, err := exec.Command("ip", append([]string{"-n", n.Name}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ip -n %s %s: %w: %s", n.Name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// Command runs name inside the namespace, its network namespace only
// (nsenter --net): the mount namespace stays the machine's.
func (n *NS) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + n.Path, "--", name}, args...)...)
}

// Do runs fn on a thread inside the namespace. Sockets fn opens stay in
// the namespace after it returns.
func (n *NS) Do(fn func() error) error {
	target, err := netns.GetFromPath(n.Path)
	if err != nil {
		return fmt.Errorf("namespace %s: %w", n.Name, err)
	}
	defer target.Close()
	errc := make(chan error, 1)
	go func() {
		// A thread that cannot return to its namespace stays locked:
		// the runtime ends it with this goroutine.
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		if err := netns.Set(target); err != nil {
			errc <- fmt.Errorf("enter %s: %w", n.Name, err)
			return
		}
		err = fn()
		if serr := netns.Set(orig); serr != nil {
			errc <- errors.Join(err, serr)
			return
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	return <-errc
}

// Dial connects from inside the namespace.
func (n *NS) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := n.Do(func() error {
		var err error
		c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// Listen listens inside the namespace.
func (n *NS) Listen(network, addr string) (net.Listener, error) {
	var l net.Listener
	err := n.Do(func() error {
		var err error
		l, err = net.Listen(network, addr)
		return err
	})
	return l, err
}

// Segment is an L2 segment: a bridge in a namespace of its own, with the
// first address of its prefix (the hosts' default gateway), that hosts
// attach to with an address each.
type Segment struct {
	NS     *NS
	Prefix netip.Prefix
	MTU    int

	mu    sync.Mutex
	next  netip.Addr
	hosts []*Host
}

// Host is a simulated host: its namespace, with eth0 on the segment.
type Host struct {
	*NS
	// Addr is eth0's address; the segment's gateway is the default route.
	Addr     netip.Addr
	Dev      string
	replicas []*NS
	index    int
}

// NewSegment creates a segment named prefix+"-seg" on subnet, whose links
// have MTU mtu.
func NewSegment(prefix string, subnet netip.Prefix, mtu int) (*Segment, error) {
	ns, err := NewNS(prefix + "-seg")
	if err != nil {
		return nil, err
	}
	s := &Segment{NS: ns, Prefix: subnet.Masked(), MTU: mtu, next: subnet.Masked().Addr().Next().Next()}
	gw := netip.PrefixFrom(s.Prefix.Addr().Next(), s.Prefix.Bits())
	for _, args := range [][]string{
		{"link", "add", "br0", "mtu", fmt.Sprint(mtu), "type", "bridge"},
		{"addr", "add", gw.String(), "dev", "br0"},
		{"link", "set", "br0", "up"},
	} {
		if err := ns.IP(args...); err != nil {
			ns.Delete()
			return nil, err
		}
	}
	if err := ns.Do(switchOnly); err != nil {
		ns.Delete()
		return nil, err
	}
	return s, nil
}

// bridgeNetfilter are the switches that send a namespace's bridged
// frames through its IP, IPv6 and ARP netfilter hooks (br_netfilter).
var bridgeNetfilter = []string{
	"/proc/sys/net/bridge/bridge-nf-call-iptables",
	"/proc/sys/net/bridge/bridge-nf-call-ip6tables",
	"/proc/sys/net/bridge/bridge-nf-call-arptables",
}

// switchOnly turns br_netfilter off in the calling thread's namespace:
// the segment stands in for a switch, which forwards frames without a
// host's netfilter hooks. The kernel turns them on in every namespace
// that has a bridge, and a frame across the segment would otherwise pay
// them twice (data and acknowledgement alike), a cost no wire has.
// Without br_netfilter (a module not loaded) there is nothing to turn off.
func switchOnly() error {
	for _, p := range bridgeNetfilter {
		err := os.WriteFile(p, []byte("0\n"), 0o644)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("segment: %s: %w", p, err)
		}
	}
	return nil
}

// Gateway is the segment's own address.
func (s *Segment) Gateway() netip.Addr { return s.Prefix.Addr().Next() }

// AddHost creates host namespace name with eth0 on the segment, the next
// free address, and a default route via the segment's gateway.
func (s *Segment) AddHost(name string) (*Host, error) {
	s.mu.Lock()
	addr := s.next
	s.next = s.next.Next()
	idx := len(s.hosts)
	s.mu.Unlock()
	ns, err := NewNS(name)
	if err != nil {
		return nil, err
	}
	h := &Host{NS: ns, Addr: addr, Dev: "eth0", index: idx}
	port := fmt.Sprintf("h%d", idx)
	mtu := fmt.Sprint(s.MTU)
	for _, step := range []struct {
		ns   *NS
		args []string
	}{
		{ns, []string{"link", "add", "eth0", "mtu", mtu, "type", "veth", "peer", "name", port, "mtu", mtu, "netns", s.NS.Name}},
		{ns, []string{"addr", "add", netip.PrefixFrom(addr, s.Prefix.Bits()).String(), "dev", "eth0"}},
		{ns, []string{"link", "set", "eth0", "up"}},
		{s.NS, []string{"link", "set", port, "master", "br0", "up"}},
		{ns, []string{"route", "add", "default", "via", s.Gateway().String()}},
	} {
		if err := step.ns.IP(step.args...); err != nil {
			ns.Delete()
			return nil, err
		}
	}
	s.mu.Lock()
	s.hosts = append(s.hosts, h)
	s.mu.Unlock()
	return h, nil
}

// AddReplica creates replica namespace name attached to the host's bridge
// (which must exist) by a veth pair of MTU mtu, with address addr (CIDR)
// and a default route via gw, as the CNI bridge plugin attaches a
// container.
func (h *Host) AddReplica(name, bridge string, addr netip.Prefix, gw netip.Addr, mtu int) (*NS, error) {
	ns, err := NewNS(name)
	if err != nil {
		return nil, err
	}
	port := fmt.Sprintf("r%d-%d", h.index, len(h.replicas))
	m := fmt.Sprint(mtu)
	for _, step := range []struct {
		ns   *NS
		args []string
	}{
		{h.NS, []string{"link", "add", port, "mtu", m, "type", "veth", "peer", "name", "eth0", "mtu", m, "netns", ns.Name}},
		{h.NS, []string{"link", "set", port, "master", bridge, "up"}},
		{ns, []string{"addr", "add", addr.String(), "dev", "eth0"}},
		{ns, []string{"link", "set", "eth0", "up"}},
		{ns, []string{"route", "add", "default", "via", gw.String()}},
	} {
		if err := step.ns.IP(step.args...); err != nil {
			ns.Delete()
			return nil, err
		}
	}
	h.replicas = append(h.replicas, ns)
	return ns, nil
}

// Close removes every namespace of the segment: replicas, hosts, the
// segment's own.
func (s *Segment) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, h := range s.hosts {
		for _, r := range h.replicas {
			errs = append(errs, r.Delete())
		}
		errs = append(errs, h.Delete())
	}
	errs = append(errs, s.NS.Delete())
	s.hosts = nil
	return errors.Join(errs...)
}

// Exists reports whether a namespace called name is bound.
func Exists(name string) bool {
	_, err := os.Stat(filepath.Join(NetNSDir, name))
	return err == nil
}
