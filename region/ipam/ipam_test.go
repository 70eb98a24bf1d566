package ipam

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"github.com/stratahq/strata/internal/api"
)

func mustPool(t *testing.T, n api.Network, block string, ports []api.Port, start netip.Addr) *Pool {
	t.Helper()
	ptrs := make([]*api.Port, len(ports))
	for i := range ports {
		ptrs[i] = &ports[i]
	}
	p, err := NewPool(n, netip.MustParsePrefix(block), ptrs, start)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAllocateSkipsGatewayReservedAndTaken(t *testing.T) {
	n := api.Network{Name: "n", Subnet: "10.0.0.0/28", Gateway: "10.0.0.1", Reserved: []string{"10.0.0.11-10.0.0.12"}, Bridge: "b", NodeMask: 29}
	// Block 10.0.0.8/29: .8 network, .9 the block's gateway, .10 taken,
	// .11-.12 reserved, .13 .14 free, .15 broadcast.
	p := mustPool(t, n, "10.0.0.8/29", []api.Port{{Network: "n", Address: "10.0.0.10", Assignment: "x"}, {Address: "10.0.0.3", Assignment: "elsewhere"}}, netip.Addr{})
	var got []string
	for _, id := range []string{"r0", "r1"} {
		a, err := p.Allocate(id)
		if err != nil {
			t.Fatalf("allocation for %s: %v", id, err)
		}
		got = append(got, a.String())
	}
	if got[0] != "10.0.0.13" || got[1] != "10.0.0.14" {
		t.Fatalf("allocations: got %v; want [10.0.0.13 10.0.0.14]", got)
	}
	if _, err := p.Allocate("r2"); !errors.Is(err, api.ErrExhausted) {
		t.Fatalf("third allocation: got %v; want an exhaustion error", err)
	}
}

func TestNetworkGatewayStaysReservedInItsBlock(t *testing.T) {
	// The whole-subnet plan's gateway, 10.0.0.1, is the first block's
	// gateway too; a gateway elsewhere stays out of its block's pool.
	n := api.Network{Name: "n", Subnet: "10.0.0.0/24", Gateway: "10.0.0.130", Bridge: "b", NodeMask: 25}
	p := mustPool(t, n, "10.0.0.128/25", nil, netip.Addr{})
	for range 124 {
		a, err := p.Allocate("x")
		if err != nil {
			t.Fatal(err)
		}
		if a.String() == "10.0.0.130" || a.String() == "10.0.0.129" || a.String() == "10.0.0.255" {
			t.Fatalf("handed out %s; want the network's gateway, the block's gateway and broadcast kept", a)
		}
	}
	if _, err := p.Allocate("y"); !IsExhausted(err) {
		t.Fatalf("after 124 allocations (a /25 less 4): got %v; want exhausted", err)
	}
	if c, _ := Capacity(n, netip.MustParsePrefix("10.0.0.128/25")); c != 124 {
		t.Fatalf("capacity: got %d; want 125", c)
	}
}

func TestRoundRobinDelaysReuse(t *testing.T) {
	n := api.Network{Name: "n", Subnet: "10.0.0.0/16", Gateway: "10.0.0.1", Bridge: "b", NodeMask: 24}
	p := mustPool(t, n, "10.0.3.0/24", nil, netip.Addr{})
	a, _ := p.Allocate("a")
	if a.String() != "10.0.3.2" {
		t.Fatalf("first address of block 10.0.3.0/24: got %s; want 10.0.3.2 (.1 is the gateway)", a)
	}
	p.Release(a)
	b, _ := p.Allocate("b")
	if a == b {
		t.Fatalf("reuse: got %s again right after release; want the next address", b)
	}
	// A new pool resuming from b's successor continues there.
	q := mustPool(t, n, "10.0.3.0/24", []api.Port{{Address: b.String(), Assignment: "b"}}, p.Next())
	c, _ := q.Allocate("c")
	if c != b.Next() {
		t.Fatalf("resumed pool: got %s; want %s", c, b.Next())
	}
}

func TestWrapAround(t *testing.T) {
	n := api.Network{Name: "n", Subnet: "10.0.0.0/29", Gateway: "10.0.0.1", Bridge: "b", NodeMask: 30}
	p := mustPool(t, n, "10.0.0.4/30", nil, netip.MustParseAddr("10.0.0.6"))
	a, err := p.Allocate("a")
	if err != nil || a.String() != "10.0.0.6" {
		t.Fatalf("got %v, %v; want 10.0.0.6", a, err)
	}
	p.Release(a)
	b, err := p.Allocate("b")
	if err != nil || b.String() != "10.0.0.6" {
		t.Fatalf("after wrap: got %v, %v; want 10.0.0.6 again (the only host)", b, err)
	}
}

func TestAttachment(t *testing.T) {
	n := api.Network{Name: "default", Subnet: "10.88.0.0/16", Gateway: "10.88.0.1", Bridge: "strata0", NodeMask: 24}
	p := mustPool(t, n, "10.88.7.0/24", nil, netip.Addr{})
	a, _ := p.Allocate("x")
	got := p.Attachment(a)
	want := api.NetworkAttachment{Network: "default", Bridge: "strata0", Subnet: "10.88.7.0/24", Gateway: "10.88.7.1", Address: "10.88.7.2"}
	if *got != want {
		t.Fatalf("attachment: got %+v; want %+v", *got, want)
	}
	// Every address of the block names the same block and gateway.
	b, _ := p.Allocate("y")
	got = p.Attachment(b)
	want.Address = "10.88.7.3"
	if *got != want {
		t.Fatalf("second attachment: got %+v; want %+v", *got, want)
	}
}

func TestNewPoolRefusesABlockOutsideTheNetwork(t *testing.T) {
	n := api.Network{Name: "n", Subnet: "10.0.0.0/24", Gateway: "10.0.0.1", Bridge: "b", NodeMask: 26}
	for _, b := range []string{"10.0.1.0/26", "10.0.0.0/23"} {
		if _, err := NewPool(n, netip.MustParsePrefix(b), nil, netip.Addr{}); err == nil {
			t.Errorf("block %s of %s: got a pool; want an error", b, n.Subnet)
		}
	}
}

func TestPickBlock(t *testing.T) {
	n := api.Network{Name: "n", Subnet: "10.0.0.0/22", Gateway: "10.0.0.1", Bridge: "b", NodeMask: 24}
	pfx := netip.MustParsePrefix
	use := func(addr, node string) AddressUse { return AddressUse{Addr: netip.MustParseAddr(addr), Node: node} }
	taken := func(bs ...string) map[netip.Prefix]bool {
		m := map[netip.Prefix]bool{}
		for _, b := range bs {
			m[pfx(b)] = true
		}
		return m
	}
	cases := []struct {
		name  string
		taken map[netip.Prefix]bool
		used  []AddressUse
		want  string // "" when exhausted
	}{
		{"the block of the node's own addresses", nil,
			[]AddressUse{use("10.0.2.7", "a"), use("10.0.2.9", "a"), use("10.0.1.3", "a")}, "10.0.2.0/24"},
		{"not one that another node's replica holds an address of", nil,
			[]AddressUse{use("10.0.2.7", "a"), use("10.0.2.9", "a"), use("10.0.2.10", "b"), use("10.0.1.3", "a")}, "10.0.1.0/24"},
		{"not a taken one", taken("10.0.2.0/24"),
			[]AddressUse{use("10.0.2.7", "a"), use("10.0.1.3", "a")}, "10.0.1.0/24"},
		{"the last free one, though another node's replica holds an address of it", taken("10.0.0.0/24", "10.0.1.0/24", "10.0.3.0/24"),
			[]AddressUse{use("10.0.2.7", "b")}, "10.0.2.0/24"},
		{"none left", taken("10.0.0.0/24", "10.0.1.0/24", "10.0.2.0/24", "10.0.3.0/24"), nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := PickBlock(n, "a", func(b netip.Prefix) bool { return c.taken[b] }, c.used)
			if c.want == "" {
				if !IsExhausted(err) {
					t.Fatalf("got %v, %v; want exhausted", got, err)
				}
				return
			}
			if err != nil || got.String() != c.want {
				t.Fatalf("got %v, %v; want %s", got, err, c.want)
			}
		})
	}
}

// TestPickBlockSpreadsNodes checks that nodes registering with nothing
// taken mostly start from different blocks (fewer races between API
// replicas), and that picking blocks one after another for every node
// hands out each block exactly once.
func TestPickBlockSpreadsNodes(t *testing.T) {
	n := api.Network{Name: "n", Subnet: "10.0.0.0/16", Gateway: "10.0.0.1", Bridge: "b", NodeMask: 24}
	first := map[netip.Prefix]int{}
	for i := range 64 {
		b, err := PickBlock(n, fmt.Sprintf("node-%d", i), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		first[b]++
	}
	if len(first) < 40 {
		t.Errorf("64 nodes on an empty network start from %d distinct blocks; want most of them apart", len(first))
	}
	taken := map[netip.Prefix]bool{}
	isTaken := func(b netip.Prefix) bool { return taken[b] }
	for i := range 256 {
		b, err := PickBlock(n, fmt.Sprintf("node-%d", i), isTaken, nil)
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		if taken[b] {
			t.Fatalf("node %d got %s, already taken", i, b)
		}
		taken[b] = true
	}
	if _, err := PickBlock(n, "one-too-many", isTaken, nil); !IsExhausted(err) {
		t.Fatalf("257th node: got %v; want exhausted", err)
	}
}
