package scheduler

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stratahq/strata/internal/api"
)

// res is the resource most cases place replicas of.
const res = "t/web"

// mk returns a node every filter accepts (Up, schedulable, no condition
// in Error, serving containers, zone z1, 4 CPUs, 8 GiB of memory, 100 GiB
// of disk, empty), then applies edits, so that a case states only what it
// is about.
func mk(name string, edits ...func(*NodeInfo)) *NodeInfo {
	n := &NodeInfo{
		Node: &api.Node{
			Name:        name,
			Zone:        "z1",
			Schedulable: true,
			Providers:   []api.NodeProvider{{Name: "runc", Kinds: []api.ProviderKind{api.ProviderContainer}}},
			Capacity:    api.Capacity{MilliCPU: 4000, MemoryMiB: 8192, DiskMiB: 102400},
		},
		Health: api.HealthUp,
	}
	for _, e := range edits {
		e(n)
	}
	return n
}

func cordoned(n *NodeInfo) { n.Node.Schedulable = false }
func errored(n *NodeInfo)  { n.Errored = true }

func health(h api.Health) func(*NodeInfo) { return func(n *NodeInfo) { n.Health = h } }
func zone(z string) func(*NodeInfo)       { return func(n *NodeInfo) { n.Node.Zone = z } }

func serves(kinds ...api.ProviderKind) func(*NodeInfo) {
	return func(n *NodeInfo) { n.Node.Providers = []api.NodeProvider{{Name: "p", Kinds: kinds}} }
}

// labels takes key, value pairs.
func labels(kv ...string) func(*NodeInfo) {
	return func(n *NodeInfo) {
		n.Node.Labels = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			n.Node.Labels[kv[i]] = kv[i+1]
		}
	}
}

func capacity(cpu, mem, disk int64) func(*NodeInfo) {
	return func(n *NodeInfo) { n.Node.Capacity = api.Capacity{MilliCPU: cpu, MemoryMiB: mem, DiskMiB: disk} }
}

func alloc(cpu, mem, disk int64) func(*NodeInfo) {
	return func(n *NodeInfo) { n.Allocated = api.Capacity{MilliCPU: cpu, MemoryMiB: mem, DiskMiB: disk} }
}

func placed(resource string, c int) func(*NodeInfo) {
	return func(n *NodeInfo) {
		if n.Placed == nil {
			n.Placed = map[string]int{}
		}
		n.Placed[resource] = c
	}
}

// req returns a replica of res taking 1 CPU, 1 GiB of memory and 1 GiB of
// disk, then applies edits.
func req(edits ...func(*Request)) Request {
	r := Request{Resource: res, Provider: api.ProviderContainer, Need: api.Capacity{MilliCPU: 1000, MemoryMiB: 1024, DiskMiB: 1024}}
	for _, e := range edits {
		e(&r)
	}
	return r
}

func reqs(n int, edits ...func(*Request)) []Request {
	out := make([]Request, n)
	for i := range out {
		out[i] = req(edits...)
	}
	return out
}

func soft(r *Request)    { r.Rule.AntiAffinity = "soft" }
func hard(r *Request)    { r.Rule.AntiAffinity = "hard" }
func binpack(r *Request) { r.Rule.Strategy = "binpack" }

func need(cpu, mem, disk int64) func(*Request) {
	return func(r *Request) { r.Need = api.Capacity{MilliCPU: cpu, MemoryMiB: mem, DiskMiB: disk} }
}

func of(resource string) func(*Request) { return func(r *Request) { r.Resource = resource } }

func nodesOf(ds []Decision) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Node
	}
	return out
}

// TestFilters checks each filter alone: with the node it rejects and a
// fitting node, the replica goes to the fitting one; with the rejected
// node alone, the replica stays unplaced and the reason counts the node
// under that filter.
func TestFilters(t *testing.T) {
	tests := []struct {
		name string
		// setup makes bad unfit for r by one filter, and good fit.
		setup  func(bad, good *NodeInfo, r *Request)
		reason string
	}{
		{"provider not served", func(bad, _ *NodeInfo, _ *Request) {
			serves(api.ProviderVM, api.ProviderLoadbalancer)(bad)
		}, "does not serve the provider kind"},
		{"no provider at all", func(bad, _ *NodeInfo, _ *Request) { bad.Node.Providers = nil }, "does not serve the provider kind"},
		{"provider kind served by a second provider", func(bad, good *NodeInfo, r *Request) {
			r.Provider = api.ProviderVM
			serves(api.ProviderContainer)(bad)
			good.Node.Providers = []api.NodeProvider{
				{Name: "runc", Kinds: []api.ProviderKind{api.ProviderContainer}},
				{Name: "libvirt", Kinds: []api.ProviderKind{api.ProviderVM}},
			}
		}, "does not serve the provider kind"},
		{"down", func(bad, _ *NodeInfo, _ *Request) { health(api.HealthDown)(bad) }, "not Up"},
		{"suspect", func(bad, _ *NodeInfo, _ *Request) { health(api.HealthSuspect)(bad) }, "not Up"},
		{"health unknown", func(bad, _ *NodeInfo, _ *Request) { health(api.HealthUnknown)(bad) }, "not Up"},
		{"cordoned", func(bad, _ *NodeInfo, _ *Request) { cordoned(bad) }, "cordoned"},
		{"condition in error", func(bad, _ *NodeInfo, _ *Request) { errored(bad) }, "a condition in Error"},
		{"not the pinned node", func(_, good *NodeInfo, r *Request) { r.Pin = good.Node.Name }, "not the node holding its volume"},
		{"the node it leaves", func(bad, _ *NodeInfo, r *Request) { r.Avoid = bad.Node.Name }, "the node it leaves"},
		{"selector value differs", func(bad, good *NodeInfo, r *Request) {
			r.Rule.NodeSelector = map[string]string{"disk": "ssd"}
			labels("disk", "hdd")(bad)
			labels("disk", "ssd")(good)
		}, "node selector mismatch"},
		{"selector label missing", func(_, good *NodeInfo, r *Request) {
			r.Rule.NodeSelector = map[string]string{"disk": "ssd"}
			labels("disk", "ssd")(good)
		}, "node selector mismatch"},
		{"selector needs every label", func(bad, good *NodeInfo, r *Request) {
			r.Rule.NodeSelector = map[string]string{"disk": "ssd", "gpu": "a100"}
			labels("disk", "ssd")(bad)
			labels("disk", "ssd", "gpu", "a100", "extra", "x")(good)
		}, "node selector mismatch"},
		// An empty value still asks for the label, as api.Selector's "k="
		// does: a node without it does not match.
		{"selector with an empty value needs the label", func(_, good *NodeInfo, r *Request) {
			r.Rule.NodeSelector = map[string]string{"gpu": ""}
			labels("gpu", "")(good)
		}, "node selector mismatch"},
		{"outside the zones", func(bad, good *NodeInfo, r *Request) {
			r.Rule.Zones = []string{"z2", "z3"}
			zone("z1")(bad)
			zone("z3")(good)
		}, "outside the allowed zones"},
		{"no zone while zones are asked", func(bad, good *NodeInfo, r *Request) {
			r.Rule.Zones = []string{"z2"}
			zone("")(bad)
			zone("z2")(good)
		}, "outside the allowed zones"},
		{"hard anti-affinity", func(bad, _ *NodeInfo, r *Request) {
			hard(r)
			placed(res, 1)(bad)
		}, "already running a replica (hard anti-affinity)"},
		{"cpu short by one milli", func(bad, _ *NodeInfo, _ *Request) { alloc(3001, 0, 0)(bad) }, "insufficient cpu"},
		{"memory short by one MiB", func(bad, _ *NodeInfo, _ *Request) { alloc(0, 8192-1023, 0)(bad) }, "insufficient memory"},
		{"disk short by one MiB", func(bad, _ *NodeInfo, _ *Request) { capacity(4000, 8192, 1023)(bad) }, "insufficient disk"},
		{"overcommitted node", func(bad, _ *NodeInfo, _ *Request) { alloc(5000, 0, 0)(bad) }, "insufficient cpu"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// "a" sorts first and is emptier than "b", so it would win
			// every tie and every least-allocated comparison it is not
			// filtered out of.
			bad, good := mk("a"), mk("b", alloc(500, 512, 0))
			r := req()
			tt.setup(bad, good, &r)
			got := NewSnapshot([]*NodeInfo{bad, good}).Place([]Request{r})
			if got[0].Node != "b" || got[0].Reason != "" {
				t.Errorf("with a fitting node: got %+v; want node b", got[0])
			}

			bad, good = mk("a"), mk("b")
			r = req()
			tt.setup(bad, good, &r)
			got = NewSnapshot([]*NodeInfo{bad}).Place([]Request{r})
			want := Decision{Reason: "0/1 nodes fit: 1 " + tt.reason}
			if got[0] != want {
				t.Errorf("alone: got %+v; want %+v", got[0], want)
			}
		})
	}
}

// TestReasons checks that a node is counted once, under the first filter
// it fails, and that the counts read in the order the filters run
// whatever the order of the nodes.
func TestReasons(t *testing.T) {
	tests := []struct {
		name  string
		nodes []*NodeInfo
		req   Request
		want  string
	}{
		{
			name: "one node per filter, named against the filter order",
			nodes: []*NodeInfo{
				mk("k", serves(api.ProviderVM)),
				mk("j", health(api.HealthDown)),
				mk("i", cordoned),
				mk("h", errored),
				mk("g"), // the node it leaves
				mk("f", labels("disk", "hdd")),
				mk("e", labels("disk", "ssd"), zone("z9")),
				mk("d", labels("disk", "ssd"), placed(res, 1)),
				mk("c", labels("disk", "ssd"), alloc(3500, 0, 0)),
				mk("b", labels("disk", "ssd"), alloc(0, 8000, 0)),
				mk("a", labels("disk", "ssd"), alloc(0, 0, 102000)),
			},
			req: req(hard, func(r *Request) {
				r.Avoid = "g"
				r.Rule.NodeSelector = map[string]string{"disk": "ssd"}
				r.Rule.Zones = []string{"z1"}
			}),
			want: "0/11 nodes fit: 1 does not serve the provider kind, 1 not Up, 1 cordoned, 1 a condition in Error, " +
				"1 the node it leaves, 1 node selector mismatch, 1 outside the allowed zones, " +
				"1 already running a replica (hard anti-affinity), 1 insufficient cpu, 1 insufficient memory, 1 insufficient disk",
		},
		{
			name: "pinned to a full node",
			nodes: []*NodeInfo{
				mk("a", serves(api.ProviderVM)),
				mk("b", cordoned), mk("c", cordoned),
				mk("d"), mk("e"), mk("f"),
				mk("vol", alloc(0, 8000, 0)),
			},
			req:  req(func(r *Request) { r.Pin = "vol" }),
			want: "0/7 nodes fit: 1 does not serve the provider kind, 2 cordoned, 3 not the node holding its volume, 1 insufficient memory",
		},
		{
			name:  "pinned to a node that is gone",
			nodes: []*NodeInfo{mk("a"), mk("b")},
			req:   req(func(r *Request) { r.Pin = "gone" }),
			want:  "0/2 nodes fit: 2 not the node holding its volume",
		},
		{
			name: "first failing filter only",
			nodes: []*NodeInfo{
				mk("a", serves(api.ProviderVM), health(api.HealthDown), cordoned, errored, alloc(4000, 8192, 0)),
				mk("b", health(api.HealthSuspect), cordoned, alloc(4000, 0, 0)),
				mk("c", cordoned, errored),
				mk("d", alloc(4000, 8192, 102400)),
			},
			req:  req(),
			want: "0/4 nodes fit: 1 does not serve the provider kind, 1 not Up, 1 cordoned, 1 insufficient cpu",
		},
		{
			name: "the package's example",
			nodes: []*NodeInfo{
				mk("n01", cordoned), mk("n02", alloc(0, 8000, 0)), mk("n03", alloc(0, 8000, 0)),
				mk("n04", alloc(0, 8000, 0)), mk("n05", cordoned), mk("n06", alloc(0, 8000, 0)),
				mk("n07", alloc(0, 8000, 0)), mk("n08", alloc(0, 8000, 0)), mk("n09", alloc(0, 8000, 0)),
				mk("n10", cordoned), mk("n11", alloc(0, 8000, 0)), mk("n12", alloc(0, 8000, 0)),
			},
			req:  req(),
			want: "0/12 nodes fit: 3 cordoned, 9 insufficient memory",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NewSnapshot(tt.nodes).Place([]Request{tt.req})
			if got[0].Node != "" || got[0].Reason != tt.want {
				t.Errorf("got %+v; want reason %q", got[0], tt.want)
			}
		})
	}
}

// TestScores checks which feasible node wins, replica after replica.
func TestScores(t *testing.T) {
	tests := []struct {
		name  string
		nodes []*NodeInfo
		reqs  []Request
		want  []string // node per request, "" for unplaced
	}{
		{
			name:  "least allocated picks the emptier node",
			nodes: []*NodeInfo{mk("a", alloc(2000, 4096, 0)), mk("b", alloc(1000, 1024, 0))},
			reqs:  reqs(1),
			want:  []string{"b"},
		},
		{
			name:  "spread is the default strategy",
			nodes: []*NodeInfo{mk("a", alloc(2000, 4096, 0)), mk("b", alloc(1000, 1024, 0))},
			reqs:  reqs(1, func(r *Request) { r.Rule.Strategy = "spread" }),
			want:  []string{"b"},
		},
		{
			// 50% of a big node is fuller than 25% of a small one, though
			// the big one has more left.
			name: "least allocated compares shares, not amounts",
			nodes: []*NodeInfo{
				mk("a", capacity(64000, 65536, 102400), alloc(32000, 32768, 0)),
				mk("b", alloc(1000, 1024, 0)),
			},
			reqs: reqs(1),
			want: []string{"b"},
		},
		{
			// a: cpu 100% and memory 12.5% after; b: 25% and 75%.
			name:  "least allocated averages cpu and memory",
			nodes: []*NodeInfo{mk("a", alloc(3000, 0, 0)), mk("b", alloc(0, 5120, 0))},
			reqs:  reqs(1),
			want:  []string{"b"},
		},
		{
			name:  "equal nodes: the first by name",
			nodes: []*NodeInfo{mk("c"), mk("a"), mk("b")},
			reqs:  reqs(1),
			want:  []string{"a"},
		},
		{
			name:  "least allocated spreads a batch",
			nodes: []*NodeInfo{mk("a"), mk("b"), mk("c")},
			reqs:  reqs(4),
			want:  []string{"a", "b", "c", "a"},
		},
		{
			name:  "binpack picks the fuller node",
			nodes: []*NodeInfo{mk("a", alloc(2000, 4096, 0)), mk("b", alloc(1000, 1024, 0))},
			reqs:  reqs(1, binpack),
			want:  []string{"a"},
		},
		{
			name:  "binpack fills a node before the next",
			nodes: []*NodeInfo{mk("a"), mk("b", alloc(1000, 1024, 0))},
			reqs:  reqs(4, binpack),
			want:  []string{"b", "b", "b", "a"},
		},
		{
			name:  "without anti-affinity the emptier node wins though it runs a replica",
			nodes: []*NodeInfo{mk("a", placed(res, 1)), mk("b", alloc(2000, 4096, 0))},
			reqs:  reqs(1),
			want:  []string{"a"},
		},
		{
			name:  "soft anti-affinity prefers a node without a replica",
			nodes: []*NodeInfo{mk("a", placed(res, 1)), mk("b", alloc(2000, 4096, 0))},
			reqs:  reqs(1, soft),
			want:  []string{"b"},
		},
		{
			name:  "soft anti-affinity counts only the same resource",
			nodes: []*NodeInfo{mk("a", placed("t/other", 3)), mk("b", alloc(2000, 4096, 0))},
			reqs:  reqs(1, soft),
			want:  []string{"a"},
		},
		{
			name:  "soft anti-affinity still places when every node has a replica",
			nodes: []*NodeInfo{mk("a", placed(res, 1)), mk("b", placed(res, 1), alloc(2000, 4096, 0))},
			reqs:  reqs(2, soft),
			want:  []string{"a", "b"},
		},
		{
			// Least allocated alone would put the first three on the big
			// node.
			name:  "soft anti-affinity spreads a batch over unequal nodes",
			nodes: []*NodeInfo{mk("a", capacity(64000, 65536, 102400)), mk("b"), mk("c")},
			reqs:  reqs(4, soft),
			want:  []string{"a", "b", "c", "a"},
		},
		{
			name:  "without soft anti-affinity the big node takes them",
			nodes: []*NodeInfo{mk("a", capacity(64000, 65536, 102400)), mk("b"), mk("c")},
			reqs:  reqs(3),
			want:  []string{"a", "a", "a"},
		},
		{
			name:  "hard anti-affinity refuses a second replica on a node",
			nodes: []*NodeInfo{mk("a"), mk("b", placed(res, 1)), mk("c")},
			reqs:  reqs(3, hard),
			want:  []string{"a", "c", ""},
		},
		{
			name:  "zone spread alternates zones over a batch",
			nodes: []*NodeInfo{mk("a1"), mk("a2"), mk("a3"), mk("b1", zone("z2")), mk("b2", zone("z2"))},
			reqs:  reqs(4),
			want:  []string{"a1", "b1", "a2", "b2"},
		},
		{
			name:  "zone spread counts the replicas already placed",
			nodes: []*NodeInfo{mk("a", placed(res, 1)), mk("b"), mk("c", zone("z2"), alloc(3000, 6144, 0))},
			reqs:  reqs(1),
			want:  []string{"c"},
		},
		{
			name:  "zone spread counts only the same resource",
			nodes: []*NodeInfo{mk("a", placed("t/other", 2)), mk("c", zone("z2"), alloc(3000, 6144, 0))},
			reqs:  reqs(1),
			want:  []string{"a"},
		},
		{
			name:  "zone spread within the allowed zones",
			nodes: []*NodeInfo{mk("a"), mk("b", zone("z2")), mk("c", zone("z3"))},
			reqs:  reqs(4, func(r *Request) { r.Rule.Zones = []string{"z1", "z3"} }),
			want:  []string{"a", "c", "a", "c"},
		},
		{
			name:  "pin wins over a better-scoring node",
			nodes: []*NodeInfo{mk("a"), mk("vol", alloc(2000, 4096, 0), placed(res, 1))},
			reqs:  reqs(2, soft, func(r *Request) { r.Pin = "vol" }),
			want:  []string{"vol", "vol"},
		},
		{
			// Replicas of one resource are placed together; one asking
			// for something else (half through a change) is decided on
			// its own terms.
			name:  "a replica of the resource with another strategy",
			nodes: []*NodeInfo{mk("a", alloc(2000, 4096, 0)), mk("b")},
			reqs:  []Request{req(), req(binpack), req()},
			want:  []string{"b", "a", "b"},
		},
		{
			// x, the emptier, has room for the first replica only.
			name: "a replica of the resource with another need",
			nodes: []*NodeInfo{
				mk("x", capacity(2000, 8192, 102400)),
				mk("y", capacity(16000, 8192, 102400), alloc(8000, 6144, 0)),
			},
			reqs: []Request{req(need(1000, 1024, 0)), req(need(3000, 1024, 0))},
			want: []string{"x", "y"},
		},
		{
			name:  "avoid sends the replica to a worse node",
			nodes: []*NodeInfo{mk("a"), mk("b", alloc(2000, 4096, 0))},
			reqs:  reqs(1, func(r *Request) { r.Avoid = "a" }),
			want:  []string{"b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := nodesOf(NewSnapshot(tt.nodes).Place(tt.reqs))
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q; want %q", got, tt.want)
			}
		})
	}
}

// TestBatchAccounting checks that a batch books what it places, so that it
// never places more than fits.
func TestBatchAccounting(t *testing.T) {
	tests := []struct {
		name       string
		nodes      []*NodeInfo
		reqs       []Request
		wantPlaced int
		wantReason string // of the unplaced ones
	}{
		{
			name:       "cpu",
			nodes:      []*NodeInfo{mk("a"), mk("b"), mk("c")},
			reqs:       reqs(13, need(1000, 64, 0)),
			wantPlaced: 12,
			wantReason: "0/3 nodes fit: 3 insufficient cpu",
		},
		{
			name:       "memory",
			nodes:      []*NodeInfo{mk("a"), mk("b")},
			reqs:       reqs(6, need(100, 4096, 0)),
			wantPlaced: 4,
			wantReason: "0/2 nodes fit: 2 insufficient memory",
		},
		{
			name:       "disk",
			nodes:      []*NodeInfo{mk("a"), mk("b")},
			reqs:       reqs(5, need(100, 64, 40960)),
			wantPlaced: 4,
			wantReason: "0/2 nodes fit: 2 insufficient disk",
		},
		{
			name:       "what nodes already hold",
			nodes:      []*NodeInfo{mk("a", alloc(3000, 0, 0)), mk("b", alloc(2500, 0, 0))},
			reqs:       reqs(4, need(1000, 64, 0)),
			wantPlaced: 2,
			wantReason: "0/2 nodes fit: 2 insufficient cpu",
		},
		{
			name:       "exact fit",
			nodes:      []*NodeInfo{mk("a", capacity(1000, 1024, 1024))},
			reqs:       reqs(2),
			wantPlaced: 1,
			wantReason: "0/1 nodes fit: 1 insufficient cpu",
		},
		{
			name:  "replicas of several resources",
			nodes: []*NodeInfo{mk("a"), mk("b")},
			reqs: append(append(reqs(3, need(2000, 64, 0)), reqs(3, of("t/db"), need(2000, 64, 0), binpack)...),
				reqs(2, of("t/cache"), need(500, 64, 0), soft)...),
			wantPlaced: 4,
			wantReason: "0/2 nodes fit: 2 insufficient cpu",
		},
		{
			name:       "requests that need nothing",
			nodes:      []*NodeInfo{mk("a", alloc(4000, 8192, 102400))},
			reqs:       reqs(3, need(0, 0, 0)),
			wantPlaced: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			initial := map[string]api.Capacity{}
			capa := map[string]api.Capacity{}
			for _, n := range tt.nodes {
				initial[n.Node.Name], capa[n.Node.Name] = n.Allocated, n.Node.Capacity
			}
			got := NewSnapshot(tt.nodes).Place(tt.reqs)
			if len(got) != len(tt.reqs) {
				t.Fatalf("got %d decisions; want %d", len(got), len(tt.reqs))
			}
			booked := map[string]api.Capacity{}
			placedN := 0
			for i, d := range got {
				if d.Node == "" {
					if d.Reason != tt.wantReason {
						t.Errorf("request %d: got reason %q; want %q", i, d.Reason, tt.wantReason)
					}
					continue
				}
				placedN++
				booked[d.Node] = booked[d.Node].Add(tt.reqs[i].Need)
			}
			if placedN != tt.wantPlaced {
				t.Errorf("got %d placed; want %d", placedN, tt.wantPlaced)
			}
			for _, n := range tt.nodes {
				name := n.Node.Name
				want := initial[name].Add(booked[name])
				if n.Allocated != want {
					t.Errorf("node %s: got allocated %+v; want %+v", name, n.Allocated, want)
				}
				if booked[name] != (api.Capacity{}) && !capa[name].Fits(want) {
					t.Errorf("node %s: got allocated %+v; want within %+v", name, want, capa[name])
				}
			}
		})
	}
}

// TestPlacedCounts checks that the snapshot counts the replicas it places
// per node and resource, which later batches and hard anti-affinity rely
// on.
func TestPlacedCounts(t *testing.T) {
	a, b := mk("a"), mk("b", placed(res, 2))
	s := NewSnapshot([]*NodeInfo{a, b})
	s.Place(append(reqs(2, soft), reqs(1, of("t/db"))...))
	if got, want := a.Placed, (map[string]int{res: 2}); !mapsEqual(got, want) {
		t.Errorf("node a: got placed %v; want %v", got, want)
	}
	if got, want := b.Placed, (map[string]int{res: 2, "t/db": 1}); !mapsEqual(got, want) {
		t.Errorf("node b: got placed %v; want %v", got, want)
	}
}

// mapsEqual compares counts, a zero count being the same as none.
func mapsEqual(a, b map[string]int) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}

// TestRelease checks that a released replica gives its share back to the
// next decisions: capacity, hard anti-affinity and zone spread.
func TestRelease(t *testing.T) {
	oneCPU := api.Capacity{MilliCPU: 1000, MemoryMiB: 1024, DiskMiB: 1024}
	twoCPUs := oneCPU.Add(oneCPU)
	tests := []struct {
		name    string
		nodes   []*NodeInfo
		before  []Request // placed before the release
		release func(s *Snapshot)
		after   []Request
		want    []string // nodes of after
		// then is placed in a call of its own, after after.
		then     []Request
		wantThen []string
	}{
		{
			name:    "capacity",
			nodes:   []*NodeInfo{mk("a")},
			before:  reqs(4),
			release: func(s *Snapshot) { s.Release("a", res, oneCPU) },
			after:   reqs(2),
			want:    []string{"a", ""},
		},
		{
			name:    "capacity of a replica placed before the snapshot",
			nodes:   []*NodeInfo{mk("a", alloc(4000, 4096, 4096), placed(res, 4))},
			release: func(s *Snapshot) { s.Release("a", res, oneCPU) },
			after:   reqs(2),
			want:    []string{"a", ""},
		},
		{
			// A replica being destroyed holds capacity without being
			// counted in Placed; releasing it returns the capacity only
			// (were the count to go below zero, a second replica would
			// fit in the room returned).
			name:    "capacity of a replica not counted as placed",
			nodes:   []*NodeInfo{mk("a", alloc(4000, 4096, 4096))},
			release: func(s *Snapshot) { s.Release("a", res, twoCPUs) },
			after:   reqs(2, hard),
			want:    []string{"a", ""},
		},
		{
			name:    "hard anti-affinity",
			nodes:   []*NodeInfo{mk("a"), mk("b")},
			before:  reqs(2, hard),
			release: func(s *Snapshot) { s.Release("b", res, oneCPU) },
			after:   reqs(2, hard),
			want:    []string{"b", ""},
		},
		{
			name:    "zone spread",
			nodes:   []*NodeInfo{mk("a", placed(res, 1), alloc(1000, 1024, 1024)), mk("b", zone("z2"), alloc(2000, 2048, 0))},
			release: func(s *Snapshot) { s.Release("a", res, oneCPU) },
			after:   reqs(1),
			want:    []string{"a"},
		},
		{
			// A node emptied of a resource then given a replica again
			// counts once in its zone: a on its own in z1, not twice,
			// against b in z2.
			name:     "a node emptied then refilled",
			nodes:    []*NodeInfo{mk("a"), mk("b", zone("z2"), placed(res, 1), alloc(2000, 2048, 0))},
			before:   reqs(1),
			release:  func(s *Snapshot) { s.Release("a", res, oneCPU) },
			after:    reqs(1),
			want:     []string{"a"},
			then:     reqs(1),
			wantThen: []string{"a"},
		},
		{
			name:    "an unknown node changes nothing",
			nodes:   []*NodeInfo{mk("a")},
			before:  reqs(4),
			release: func(s *Snapshot) { s.Release("gone", res, oneCPU) },
			after:   reqs(1),
			want:    []string{""},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewSnapshot(tt.nodes)
			for i, d := range s.Place(tt.before) {
				if d.Node == "" {
					t.Fatalf("before the release, request %d: got unplaced (%s); want placed", i, d.Reason)
				}
			}
			tt.release(s)
			if got := nodesOf(s.Place(tt.after)); !slices.Equal(got, tt.want) {
				t.Errorf("got %q; want %q", got, tt.want)
			}
			if got := nodesOf(s.Place(tt.then)); !slices.Equal(got, tt.wantThen) && len(tt.then) > 0 {
				t.Errorf("then: got %q; want %q", got, tt.wantThen)
			}
		})
	}
}

func TestEmpty(t *testing.T) {
	tests := []struct {
		name  string
		nodes []*NodeInfo
		reqs  []Request
		want  []Decision
	}{
		{"no nodes", nil, reqs(2), []Decision{{Reason: "no nodes in the region"}, {Reason: "no nodes in the region"}}},
		{"no requests", []*NodeInfo{mk("a")}, nil, []Decision{}},
		{"neither", nil, nil, []Decision{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewSnapshot(tt.nodes)
			if got := s.Len(); got != len(tt.nodes) {
				t.Errorf("got Len %d; want %d", got, len(tt.nodes))
			}
			if got := s.Place(tt.reqs); !slices.Equal(got, tt.want) {
				t.Errorf("got %+v; want %+v", got, tt.want)
			}
		})
	}
}

// TestReasonMentionsEveryNode is a guard on the reason's shape, which
// operators read: the counts add up to the nodes.
func TestReasonMentionsEveryNode(t *testing.T) {
	nodes := []*NodeInfo{mk("a", cordoned), mk("b", cordoned), mk("c", health(api.HealthDown)), mk("d", alloc(4000, 0, 0))}
	got := NewSnapshot(nodes).Place(reqs(1))[0].Reason
	total, sum, err := parseReason(got)
	if err != nil {
		t.Fatalf("got reason %q: %v", got, err)
	}
	if total != 4 || sum != 4 {
		t.Errorf("got %d nodes and counts summing to %d in %q; want 4 and 4", total, sum, got)
	}
}

// parseReason reads "0/N nodes fit: c1 why1, c2 why2" into N and the sum
// of the counts.
func parseReason(s string) (total, sum int, err error) {
	head, list, ok := strings.Cut(s, " nodes fit: ")
	if !ok {
		return 0, 0, fmt.Errorf("no %q", " nodes fit: ")
	}
	if _, err := fmt.Sscanf(head, "0/%d", &total); err != nil {
		return 0, 0, fmt.Errorf("head %q: %v", head, err)
	}
	for _, part := range strings.Split(list, ", ") {
		var c int
		if _, err := fmt.Sscanf(part, "%d ", &c); err != nil || c <= 0 {
			return 0, 0, fmt.Errorf("part %q: count %d, %v", part, c, err)
		}
		sum += c
	}
	return total, sum, nil
}

// TestAddresses places replicas that need an address only on nodes with
// one left in their block, books the addresses as it goes, and leaves the
// others alone; NoAddresses rules a node out for the next Place.
func TestAddresses(t *testing.T) {
	addrs := func(n int) func(*NodeInfo) { return func(ni *NodeInfo) { ni.Addresses = n } }
	s := NewSnapshot([]*NodeInfo{mk("a", addrs(0)), mk("b", addrs(2)), mk("c", addrs(1))})
	reqs := make([]Request, 4)
	for i := range reqs {
		reqs[i] = Request{Resource: res, Provider: api.ProviderContainer, Need: api.Capacity{MilliCPU: 100, MemoryMiB: 64}, Address: true}
	}
	var got []string
	for _, d := range s.Place(reqs) {
		got = append(got, d.Node)
		if d.Node == "" && !strings.Contains(d.Reason, "3 no free address in the node's block") {
			t.Errorf("unplaced reason: got %q; want 3 nodes without a free address", d.Reason)
		}
	}
	slices.Sort(got)
	if want := []string{"", "b", "b", "c"}; !slices.Equal(got, want) {
		t.Fatalf("placements: got %v; want %v", got, want)
	}
	// Replicas that need no address still go anywhere.
	if d := s.Place([]Request{{Resource: "t/lb", Provider: api.ProviderContainer, Need: api.Capacity{MilliCPU: 100}}}); d[0].Node == "" {
		t.Fatalf("a replica without an address: got unplaced (%s); want placed", d[0].Reason)
	}

	s = NewSnapshot([]*NodeInfo{mk("a", addrs(5)), mk("b", addrs(5))})
	if !s.NoAddresses("a") || s.NoAddresses("a") {
		t.Fatal("NoAddresses: want true the first time, false the second")
	}
	for _, d := range s.Place(reqs[:3]) {
		if d.Node != "b" {
			t.Fatalf("after NoAddresses(a): got %q; want b", d.Node)
		}
	}
}
