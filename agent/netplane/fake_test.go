package netplane

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
)

// fakeKernel keeps a host's state in maps and logs every change, so that
// tests can say what Apply must change and what it must leave alone. Like
// the kernel, deleting a link deletes its addresses, routes and entries,
// and a route needs its device and, for its source, a local address.
type fakeKernel struct {
	mu        sync.Mutex
	links     map[string]Link
	addrs     map[string][]netip.Prefix
	routes    map[routeKey]Route
	neighbors map[string]map[netip.Addr]net.HardwareAddr
	fdb       map[string]map[string]netip.Addr
	masq      map[string][]netip.Prefix
	// isolation maps "table bridge" to the chain's rules.
	isolation  map[string][]string
	forwarding bool
	// changes logs every mutating call, "verb object".
	changes []string
	// failRoute makes ReplaceRoute fail for this destination.
	failRoute netip.Prefix
}

func newFakeKernel() *fakeKernel {
	return &fakeKernel{
		links: map[string]Link{}, addrs: map[string][]netip.Prefix{}, routes: map[routeKey]Route{},
		neighbors: map[string]map[netip.Addr]net.HardwareAddr{}, fdb: map[string]map[string]netip.Addr{},
		masq: map[string][]netip.Prefix{}, isolation: map[string][]string{},
	}
}

var _ Kernel = (*fakeKernel)(nil)

func (f *fakeKernel) log(format string, args ...any) {
	f.changes = append(f.changes, fmt.Sprintf(format, args...))
}

// takeChanges returns the changes logged since the last call, sorted.
func (f *fakeKernel) takeChanges() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.changes
	f.changes = nil
	sort.Strings(out)
	return out
}

func (f *fakeKernel) Link(name string) (Link, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.links[name]
	return l, ok, nil
}

func (f *fakeKernel) AddLink(l Link) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.links[l.Name]; ok {
		return fmt.Errorf("link %s exists", l.Name)
	}
	if l.Kind == KindVXLAN {
		if _, ok := f.links[l.Parent]; !ok {
			return fmt.Errorf("no underlay interface %s", l.Parent)
		}
	}
	if len(l.MAC) == 0 {
		l.MAC = net.HardwareAddr{0x02, 0, 0, 0, 0, byte(len(f.links))}
	}
	f.links[l.Name] = l
	f.log("add link %s", l.Name)
	return nil
}

func (f *fakeKernel) SetLink(l Link) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur, ok := f.links[l.Name]
	if !ok {
		return fmt.Errorf("no link %s", l.Name)
	}
	cur.MTU, cur.Up, cur.Alias, cur.MAC = l.MTU, l.Up, l.Alias, l.MAC
	f.links[l.Name] = cur
	f.log("set link %s", l.Name)
	return nil
}

func (f *fakeKernel) DelLink(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.links, name)
	delete(f.addrs, name)
	delete(f.neighbors, name)
	delete(f.fdb, name)
	for k, r := range f.routes {
		if r.Dev == name {
			delete(f.routes, k)
		}
	}
	f.log("del link %s", name)
	return nil
}

func (f *fakeKernel) Addrs(link string) ([]netip.Prefix, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.addrs[link]), nil
}

func (f *fakeKernel) AddAddr(link string, p netip.Prefix) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.links[link]; !ok {
		return fmt.Errorf("no link %s", link)
	}
	f.addrs[link] = append(f.addrs[link], p)
	f.log("add addr %s %s", link, p)
	return nil
}

func (f *fakeKernel) DelAddr(link string, p netip.Prefix) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.addrs[link] = slices.DeleteFunc(f.addrs[link], func(a netip.Prefix) bool { return a == p })
	f.log("del addr %s %s", link, p)
	return nil
}

func (f *fakeKernel) Routes() ([]Route, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Route, 0, len(f.routes))
	for _, r := range f.routes {
		out = append(out, r)
	}
	return out, nil
}

func (f *fakeKernel) local(a netip.Addr) bool {
	for _, ps := range f.addrs {
		if slices.ContainsFunc(ps, func(p netip.Prefix) bool { return p.Addr() == a }) {
			return true
		}
	}
	return false
}

func (f *fakeKernel) ReplaceRoute(r Route) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Dst == f.failRoute {
		return fmt.Errorf("injected failure for %s", r.Dst)
	}
	if _, ok := f.links[r.Dev]; !ok {
		return fmt.Errorf("route to %s: no device %s", r.Dst, r.Dev)
	}
	if r.Src.IsValid() && !f.local(r.Src) {
		return fmt.Errorf("route to %s: source %s is not a local address", r.Dst, r.Src)
	}
	f.routes[routeKey{r.Dst, r.Metric}] = r
	f.log("replace route %s", r.Dst)
	return nil
}

func (f *fakeKernel) DelRoute(r Route) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.routes, routeKey{r.Dst, r.Metric})
	f.log("del route %s", r.Dst)
	return nil
}

func (f *fakeKernel) Neighbors(link string) ([]Neighbor, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Neighbor
	for ip, mac := range f.neighbors[link] {
		out = append(out, Neighbor{IP: ip, MAC: mac})
	}
	return out, nil
}

func (f *fakeKernel) SetNeighbor(link string, n Neighbor) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.links[link]; !ok {
		return fmt.Errorf("no link %s", link)
	}
	if f.neighbors[link] == nil {
		f.neighbors[link] = map[netip.Addr]net.HardwareAddr{}
	}
	f.neighbors[link][n.IP] = n.MAC
	f.log("set neigh %s", n.IP)
	return nil
}

func (f *fakeKernel) DelNeighbor(link string, n Neighbor) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.neighbors[link], n.IP)
	f.log("del neigh %s", n.IP)
	return nil
}

func (f *fakeKernel) FDB(link string) ([]FDBEntry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []FDBEntry
	for mac, dst := range f.fdb[link] {
		hw, _ := net.ParseMAC(mac)
		out = append(out, FDBEntry{MAC: hw, Dst: dst})
	}
	return out, nil
}

func (f *fakeKernel) SetFDB(link string, e FDBEntry) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.links[link]; !ok {
		return fmt.Errorf("no link %s", link)
	}
	if f.fdb[link] == nil {
		f.fdb[link] = map[string]netip.Addr{}
	}
	f.fdb[link][e.MAC.String()] = e.Dst
	f.log("set fdb %s %s", e.MAC, e.Dst)
	return nil
}

func (f *fakeKernel) DelFDB(link string, e FDBEntry) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.fdb[link], e.MAC.String())
	f.log("del fdb %s", e.MAC)
	return nil
}

func (f *fakeKernel) Masquerade(table string) ([]netip.Prefix, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.masq[table]
	return slices.Clone(m), ok, nil
}

func (f *fakeKernel) SetMasquerade(table string, subnets []netip.Prefix) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.masq[table] = slices.Clone(subnets)
	f.log("set masquerade %s", table)
	return nil
}

func (f *fakeKernel) Isolation(table, bridge string) ([]string, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.isolation[table+" "+bridge]
	return slices.Clone(r), ok, nil
}

func (f *fakeKernel) SetIsolation(table string, iso Isolation) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.isolation[table+" "+iso.Bridge] = iso.Rules()
	f.log("set isolation %s %s", table, iso.Bridge)
	return nil
}

func (f *fakeKernel) Forwarding() (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.forwarding, nil
}

func (f *fakeKernel) EnableForwarding() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forwarding = true
	f.log("enable forwarding")
	return nil
}

func (f *fakeKernel) Underlay(addr netip.Addr, dev string) (netip.Addr, string, int, error) {
	return netip.MustParseAddr("192.0.2.1"), "eth0", 1500, nil
}

// dump renders the host's state, one sorted line per entry, for
// comparisons.
func (f *fakeKernel) dump() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, l := range f.links {
		s := fmt.Sprintf("link %s %s mtu %d up %v", l.Name, l.Kind, l.MTU, l.Up)
		if l.Alias != "" {
			s += " alias " + l.Alias
		}
		if l.Kind == KindVXLAN {
			s += fmt.Sprintf(" vni %d port %d local %s dev %s mac %s", l.VNI, l.Port, l.Local, l.Parent, l.MAC)
		}
		out = append(out, s)
	}
	for link, ps := range f.addrs {
		for _, p := range ps {
			out = append(out, fmt.Sprintf("addr %s %s", link, p))
		}
	}
	for _, r := range f.routes {
		s := fmt.Sprintf("route %s", r.Dst)
		if r.Gw.IsValid() {
			s += " via " + r.Gw.String()
		}
		s += " dev " + r.Dev
		if r.OnLink {
			s += " onlink"
		}
		if r.Src.IsValid() {
			s += " src " + r.Src.String()
		}
		if r.Metric != 0 {
			s += fmt.Sprintf(" metric %d", r.Metric)
		}
		out = append(out, s)
	}
	for link, m := range f.neighbors {
		for ip, mac := range m {
			out = append(out, fmt.Sprintf("neigh %s %s lladdr %s", link, ip, mac))
		}
	}
	for link, m := range f.fdb {
		for mac, dst := range m {
			out = append(out, fmt.Sprintf("fdb %s %s dst %s", link, mac, dst))
		}
	}
	for table, ps := range f.masq {
		var ss []string
		for _, p := range ps {
			ss = append(ss, p.String())
		}
		out = append(out, fmt.Sprintf("masquerade %s %s", table, strings.Join(ss, ",")))
	}
	for chain, rules := range f.isolation {
		for _, r := range rules {
			out = append(out, fmt.Sprintf("isolation %s: %s", chain, r))
		}
	}
	if f.forwarding {
		out = append(out, "forwarding on")
	}
	sort.Strings(out)
	return out
}
