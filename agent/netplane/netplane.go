// Package netplane programs a host for its region's network: the
// replicas' bridge with the gateway of the node's block, a route to every
// other node's block, and masquerading of what leaves the cluster.
//
// The agent follows the region's node list (AgentService.WatchNetwork) and
// hands it to Plane.Apply, which reconciles the kernel with it, as
// flannel's vxlan and host-gw backends do with their subnet leases:
//
//   - vxlan (default): one VXLAN device (UDP 4789) whose MAC other hosts
//     know (the node's VTEP MAC); for each other node, a permanent
//     neighbour entry mapping its block's network address to its VTEP
//     MAC, a forwarding entry sending that MAC to its underlay address,
//     and a route to its block via that network address, on-link over the
//     VXLAN device;
//   - host-gw: for each other node, a route to its block via its underlay
//     address (the hosts share an L2 segment);
//   - none: no routes to other nodes (every node on one host, or the
//     network routes the blocks).
//
// ApplyPolicy (policy.go) enforces, on the same host, tenant isolation
// and the network policies of the tenants whose replicas run there, in
// an nftables table of its own compiled from the replicas' addresses
// (sets) and the policies (chains).
//
// Apply reads what the kernel has and changes only what differs: an entry
// that is right is left alone, so an agent restart, or a node list that
// did not change, disturbs no connection; what is Strata's and no longer
// wanted (a deleted node's route, neighbour and forwarding entry) is
// removed. Strata's routes carry their own protocol number
// (RouteProtocol), the VXLAN device and its entries are Strata's, and the
// NAT rules live in a table of Strata's own, with a chain per purpose, so
// that nothing else on the host is touched.
//
// This is the agent's host set-up, not a provider: providers attach
// replicas (containers, VMs) to the bridge; the data plane is shared by
// all of them and must exist before any, and it follows the region's
// node list, which only the agent holds.
package netplane

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/hostpolicy"
)

// RouteProtocol marks Strata's routes (`ip route show proto 83`): the
// routes the data plane finds with it and does not want are its own
// leftovers, and it never touches a route without it.
const RouteProtocol = 83

// Defaults of Host.
const (
	DefaultVXLANDevice = "strata.vxlan"
	DefaultTable       = "strata"
	// clusterMetric ranks the route of the whole cluster CIDR onto the
	// bridge below the blocks' routes.
	clusterMetric = 1000
)

// Host is what the agent knows of its host.
type Host struct {
	Node string
	// Bridge is where replicas attach; it gets the gateway of the node's
	// block.
	Bridge string
	// VXLANDevice names the VXLAN device (default DefaultVXLANDevice).
	VXLANDevice string
	// Underlay is the address other hosts reach this one at, on
	// UnderlayDev, whose MTU is UnderlayMTU.
	Underlay    netip.Addr
	UnderlayDev string
	UnderlayMTU int
	// VTEPMAC is the VXLAN device's MAC address, which other hosts' FDB
	// entries name (VTEPMAC derives it from the node name).
	VTEPMAC net.HardwareAddr
	// Table is the nftables table of the NAT and isolation rules
	// (default DefaultTable).
	Table string
	// Services are the host's ports that replicas on the bridge may
	// reach (load balancers' listeners); every other service of the host
	// is closed to them.
	Services []HostService
	// GatewayServices are ports replicas may reach at the gateway of the
	// node's block (the agent's name server); their Addr is ignored, the
	// block decides it.
	GatewayServices []HostService
}

// Gateway is the gateway of a node's block: its first address, which
// the bridge holds.
func Gateway(block netip.Prefix) netip.Addr { return block.Masked().Addr().Next() }

// atGateway are services at gateway gw.
func atGateway(services []HostService, gw netip.Addr) []HostService {
	out := make([]HostService, len(services))
	for i, s := range services {
		s.Addr = gw
		out[i] = s
	}
	return out
}

// HostService is a port range of the host that replicas may reach.
type HostService struct {
	// Addr is the host's address; the unspecified address is any of
	// the host's addresses.
	Addr  netip.Addr
	Proto string // "tcp" or "udp"
	Ports hostpolicy.PortRanges
}

// Isolation keeps the replicas on Bridge from their host: of what is
// addressed to the host itself, they get answers to what the host opened
// (established, related) and reach Services; everything else is dropped.
// What they send through the host to other replicas, other hosts and
// the outside is forwarded, not addressed to the host, and untouched.
type Isolation struct {
	Bridge   string
	Services []HostService
}

// Rules describes the isolation chain's rules, in order: the kernel
// writes each as its rule's comment, and a chain whose comments are
// these is left alone.
func (iso Isolation) Rules() []string {
	out := []string{"accept established,related from " + iso.Bridge}
	for _, s := range iso.Services {
		addr := "any"
		if s.Addr.IsValid() && !s.Addr.IsUnspecified() {
			addr = s.Addr.String()
		}
		for _, r := range s.Ports {
			out = append(out, fmt.Sprintf("accept %s %s:%s from %s", s.Proto, addr, hostpolicy.PortRanges{r}, iso.Bridge))
		}
	}
	return append(out, "drop local from "+iso.Bridge)
}

// Network is the region network, as WatchNetwork tells it.
type Network struct {
	Subnet  netip.Prefix
	Backend string
	VNI     int
	// Bridge is the network's bridge, used when the host names none.
	Bridge string
}

// ReplicaMTU is the MTU of replica interfaces on host h.
func (n Network) ReplicaMTU(h Host) int {
	nw := api.Network{Backend: n.Backend}
	return nw.ReplicaMTU(h.UnderlayMTU)
}

// Peer is one node's place on the network.
type Peer struct {
	Node     string
	Block    netip.Prefix
	Underlay netip.Addr
	VTEPMAC  net.HardwareAddr
}

// VTEPMAC is the VXLAN MAC address of node: derived from its name, so that
// it survives the device being recreated (a reboot) and the agent can tell
// it before the device exists; locally administered, unicast.
func VTEPMAC(node string) net.HardwareAddr {
	sum := sha256.Sum256([]byte("strata-vtep/" + node))
	mac := net.HardwareAddr(sum[:6])
	mac[0] = mac[0]&0xfe | 0x02
	return mac
}

// ErrNoBlock is returned by Apply while the region has not given the node
// a block.
var ErrNoBlock = errors.New("the node has no address block yet")

// Plane reconciles one host. It is not safe for concurrent use: the
// agent's network loop is its only caller.
type Plane struct {
	k    Kernel
	host Host
	log  *slog.Logger
}

// New returns a Plane for host h over kernel k.
func New(k Kernel, h Host, log *slog.Logger) *Plane {
	if h.VXLANDevice == "" {
		h.VXLANDevice = DefaultVXLANDevice
	}
	if h.Table == "" {
		h.Table = DefaultTable
	}
	if len(h.VTEPMAC) == 0 {
		h.VTEPMAC = VTEPMAC(h.Node)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Plane{k: k, host: h, log: log}
}

// Host returns the host the plane programs.
func (p *Plane) Host() Host { return p.host }

// Changes counts what one Apply changed.
type Changes struct {
	Links, Addrs, Routes, Neighbors, FDB, NAT, Filter int
	// Deleted counts the removals among them.
	Deleted int
}

// Total is the number of changes.
func (c Changes) Total() int {
	return c.Links + c.Addrs + c.Routes + c.Neighbors + c.FDB + c.NAT + c.Filter
}

// desired is the state Apply converges to.
type desired struct {
	bridge     Link
	bridgeAddr netip.Prefix
	vxlan      *Link // nil: no VXLAN device
	neighbors  []Neighbor
	fdb        []FDBEntry
	routes     []Route
	masquerade []netip.Prefix
	isolation  Isolation
}

// plan computes what the host should look like for network nw and peers.
// Peers that cannot be routed to (no block or no underlay address yet, a
// block overlapping this node's, this host's own address) are left out and
// returned as skipped.
func (p *Plane) plan(nw Network, peers []Peer) (desired, []string, error) {
	h := p.host
	var self *Peer
	for i := range peers {
		if peers[i].Node == h.Node {
			self = &peers[i]
		}
	}
	if self == nil || !self.Block.IsValid() {
		return desired{}, nil, ErrNoBlock
	}
	block := self.Block.Masked()
	gw := Gateway(block)
	mtu := nw.ReplicaMTU(h)
	if h.Bridge == "" {
		h.Bridge = nw.Bridge
	}
	if h.Bridge == "" {
		return desired{}, nil, errors.New("no bridge: neither the host nor the network names one")
	}
	d := desired{
		bridge:     Link{Name: h.Bridge, Kind: KindBridge, MTU: mtu, Up: true, Alias: api.BridgeAlias},
		bridgeAddr: netip.PrefixFrom(gw, block.Bits()),
		masquerade: []netip.Prefix{nw.Subnet.Masked()},
		isolation:  Isolation{Bridge: h.Bridge, Services: append(slices.Clone(h.Services), atGateway(h.GatewayServices, gw)...)},
	}
	if nw.Backend == api.BackendVXLAN {
		d.vxlan = &Link{Name: h.VXLANDevice, Kind: KindVXLAN, MTU: mtu, Up: true, MAC: h.VTEPMAC,
			VNI: nw.VNI, Port: api.VXLANPort, Local: h.Underlay, Parent: h.UnderlayDev}
	}
	var skipped []string
	if nw.Backend == api.BackendVXLAN || nw.Backend == api.BackendHostGW {
		// The whole cluster CIDR onto the bridge, below the blocks'
		// routes: replicas that got an address before node blocks (the
		// whole-subnet plan) stay reachable on this host, and traffic to
		// a block no node has stays here instead of leaving by the
		// default route unmasqueraded.
		d.routes = append(d.routes, Route{Dst: nw.Subnet.Masked(), Dev: h.Bridge, Src: gw, Metric: clusterMetric})
		for _, peer := range peers {
			if peer.Node == h.Node {
				continue
			}
			if why := p.unroutable(nw, block, peer); why != "" {
				skipped = append(skipped, peer.Node+" ("+why+")")
				continue
			}
			d.addPeer(nw.Backend, h, gw, peer)
		}
	}
	return d, skipped, nil
}

// unroutable says why peer cannot be routed to from this host, "" when it
// can; block is this node's.
func (p *Plane) unroutable(nw Network, block netip.Prefix, peer Peer) string {
	switch {
	case !peer.Block.IsValid():
		return "no block"
	case !peer.Underlay.IsValid():
		return "no underlay address"
	case peer.Block.Overlaps(block):
		return "its block overlaps this node's"
	case peer.Underlay == p.host.Underlay:
		return "it runs on this host"
	case nw.Backend == api.BackendVXLAN && len(peer.VTEPMAC) != 6:
		return "no VTEP MAC"
	}
	return ""
}

// addPeer adds what reaches peer's block on backend: with vxlan its
// neighbour and forwarding entries and a route over the VXLAN device,
// with host-gw a route via its underlay address. gw is this node's
// gateway, the routes' source.
func (d *desired) addPeer(backend string, h Host, gw netip.Addr, peer Peer) {
	pb := peer.Block.Masked()
	switch backend {
	case api.BackendVXLAN:
		d.neighbors = append(d.neighbors, Neighbor{IP: pb.Addr(), MAC: peer.VTEPMAC})
		d.fdb = append(d.fdb, FDBEntry{MAC: peer.VTEPMAC, Dst: peer.Underlay})
		d.routes = append(d.routes, Route{Dst: pb, Gw: pb.Addr(), Dev: h.VXLANDevice, Src: gw, OnLink: true})
	case api.BackendHostGW:
		d.routes = append(d.routes, Route{Dst: pb, Gw: peer.Underlay, Dev: h.UnderlayDev, Src: gw})
	}
}

// Apply converges the host to network nw with nodes peers (this node
// included: its block is the bridge's). It goes on past a failed entry
// and returns every failure joined, with what it changed.
func (p *Plane) Apply(ctx context.Context, nw Network, peers []Peer) (Changes, error) {
	var ch Changes
	d, skipped, err := p.plan(nw, peers)
	if err != nil {
		return ch, err
	}
	if len(skipped) > 0 {
		p.log.Debug("network peers left out", "peers", skipped)
	}
	var errs []error
	fail := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if on, err := p.k.Forwarding(); err != nil {
		fail(fmt.Errorf("ip forwarding: %w", err))
	} else if !on {
		fail(p.k.EnableForwarding())
	}
	// The bridge and its gateway first: every route's source address is
	// the gateway, which must exist before them.
	if err := p.ensureLink(d.bridge, &ch); err != nil {
		return ch, errors.Join(append(errs, err)...)
	}
	if err := p.ensureAddr(d.bridge.Name, d.bridgeAddr, nw.Subnet, &ch); err != nil {
		return ch, errors.Join(append(errs, err)...)
	}
	if ctx.Err() != nil {
		return ch, ctx.Err()
	}
	vxlanOK, err := p.ensureVXLAN(d.vxlan, &ch)
	fail(err)
	// Neighbour and forwarding entries before the routes that use them;
	// stale routes go before the entries they used.
	if vxlanOK {
		fail(p.syncNeighbors(d.neighbors, &ch))
		fail(p.syncFDB(d.fdb, &ch))
	}
	fail(p.syncRoutes(d.routes, vxlanOK || d.vxlan == nil, &ch))
	if vxlanOK {
		fail(p.pruneNeighbors(d.neighbors, &ch))
		fail(p.pruneFDB(d.fdb, &ch))
	}
	fail(p.syncMasquerade(d.masquerade, &ch))
	fail(p.syncIsolation(d.isolation, &ch))
	return ch, errors.Join(errs...)
}

// ensureLink creates want, or brings an existing link of that name to it.
// A VXLAN device whose identity (VNI, port, local address, underlay
// interface) differs is recreated: the kernel cannot change those.
func (p *Plane) ensureLink(want Link, ch *Changes) error {
	have, ok, err := p.k.Link(want.Name)
	if err != nil {
		return fmt.Errorf("link %s: %w", want.Name, err)
	}
	if ok && have.Kind != want.Kind {
		return fmt.Errorf("link %s is a %s, not a %s: rename it or choose another name", want.Name, have.Kind, want.Kind)
	}
	if ok && want.Kind == KindVXLAN && !sameVXLAN(have, want) {
		p.log.Info("recreating the VXLAN device", "link", want.Name, "vni", want.VNI, "local", want.Local, "parent", want.Parent)
		if err := p.k.DelLink(want.Name); err != nil {
			return fmt.Errorf("link %s: %w", want.Name, err)
		}
		ch.Links++
		ok = false
	}
	if !ok {
		if err := p.k.AddLink(want); err != nil {
			return fmt.Errorf("create link %s: %w", want.Name, err)
		}
		ch.Links++
		return nil
	}
	return p.updateLink(have, want, ch)
}

// updateLink brings the MTU, alias, MAC and state of an existing link
// have to want's.
func (p *Plane) updateLink(have, want Link, ch *Changes) error {
	next := have
	next.Up = true
	if want.MTU > 0 {
		next.MTU = want.MTU
	}
	if want.Alias != "" {
		next.Alias = want.Alias
	}
	if len(want.MAC) > 0 {
		next.MAC = want.MAC
	}
	if next.MTU == have.MTU && next.Up == have.Up && next.Alias == have.Alias && slices.Equal(next.MAC, have.MAC) {
		return nil
	}
	if err := p.k.SetLink(next); err != nil {
		return fmt.Errorf("link %s: %w", want.Name, err)
	}
	ch.Links++
	return nil
}

// ensureVXLAN creates or updates the VXLAN device want, or removes the
// device when want is nil (a backend without one). ok reports whether
// the device is there to hold entries.
func (p *Plane) ensureVXLAN(want *Link, ch *Changes) (ok bool, err error) {
	if want != nil {
		if err := p.ensureLink(*want, ch); err != nil {
			return false, err
		}
		return true, nil
	}
	_, exists, err := p.k.Link(p.host.VXLANDevice)
	if err != nil || !exists {
		return false, err
	}
	// The backend changed: the device goes, and its entries and routes
	// with it.
	ch.Links++
	ch.Deleted++
	return false, p.k.DelLink(p.host.VXLANDevice)
}

// sameVXLAN reports whether two VXLAN devices have the same identity.
func sameVXLAN(a, b Link) bool {
	return a.VNI == b.VNI && a.Port == b.Port && a.Local == b.Local && a.Parent == b.Parent
}

// ensureAddr gives link the address want and removes its other addresses
// inside the cluster subnet (a block's gateway the node no longer has,
// the whole subnet's gateway of the single-host plan); addresses outside
// it are someone else's.
func (p *Plane) ensureAddr(link string, want, subnet netip.Prefix, ch *Changes) error {
	have, err := p.k.Addrs(link)
	if err != nil {
		return fmt.Errorf("addresses of %s: %w", link, err)
	}
	if !slices.Contains(have, want) {
		if err := p.k.AddAddr(link, want); err != nil {
			return fmt.Errorf("add %s to %s: %w", want, link, err)
		}
		ch.Addrs++
	}
	var errs []error
	for _, a := range have {
		if a != want && subnet.Contains(a.Addr()) {
			if err := p.k.DelAddr(link, a); err != nil {
				errs = append(errs, fmt.Errorf("remove %s from %s: %w", a, link, err))
				continue
			}
			ch.Addrs++
			ch.Deleted++
		}
	}
	return errors.Join(errs...)
}

func (p *Plane) syncNeighbors(want []Neighbor, ch *Changes) error {
	dev := p.host.VXLANDevice
	have, err := p.k.Neighbors(dev)
	if err != nil {
		return fmt.Errorf("neighbours of %s: %w", dev, err)
	}
	cur := make(map[netip.Addr]net.HardwareAddr, len(have))
	for _, n := range have {
		cur[n.IP] = n.MAC
	}
	var errs []error
	for _, n := range want {
		if mac, ok := cur[n.IP]; ok && slices.Equal(mac, n.MAC) {
			continue
		}
		if err := p.k.SetNeighbor(dev, n); err != nil {
			errs = append(errs, fmt.Errorf("neighbour %s: %w", n.IP, err))
			continue
		}
		ch.Neighbors++
	}
	return errors.Join(errs...)
}

func (p *Plane) pruneNeighbors(want []Neighbor, ch *Changes) error {
	dev := p.host.VXLANDevice
	have, err := p.k.Neighbors(dev)
	if err != nil {
		return fmt.Errorf("neighbours of %s: %w", dev, err)
	}
	keep := make(map[netip.Addr]bool, len(want))
	for _, n := range want {
		keep[n.IP] = true
	}
	var errs []error
	for _, n := range have {
		if keep[n.IP] {
			continue
		}
		if err := p.k.DelNeighbor(dev, n); err != nil {
			errs = append(errs, fmt.Errorf("remove neighbour %s: %w", n.IP, err))
			continue
		}
		ch.Neighbors++
		ch.Deleted++
	}
	return errors.Join(errs...)
}

func (p *Plane) syncFDB(want []FDBEntry, ch *Changes) error {
	dev := p.host.VXLANDevice
	have, err := p.k.FDB(dev)
	if err != nil {
		return fmt.Errorf("forwarding entries of %s: %w", dev, err)
	}
	cur := make(map[string][]netip.Addr, len(have))
	for _, e := range have {
		cur[e.MAC.String()] = append(cur[e.MAC.String()], e.Dst)
	}
	var errs []error
	for _, e := range want {
		if dsts := cur[e.MAC.String()]; len(dsts) == 1 && dsts[0] == e.Dst {
			continue
		}
		if err := p.k.SetFDB(dev, e); err != nil {
			errs = append(errs, fmt.Errorf("forwarding entry %s: %w", e.MAC, err))
			continue
		}
		ch.FDB++
	}
	return errors.Join(errs...)
}

func (p *Plane) pruneFDB(want []FDBEntry, ch *Changes) error {
	dev := p.host.VXLANDevice
	have, err := p.k.FDB(dev)
	if err != nil {
		return fmt.Errorf("forwarding entries of %s: %w", dev, err)
	}
	keep := make(map[string]netip.Addr, len(want))
	for _, e := range want {
		keep[e.MAC.String()] = e.Dst
	}
	var errs []error
	for _, e := range have {
		if dst, ok := keep[e.MAC.String()]; ok && dst == e.Dst {
			continue
		}
		if err := p.k.DelFDB(dev, e); err != nil {
			errs = append(errs, fmt.Errorf("remove forwarding entry %s: %w", e.MAC, err))
			continue
		}
		ch.FDB++
		ch.Deleted++
	}
	return errors.Join(errs...)
}

// routeKey is what makes a route one entry of the main table.
type routeKey struct {
	dst    netip.Prefix
	metric int
}

// syncRoutes replaces the routes that differ from want and removes
// Strata's routes that are not wanted. With add false (the VXLAN device
// is missing) it only removes.
func (p *Plane) syncRoutes(want []Route, add bool, ch *Changes) error {
	have, err := p.k.Routes()
	if err != nil {
		return fmt.Errorf("routes: %w", err)
	}
	cur := make(map[routeKey]Route, len(have))
	for _, r := range have {
		cur[routeKey{r.Dst, r.Metric}] = r
	}
	keep := make(map[routeKey]bool, len(want))
	var errs []error
	for _, r := range want {
		k := routeKey{r.Dst, r.Metric}
		keep[k] = true
		if !add {
			continue
		}
		if c, ok := cur[k]; ok && c == r {
			continue
		}
		if err := p.k.ReplaceRoute(r); err != nil {
			errs = append(errs, fmt.Errorf("route to %s: %w", r.Dst, err))
			continue
		}
		ch.Routes++
	}
	for k, r := range cur {
		if keep[k] {
			continue
		}
		if err := p.k.DelRoute(r); err != nil {
			errs = append(errs, fmt.Errorf("remove route to %s: %w", r.Dst, err))
			continue
		}
		ch.Routes++
		ch.Deleted++
	}
	return errors.Join(errs...)
}

func (p *Plane) syncMasquerade(want []netip.Prefix, ch *Changes) error {
	have, ok, err := p.k.Masquerade(p.host.Table)
	if err != nil {
		return fmt.Errorf("nftables table %s: %w", p.host.Table, err)
	}
	if ok && slices.Equal(have, want) {
		return nil
	}
	if err := p.k.SetMasquerade(p.host.Table, want); err != nil {
		return fmt.Errorf("nftables table %s: %w", p.host.Table, err)
	}
	ch.NAT++
	return nil
}

func (p *Plane) syncIsolation(want Isolation, ch *Changes) error {
	have, ok, err := p.k.Isolation(p.host.Table, want.Bridge)
	if err != nil {
		return fmt.Errorf("nftables table %s: isolation of %s: %w", p.host.Table, want.Bridge, err)
	}
	if ok && slices.Equal(have, want.Rules()) {
		return nil
	}
	if err := p.k.SetIsolation(p.host.Table, want); err != nil {
		return fmt.Errorf("nftables table %s: isolation of %s: %w", p.host.Table, want.Bridge, err)
	}
	ch.Filter++
	return nil
}
