package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"time"

	"github.com/stratahq/strata/agent/netplane"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/testkit/simhost"
)

// The N benchmarks run the data plane on simulated hosts: network
// namespaces of this machine with their own underlay addresses on one
// segment (testkit/simhost), programmed by agent/netplane over the real
// kernel. They need root.

const (
	netRuns   = 5
	netSubnet = "10.0.0.0/8"
)

// netHost is a simulated host with its data plane applied.
type netHost struct {
	*simhost.Host
	k     *netplane.Netlink
	plane *netplane.Plane
	peer  netplane.Peer
}

// netTopology builds a segment with n hosts, blocks 10.0.<i+1>.0/24, and
// with a backend, applies the data plane on each.
func netTopology(n int, backend string) (*simhost.Segment, []*netHost, error) {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	prefix := "stnb-" + hex.EncodeToString(b)
	seg, err := simhost.NewSegment(prefix, netip.MustParsePrefix("192.0.2.0/24"), 1500)
	if err != nil {
		return nil, nil, err
	}
	var hosts []*netHost
	fail := func(err error) (*simhost.Segment, []*netHost, error) {
		for _, h := range hosts {
			h.k.Close()
		}
		seg.Close()
		return nil, nil, err
	}
	for i := range n {
		h, err := seg.AddHost(fmt.Sprintf("%s-h%d", prefix, i+1))
		if err != nil {
			return fail(err)
		}
		k, err := netplane.NewNetlink(h.Path)
		if err != nil {
			return fail(err)
		}
		node := fmt.Sprintf("h%d", i+1)
		p := netplane.New(k, netplane.Host{Node: node, Bridge: "strata0", Underlay: h.Addr, UnderlayDev: h.Dev, UnderlayMTU: 1500}, nil)
		hosts = append(hosts, &netHost{Host: h, k: k, plane: p,
			peer: netplane.Peer{Node: node, Block: netip.MustParsePrefix(fmt.Sprintf("10.0.%d.0/24", i+1)), Underlay: h.Addr, VTEPMAC: netplane.VTEPMAC(node)}})
	}
	peers := make([]netplane.Peer, len(hosts))
	for i, h := range hosts {
		peers[i] = h.peer
	}
	nw := netplane.Network{Subnet: netip.MustParsePrefix(netSubnet), Backend: backend, VNI: 1}
	for _, h := range hosts {
		if backend == "" {
			break
		}
		if _, err := h.plane.Apply(context.Background(), nw, peers); err != nil {
			return fail(fmt.Errorf("apply on %s: %w", h.Name, err))
		}
	}
	return seg, hosts, nil
}

func closeTopology(seg *simhost.Segment, hosts []*netHost) {
	for _, h := range hosts {
		h.k.Close()
	}
	seg.Close()
}

// n1 measures TCP throughput and round trips between replicas on two
// hosts (bridge → VXLAN → segment → VXLAN → bridge) against two replicas
// on one host (bridge only), in each of netRuns fresh topologies; and the
// same across hosts with host-gw, which tells the encapsulation's share
// from the extra hops'.
func (s *suite) n1(ctx context.Context) error {
	if os.Geteuid() != 0 {
		return errors.New("needs root (network namespaces)")
	}
	var sameTP, crossTP, gwTP, tpRatio, gwRatio []float64
	var sameRTT, crossRTT, gwRTT, overhead, gwOverhead []time.Duration
	for range netRuns {
		tp, rtt, err := netPaths(ctx, api.BackendVXLAN)
		if err != nil {
			return err
		}
		sameTP, crossTP, tpRatio = append(sameTP, tp[0]), append(crossTP, tp[1]), append(tpRatio, tp[1]/tp[0])
		sameRTT, crossRTT, overhead = append(sameRTT, rtt[0]), append(crossRTT, rtt[1]), append(overhead, rtt[1]-rtt[0])
		tp, rtt, err = netPaths(ctx, api.BackendHostGW)
		if err != nil {
			return err
		}
		gwTP, gwRatio = append(gwTP, tp[1]), append(gwRatio, tp[1]/tp[0])
		gwRTT, gwOverhead = append(gwRTT, rtt[1]), append(gwOverhead, rtt[1]-rtt[0])
	}
	gbit := func(v []float64) string {
		s := slices.Sorted(slices.Values(v))
		return fmt.Sprintf("%.2f Gbit/s (%.2f–%.2f)", s[len(s)/2], s[0], s[len(s)-1])
	}
	ratio := func(v []float64) (float64, string) {
		s := slices.Sorted(slices.Values(v))
		return s[len(s)/2], fmt.Sprintf("%.2f × same host (%.2f–%.2f)", s[len(s)/2], s[0], s[len(s)-1])
	}
	rtts := func(v []time.Duration) string {
		s := slices.Sorted(slices.Values(v))
		return fmt.Sprintf("%s (%s–%s)", usec(s[len(s)/2]), usec(s[0]), usec(s[len(s)-1]))
	}
	over := func(v []time.Duration) (time.Duration, string) {
		s := slices.Sorted(slices.Values(v))
		return s[len(s)/2], fmt.Sprintf("+%s (%s–%s)", usec(s[len(s)/2]), usec(s[0]), usec(s[len(s)-1]))
	}
	medRatio, ratioText := ratio(tpRatio)
	_, gwRatioText := ratio(gwRatio)
	medOver, overText := over(overhead)
	_, gwOverText := over(gwOverhead)
	note := fmt.Sprintf("%d runs on fresh simulated hosts, median (min–max); per run and backend, an untimed stream of %d MiB on each path, then each path twice (same, across, across, same), one TCP stream of %d MiB and round trips of 1 byte (p50 of %d) each time; ratios to the same host within the run. The two hosts share this machine's kernel and CPUs: the figures are what the path costs (veth, bridges, the segment, VXLAN encapsulation), not a NIC; the segment forwards like a switch, without the IP hooks (br_netfilter) that a bridge in a namespace would run; within a host a packet is only bridged, across hosts both hosts also route it (route lookup, connection tracking, forward); host-gw crosses the same hops without the encapsulation. A veth hands a packet to the other namespace on the sender's CPU, so the sending replica's CPU also runs the receiving host's stack, decapsulation included, which separate hosts run on their own CPUs.", netRuns, warmBytes>>20, tpBytes>>20, rttSamples)
	s.r.add(row{id: "N1", what: "TCP throughput replica→replica, same host (baseline)", figure: gbit(sameTP)})
	s.r.add(row{id: "N1", what: "TCP throughput replica→replica across hosts (VXLAN)", figure: gbit(crossTP),
		target: "≥ 0.8 × same host", ratio: ratioText, met: verdict(medRatio >= 0.8)})
	s.r.add(row{id: "N1", what: "TCP throughput replica→replica across hosts (host-gw)", figure: gbit(gwTP), ratio: gwRatioText})
	s.r.add(row{id: "N1", what: "round trip replica→replica p50, same host (baseline)", figure: rtts(sameRTT)})
	s.r.add(row{id: "N1", what: "round trip replica→replica p50 across hosts (VXLAN)", figure: rtts(crossRTT),
		target: "p50 overhead ≤ 0.1 ms", ratio: overText, met: verdict(medOver <= 100*time.Microsecond)})
	s.r.add(row{id: "N1", what: "round trip replica→replica p50 across hosts (host-gw)", figure: rtts(gwRTT), ratio: gwOverText, notes: note})
	return nil
}

// netPaths builds two hosts on backend, a client and a server replica on
// host 1 and a server replica on host 2, and measures both paths from the
// client twice each, taking turns, so that the machine's other load weighs
// on both alike: index 0 is the same host, 1 across hosts.
func netPaths(ctx context.Context, backend string) (tp [2]float64, rtt [2]time.Duration, err error) {
	seg, hosts, err := netTopology(2, backend)
	if err != nil {
		return tp, rtt, err
	}
	defer closeTopology(seg, hosts)
	mk := func(h *netHost, i int) (*simhost.NS, netip.Addr, error) {
		addr := h.peer.Block.Addr().Next().Next()
		for range i {
			addr = addr.Next()
		}
		ns, err := h.AddReplica(fmt.Sprintf("%s-r%d", h.Name, i), "strata0", netip.PrefixFrom(addr, 24), h.peer.Block.Addr().Next(), hosts[0].plane.Host().UnderlayMTU-mtuCut(backend))
		return ns, addr, err
	}
	client, _, err := mk(hosts[0], 0)
	if err != nil {
		return tp, rtt, err
	}
	local, localAddr, err := mk(hosts[0], 1)
	if err != nil {
		return tp, rtt, err
	}
	remote, remoteAddr, err := mk(hosts[1], 0)
	if err != nil {
		return tp, rtt, err
	}
	servers := [2]*simhost.NS{local, remote}
	addrs := [2]netip.Addr{localAddr, remoteAddr}
	// An untimed stream on each path first: the kernel is still tearing
	// down the previous run's namespaces (cleanup_net), which would
	// otherwise weigh on whichever path goes first; then same, across,
	// across, same, so that a drift in the machine's load cancels out.
	for p := range 2 {
		l, err := servers[p].Listen("tcp", net.JoinHostPort(addrs[p].String(), "5001"))
		if err != nil {
			return tp, rtt, err
		}
		go serveSinkEcho(l)
		_, err = throughput(ctx, client, net.JoinHostPort(addrs[p].String(), "5001"), warmBytes)
		l.Close()
		if err != nil {
			return tp, rtt, err
		}
	}
	for _, p := range []int{0, 1, 1, 0} {
		g, r, err := tcpPair(ctx, client, servers[p], addrs[p])
		if err != nil {
			return tp, rtt, err
		}
		tp[p] += g / 2
		rtt[p] += r / 2
	}
	return tp, rtt, nil
}

// mtuCut is what the backend takes off the underlay MTU for replicas.
func mtuCut(backend string) int {
	if backend == api.BackendVXLAN {
		return api.VXLANOverhead
	}
	return 0
}

const (
	tpBytes    = 1 << 30
	warmBytes  = 64 << 20
	rttSamples = 2000
)

// tcpPair measures, from client to a server in ns server at addr, the
// throughput of one stream of tpBytes (Gbit/s) and the p50 round trip of
// a byte.
func tcpPair(ctx context.Context, client, server *simhost.NS, addr netip.Addr) (float64, time.Duration, error) {
	l, err := server.Listen("tcp", net.JoinHostPort(addr.String(), "5001"))
	if err != nil {
		return 0, 0, err
	}
	defer l.Close()
	go serveSinkEcho(l)
	target := net.JoinHostPort(addr.String(), "5001")
	gbps, err := throughput(ctx, client, target, tpBytes)
	if err != nil {
		return 0, 0, err
	}
	rtt, err := roundTrip(ctx, client, target)
	if err != nil {
		return 0, 0, err
	}
	return gbps, rtt, nil
}

// dialNS connects from client to target within 10 seconds: the bound is
// the connection's own, not the stream's that follows (a loaded machine
// moves 1 GiB slowly).
func dialNS(ctx context.Context, client *simhost.NS, target string) (net.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return client.Dial(dctx, "tcp", target)
}

// serveSinkEcho serves connections on l until it closes: a first byte
// 's' sinks the stream and answers how many bytes came, 'p' echoes bytes.
func serveSinkEcho(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			one := make([]byte, 1)
			if _, err := io.ReadFull(c, one); err != nil {
				return
			}
			if one[0] == 's' {
				n, _ := io.Copy(io.Discard, c)
				_, _ = fmt.Fprintf(c, "%d", n)
				return
			}
			_, _ = io.Copy(c, c)
		}()
	}
}

// throughput sends size bytes on one stream to target and returns
// Gbit/s: the clock stops when the server has read everything.
func throughput(ctx context.Context, client *simhost.NS, target string, size int) (float64, error) {
	c, err := dialNS(ctx, client, target)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	buf := make([]byte, 256<<10)
	start := time.Now()
	if _, err := c.Write([]byte{'s'}); err != nil {
		return 0, err
	}
	for sent := 0; sent < size; sent += len(buf) {
		if _, err := c.Write(buf); err != nil {
			return 0, err
		}
	}
	_ = c.(*net.TCPConn).CloseWrite()
	ack, err := io.ReadAll(c)
	took := time.Since(start)
	if err != nil || len(ack) == 0 {
		return 0, fmt.Errorf("throughput: the server's count: %q, %v", ack, err)
	}
	return float64(size) * 8 / took.Seconds() / 1e9, nil
}

// roundTrip is the p50 round trip of one byte to target, over
// rttSamples after a warm-up.
func roundTrip(ctx context.Context, client *simhost.NS, target string) (time.Duration, error) {
	c, err := dialNS(ctx, client, target)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.(*net.TCPConn).SetNoDelay(true)
	if _, err := c.Write([]byte{'p'}); err != nil {
		return 0, err
	}
	one := []byte{1}
	rtts := make([]time.Duration, 0, rttSamples)
	for i := range rttSamples + 200 {
		t0 := time.Now()
		if _, err := c.Write(one); err != nil {
			return 0, err
		}
		if _, err := io.ReadFull(c, one); err != nil {
			return 0, err
		}
		if i >= 200 { // warm-up
			rtts = append(rtts, time.Since(t0))
		}
	}
	return pct(rtts, 50), nil
}

// n2 times the data plane converging: a host programmed for 1,000 other
// nodes from scratch, then one node changing (its underlay address), in
// netRuns fresh hosts.
func (s *suite) n2(ctx context.Context) error {
	if os.Geteuid() != 0 {
		return errors.New("needs root (network namespaces)")
	}
	const nodes, changes = 1000, 20
	var scratch, change, unchanged []time.Duration
	for range netRuns {
		seg, hosts, err := netTopology(1, "")
		if err != nil {
			return err
		}
		h := hosts[0]
		peers := []netplane.Peer{{Node: h.peer.Node, Block: netip.MustParsePrefix("10.255.255.0/24"), Underlay: h.Addr, VTEPMAC: h.peer.VTEPMAC}}
		for i := range nodes {
			name := fmt.Sprintf("n%d", i)
			peers = append(peers, netplane.Peer{Node: name,
				Block:    netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24),
				Underlay: netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i) + 1}), VTEPMAC: netplane.VTEPMAC(name)})
		}
		nw := netplane.Network{Subnet: netip.MustParsePrefix(netSubnet), Backend: api.BackendVXLAN, VNI: 1}
		p := netplane.New(h.k, h.plane.Host(), nil)
		start := time.Now()
		ch, err := p.Apply(ctx, nw, peers)
		scratch = append(scratch, time.Since(start))
		if err == nil && ch.Routes < nodes {
			err = fmt.Errorf("from scratch: %d routes programmed; want %d", ch.Routes, nodes)
		}
		for i := 0; err == nil && i < changes; i++ {
			k := 1 + i*37%nodes
			peers[k].Underlay = netip.AddrFrom4([4]byte{198, 19, byte(i), byte(k)})
			start = time.Now()
			ch, err = p.Apply(ctx, nw, peers)
			change = append(change, time.Since(start))
			if err == nil && ch.FDB != 1 {
				err = fmt.Errorf("one node re-addressed: %d forwarding entries changed; want 1", ch.FDB)
			}
		}
		if err == nil {
			start = time.Now()
			ch, err = p.Apply(ctx, nw, peers)
			unchanged = append(unchanged, time.Since(start))
			if err == nil && ch.Total() != 0 {
				err = fmt.Errorf("applying the same list again changed %d entries", ch.Total())
			}
		}
		closeTopology(seg, hosts)
		if err != nil {
			return err
		}
	}
	med := func(d []time.Duration) time.Duration { return pct(d, 50) }
	note := fmt.Sprintf("agent/netplane over the real kernel in a fresh simulated host per run (%d runs); vxlan backend: per node a route, a neighbour and an FDB entry, each Apply reading them back from the kernel first. One change: a node's underlay address, %d per run; median (min–max) of all.", netRuns, changes)
	s.r.add(row{id: "N2", what: fmt.Sprintf("data plane: program %d remote nodes from scratch", nodes), figure: msSpread(scratch),
		target: "≤ 1 s", met: verdict(med(scratch) <= time.Second)})
	s.r.add(row{id: "N2", what: fmt.Sprintf("data plane: one node changes (of %d)", nodes), figure: msSpread(change),
		target: "≤ 50 ms", met: verdict(med(change) <= 50*time.Millisecond)})
	s.r.add(row{id: "N2", what: fmt.Sprintf("data plane: nothing changes (of %d), e.g. an agent restart", nodes), figure: msSpread(unchanged), notes: note})
	return nil
}

// msSpread is the median of d with its range, in milliseconds.
func msSpread(d []time.Duration) string {
	s := slices.Clone(d)
	slices.Sort(s)
	return fmt.Sprintf("%s (%.1f–%.1f ms)", ms(pct(s, 50)), float64(s[0].Microseconds())/1000, float64(s[len(s)-1].Microseconds())/1000)
}

func usec(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d.Nanoseconds())/1000) }
