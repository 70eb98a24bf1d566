package ipam

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/stratahq/strata/internal/api"
)

func TestAllocateSkipsGatewayReservedAndTaken(t *testing.T) {
	n := api.Network{Name: "n", Subnet: "10.0.0.0/29", Gateway: "10.0.0.1", Reserved: []string{"10.0.0.3-10.0.0.4"}, Bridge: "b"}
	p, err := NewPool(n, []api.Port{{Network: "n", Address: "10.0.0.2", Assignment: "x"}}, netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, id := range []string{"r0", "r1"} {
		a, err := p.Allocate(id)
		if err != nil {
			t.Fatalf("allocation for %s: %v", id, err)
		}
		got = append(got, a.String())
	}
	// /29: .1 gateway, .2 taken, .3-.4 reserved, .5 .6 free, .7 broadcast.
	if got[0] != "10.0.0.5" || got[1] != "10.0.0.6" {
		t.Fatalf("allocations: got %v; want [10.0.0.5 10.0.0.6]", got)
	}
	if _, err := p.Allocate("r2"); !errors.Is(err, api.ErrExhausted) {
		t.Fatalf("third allocation: got %v; want an exhaustion error", err)
	}
}

func TestRoundRobinDelaysReuse(t *testing.T) {
	n := api.Network{Name: "n", Subnet: "10.0.0.0/24", Gateway: "10.0.0.1", Bridge: "b"}
	p, err := NewPool(n, nil, netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := p.Allocate("a")
	p.Release(a)
	b, _ := p.Allocate("b")
	if a == b {
		t.Fatalf("reuse: got %s again right after release; want the next address", b)
	}
	// A new pool resuming from b's successor continues there.
	q, _ := NewPool(n, []api.Port{{Address: b.String(), Assignment: "b"}}, p.Next())
	c, _ := q.Allocate("c")
	if c != b.Next() {
		t.Fatalf("resumed pool: got %s; want %s", c, b.Next())
	}
}

func TestWrapAround(t *testing.T) {
	n := api.Network{Name: "n", Subnet: "10.0.0.0/30", Gateway: "10.0.0.1", Bridge: "b"}
	p, err := NewPool(n, nil, netip.MustParseAddr("10.0.0.2"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := p.Allocate("a")
	if err != nil || a.String() != "10.0.0.2" {
		t.Fatalf("got %v, %v; want 10.0.0.2", a, err)
	}
	p.Release(a)
	b, err := p.Allocate("b")
	if err != nil || b.String() != "10.0.0.2" {
		t.Fatalf("after wrap: got %v, %v; want 10.0.0.2 again (the only host)", b, err)
	}
}

func TestAttachment(t *testing.T) {
	n := api.Network{Name: "default", Subnet: "10.88.0.0/16", Gateway: "10.88.0.1", Bridge: "strata0"}
	p, _ := NewPool(n, nil, netip.Addr{})
	a, _ := p.Allocate("x")
	got := p.Attachment(a)
	want := api.NetworkAttachment{Network: "default", Bridge: "strata0", Subnet: "10.88.0.0/16", Gateway: "10.88.0.1", Address: "10.88.0.2"}
	if *got != want {
		t.Fatalf("attachment: got %+v; want %+v", *got, want)
	}
}
