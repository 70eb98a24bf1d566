package netplane

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/hostpolicy"
	"github.com/stratahq/strata/testkit/simhost"
	"github.com/stratahq/strata/testkit/testenv"
)

// kernelHost is a simulated host with its data plane.
type kernelHost struct {
	*simhost.Host
	k     *Netlink
	plane *Plane
	peer  Peer
}

// newKernelHosts builds n hosts on one segment, each with its own
// namespace, underlay address and data plane over the real kernel, blocks
// 10.97.<i+1>.0/24 of 10.97.0.0/16.
func newKernelHosts(t *testing.T, n int) (*simhost.Segment, []*kernelHost) {
	t.Helper()
	testenv.RequireRoot(t, "network namespaces (root)")
	testenv.LookPath(t, "ip")
	testenv.LookPath(t, "nsenter")
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	prefix := "stn-" + hex.EncodeToString(b)
	seg, err := simhost.NewSegment(prefix, netip.MustParsePrefix("192.0.2.0/24"), 1500)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := seg.Close(); err != nil {
			t.Errorf("clean up: %v", err)
		}
	})
	var hosts []*kernelHost
	for i := range n {
		h, err := seg.AddHost(fmt.Sprintf("%s-h%d", prefix, i+1))
		if err != nil {
			t.Fatal(err)
		}
		k, err := NewNetlink(h.Path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(k.Close)
		addr, dev, mtu, err := k.Underlay(netip.Addr{}, "")
		if err != nil {
			t.Fatal(err)
		}
		if addr != h.Addr || dev != "eth0" || mtu != 1500 {
			t.Fatalf("underlay of %s: got %s %s %d; want %s eth0 1500 (the default route's interface)", h.Name, addr, dev, mtu, h.Addr)
		}
		node := fmt.Sprintf("n%d", i+1)
		host := Host{Node: node, Bridge: "strata0", Underlay: addr, UnderlayDev: dev, UnderlayMTU: mtu}
		p := New(k, host, nil)
		hosts = append(hosts, &kernelHost{Host: h, k: k, plane: p,
			peer: Peer{Node: node, Block: netip.MustParsePrefix(fmt.Sprintf("10.97.%d.0/24", i+1)), Underlay: addr, VTEPMAC: p.Host().VTEPMAC}})
	}
	return seg, hosts
}

func applyAll(t *testing.T, nw Network, hosts []*kernelHost, peers []Peer) {
	t.Helper()
	for _, h := range hosts {
		if _, err := h.plane.Apply(context.Background(), nw, peers); err != nil {
			t.Fatalf("apply on %s: %v", h.peer.Node, err)
		}
	}
}

func peersOf(hosts []*kernelHost) []Peer {
	out := make([]Peer, len(hosts))
	for i, h := range hosts {
		out[i] = h.peer
	}
	return out
}

// echoServer accepts connections in ns and echoes lines, reporting each
// connection's remote address.
func echoServer(t *testing.T, ns *simhost.NS, addr string) <-chan string {
	t.Helper()
	l, err := ns.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	remotes := make(chan string, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			remotes <- c.RemoteAddr().(*net.TCPAddr).IP.String()
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return remotes
}

// echo sends a line on c and waits for it back.
func echo(c net.Conn, r *bufio.Reader, line string) error {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return err
	}
	got, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(got) != line {
		return fmt.Errorf("echo: got %q; want %q", got, line)
	}
	return nil
}

func ipOut(t *testing.T, ns *simhost.NS, args ...string) string {
	t.Helper()
	out, err := ns.IPOutput(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func bridgeFDB(t *testing.T, ns *simhost.NS, dev string) string {
	t.Helper()
	out, err := exec.Command("bridge", "-n", ns.Name, "fdb", "show", "dev", dev).CombinedOutput()
	if err != nil {
		t.Fatalf("bridge fdb: %v: %s", err, out)
	}
	return string(out)
}

// TestKernelVXLAN programs three simulated hosts over the real kernel and
// checks, with traffic and with iproute2 as an operator would: a replica
// reaches a replica of another host by address, unmasqueraded; traffic
// leaving the cluster is masqueraded; applying again, or from a new
// Plane (an agent restart), changes nothing and keeps an established
// connection; a deleted node's route, neighbour and forwarding entry go
// from the others; the host-gw backend carries the same traffic.
func TestKernelVXLAN(t *testing.T) {
	seg, hosts := newKernelHosts(t, 3)
	nw := Network{Subnet: netip.MustParsePrefix("10.97.0.0/16"), Backend: api.BackendVXLAN, VNI: 42}
	applyAll(t, nw, hosts, peersOf(hosts))

	link := ipOut(t, hosts[0].NS, "-d", "link", "show", "strata.vxlan")
	for _, want := range []string{"mtu 1450", "vxlan id 42", "local 192.0.2.2", "dev eth0", "dstport 4789", "nolearning", hosts[0].peer.VTEPMAC.String()} {
		if !strings.Contains(link, want) {
			t.Errorf("ip -d link show strata.vxlan: no %q in:\n%s", want, link)
		}
	}
	if br := ipOut(t, hosts[0].NS, "addr", "show", "strata0"); !strings.Contains(br, "inet 10.97.1.1/24") || !strings.Contains(br, "mtu 1450") {
		t.Errorf("bridge: got\n%s\nwant 10.97.1.1/24, MTU 1450", br)
	}

	// Replicas on hosts 1 and 2.
	r1, err := hosts[0].AddReplica(hosts[0].Name+"-r", "strata0", netip.MustParsePrefix("10.97.1.2/24"), netip.MustParseAddr("10.97.1.1"), 1450)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := hosts[1].AddReplica(hosts[1].Name+"-r", "strata0", netip.MustParsePrefix("10.97.2.2/24"), netip.MustParseAddr("10.97.2.1"), 1450)
	if err != nil {
		t.Fatal(err)
	}
	remotes := echoServer(t, r2, "10.97.2.2:7000")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := r1.Dial(ctx, "tcp", "10.97.2.2:7000")
	if err != nil {
		t.Fatalf("replica on host 1 → replica on host 2: %v", err)
	}
	defer conn.Close()
	rd := bufio.NewReader(conn)
	if err := echo(conn, rd, "first"); err != nil {
		t.Fatal(err)
	}
	if got := <-remotes; got != "10.97.1.2" {
		t.Errorf("the server saw the client as %s; want 10.97.1.2 (no masquerade inside the cluster)", got)
	}

	// Out of the cluster: masqueraded to host 1's underlay address.
	outside := echoServer(t, seg.NS, seg.Gateway().String()+":7001")
	c2, err := r1.Dial(ctx, "tcp", seg.Gateway().String()+":7001")
	if err != nil {
		t.Fatalf("replica → outside the cluster: %v", err)
	}
	c2.Close()
	if got := <-outside; got != hosts[0].Addr.String() {
		t.Errorf("outside saw the replica as %s; want host 1's address %s (masquerade)", got, hosts[0].Addr)
	}

	// Converged: nothing to change, and a new Plane (a restarted agent)
	// finds nothing to change either; the connection lives on.
	for _, p := range []*Plane{hosts[0].plane, New(hosts[0].k, hosts[0].plane.Host(), nil)} {
		ch, err := p.Apply(context.Background(), nw, peersOf(hosts))
		if err != nil || ch.Total() != 0 {
			t.Fatalf("apply again: got %+v, %v; want no change", ch, err)
		}
	}
	if err := echo(conn, rd, "after re-apply"); err != nil {
		t.Fatalf("established connection after re-applying: %v", err)
	}

	// Node 3 is deleted: its entries go from hosts 1 and 2.
	applyAll(t, nw, hosts[:2], peersOf(hosts[:2]))
	for _, h := range hosts[:2] {
		if r := ipOut(t, h.NS, "route", "show", "proto", "83"); strings.Contains(r, "10.97.3.0/24") {
			t.Errorf("%s still routes node 3's block:\n%s", h.Name, r)
		}
		if n := ipOut(t, h.NS, "neigh", "show", "dev", "strata.vxlan"); strings.Contains(n, "10.97.3.0") {
			t.Errorf("%s still has node 3's neighbour entry:\n%s", h.Name, n)
		}
		if f := bridgeFDB(t, h.NS, "strata.vxlan"); strings.Contains(f, hosts[2].peer.VTEPMAC.String()) || !strings.Contains(f, "dst 192.0.2.") {
			t.Errorf("%s forwarding entries: got\n%s\nwant the other node's only", h.Name, f)
		}
	}
	if err := echo(conn, rd, "after a node left"); err != nil {
		t.Fatalf("established connection after another node left: %v", err)
	}

	// host-gw: the same hosts share a segment, plain routes do.
	gw := nw
	gw.Backend = api.BackendHostGW
	applyAll(t, gw, hosts[:2], peersOf(hosts[:2]))
	if _, ok, _ := hosts[0].k.Link("strata.vxlan"); ok {
		t.Error("the VXLAN device is still there with host-gw")
	}
	if r := ipOut(t, hosts[0].NS, "route", "show", "10.97.2.0/24"); !strings.Contains(r, "via 192.0.2.3 dev eth0") {
		t.Errorf("host-gw route: got %q; want via host 2's address on eth0", r)
	}
	c3, err := r1.Dial(ctx, "tcp", "10.97.2.2:7000")
	if err != nil {
		t.Fatalf("host-gw: replica on host 1 → replica on host 2: %v", err)
	}
	defer c3.Close()
	if err := echo(c3, bufio.NewReader(c3), "host-gw"); err != nil {
		t.Fatal(err)
	}
}

// TestKernelUpgradeFromOneHost is a host of the single-host plan: its
// bridge holds the whole subnet's gateway (/16) and a replica has an
// address far from the node's future block. Once the data plane applies
// the block, the old replica is still reached from the host and from a
// new replica of the block.
func TestKernelUpgradeFromOneHost(t *testing.T) {
	_, hosts := newKernelHosts(t, 1)
	h := hosts[0]
	for _, args := range [][]string{
		{"link", "add", "strata0", "type", "bridge"},
		{"addr", "add", "10.97.0.1/16", "dev", "strata0"},
		{"link", "set", "strata0", "up"},
	} {
		if err := h.IP(args...); err != nil {
			t.Fatal(err)
		}
	}
	old, err := h.AddReplica(h.Name+"-old", "strata0", netip.MustParsePrefix("10.97.5.3/16"), netip.MustParseAddr("10.97.0.1"), 1500)
	if err != nil {
		t.Fatal(err)
	}
	nw := Network{Subnet: netip.MustParsePrefix("10.97.0.0/16"), Backend: api.BackendVXLAN, VNI: 1}
	self := h.peer
	self.Block = netip.MustParsePrefix("10.97.0.0/24")
	if _, err := h.plane.Apply(context.Background(), nw, []Peer{self}); err != nil {
		t.Fatal(err)
	}
	if br := ipOut(t, h.NS, "-4", "addr", "show", "strata0"); strings.Contains(br, "10.97.0.1/16") || !strings.Contains(br, "10.97.0.1/24") {
		t.Fatalf("bridge addresses:\n%s\nwant 10.97.0.1/24 in place of 10.97.0.1/16", br)
	}
	fresh, err := h.AddReplica(h.Name+"-new", "strata0", netip.MustParsePrefix("10.97.0.7/24"), netip.MustParseAddr("10.97.0.1"), 1450)
	if err != nil {
		t.Fatal(err)
	}
	remotes := echoServer(t, old, "10.97.5.3:7000")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, from := range []struct {
		name string
		ns   *simhost.NS
		want string
	}{{"the host", h.NS, "10.97.0.1"}, {"a replica of the block", fresh, "10.97.0.7"}} {
		c, err := from.ns.Dial(ctx, "tcp", "10.97.5.3:7000")
		if err != nil {
			t.Fatalf("%s → the old replica: %v", from.name, err)
		}
		if err := echo(c, bufio.NewReader(c), "hi"); err != nil {
			t.Fatalf("%s → the old replica: %v", from.name, err)
		}
		c.Close()
		if got := <-remotes; got != from.want {
			t.Errorf("the old replica saw %s as %s; want %s", from.name, got, from.want)
		}
	}
}

// TestKernelHostIsolation: a replica reaches none of its host's services,
// at the gateway or at any other of the host's addresses, except the
// host's services for replicas (a load balancer's listeners) on their
// addresses and those at the gateway (the name server) there only; what it sends through the host is forwarded as before, and
// the host's services stay open to the underlay.
func TestKernelHostIsolation(t *testing.T) {
	seg, hosts := newKernelHosts(t, 1)
	h := hosts[0]
	under := h.Addr.String()
	h.plane = New(h.k, Host{Node: h.peer.Node, Bridge: "strata0", Underlay: h.Addr, UnderlayDev: "eth0", UnderlayMTU: 1500,
		Services: []HostService{
			{Addr: h.Addr, Proto: "tcp", Ports: hostpolicy.MustParsePorts("7200-7201")},
			{Addr: netip.IPv4Unspecified(), Proto: "tcp", Ports: hostpolicy.MustParsePorts("7300")},
		},
		GatewayServices: []HostService{{Proto: "tcp", Ports: hostpolicy.MustParsePorts("7500")}}}, nil)
	nw := Network{Subnet: netip.MustParsePrefix("10.97.0.0/16"), Backend: api.BackendVXLAN, VNI: 1}
	applyAll(t, nw, hosts, peersOf(hosts))
	r, err := h.AddReplica(h.Name+"-r", "strata0", netip.MustParsePrefix("10.97.1.2/24"), netip.MustParseAddr("10.97.1.1"), 1450)
	if err != nil {
		t.Fatal(err)
	}
	// 7200 listens everywhere but is open to replicas at the host's
	// address only.
	for _, addr := range []string{under + ":7100", "10.97.1.1:7101", "0.0.0.0:7102", "0.0.0.0:7200", "0.0.0.0:7300", "0.0.0.0:7500"} {
		echoServer(t, h.NS, addr)
	}
	outside := echoServer(t, seg.NS, seg.Gateway().String()+":7400")
	dial := func(from *simhost.NS, addr string) error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		c, err := from.Dial(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		return echo(c, bufio.NewReader(c), "hi")
	}
	cases := []struct {
		name string
		from *simhost.NS
		addr string
		open bool
	}{
		{"replica → a host service at the host's address", r, under + ":7100", false},
		{"replica → a host service at the gateway", r, "10.97.1.1:7101", false},
		{"replica → a host service listening everywhere, at the gateway", r, "10.97.1.1:7102", false},
		{"replica → a host service listening everywhere, at the host's address", r, under + ":7102", false},
		{"replica → the load balancer's port at its address", r, under + ":7200", true},
		{"replica → the load balancer's port at another address", r, "10.97.1.1:7200", false},
		{"replica → a port open on every address, at the gateway", r, "10.97.1.1:7300", true},
		{"replica → a port open at the gateway (name server), at the gateway", r, "10.97.1.1:7500", true},
		{"replica → a port open at the gateway, at the host's address", r, under + ":7500", false},
		{"replica → outside the cluster, through the host", r, seg.Gateway().String() + ":7400", true},
		{"the underlay → a host service", seg.NS, under + ":7100", true},
		{"the underlay → a host service listening everywhere", seg.NS, under + ":7102", true},
	}
	for _, c := range cases {
		err := dial(c.from, c.addr)
		if c.open && err != nil {
			t.Errorf("%s (%s): %v; want it open", c.name, c.addr, err)
		}
		if !c.open && err == nil {
			t.Errorf("%s (%s): open; want it closed to replicas", c.name, c.addr)
		}
	}
	if got := <-outside; got != under {
		t.Errorf("outside saw the replica as %s; want the host's %s (masquerade)", got, under)
	}
	if ch, err := h.plane.Apply(context.Background(), nw, peersOf(hosts)); err != nil || ch.Total() != 0 {
		t.Errorf("apply again: got %+v, %v; want no change", ch, err)
	}
	have, ok, err := h.k.Isolation(DefaultTable, "strata0")
	want := []string{"accept established,related from strata0", "accept tcp " + under + ":7200-7201 from strata0", "accept tcp any:7300 from strata0", "accept tcp 10.97.1.1:7500 from strata0", "drop local from strata0"}
	if err != nil || !ok || !slices.Equal(have, want) {
		t.Errorf("isolation chain: got %q (%v, %v); want %q", have, ok, err, want)
	}
}

// TestKernelVXLANLargeSegments: a stream between replicas of two hosts
// crosses the VXLAN device as large segments, unfragmented. The
// replicas' MTU leaves room for the encapsulation (no fragment, no "need
// to fragment" answer on either host) and segmentation offload carries
// through the device (the receiving host decapsulates packets of many
// MTUs each, not one per MTU): what the path's throughput depends on,
// since every packet costs the encapsulation, whatever its size.
func TestKernelVXLANLargeSegments(t *testing.T) {
	_, hosts := newKernelHosts(t, 2)
	nw := Network{Subnet: netip.MustParsePrefix("10.97.0.0/16"), Backend: api.BackendVXLAN, VNI: 7}
	applyAll(t, nw, hosts, peersOf(hosts))
	mtu := nw.ReplicaMTU(hosts[0].plane.Host())
	link := ipOut(t, hosts[0].NS, "-d", "link", "show", "strata.vxlan")
	for _, want := range []string{fmt.Sprintf("mtu %d", mtu), " udpcsum", "nolearning"} {
		if !strings.Contains(link, want) {
			t.Errorf("ip -d link show strata.vxlan: no %q in:\n%s", want, link)
		}
	}
	r1, err := hosts[0].AddReplica(hosts[0].Name+"-r", "strata0", netip.MustParsePrefix("10.97.1.2/24"), netip.MustParseAddr("10.97.1.1"), mtu)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := hosts[1].AddReplica(hosts[1].Name+"-r", "strata0", netip.MustParsePrefix("10.97.2.2/24"), netip.MustParseAddr("10.97.2.1"), mtu)
	if err != nil {
		t.Fatal(err)
	}
	before := linkCounters(t, hosts[1].NS, "strata.vxlan")
	const size = 32 << 20
	if got := sendStream(t, r1, r2, "10.97.2.2:7000", size); got != size {
		t.Fatalf("the replica on host 2 received %d bytes; want %d", got, size)
	}
	after := linkCounters(t, hosts[1].NS, "strata.vxlan")
	bytes, packets := after.RxBytes-before.RxBytes, after.RxPackets-before.RxPackets
	if packets == 0 || bytes < size {
		t.Fatalf("host 2's VXLAN device received %d bytes in %d packets; want the stream's %d bytes", bytes, packets, size)
	}
	if avg := bytes / packets; avg < uint64(2*mtu) {
		t.Errorf("host 2 decapsulated %d packets of %d bytes on average; want large segments (≥ %d bytes; one MTU each: the stream was segmented before the encapsulation)", packets, avg, 2*mtu)
	}
	for _, h := range hosts {
		snmp := snmpCounters(t, h.NS)
		for _, c := range []string{"Ip:FragCreates", "Ip:FragFails", "Ip:ReasmReqds", "Icmp:OutDestUnreachs"} {
			if snmp[c] != 0 {
				t.Errorf("%s: %s = %d; want 0 (the replicas' MTU leaves room for the encapsulation)", h.Name, c, snmp[c])
			}
		}
	}
}

// sendStream sends size bytes from a replica in from to a server it
// starts in to at addr, and returns how many the server read.
func sendStream(t *testing.T, from, to *simhost.NS, addr string, size int) int64 {
	t.Helper()
	l, err := to.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got := make(chan int64, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			got <- -1
			return
		}
		defer c.Close()
		n, _ := io.Copy(io.Discard, c)
		got <- n
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := from.Dial(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 256<<10)
	for sent := 0; sent < size; sent += len(buf) {
		if _, err := c.Write(buf[:min(len(buf), size-sent)]); err != nil {
			t.Fatal(err)
		}
	}
	_ = c.(*net.TCPConn).CloseWrite()
	select {
	case n := <-got:
		return n
	case <-ctx.Done():
		t.Fatal("the server did not finish reading the stream")
		return 0
	}
}

// counters are a link's receive statistics.
type counters struct {
	RxBytes   uint64 `json:"bytes"`
	RxPackets uint64 `json:"packets"`
}

func linkCounters(t *testing.T, ns *simhost.NS, dev string) counters {
	t.Helper()
	var links []struct {
		Stats struct {
			Rx counters `json:"rx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal([]byte(ipOut(t, ns, "-s", "-j", "link", "show", dev)), &links); err != nil || len(links) != 1 {
		t.Fatalf("statistics of %s: %v", dev, err)
	}
	return links[0].Stats.Rx
}

// snmpCounters reads the namespace's /proc/net/snmp as "Ip:FragCreates"
// and the like.
func snmpCounters(t *testing.T, ns *simhost.NS) map[string]int64 {
	t.Helper()
	out, err := ns.Command(context.Background(), "cat", "/proc/net/snmp").Output()
	if err != nil {
		t.Fatalf("/proc/net/snmp of %s: %v", ns.Name, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	m := map[string]int64{}
	for i := 0; i+1 < len(lines); i += 2 {
		names, values := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		for j := 1; j < len(names) && j < len(values); j++ {
			var v int64
			_, _ = fmt.Sscan(values[j], &v)
			m[strings.TrimSuffix(names[0], ":")+":"+names[j]] = v
		}
	}
	return m
}
