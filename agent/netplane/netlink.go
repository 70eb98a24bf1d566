package netplane

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Netlink is the Kernel of one network namespace: links, addresses,
// routes and neighbours over rtnetlink, NAT over nftables.
type Netlink struct {
	h *netlink.Handle
	// ns is the namespace's handle; -1 for the process's own.
	ns netns.NsHandle
}

var _ Kernel = (*Netlink)(nil)

// NewNetlink returns the Kernel of the network namespace bound at nsPath
// ("/var/run/netns/x"), or of the process's own namespace when nsPath is
// empty. Close releases it.
func NewNetlink(nsPath string) (*Netlink, error) {
	if nsPath == "" {
		h, err := netlink.NewHandle()
		if err != nil {
			return nil, fmt.Errorf("netlink: %w", err)
		}
		return &Netlink{h: h, ns: -1}, nil
	}
	ns, err := netns.GetFromPath(nsPath)
	if err != nil {
		return nil, fmt.Errorf("network namespace %s: %w", nsPath, err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		ns.Close()
		return nil, fmt.Errorf("netlink in %s: %w", nsPath, err)
	}
	return &Netlink{h: h, ns: ns}, nil
}

// Close releases the handles.
func (k *Netlink) Close() {
	k.h.Close()
	if k.ns >= 0 {
		k.ns.Close()
	}
}

// retryDump runs a netlink dump again when it was interrupted by a
// concurrent change (the result may then be inconsistent).
func retryDump[T any](f func() (T, error)) (T, error) {
	var v T
	var err error
	for range 5 {
		if v, err = f(); !errors.Is(err, netlink.ErrDumpInterrupted) {
			return v, err
		}
	}
	return v, err
}

func (k *Netlink) link(name string) (netlink.Link, bool, error) {
	l, err := k.h.LinkByName(name)
	var nf netlink.LinkNotFoundError
	if errors.As(err, &nf) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return l, true, nil
}

func (k *Netlink) Link(name string) (Link, bool, error) {
	l, ok, err := k.link(name)
	if err != nil || !ok {
		return Link{}, ok, err
	}
	a := l.Attrs()
	out := Link{Name: a.Name, Kind: l.Type(), MTU: a.MTU, Up: a.Flags&net.FlagUp != 0, Alias: a.Alias, MAC: a.HardwareAddr}
	if vx, isVX := l.(*netlink.Vxlan); isVX {
		out.VNI, out.Port = vx.VxlanId, vx.Port
		if ip, ok := netip.AddrFromSlice(vx.SrcAddr); ok {
			out.Local = ip.Unmap()
		}
		if vx.VtepDevIndex > 0 {
			if parent, err := k.h.LinkByIndex(vx.VtepDevIndex); err == nil {
				out.Parent = parent.Attrs().Name
			}
		}
	}
	return out, true, nil
}

func (k *Netlink) AddLink(l Link) error {
	attrs := netlink.NewLinkAttrs()
	attrs.Name, attrs.MTU = l.Name, l.MTU
	if len(l.MAC) > 0 {
		attrs.HardwareAddr = l.MAC
	}
	var nl netlink.Link
	switch l.Kind {
	case KindBridge:
		nl = &netlink.Bridge{LinkAttrs: attrs}
	case KindVXLAN:
		// Outer UDP checksums, asked for rather than left to the
		// kernel's default: a receiving NIC that verifies them lets the
		// kernel derive the inner packet's checksum from the outer one
		// instead of summing every payload byte again.
		vx := &netlink.Vxlan{LinkAttrs: attrs, VxlanId: l.VNI, Port: l.Port, Learning: false, UDPCSum: true, SrcAddr: l.Local.AsSlice()}
		if l.Parent != "" {
			parent, err := k.h.LinkByName(l.Parent)
			if err != nil {
				return fmt.Errorf("underlay interface %s: %w", l.Parent, err)
			}
			vx.VtepDevIndex = parent.Attrs().Index
		}
		nl = vx
	default:
		return fmt.Errorf("link kind %q is not one the data plane creates", l.Kind)
	}
	if err := k.h.LinkAdd(nl); err != nil {
		if !errors.Is(err, unix.EEXIST) {
			return err
		}
		// Created meanwhile (a CNI plugin creating the bridge): take it.
		return k.SetLink(l)
	}
	return k.SetLink(l)
}

func (k *Netlink) SetLink(l Link) error {
	nl, ok, err := k.link(l.Name)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("link %s: %w", l.Name, unix.ENODEV)
	}
	a := nl.Attrs()
	if l.MTU > 0 && a.MTU != l.MTU {
		if err := k.h.LinkSetMTU(nl, l.MTU); err != nil {
			return fmt.Errorf("set MTU %d: %w", l.MTU, err)
		}
	}
	if l.Alias != "" && a.Alias != l.Alias {
		if err := k.h.LinkSetAlias(nl, l.Alias); err != nil {
			return fmt.Errorf("set alias: %w", err)
		}
	}
	if len(l.MAC) > 0 && !slices.Equal(a.HardwareAddr, l.MAC) {
		if err := k.h.LinkSetHardwareAddr(nl, l.MAC); err != nil {
			return fmt.Errorf("set MAC %s: %w", l.MAC, err)
		}
	}
	if l.Up && a.Flags&net.FlagUp == 0 {
		if err := k.h.LinkSetUp(nl); err != nil {
			return fmt.Errorf("set up: %w", err)
		}
	}
	return nil
}

func (k *Netlink) DelLink(name string) error {
	nl, ok, err := k.link(name)
	if err != nil || !ok {
		return err
	}
	return k.h.LinkDel(nl)
}

func (k *Netlink) Addrs(link string) ([]netip.Prefix, error) {
	nl, ok, err := k.link(link)
	if err != nil || !ok {
		return nil, err
	}
	addrs, err := retryDump(func() ([]netlink.Addr, error) { return k.h.AddrList(nl, netlink.FAMILY_V4) })
	if err != nil {
		return nil, err
	}
	out := make([]netip.Prefix, 0, len(addrs))
	for _, a := range addrs {
		if p, ok := prefixOf(a.IPNet); ok {
			out = append(out, p)
		}
	}
	return out, nil
}

func (k *Netlink) AddAddr(link string, p netip.Prefix) error {
	nl, ok, err := k.link(link)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("link %s: %w", link, unix.ENODEV)
	}
	err = k.h.AddrAdd(nl, &netlink.Addr{IPNet: ipNet(p)})
	if errors.Is(err, unix.EEXIST) {
		return nil
	}
	return err
}

func (k *Netlink) DelAddr(link string, p netip.Prefix) error {
	nl, ok, err := k.link(link)
	if err != nil || !ok {
		return err
	}
	err = k.h.AddrDel(nl, &netlink.Addr{IPNet: ipNet(p)})
	if errors.Is(err, unix.EADDRNOTAVAIL) {
		return nil
	}
	return err
}

func (k *Netlink) Routes() ([]Route, error) {
	filter := &netlink.Route{Protocol: RouteProtocol, Table: unix.RT_TABLE_MAIN}
	rs, err := retryDump(func() ([]netlink.Route, error) {
		return k.h.RouteListFiltered(netlink.FAMILY_V4, filter, netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE)
	})
	if err != nil {
		return nil, err
	}
	names := map[int]string{}
	out := make([]Route, 0, len(rs))
	for _, r := range rs {
		dst, ok := prefixOf(r.Dst)
		if !ok {
			continue
		}
		name, ok := names[r.LinkIndex]
		if !ok {
			if l, err := k.h.LinkByIndex(r.LinkIndex); err == nil {
				name = l.Attrs().Name
			}
			names[r.LinkIndex] = name
		}
		out = append(out, Route{Dst: dst, Gw: addrOf(r.Gw), Dev: name, Src: addrOf(r.Src), OnLink: r.Flags&int(netlink.FLAG_ONLINK) != 0, Metric: r.Priority})
	}
	return out, nil
}

func (k *Netlink) route(r Route) (*netlink.Route, error) {
	nl, ok, err := k.link(r.Dev)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("link %s: %w", r.Dev, unix.ENODEV)
	}
	out := &netlink.Route{
		LinkIndex: nl.Attrs().Index, Dst: ipNet(r.Dst), Protocol: RouteProtocol, Table: unix.RT_TABLE_MAIN,
		Priority: r.Metric, Scope: netlink.SCOPE_LINK,
	}
	if r.Gw.IsValid() {
		out.Gw, out.Scope = r.Gw.AsSlice(), netlink.SCOPE_UNIVERSE
	}
	if r.Src.IsValid() {
		out.Src = r.Src.AsSlice()
	}
	if r.OnLink {
		out.SetFlag(netlink.FLAG_ONLINK)
	}
	return out, nil
}

func (k *Netlink) ReplaceRoute(r Route) error {
	nr, err := k.route(r)
	if err != nil {
		return err
	}
	return k.h.RouteReplace(nr)
}

func (k *Netlink) DelRoute(r Route) error {
	nr := &netlink.Route{Dst: ipNet(r.Dst), Protocol: RouteProtocol, Table: unix.RT_TABLE_MAIN, Priority: r.Metric}
	err := k.h.RouteDel(nr)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	return err
}

func (k *Netlink) index(link string) (int, error) {
	nl, ok, err := k.link(link)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("link %s: %w", link, unix.ENODEV)
	}
	return nl.Attrs().Index, nil
}

func (k *Netlink) Neighbors(link string) ([]Neighbor, error) {
	idx, err := k.index(link)
	if err != nil {
		return nil, err
	}
	ns, err := retryDump(func() ([]netlink.Neigh, error) { return k.h.NeighList(idx, netlink.FAMILY_V4) })
	if err != nil {
		return nil, err
	}
	var out []Neighbor
	for _, n := range ns {
		if n.State&netlink.NUD_PERMANENT == 0 {
			continue
		}
		if ip := addrOf(n.IP); ip.IsValid() {
			out = append(out, Neighbor{IP: ip, MAC: n.HardwareAddr})
		}
	}
	return out, nil
}

func (k *Netlink) neigh(link string, ip netip.Addr, mac net.HardwareAddr, fdb bool) (*netlink.Neigh, error) {
	idx, err := k.index(link)
	if err != nil {
		return nil, err
	}
	n := &netlink.Neigh{LinkIndex: idx, State: netlink.NUD_PERMANENT, IP: ip.AsSlice(), HardwareAddr: mac}
	if fdb {
		n.Family, n.Flags = unix.AF_BRIDGE, netlink.NTF_SELF
	} else {
		n.Family, n.Type = netlink.FAMILY_V4, unix.RTN_UNICAST
	}
	return n, nil
}

func (k *Netlink) SetNeighbor(link string, n Neighbor) error {
	nn, err := k.neigh(link, n.IP, n.MAC, false)
	if err != nil {
		return err
	}
	return k.h.NeighSet(nn)
}

func (k *Netlink) DelNeighbor(link string, n Neighbor) error {
	nn, err := k.neigh(link, n.IP, n.MAC, false)
	if err != nil {
		return err
	}
	err = k.h.NeighDel(nn)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}

func (k *Netlink) FDB(link string) ([]FDBEntry, error) {
	idx, err := k.index(link)
	if err != nil {
		return nil, err
	}
	ns, err := retryDump(func() ([]netlink.Neigh, error) { return k.h.NeighList(idx, unix.AF_BRIDGE) })
	if err != nil {
		return nil, err
	}
	var out []FDBEntry
	for _, n := range ns {
		if dst := addrOf(n.IP); dst.IsValid() && len(n.HardwareAddr) == 6 {
			out = append(out, FDBEntry{MAC: n.HardwareAddr, Dst: dst})
		}
	}
	return out, nil
}

func (k *Netlink) SetFDB(link string, e FDBEntry) error {
	n, err := k.neigh(link, e.Dst, e.MAC, true)
	if err != nil {
		return err
	}
	return k.h.NeighSet(n)
}

func (k *Netlink) DelFDB(link string, e FDBEntry) error {
	n, err := k.neigh(link, e.Dst, e.MAC, true)
	if err != nil {
		return err
	}
	err = k.h.NeighDel(n)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}

// The NAT layout: table <Table> (family ip) holds one chain per purpose.
// natChain masquerades what leaves the cluster; rules are recognised by
// their comment, "masquerade <subnet>". Later purposes (ingress policies
// with sets on the destination host) get chains of their own in the same
// table.
const natChain = "masquerade"

func (k *Netlink) nft() (*nftables.Conn, error) {
	if k.ns >= 0 {
		return nftables.New(nftables.WithNetNSFd(int(k.ns)))
	}
	return nftables.New()
}

// chainOf returns the chain name of table t, nil when there is none.
// (Conn.ListChain's error for a missing chain does not wrap ENOENT.)
func chainOf(c *nftables.Conn, t *nftables.Table, name string) (*nftables.Chain, error) {
	chs, err := c.ListChainsOfTableFamily(t.Family)
	if err != nil {
		return nil, err
	}
	for _, ch := range chs {
		if ch.Table.Name == t.Name && ch.Name == name {
			return ch, nil
		}
	}
	return nil, nil
}

func (k *Netlink) Masquerade(table string) ([]netip.Prefix, bool, error) {
	c, err := k.nft()
	if err != nil {
		return nil, false, err
	}
	t, err := c.ListTableOfFamily(table, nftables.TableFamilyIPv4)
	if errors.Is(err, unix.ENOENT) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	ch, err := chainOf(c, t, natChain)
	if err != nil || ch == nil {
		return nil, false, err
	}
	if ch.Type != nftables.ChainTypeNAT || ch.Hooknum == nil || *ch.Hooknum != *nftables.ChainHookPostrouting ||
		ch.Priority == nil || *ch.Priority != *nftables.ChainPriorityNATSource {
		return nil, false, nil
	}
	rules, err := c.GetRules(t, ch)
	if err != nil {
		return nil, false, err
	}
	var out []netip.Prefix
	for _, r := range rules {
		comment, _ := userdata.GetString(r.UserData, userdata.TypeComment)
		s, ok := strings.CutPrefix(comment, "masquerade ")
		p, err := netip.ParsePrefix(s)
		if !ok || err != nil {
			return nil, false, nil // not a rule of ours: rewrite the chain
		}
		out = append(out, p)
	}
	return out, true, nil
}

func (k *Netlink) SetMasquerade(table string, subnets []netip.Prefix) error {
	c, err := k.nft()
	if err != nil {
		return err
	}
	t := c.AddTable(&nftables.Table{Name: table, Family: nftables.TableFamilyIPv4})
	// A chain of the same name with other hook settings cannot be
	// changed in place: it goes first.
	if ch, err := chainOf(c, t, natChain); err == nil && ch != nil && (ch.Type != nftables.ChainTypeNAT || ch.Hooknum == nil || *ch.Hooknum != *nftables.ChainHookPostrouting) {
		c.DelChain(ch)
	}
	ch := c.AddChain(&nftables.Chain{
		Name: natChain, Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource,
	})
	c.FlushChain(ch)
	for _, s := range subnets {
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: masqueradeExprs(s),
			UserData: userdata.AppendString(nil, userdata.TypeComment, "masquerade "+s.String())})
	}
	// One batch: the chain is never seen empty.
	return c.Flush()
}

// masqueradeExprs is `ip saddr s ip daddr != s masquerade`.
func masqueradeExprs(s netip.Prefix) []expr.Any {
	mask := net.CIDRMask(s.Bits(), 32)
	network := s.Masked().Addr().AsSlice()
	match := func(offset uint32, op expr.CmpOp) []expr.Any {
		return []expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: binaryutil.NativeEndian.PutUint32(0)},
			&expr.Cmp{Op: op, Register: 1, Data: network},
		}
	}
	out := append(match(12, expr.CmpOpEq), match(16, expr.CmpOpNeq)...)
	return append(out, &expr.Masq{})
}

func (k *Netlink) Forwarding() (bool, error) {
	var on bool
	err := k.inNS(func() error {
		b, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
		on = strings.TrimSpace(string(b)) == "1"
		return err
	})
	return on, err
}

func (k *Netlink) EnableForwarding() error {
	return k.inNS(func() error { return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1\n"), 0o644) })
}

// inNS runs fn on a thread in the Kernel's namespace: /proc/sys/net is
// the namespace of the thread that opens it.
func (k *Netlink) inNS(fn func() error) error {
	if k.ns < 0 {
		return fn()
	}
	errc := make(chan error, 1)
	go func() {
		// The thread returns to its namespace before it is released; if
		// it cannot, it stays locked and the runtime ends it with this
		// goroutine.
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		if err := netns.Set(k.ns); err != nil {
			errc <- err
			return
		}
		err = fn()
		if serr := netns.Set(orig); serr != nil {
			errc <- errors.Join(err, fmt.Errorf("return to the agent's namespace: %w", serr))
			return
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	return <-errc
}

// Underlay finds the host's underlay: the interface dev (default: the
// one holding addr, else the one of the default route) and its address
// (default: its first IPv4 address) and MTU.
func (k *Netlink) Underlay(addr netip.Addr, dev string) (netip.Addr, string, int, error) {
	var nl netlink.Link
	var err error
	switch {
	case dev != "":
		nl, err = k.underlayByName(dev)
	case addr.IsValid():
		nl, err = k.underlayByAddr(addr)
	default:
		nl, err = k.underlayByDefaultRoute()
	}
	if err != nil {
		return netip.Addr{}, "", 0, err
	}
	if !addr.IsValid() {
		if addr, err = k.firstAddr(nl); err != nil {
			return netip.Addr{}, "", 0, err
		}
	}
	return addr, nl.Attrs().Name, nl.Attrs().MTU, nil
}

func (k *Netlink) underlayByName(dev string) (netlink.Link, error) {
	l, ok, err := k.link(dev)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("underlay interface %s: %w", dev, unix.ENODEV)
	}
	return l, nil
}

func (k *Netlink) underlayByAddr(addr netip.Addr) (netlink.Link, error) {
	links, err := k.h.LinkList()
	if err != nil {
		return nil, err
	}
	for _, l := range links {
		as, _ := k.h.AddrList(l, netlink.FAMILY_V4)
		if slices.ContainsFunc(as, func(a netlink.Addr) bool { return addrOf(a.IP) == addr }) {
			return l, nil
		}
	}
	return nil, fmt.Errorf("no interface holds the underlay address %s", addr)
}

func (k *Netlink) underlayByDefaultRoute() (netlink.Link, error) {
	rs, err := retryDump(func() ([]netlink.Route, error) {
		return k.h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	})
	if err != nil {
		return nil, err
	}
	for _, r := range rs {
		if (r.Dst == nil || r.Dst.IP.IsUnspecified() && isZeroMask(r.Dst.Mask)) && r.LinkIndex > 0 {
			if l, err := k.h.LinkByIndex(r.LinkIndex); err == nil {
				return l, nil
			}
		}
	}
	return nil, errors.New("no default route: set network.underlayInterface or network.underlayAddress")
}

// firstAddr is the first IPv4 address of nl that is not link-local.
func (k *Netlink) firstAddr(nl netlink.Link) (netip.Addr, error) {
	as, err := k.h.AddrList(nl, netlink.FAMILY_V4)
	if err != nil {
		return netip.Addr{}, err
	}
	for _, a := range as {
		if ip := addrOf(a.IP); ip.IsValid() && !ip.IsLinkLocalUnicast() {
			return ip, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("underlay interface %s has no IPv4 address", nl.Attrs().Name)
}

func isZeroMask(m net.IPMask) bool {
	ones, _ := m.Size()
	return ones == 0
}

func addrOf(ip net.IP) netip.Addr {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.Addr{}
	}
	return a.Unmap()
}

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a := addrOf(n.IP)
	ones, bits := n.Mask.Size()
	if !a.Is4() || bits != 32 {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, ones), true
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 32)}
}

// isolationChain is the input chain of Isolation for a bridge: one per
// bridge, since agents of one region sharing a host (each with its own
// bridge) share the region's table.
func isolationChain(bridge string) string { return "isolate-" + bridge }

func (k *Netlink) Isolation(table, bridge string) ([]string, bool, error) {
	c, err := k.nft()
	if err != nil {
		return nil, false, err
	}
	t, err := c.ListTableOfFamily(table, nftables.TableFamilyIPv4)
	if errors.Is(err, unix.ENOENT) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	ch, err := chainOf(c, t, isolationChain(bridge))
	if err != nil || ch == nil {
		return nil, false, err
	}
	if !isIsolationChain(ch) {
		return nil, false, nil
	}
	rules, err := c.GetRules(t, ch)
	if err != nil {
		return nil, false, err
	}
	out := make([]string, 0, len(rules))
	for _, r := range rules {
		comment, _ := userdata.GetString(r.UserData, userdata.TypeComment)
		out = append(out, comment)
	}
	return out, true, nil
}

func isIsolationChain(ch *nftables.Chain) bool {
	return ch.Type == nftables.ChainTypeFilter && ch.Hooknum != nil && *ch.Hooknum == *nftables.ChainHookInput &&
		ch.Priority != nil && *ch.Priority == *nftables.ChainPriorityFilter && ch.Policy != nil && *ch.Policy == nftables.ChainPolicyAccept
}

func (k *Netlink) SetIsolation(table string, iso Isolation) error {
	c, err := k.nft()
	if err != nil {
		return err
	}
	t := c.AddTable(&nftables.Table{Name: table, Family: nftables.TableFamilyIPv4})
	name := isolationChain(iso.Bridge)
	if ch, err := chainOf(c, t, name); err == nil && ch != nil && !isIsolationChain(ch) {
		c.DelChain(ch)
	}
	// Policy accept: the chain sees everything addressed to the host and
	// decides only for what comes from the bridge.
	accept := nftables.ChainPolicyAccept
	ch := c.AddChain(&nftables.Chain{
		Name: name, Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter, Policy: &accept,
	})
	c.FlushChain(ch)
	comments := iso.Rules()
	exprs := isolationExprs(iso)
	for i, e := range exprs {
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: e,
			UserData: userdata.AppendString(nil, userdata.TypeComment, comments[i])})
	}
	// One batch: no moment without the drop rule.
	return c.Flush()
}

// isolationExprs are the rules of Isolation.Rules, in its order:
//
//	iifname <bridge> ct state established,related accept
//	iifname <bridge> [ip daddr <addr>] meta l4proto <proto> th dport <lo>-<hi> accept
//	iifname <bridge> fib daddr type local drop
func isolationExprs(iso Isolation) [][]expr.Any {
	iif := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname(iso.Bridge)},
	}
	with := func(es ...expr.Any) []expr.Any { return append(slices.Clone(iif), es...) }
	state := binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED)
	out := [][]expr.Any{with(
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: state, Xor: binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(0)},
		&expr.Verdict{Kind: expr.VerdictAccept},
	)}
	for _, s := range iso.Services {
		proto := byte(unix.IPPROTO_TCP)
		if s.Proto == "udp" {
			proto = unix.IPPROTO_UDP
		}
		for _, r := range s.Ports {
			var e []expr.Any
			if s.Addr.IsValid() && !s.Addr.IsUnspecified() {
				e = append(e,
					&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
					&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: s.Addr.AsSlice()})
			}
			e = append(e,
				&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
				&expr.Range{Op: expr.CmpOpEq, Register: 1,
					FromData: binaryutil.BigEndian.PutUint16(uint16(r.Lo)), ToData: binaryutil.BigEndian.PutUint16(uint16(r.Hi))},
				&expr.Verdict{Kind: expr.VerdictAccept})
			out = append(out, with(e...))
		}
	}
	return append(out, with(
		&expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL)},
		&expr.Verdict{Kind: expr.VerdictDrop},
	))
}

// ifname is an interface name as nftables compares it: NUL-padded to
// IFNAMSIZ.
func ifname(name string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return b
}
