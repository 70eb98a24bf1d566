package controller

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// heldTimers stands for time.AfterFunc: the coalesced full marks node
// events ask for wait until the test fires them, and the coalescer's
// clock stands still, so every mark after the first is deferred.
type heldTimers struct {
	mu sync.Mutex
	fs []func()
	// passes counts how many passes looked at each key.
	passes map[string]int
}

func holdTimers(h *heldTimers) func(*Options) {
	h.passes = map[string]int{}
	t0 := time.Now()
	return func(o *Options) {
		o.wallClock = func() time.Time { return t0 }
		o.afterFunc = func(_ time.Duration, f func()) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.fs = append(h.fs, f)
		}
		o.passed = func(keys []string) {
			h.mu.Lock()
			defer h.mu.Unlock()
			for _, k := range keys {
				h.passes[k]++
			}
		}
	}
}

func (h *heldTimers) held() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.fs)
}

func (h *heldTimers) fire() {
	h.mu.Lock()
	fs := h.fs
	h.fs = nil
	h.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// looked returns how many passes looked at key since the last reset.
func (h *heldTimers) looked(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.passes[key]
}

func (h *heldTimers) reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	clear(h.passes)
}

// Node churn reconciles only the resources on the changed node at once;
// everything else waits for one coalesced full mark, however many nodes
// register. A node going Down still reschedules its replicas at once.
func TestNodeChurnMarksOnlyWhatItAffects(t *testing.T) {
	var tm heldTimers
	h := newHarness(t, holdTimers(&tm))
	h.addNode("n1", "a", api.HealthUp)
	h.addNode("n2", "a", api.HealthUp)
	const n = 8
	for i := range n {
		h.place(fmt.Sprintf("r%d", i), 1, 1)
	}
	on := map[string][]string{}
	for i := range n {
		name := fmt.Sprintf("r%d", i)
		h.eventually(name+" ready", h.readyWith(name, 1))
		run, _ := h.replicas(name)
		on[run[0].Node] = append(on[run[0].Node], name)
	}
	if len(on["n1"]) == 0 || len(on["n2"]) == 0 {
		t.Fatalf("replicas by node %v; want some on each of n1 and n2", on)
	}
	tm.reset()

	// A fleet registers: nothing runs on the new nodes.
	const m = 30
	for i := range m {
		h.addNode(fmt.Sprintf("new%d", i), "b", api.HealthUp)
	}
	// n1 goes Down: its resources, and only they, are looked at now.
	h.set(h.down, "n1", true)
	h.setHealth("n1", api.HealthDown)
	for _, name := range on["n1"] {
		h.eventually(name+" moved off n1", func() error {
			run, _ := h.replicas(name)
			if len(run) != 1 || run[0].Node == "n1" {
				return fmt.Errorf("running %d, first on %v; want 1 off n1", len(run), run)
			}
			return h.shareReady(name, 1)
		})
	}
	for _, name := range on["n2"] {
		if got := tm.looked("t/" + name); got != 0 {
			t.Errorf("%s (on n2) looked at by %d passes during node churn; want 0 before the coalesced full mark", name, got)
		}
	}
	// 2m+3 node events (records and statuses) asked for one deferred
	// full mark: the first node event of the test had its own at once.
	if got := tm.held(); got != 1 {
		t.Fatalf("coalesced full marks pending: %d; want 1", got)
	}
	tm.fire()
	for _, name := range on["n2"] {
		h.eventually(name+" looked at by the full pass", func() error {
			if tm.looked("t/"+name) == 0 {
				return fmt.Errorf("not looked at")
			}
			return nil
		})
	}
	if got := tm.held(); got != 0 {
		t.Fatalf("coalesced full marks pending after firing, with no node event since: %d; want 0", got)
	}
}

// A replica waiting for room gets its place from the coalesced full mark
// a new node asks for, though nothing runs on that node.
func TestNewNodePlacesPendingReplicaThroughCoalescedMark(t *testing.T) {
	var tm heldTimers
	h := newHarness(t, holdTimers(&tm))
	// The first node event takes the immediate full mark.
	h.addNode("small", "a", api.HealthUp)
	h.place("big", 1, 1, func(p *api.Placement) { p.Flavor.Spec.MemoryMiB = 20000 })
	h.eventually("unplaced", func() error {
		run, _ := h.replicas("big")
		if len(run) != 1 || run[0].Node != "" || run[0].Reason == "" {
			return fmt.Errorf("running %v; want one unplaced with a reason", run)
		}
		return nil
	})
	n := newNode("large", "b")
	n.Capacity.MemoryMiB = 65536
	h.putNode(n)
	h.setHealth("large", api.HealthUp)
	if got := tm.held(); got != 1 {
		t.Fatalf("coalesced full marks pending: %d; want 1", got)
	}
	tm.fire()
	h.eventually("placed on the new node", func() error {
		run, _ := h.replicas("big")
		if len(run) != 1 || run[0].Node != "large" {
			return fmt.Errorf("running %v; want one on large", run)
		}
		return h.shareReady("big", 1)
	})
}
