package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"time"

	"github.com/stratahq/strata/agent/netplane"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/testkit/simhost"
)

// N3 sizes: policies, each admitting addrsPerPolicy replicas.
const (
	n3Policies       = 1000
	n3AddrsPerPolicy = 10
	// n3Turns is how many streams each side gets per run, taking turns.
	n3Turns = 4
)

// n3 measures what enforcing policies costs a connection's throughput:
// on two simulated hosts (vxlan), one TCP stream from a replica on host 1
// to a replica on host 2, with host 2 enforcing nothing, then 1,000
// policies that all select the server and admit 10,000 addresses (the
// client by the last of them, so that a new connection walks every
// policy's rule), taking turns; and the time to program that ruleset.
func (s *suite) n3(ctx context.Context) error {
	if os.Geteuid() != 0 {
		return errors.New("needs root (network namespaces)")
	}
	var without, with, ratios []float64
	var program []time.Duration
	var rules, elements int
	for range netRuns {
		r, err := policyRun(ctx)
		if err != nil {
			return err
		}
		without, with, ratios = append(without, r.without), append(with, r.with), append(ratios, r.with/r.without)
		program = append(program, r.program)
		rules, elements = r.rules, r.elements
	}
	gbit := func(v []float64) string {
		s := slices.Sorted(slices.Values(v))
		return fmt.Sprintf("%.2f Gbit/s (%.2f–%.2f)", s[len(s)/2], s[0], s[len(s)-1])
	}
	rs := slices.Sorted(slices.Values(ratios))
	med := rs[len(rs)/2]
	note := fmt.Sprintf("%d runs on fresh simulated hosts (vxlan), median (min–max); per run, one TCP stream of %d MiB at a time from a replica on host 1 to a replica on host 2, %d without policies and %d with them, taking turns, the median of each; the ratio is within the run. The ruleset has %d rules and %d set elements: rules grow with policies, addresses are set elements, and packets of an admitted connection are accepted by the first rule (conntrack established), so only a connection's first packet walks the policies.", netRuns, tpBytes>>20, n3Turns, n3Turns, rules, elements)
	s.r.add(row{id: "N3", what: "TCP throughput across hosts, no network policy (baseline)", figure: gbit(without)})
	s.r.add(row{id: "N3", what: fmt.Sprintf("TCP throughput across hosts, %d policies / %d allowed addresses", n3Policies, n3Policies*n3AddrsPerPolicy), figure: gbit(with),
		target: "≥ 0.95 × without", ratio: fmt.Sprintf("%.2f × without (%.2f–%.2f)", med, rs[0], rs[len(rs)-1]), met: verdict(med >= 0.95)})
	s.r.add(row{id: "N3", what: fmt.Sprintf("program %d policies / %d allowed addresses on a host", n3Policies, n3Policies*n3AddrsPerPolicy), figure: msSpread(program), notes: note})
	return nil
}

// policyResult is one N3 run.
type policyResult struct {
	without, with   float64
	program         time.Duration
	rules, elements int
}

// policyRun builds two hosts, a client replica on host 1 and a server on
// host 2, and measures the server's throughput without and with the
// policies, taking turns.
func policyRun(ctx context.Context) (policyResult, error) {
	var res policyResult
	seg, hosts, err := netTopology(2, api.BackendVXLAN)
	if err != nil {
		return res, err
	}
	defer closeTopology(seg, hosts)
	mtu := hosts[0].plane.Host().UnderlayMTU - api.VXLANOverhead
	replica := func(h *netHost) (*simhost.NS, netip.Addr, error) {
		addr := h.peer.Block.Addr().Next().Next()
		ns, err := h.AddReplica(h.Name+"-r", "strata0", netip.PrefixFrom(addr, 24), h.peer.Block.Addr().Next(), mtu)
		return ns, addr, err
	}
	client, clientAddr, err := replica(hosts[0])
	if err != nil {
		return res, err
	}
	server, serverAddr, err := replica(hosts[1])
	if err != nil {
		return res, err
	}
	nw := netplane.Network{Subnet: netip.MustParsePrefix(netSubnet), Backend: api.BackendVXLAN, VNI: 1}
	peers := []netplane.Peer{hosts[0].peer, hosts[1].peer}
	eps, pols := policyLoad(clientAddr, serverAddr, hosts[0].peer.Node, hosts[1].peer.Node)
	// Turn by turn: the table with the policies, or with none (tenant
	// isolation only, which the data plane always enforces).
	apply := func(on bool) error {
		p := netplane.New(hosts[1].k, hosts[1].plane.Host(), nil)
		e, ps := eps[:2], []api.NetworkPolicy(nil)
		if on {
			e, ps = eps, pols
		}
		start := time.Now()
		_, rs, err := p.ApplyPolicy(ctx, nw, peers, e, ps)
		if on {
			res.program, res.rules, res.elements = time.Since(start), rs.Rules(), rs.Elements()
		}
		return err
	}
	var with, without []float64
	for i := range 2 * n3Turns {
		on := i%2 == 1
		if err := apply(on); err != nil {
			return res, err
		}
		g, _, err := tcpPair(ctx, client, server, serverAddr)
		if err != nil {
			return res, fmt.Errorf("policies %v: %w", on, err)
		}
		if on {
			with = append(with, g)
		} else {
			without = append(without, g)
		}
	}
	res.with, res.without = median(with), median(without)
	return res, nil
}

// median is the middle of v (the mean of the two middle ones).
func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

// policyLoad is the client and the server, then n3Policies policies
// selecting the server (role=server), policy i admitting the
// n3AddrsPerPolicy replicas labelled peer=i on other nodes; the client is
// peer=<the last policy>.
func policyLoad(client, server netip.Addr, clientNode, serverNode string) ([]netplane.Endpoint, []api.NetworkPolicy) {
	last := fmt.Sprint(n3Policies - 1)
	eps := []netplane.Endpoint{
		{ID: "client", Addr: client, Tenant: "t", Resource: "client", Node: clientNode, Labels: map[string]string{"peer": last}},
		{ID: "server", Addr: server, Tenant: "t", Resource: "server", Node: serverNode, Labels: map[string]string{"role": "server"}},
	}
	var pols []api.NetworkPolicy
	n := 0
	for i := range n3Policies {
		peer := fmt.Sprint(i)
		for range n3AddrsPerPolicy {
			n++
			// 10.100.0.0/16 and up: no node's block, inside the cluster.
			addr := netip.AddrFrom4([4]byte{10, byte(100 + n>>16), byte(n >> 8), byte(n)})
			eps = append(eps, netplane.Endpoint{ID: fmt.Sprintf("r%d", n), Addr: addr, Tenant: "t", Resource: "r" + peer, Node: "elsewhere", Labels: map[string]string{"peer": peer}})
		}
		pols = append(pols, api.NetworkPolicy{Name: "p" + peer, Tenant: "t", Selector: map[string]string{"role": "server"},
			Ingress: []api.IngressRule{{From: []api.PolicyPeer{{Resources: &api.PeerSelector{MatchLabels: map[string]string{"peer": peer}}}}, Ports: []api.PolicyPort{{Port: 5001}}}}})
	}
	return eps, pols
}
