package netplane

import (
	"net"
	"net/netip"
)

// Kernel is what the data plane reads and changes of its host. Listing
// calls return Strata's entries only (its routes by their protocol, the
// neighbours and forwarding entries of its VXLAN device); the real one
// is Netlink, tests use a fake.
type Kernel interface {
	// Link returns the interface called name; ok is false when there is
	// none.
	Link(name string) (l Link, ok bool, err error)
	AddLink(l Link) error
	// SetLink changes an existing link's MTU, alias, MAC and state to l's.
	SetLink(l Link) error
	DelLink(name string) error

	// Addrs lists the IPv4 addresses of a link.
	Addrs(link string) ([]netip.Prefix, error)
	AddAddr(link string, p netip.Prefix) error
	DelAddr(link string, p netip.Prefix) error

	// Routes lists Strata's routes (RouteProtocol, main table).
	Routes() ([]Route, error)
	// ReplaceRoute creates or replaces the route to r.Dst at r.Metric.
	ReplaceRoute(r Route) error
	DelRoute(r Route) error

	// Neighbors lists the permanent IPv4 neighbours of a link.
	Neighbors(link string) ([]Neighbor, error)
	SetNeighbor(link string, n Neighbor) error
	DelNeighbor(link string, n Neighbor) error

	// FDB lists the forwarding entries of a VXLAN link.
	FDB(link string) ([]FDBEntry, error)
	SetFDB(link string, e FDBEntry) error
	DelFDB(link string, e FDBEntry) error

	// Masquerade returns the subnets that the NAT chain of table
	// masquerades; ok is false when the table or chain is missing.
	Masquerade(table string) (subnets []netip.Prefix, ok bool, err error)
	// SetMasquerade makes the NAT chain of table masquerade exactly
	// subnets, in one nftables transaction.
	SetMasquerade(table string, subnets []netip.Prefix) error

	// Isolation returns the rules (their descriptions, Isolation.Rules)
	// of the input chain of table that keeps the replicas on bridge from
	// the host's services; ok is false when the chain is missing or not
	// one of Strata's.
	Isolation(table, bridge string) (rules []string, ok bool, err error)
	// SetIsolation makes that chain hold exactly iso's rules, in one
	// nftables transaction.
	SetIsolation(table string, iso Isolation) error

	// Forwarding reports whether IPv4 forwarding is on; EnableForwarding
	// turns it on.
	Forwarding() (bool, error)
	EnableForwarding() error

	// Underlay finds the host's underlay: the interface dev (default: the
	// one holding addr, else the default route's), its address (default:
	// its first IPv4 address) and its MTU.
	Underlay(addr netip.Addr, dev string) (netip.Addr, string, int, error)
}

// Link kinds.
const (
	KindBridge = "bridge"
	KindVXLAN  = "vxlan"
)

// Link is a network interface as the data plane sees it.
type Link struct {
	Name  string
	Kind  string // KindBridge, KindVXLAN, or another driver's name
	MTU   int
	Up    bool
	Alias string
	// MAC is the link's address; for a new bridge, nil lets the kernel
	// pick one.
	MAC net.HardwareAddr

	// VXLAN only: the network identifier, UDP port, local address and
	// the underlay interface it sends through.
	VNI    int
	Port   int
	Local  netip.Addr
	Parent string
}

// Route is an IPv4 route of the main table.
type Route struct {
	Dst netip.Prefix
	// Gw is the next hop; invalid for a route straight onto Dev.
	Gw  netip.Addr
	Dev string
	// Src is the source address the host uses on the route.
	Src netip.Addr
	// OnLink: Gw is reachable on Dev without a route to it (VXLAN).
	OnLink bool
	Metric int
}

// Neighbor is a permanent IPv4 neighbour entry (ARP).
type Neighbor struct {
	IP  netip.Addr
	MAC net.HardwareAddr
}

// FDBEntry sends frames for MAC to the VXLAN tunnel endpoint Dst.
type FDBEntry struct {
	MAC net.HardwareAddr
	Dst netip.Addr
}
