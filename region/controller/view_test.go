package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// A pass decides against the networks and node blocks it saw first: one
// removed or changed while it runs changes the next pass, not this one.
func TestViewKeepsNetworksAndBlocksForThePass(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1", "z1", api.HealthUp)
	h.addNetwork("10.77.0.0/24", 26)
	v := h.ctrl.newView(time.Now())
	nw, err := v.network("")
	if err != nil || nw == nil || nw.Name != "default" {
		t.Fatalf("default network: %v, %v; want default", nw, err)
	}
	if _, err := v.network("other"); err == nil {
		t.Fatal("a network that does not exist: no error")
	}
	block := v.nodeBlock("n1")
	if !block.IsValid() {
		t.Fatal("n1 has no block in the view")
	}
	if got := v.nodeBlock("nope"); got.IsValid() {
		t.Fatalf("unknown node's block: %s; want none", got)
	}

	if _, err := h.st.Networks.Delete(context.Background(), "default", 0); err != nil {
		t.Fatal(err)
	}
	h.eventually("network gone from the cache", func() error {
		if _, ok := h.caches.Networks.Get("default"); ok {
			return fmt.Errorf("still cached")
		}
		return nil
	})
	if again, err := v.network(""); err != nil || again != nw {
		t.Fatalf("same pass: default network %v, %v; want the one it saw", again, err)
	}
	if got := v.nodeBlock("n1"); got != block {
		t.Fatalf("same pass: n1's block %s; want %s", got, block)
	}
	if next, err := h.ctrl.newView(time.Now()).network(""); err != nil || next != nil {
		t.Fatalf("next pass: default network %v, %v; want none", next, err)
	}
}

// A pass reads the nodes it uses, on first use, and sees each as it first
// read it; the scheduler's snapshot reads every node once.
func TestViewReadsNodesOnFirstUse(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1", "z1", api.HealthUp)
	h.addNode("n2", "z1", api.HealthUp)
	h.addNode("n3", "z1", api.HealthUp)
	v := h.ctrl.newView(time.Now())
	if lost, why := v.lost("n1"); lost {
		t.Fatalf("n1 lost: %s; want up", why)
	}
	if len(v.nodes) != 1 {
		t.Fatalf("nodes read after looking at n1: %d; want 1", len(v.nodes))
	}
	h.setHealth("n1", api.HealthDown)
	if lost, _ := v.lost("n1"); lost {
		t.Fatal("same pass: n1 lost; want it as the pass first read it (up)")
	}
	if lost, _ := v.lost("gone"); !lost {
		t.Fatal("a node that does not exist: not lost")
	}
	if got := v.snapshot().Len(); got != 3 {
		t.Fatalf("snapshot nodes: %d; want 3", got)
	}
	if lost, _ := h.ctrl.newView(time.Now()).lost("n1"); !lost {
		t.Fatal("next pass: n1 not lost; want down")
	}
}
