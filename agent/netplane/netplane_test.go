package netplane

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/stratahq/strata/internal/api"
)

var (
	subnet = netip.MustParsePrefix("10.88.0.0/16")
	macA   = net.HardwareAddr{0x02, 0xaa, 0, 0, 0, 1}
	macB   = net.HardwareAddr{0x02, 0xbb, 0, 0, 0, 2}
	macC   = net.HardwareAddr{0x02, 0xcc, 0, 0, 0, 3}
)

func peer(node, block, underlay string, mac net.HardwareAddr) Peer {
	p := Peer{Node: node, VTEPMAC: mac}
	if block != "" {
		p.Block = netip.MustParsePrefix(block)
	}
	if underlay != "" {
		p.Underlay = netip.MustParseAddr(underlay)
	}
	return p
}

// host a of the tests: block 10.88.1.0/24 on underlay 192.0.2.1 (eth0,
// MTU 1500).
func newTestPlane(t *testing.T) (*Plane, *fakeKernel) {
	t.Helper()
	k := newFakeKernel()
	k.links["eth0"] = Link{Name: "eth0", Kind: "veth", MTU: 1500, Up: true}
	k.addrs["eth0"] = []netip.Prefix{netip.MustParsePrefix("192.0.2.1/24")}
	p := New(k, Host{Node: "a", Bridge: "strata0", Underlay: netip.MustParseAddr("192.0.2.1"), UnderlayDev: "eth0", UnderlayMTU: 1500, VTEPMAC: macA}, nil)
	return p, k
}

var (
	vxlanNet  = Network{Subnet: subnet, Backend: api.BackendVXLAN, VNI: 7}
	hostGWNet = Network{Subnet: subnet, Backend: api.BackendHostGW}
	noneNet   = Network{Subnet: subnet, Backend: api.BackendNone}
	threePeer = []Peer{
		peer("a", "10.88.1.0/24", "192.0.2.1", macA),
		peer("b", "10.88.2.0/24", "192.0.2.2", macB),
		peer("c", "10.88.3.0/24", "192.0.2.3", macC),
	}
)

// base is what every backend gives host a: its bridge with its gateway,
// its underlay, masquerading of the cluster, its replicas kept from the
// host, forwarding.
func base(mtu string) []string {
	return []string{
		"addr eth0 192.0.2.1/24",
		"addr strata0 10.88.1.1/24",
		"forwarding on",
		"isolation strata strata0: accept established,related from strata0",
		"isolation strata strata0: drop local from strata0",
		"link eth0 veth mtu 1500 up true",
		"link strata0 bridge mtu " + mtu + " up true alias strata-netplane",
		"masquerade strata 10.88.0.0/16",
	}
}

func with(lines []string, more ...string) []string {
	out := append(slices.Clone(lines), more...)
	slices.Sort(out)
	return out
}

func TestApplyFromScratch(t *testing.T) {
	cases := []struct {
		name string
		nw   Network
		want []string
	}{
		{"vxlan", vxlanNet, with(base("1450"),
			"link strata.vxlan vxlan mtu 1450 up true vni 7 port 4789 local 192.0.2.1 dev eth0 mac 02:aa:00:00:00:01",
			"neigh strata.vxlan 10.88.2.0 lladdr 02:bb:00:00:00:02",
			"neigh strata.vxlan 10.88.3.0 lladdr 02:cc:00:00:00:03",
			"fdb strata.vxlan 02:bb:00:00:00:02 dst 192.0.2.2",
			"fdb strata.vxlan 02:cc:00:00:00:03 dst 192.0.2.3",
			"route 10.88.2.0/24 via 10.88.2.0 dev strata.vxlan onlink src 10.88.1.1",
			"route 10.88.3.0/24 via 10.88.3.0 dev strata.vxlan onlink src 10.88.1.1",
			"route 10.88.0.0/16 dev strata0 src 10.88.1.1 metric 1000",
		)},
		{"host-gw", hostGWNet, with(base("1500"),
			"route 10.88.2.0/24 via 192.0.2.2 dev eth0 src 10.88.1.1",
			"route 10.88.3.0/24 via 192.0.2.3 dev eth0 src 10.88.1.1",
			"route 10.88.0.0/16 dev strata0 src 10.88.1.1 metric 1000",
		)},
		{"none", noneNet, base("1500")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, k := newTestPlane(t)
			ch, err := p.Apply(context.Background(), c.nw, threePeer)
			if err != nil {
				t.Fatal(err)
			}
			if got := k.dump(); !slices.Equal(got, c.want) {
				t.Fatalf("host after Apply:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
			if ch.Total() == 0 || ch.Deleted != 0 {
				t.Errorf("changes: got %+v; want some, none deleted", ch)
			}
			// Converged: applying the same again changes nothing at all.
			k.takeChanges()
			ch, err = p.Apply(context.Background(), c.nw, threePeer)
			if err != nil {
				t.Fatal(err)
			}
			if got := k.takeChanges(); len(got) != 0 || ch.Total() != 0 {
				t.Fatalf("second Apply: got changes %v (%+v); want none", got, ch)
			}
		})
	}
}

// TestApplyChanges starts from a converged vxlan host and checks that each
// change of the node list touches exactly what it must.
func TestApplyChanges(t *testing.T) {
	cases := []struct {
		name  string
		peers []Peer
		nw    Network
		want  []string // the kernel calls, sorted
	}{
		{"a node is deleted", threePeer[:2], vxlanNet, []string{
			"del fdb 02:cc:00:00:00:03", "del neigh 10.88.3.0", "del route 10.88.3.0/24"}},
		{"a node joins", append(slices.Clone(threePeer), peer("d", "10.88.4.0/24", "192.0.2.4", net.HardwareAddr{2, 0xdd, 0, 0, 0, 4})), vxlanNet, []string{
			"replace route 10.88.4.0/24", "set fdb 02:dd:00:00:00:04 192.0.2.4", "set neigh 10.88.4.0"}},
		{"a node's underlay address changes", []Peer{threePeer[0], threePeer[1], peer("c", "10.88.3.0/24", "192.0.2.33", macC)}, vxlanNet, []string{
			"set fdb 02:cc:00:00:00:03 192.0.2.33"}},
		{"a node's VTEP MAC changes", []Peer{threePeer[0], threePeer[1], peer("c", "10.88.3.0/24", "192.0.2.3", net.HardwareAddr{2, 0xcc, 0, 0, 0, 0x33})}, vxlanNet, []string{
			"del fdb 02:cc:00:00:00:03", "set fdb 02:cc:00:00:00:33 192.0.2.3", "set neigh 10.88.3.0"}},
		{"a node not routable yet is left out", append(slices.Clone(threePeer), peer("d", "", "192.0.2.4", nil), peer("e", "10.88.5.0/24", "", nil)), vxlanNet, nil},
		{"the backend becomes host-gw", threePeer, hostGWNet, []string{
			// The VXLAN device goes, with its entries and routes.
			"del link strata.vxlan", "replace route 10.88.2.0/24", "replace route 10.88.3.0/24", "set link strata0"}},
		{"the backend becomes none", threePeer, noneNet, []string{
			"del link strata.vxlan", "del route 10.88.0.0/16", "set link strata0"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, k := newTestPlane(t)
			if _, err := p.Apply(context.Background(), vxlanNet, threePeer); err != nil {
				t.Fatal(err)
			}
			k.takeChanges()
			if _, err := p.Apply(context.Background(), c.nw, c.peers); err != nil {
				t.Fatal(err)
			}
			if got := k.takeChanges(); !slices.Equal(got, c.want) {
				t.Fatalf("kernel calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
			if _, err := p.Apply(context.Background(), c.nw, c.peers); err != nil {
				t.Fatal(err)
			}
			if got := k.takeChanges(); len(got) != 0 {
				t.Fatalf("applying again: got %v; want no change", got)
			}
		})
	}
}

// TestApplyAfterRestart is an agent starting on a host it programmed
// before, for a list that changed meanwhile: what is right stays (no
// call), what is Strata's and stale goes, what is not Strata's stays.
func TestApplyAfterRestart(t *testing.T) {
	p, k := newTestPlane(t)
	if _, err := p.Apply(context.Background(), vxlanNet, threePeer); err != nil {
		t.Fatal(err)
	}
	// A new agent process: a new Plane over the same kernel. Node c left
	// while it was down; someone else's address sits on the bridge.
	k.addrs["strata0"] = append(k.addrs["strata0"], netip.MustParsePrefix("192.168.50.1/24"))
	k.takeChanges()
	p2 := New(k, p.Host(), nil)
	if _, err := p2.Apply(context.Background(), vxlanNet, threePeer[:2]); err != nil {
		t.Fatal(err)
	}
	want := []string{"del fdb 02:cc:00:00:00:03", "del neigh 10.88.3.0", "del route 10.88.3.0/24"}
	if got := k.takeChanges(); !slices.Equal(got, want) {
		t.Fatalf("kernel calls: got %v; want %v", got, want)
	}
	if !slices.Contains(k.addrs["strata0"], netip.MustParsePrefix("192.168.50.1/24")) {
		t.Fatal("an address outside the cluster subnet was removed from the bridge; want it left alone")
	}
}

// TestApplyUpgradesTheSingleHostBridge: before node blocks the bridge held
// the whole subnet's gateway (10.88.0.1/16); it gets the block's gateway
// first, then loses the old address, and keeps its ports.
func TestApplyUpgradesTheSingleHostBridge(t *testing.T) {
	p, k := newTestPlane(t)
	k.links["strata0"] = Link{Name: "strata0", Kind: KindBridge, MTU: 1500, Up: true}
	k.addrs["strata0"] = []netip.Prefix{netip.MustParsePrefix("10.88.0.1/16")}
	self := peer("a", "10.88.0.0/24", "192.0.2.1", macA)
	if _, err := p.Apply(context.Background(), noneNet, []Peer{self}); err != nil {
		t.Fatal(err)
	}
	want := []string{"add addr strata0 10.88.0.1/24", "del addr strata0 10.88.0.1/16", "enable forwarding", "set isolation strata strata0", "set link strata0", "set masquerade strata"}
	got := k.takeChanges()
	if !slices.Equal(got, want) {
		t.Fatalf("kernel calls: got %v; want %v", got, want)
	}
	if !slices.Equal(k.addrs["strata0"], []netip.Prefix{netip.MustParsePrefix("10.88.0.1/24")}) {
		t.Fatalf("bridge addresses: got %v; want [10.88.0.1/24]", k.addrs["strata0"])
	}
}

func TestApplyRefusals(t *testing.T) {
	t.Run("no block yet", func(t *testing.T) {
		p, k := newTestPlane(t)
		_, err := p.Apply(context.Background(), vxlanNet, []Peer{peer("a", "", "192.0.2.1", macA), threePeer[1]})
		if !errors.Is(err, ErrNoBlock) {
			t.Fatalf("got %v; want ErrNoBlock", err)
		}
		if got := k.takeChanges(); len(got) != 0 {
			t.Fatalf("kernel calls: got %v; want none", got)
		}
	})
	t.Run("the bridge's name is another kind of link", func(t *testing.T) {
		p, k := newTestPlane(t)
		k.links["strata0"] = Link{Name: "strata0", Kind: "dummy"}
		_, err := p.Apply(context.Background(), vxlanNet, threePeer)
		if err == nil || !strings.Contains(err.Error(), "is a dummy, not a bridge") {
			t.Fatalf("got %v; want a refusal naming the link's kind", err)
		}
		if _, ok := k.links["strata0"]; !ok {
			t.Fatal("the other link was deleted; want it left alone")
		}
	})
	t.Run("a failed route does not stop the others", func(t *testing.T) {
		p, k := newTestPlane(t)
		k.failRoute = netip.MustParsePrefix("10.88.2.0/24")
		_, err := p.Apply(context.Background(), vxlanNet, threePeer)
		if err == nil || !strings.Contains(err.Error(), "10.88.2.0/24") {
			t.Fatalf("got %v; want the failed route named", err)
		}
		if _, ok := k.routes[routeKey{netip.MustParsePrefix("10.88.3.0/24"), 0}]; !ok {
			t.Fatal("the route to c is missing; want it added despite b's failure")
		}
		k.failRoute = netip.Prefix{}
		if _, err := p.Apply(context.Background(), vxlanNet, threePeer); err != nil {
			t.Fatalf("once the failure is gone: %v", err)
		}
	})
}

// TestApplyRecreatesAMisconfiguredVXLANDevice: the kernel cannot change a
// VXLAN device's VNI in place.
func TestApplyRecreatesAMisconfiguredVXLANDevice(t *testing.T) {
	p, k := newTestPlane(t)
	if _, err := p.Apply(context.Background(), vxlanNet, threePeer); err != nil {
		t.Fatal(err)
	}
	k.takeChanges()
	nw := vxlanNet
	nw.VNI = 8
	if _, err := p.Apply(context.Background(), nw, threePeer); err != nil {
		t.Fatal(err)
	}
	got := k.takeChanges()
	for _, want := range []string{"del link strata.vxlan", "add link strata.vxlan", "set fdb 02:bb:00:00:00:02 192.0.2.2", "replace route 10.88.3.0/24"} {
		if !slices.Contains(got, want) {
			t.Errorf("kernel calls %v lack %q", got, want)
		}
	}
	if l := k.links["strata.vxlan"]; l.VNI != 8 {
		t.Errorf("VNI: got %d; want 8", l.VNI)
	}
}

func TestVTEPMAC(t *testing.T) {
	a, b := VTEPMAC("node-a"), VTEPMAC("node-b")
	if slices.Equal(a, b) {
		t.Fatalf("two nodes, one MAC %s", a)
	}
	if !slices.Equal(a, VTEPMAC("node-a")) {
		t.Fatal("VTEPMAC is not stable")
	}
	if a[0]&1 != 0 || a[0]&2 == 0 {
		t.Fatalf("MAC %s: want unicast and locally administered", a)
	}
}
