package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/stratahq/strata/agent/netplane"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/hostpolicy"
	"github.com/stratahq/strata/internal/transport"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	"github.com/stratahq/strata/providers/provider"
)

// netResync is how often the data plane is applied again from the node
// list it holds, between changes: it repairs what someone changed on the
// host behind the agent's back.
const netResync = time.Minute

// dataPlaneWanted says whether the agent programs its host: always when
// enabled, never when disabled, and with auto unless it runs pre-built
// providers (tests, benchmarks) or only providers named fake (the fake,
// in process or behind a socket), which attach nothing to the host.
func dataPlaneWanted(cfg *config.Agent, prebuilt bool, kernel netplane.Kernel) bool {
	switch cfg.Network.DataPlane {
	case config.DataPlaneEnabled:
		return true
	case config.DataPlaneDisabled:
		return false
	}
	if kernel != nil {
		return true
	}
	if prebuilt {
		return false
	}
	for _, p := range cfg.Providers {
		if p.Name != "fake" {
			return true
		}
	}
	return false
}

// dataPlane owns the node's part of the region network: it finds the
// host's underlay, programs the host from the region's network stream
// (routes, isolation, network policies) and keeps the Network condition.
type dataPlane struct {
	// wanted: the agent programs its host (see dataPlaneWanted); kernel
	// is Options.NetKernel.
	wanted bool
	kernel netplane.Kernel
	cfg    config.AgentNetwork
	node   string
	provs  *providerSet
	health *health
	log    *slog.Logger
	// dns is the node's name server (nil: none), which the network
	// stream feeds.
	dns *nodeDNS

	// Set by setUp before the goroutines that use them start, read-only
	// afterwards. plane is nil when the data plane could not be set up.
	plane *netplane.Plane
	host  netplane.Host
}

// setUpDataPlane finds the host's underlay and builds the data plane,
// when the agent runs one, and returns what releases it. A failure leaves
// the agent running without one, with the reason in the Network
// condition.
func (d *dataPlane) setUp() (release func()) {
	release = func() {}
	if !d.wanted {
		return release
	}
	k := d.kernel
	if k == nil {
		nl, err := netplane.NewNetlink("")
		if err != nil {
			d.failed(fmt.Errorf("data plane: %w", err))
			return release
		}
		k, release = nl, nl.Close
	}
	nc := d.cfg
	var want netip.Addr
	if nc.UnderlayAddress != "" {
		want, _ = netip.ParseAddr(nc.UnderlayAddress) // validated with the config
	}
	addr, dev, mtu, err := k.Underlay(want, nc.UnderlayInterface)
	if err != nil {
		d.failed(fmt.Errorf("underlay: %w", err))
		return release
	}
	d.host = netplane.Host{
		Node: d.node, Bridge: nc.Bridge, Underlay: addr, UnderlayDev: dev, UnderlayMTU: mtu,
		VTEPMAC: netplane.VTEPMAC(d.node), Table: nc.Table, Services: d.hostServices(),
		GatewayServices: d.dns.services(),
	}
	d.plane = netplane.New(k, d.host, d.log.With("component", "netplane"))
	d.log.Info("data plane set up", "underlay", addr, "interface", dev, "mtu", mtu)
	return release
}

// resolvConf is the node's resolver configuration, which containers get.
const resolvConf = "/etc/resolv.conf"

// hostServices are the host's ports that replicas may reach: DNS on the
// name servers of the node's resolv.conf, should the node serve it
// (containers get that file), and where the providers that serve
// replicas from the host (load balancers) listen.
func (d *dataPlane) hostServices() []netplane.HostService {
	out := dnsServices(resolvConf)
	if d.provs == nil {
		return out
	}
	for _, e := range d.provs.list {
		hs, ok := e.p.(provider.HostServer)
		if !ok {
			continue
		}
		for _, l := range hs.HostListeners() {
			out = append(out, netplane.HostService{Addr: l.Addr, Proto: l.Proto, Ports: l.Ports})
		}
	}
	return out
}

// dnsServices are DNS (UDP and TCP 53) on each IPv4 name server of the
// resolv.conf at path but loopback ones, which replicas cannot reach. A
// name server that is not one of the host's addresses needs no rule
// (replicas' queries to it are forwarded, not addressed to the host), and
// its rule matches nothing. No file, no name server: none.
func dnsServices(path string) []netplane.HostService {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	dns := hostpolicy.MustParsePorts("53")
	var out []netplane.HostService
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "nameserver" {
			continue
		}
		a, err := netip.ParseAddr(f[1])
		if err != nil || !a.Is4() || a.IsLoopback() || a.IsUnspecified() {
			continue
		}
		out = append(out, netplane.HostService{Addr: a, Proto: "udp", Ports: dns}, netplane.HostService{Addr: a, Proto: "tcp", Ports: dns})
	}
	return out
}

// nodeNetwork is what the node tells the region of its host.
func (d *dataPlane) nodeNetwork() *api.NodeNetwork {
	h := d.host
	if !h.Underlay.IsValid() {
		if d.cfg.Bridge == "" {
			return nil
		}
		return &api.NodeNetwork{Bridge: d.cfg.Bridge}
	}
	return &api.NodeNetwork{UnderlayIP: h.Underlay.String(), VTEPMAC: h.VTEPMAC.String(), Bridge: d.cfg.Bridge, MTU: h.UnderlayMTU}
}

// run follows the region's network stream and applies it to the
// host, until ctx is done.
func (d *dataPlane) run(ctx context.Context, client agentv1.AgentServiceClient, t *timings, registered <-chan struct{}) {
	select {
	case <-ctx.Done():
		return
	case <-registered:
	}
	followStream(ctx, t, d.log, "network stream", func(ctx context.Context) (int, error) { return d.watchOnce(ctx, client) })
}

// watchOnce reads one network stream until it fails, applying each
// batch, and returns how many batches it delivered.
func (d *dataPlane) watchOnce(ctx context.Context, client agentv1.AgentServiceClient) (int, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := client.WatchNetwork(sctx, &agentv1.WatchNetworkRequest{Node: d.node}, grpc.MaxCallRecvMsgSize(transport.LargeMessageBytes))
	if err != nil {
		return 0, err
	}
	updates := recvBatches(sctx, stream)
	var view netView
	resync := time.NewTicker(netResync)
	defer resync.Stop()
	n := 0
	for {
		select {
		case <-ctx.Done():
			return n, ctx.Err()
		case <-resync.C:
			if view.synced {
				d.apply(ctx, &view)
			}
		case u := <-updates:
			if u.err != nil {
				return n, u.err
			}
			n++
			if err := view.merge(u.b); err != nil {
				return n, err
			}
			if view.synced {
				d.dns.merge(u.b)
			}
			if view.synced {
				d.apply(ctx, &view)
			}
		}
	}
}

// batchOrErr is one read of the network stream.
type batchOrErr struct {
	b   *agentv1.NetworkBatch
	err error
}

// recvBatches reads the stream on a goroutine of its own, so that the
// resync timer runs while the stream is quiet, until a read fails or ctx
// is done.
func recvBatches(ctx context.Context, stream grpc.ServerStreamingClient[agentv1.NetworkBatch]) <-chan batchOrErr {
	updates := make(chan batchOrErr)
	go func() {
		for {
			b, err := stream.Recv()
			select {
			case updates <- batchOrErr{b, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return updates
}

// netView is the region network as the stream told it so far: nothing
// until its first snapshot.
type netView struct {
	nw     netplane.Network
	peers  map[string]netplane.Peer
	synced bool
	// endpoints (by replica id) and policies (by tenant/name) are what
	// the host enforces of isolation and network policies.
	endpoints map[string]netplane.Endpoint
	policies  map[string]api.NetworkPolicy
}

// merge applies one batch: a snapshot replaces everything, then upserts
// and removals change single nodes.
func (v *netView) merge(b *agentv1.NetworkBatch) error {
	if b.GetSnapshot() {
		nw, err := networkFromPB(b.GetNetwork())
		if err != nil {
			return err
		}
		v.nw, v.peers, v.synced = nw, map[string]netplane.Peer{}, true
		v.endpoints, v.policies = map[string]netplane.Endpoint{}, map[string]api.NetworkPolicy{}
	}
	if !v.synced {
		return nil
	}
	for _, p := range b.GetUpserts() {
		v.peers[p.GetNode()] = peerFromPB(p)
	}
	for _, name := range b.GetRemoved() {
		delete(v.peers, name)
	}
	for _, e := range b.GetEndpoints() {
		v.endpoints[e.GetId()] = endpointFromPB(e)
	}
	for _, id := range b.GetEndpointsRemoved() {
		delete(v.endpoints, id)
	}
	for _, raw := range b.GetPolicies() {
		var p api.NetworkPolicy
		if err := json.Unmarshal(raw, &p); err != nil {
			return fmt.Errorf("network policy from the region: %w", err)
		}
		v.policies[p.Key()] = p
	}
	for _, key := range b.GetPoliciesRemoved() {
		delete(v.policies, key)
	}
	return nil
}

// endpointFromPB reads a replica's address; one that does not parse
// stays invalid and the ruleset leaves it out.
func endpointFromPB(e *agentv1.NetworkEndpoint) netplane.Endpoint {
	addr, _ := netip.ParseAddr(e.GetAddress())
	return netplane.Endpoint{ID: e.GetId(), Addr: addr, Tenant: e.GetTenant(), Resource: e.GetResource(), Labels: e.GetLabels(), Node: e.GetNode()}
}

// apply reconciles the host with the node list and records the
// outcome in the Network condition.
func (d *dataPlane) apply(ctx context.Context, v *netView) {
	list := slices.Collect(maps.Values(v.peers))
	start := time.Now()
	ch, err := d.plane.Apply(ctx, v.nw, list)
	if ctx.Err() != nil {
		return
	}
	// Isolation does not wait for the routes: a host that failed to
	// route to one node still enforces what it can.
	if !errors.Is(err, netplane.ErrNoBlock) {
		err = errors.Join(err, d.applyPolicy(ctx, v, list))
		// The name server's address is the gateway the bridge now has.
		d.dns.serve(netplane.Gateway(v.peers[d.node].Block))
	}
	took := time.Since(start)
	switch {
	case err != nil:
		d.log.Warn("data plane: apply failed", "err", err, "nodes", len(list), "changes", ch.Total())
	case ch.Total() > 0:
		d.log.Info("data plane applied", "nodes", len(list), "changes", ch.Total(), "removed", ch.Deleted, "took", took)
	default:
		d.log.Debug("data plane unchanged", "nodes", len(list), "took", took)
	}
	d.health.setNetCondition(err)
}

// applyPolicy converges the host's isolation and policy ruleset.
func (d *dataPlane) applyPolicy(ctx context.Context, v *netView, peers []netplane.Peer) error {
	eps := slices.Collect(maps.Values(v.endpoints))
	pols := slices.Collect(maps.Values(v.policies))
	start := time.Now()
	changed, rs, err := d.plane.ApplyPolicy(ctx, v.nw, peers, eps, pols)
	if err != nil || ctx.Err() != nil {
		return err
	}
	if changed {
		d.log.Info("network policy applied", "table", rs.Table, "replicas", len(rs.Local), "policies", len(pols), "rules", rs.Rules(), "elements", rs.Elements(), "took", time.Since(start))
	}
	return nil
}

// failed logs why the data plane could not be set up and
// records it as the Network condition: the node takes no replica that
// needs the region network until the agent restarts.
func (d *dataPlane) failed(err error) {
	d.log.Error("data plane not set up; replicas on the region network cannot be placed here", "err", err)
	d.health.setNetCondition(err)
}

func networkFromPB(p *agentv1.RegionNetwork) (netplane.Network, error) {
	subnet, err := netip.ParsePrefix(p.GetSubnet())
	if err != nil {
		return netplane.Network{}, fmt.Errorf("region network subnet %q: %w", p.GetSubnet(), err)
	}
	return netplane.Network{Subnet: subnet, Backend: p.GetBackend(), VNI: int(p.GetVni()), Bridge: p.GetBridge()}, nil
}

// peerFromPB reads a node's place; fields that do not parse stay empty
// and the data plane leaves the node out.
func peerFromPB(p *agentv1.NetworkPeer) netplane.Peer {
	out := netplane.Peer{Node: p.GetNode()}
	n := p.GetNetwork()
	if b, err := netip.ParsePrefix(n.GetBlock()); err == nil {
		out.Block = b
	}
	if u, err := netip.ParseAddr(n.GetUnderlayIp()); err == nil {
		out.Underlay = u
	}
	if mac, err := net.ParseMAC(n.GetVtepMac()); err == nil {
		out.VTEPMAC = mac
	}
	return out
}
