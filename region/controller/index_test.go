package controller

import (
	"slices"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// The index follows an assignment through placement, a move, an exit and
// its deletion: what it is found under and what its node counts stay
// those of its latest record, and nothing is left once it is gone.
func TestIndexFollowsAnAssignment(t *testing.T) {
	x := newIndex()
	a := &api.Assignment{ID: "r1", Tenant: "t", Resource: "web", Desired: api.DesiredRunning,
		Flavor: api.FlavorSpec{VCPUs: 1, MemoryMiB: 512}, Network: &api.NetworkAttachment{Address: "10.0.0.5"}}
	x.put(a)
	if key, ok := x.resourceOf("r1"); !ok || key != "t/web" {
		t.Fatalf("unplaced: resourceOf = %q, %v; want t/web", key, ok)
	}
	if got := x.ofResource("t/web"); !slices.Equal(got, []string{"r1"}) {
		t.Fatalf("unplaced: ofResource = %v", got)
	}
	if got, _ := x.nodeUsage("n1"); got != (api.Capacity{}) {
		t.Fatalf("unplaced: n1 counts %+v", got)
	}

	placed := *a
	placed.Node = "n1"
	x.put(&placed)
	x.put(&placed) // the same record again counts once
	want := api.Capacity{MilliCPU: 1000, MemoryMiB: 512}
	if got, running := x.nodeUsage("n1"); got != want || running["t/web"] != 1 || x.addresses("n1") != 1 {
		t.Fatalf("placed: n1 counts %+v, running %v, %d addresses; want %+v, 1, 1", got, running, x.addresses("n1"), want)
	}
	if got := x.onNode("n1"); !slices.Equal(got, []string{"r1"}) {
		t.Fatalf("placed: onNode(n1) = %v", got)
	}

	moved := placed
	moved.Node = "n2"
	x.put(&moved)
	if got := x.onNode("n1"); len(got) != 0 {
		t.Fatalf("moved: onNode(n1) = %v; want none", got)
	}
	if got, running := x.nodeUsage("n1"); got != (api.Capacity{}) || len(running) != 0 || x.addresses("n1") != 0 {
		t.Fatalf("moved: n1 still counts %+v, running %v, %d addresses", got, running, x.addresses("n1"))
	}
	if got, _ := x.nodeUsage("n2"); got != want {
		t.Fatalf("moved: n2 counts %+v; want %+v", got, want)
	}

	exited := moved
	exited.ExitedAt = time.Now()
	x.put(&exited)
	if got, running := x.nodeUsage("n2"); got != (api.Capacity{}) || len(running) != 0 || x.addresses("n2") != 1 {
		t.Fatalf("exited: n2 counts %+v, running %v, %d addresses; want only the address", got, running, x.addresses("n2"))
	}

	x.remove(&exited)
	x.remove(&exited) // removing what is gone changes nothing
	if _, ok := x.resourceOf("r1"); ok {
		t.Fatal("removed: resourceOf still finds r1")
	}
	if len(x.resources()) != 0 || len(x.onNode("n2")) != 0 || len(x.ids) != 0 {
		t.Fatalf("removed: left resources %v, on n2 %v, %d entries", x.resources(), x.onNode("n2"), len(x.ids))
	}
	if got, _ := x.nodeUsage("n2"); got != (api.Capacity{}) || x.addresses("n2") != 0 {
		t.Fatalf("removed: n2 counts %+v, %d addresses", got, x.addresses("n2"))
	}
}
