package scheduler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stratahq/strata/internal/api"
)

// TestPlaceProperties places random batches on random nodes and checks
// every decision against an oracle written apart from the scheduler: a
// model of the nodes that replays the decisions in order. Beyond the
// invariants (capacity, hard anti-affinity, a placed replica passes every
// filter, an unplaced one had no node, reasons count every node), the
// oracle scores the plain way, node after node, and wants the same node:
// Place's shortcuts must not change a decision. Each seed is a subtest,
// so a failure names the seed and
// go test -run 'TestPlaceProperties/seed=N$' replays it.
func TestPlaceProperties(t *testing.T) {
	const iterations = 500
	for seed := uint64(1); seed <= iterations; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			checkRandomPlacement(t, seed)
		})
	}
}

func checkRandomPlacement(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x5ca1ab1e))
	resources := genResources(rng)
	infos := genNodes(rng, resources)
	m := newModel(infos)
	s := NewSnapshot(infos)
	if s.Len() != len(infos) {
		t.Fatalf("seed %d: got Len %d; want %d", seed, s.Len(), len(infos))
	}
	byName := map[string]*NodeInfo{}
	for _, n := range infos {
		byName[n.Node.Name] = n
	}

	for batch := range 1 + rng.IntN(3) {
		rs := genBatch(rng, resources, m.names)
		before := m.clone()
		ds := s.Place(rs)
		if len(ds) != len(rs) {
			t.Fatalf("seed %d batch %d: got %d decisions; want %d", seed, batch, len(ds), len(rs))
		}
		checkInvariants(t, seed, batch, before, resources, rs, ds)
		for i := range rs {
			r, d := &rs[i], ds[i]
			where := fmt.Sprintf("seed %d batch %d request %d (%s)", seed, batch, i, describe(r))
			m.check(t, where, r, d)
		}
		m.compare(t, fmt.Sprintf("seed %d after batch %d", seed, batch), byName)

		// Sometimes give back a replica (placed or never counted), as the
		// controller does when it cannot address one.
		if rng.IntN(3) == 0 && len(rs) > 0 {
			i := rng.IntN(len(rs))
			node := ds[i].Node
			if node == "" && len(m.names) > 0 {
				node = m.names[rng.IntN(len(m.names))]
			}
			s.Release(node, rs[i].Resource, rs[i].Need)
			m.release(node, rs[i].Resource, rs[i].Need)
			m.compare(t, fmt.Sprintf("seed %d after release on %q", seed, node), byName)
		}
	}
}

// checkInvariants checks what must hold of a batch whatever the scores:
// no node takes more than it has room for, no node runs two replicas of
// a resource with hard anti-affinity, and the reasons count every node.
func checkInvariants(t *testing.T, seed uint64, batch int, before *model, resources []genResource, rs []Request, ds []Decision) {
	t.Helper()
	sum := map[string]api.Capacity{}
	count := map[string]map[string]int{}
	for i, d := range ds {
		if d.Node == "" {
			if before.len() == 0 {
				if d.Reason != "no nodes in the region" {
					t.Errorf("seed %d batch %d request %d: got reason %q; want %q", seed, batch, i, d.Reason, "no nodes in the region")
				}
				continue
			}
			total, n, err := parseReason(d.Reason)
			if err != nil || total != before.len() || n != before.len() {
				t.Errorf("seed %d batch %d request %d: got reason %q (%v); want counts summing to %d nodes",
					seed, batch, i, d.Reason, err, before.len())
			}
			continue
		}
		sum[d.Node] = sum[d.Node].Add(rs[i].Need)
		if count[d.Node] == nil {
			count[d.Node] = map[string]int{}
		}
		count[d.Node][rs[i].Resource]++
	}
	for name, add := range sum {
		n := before.byName[name]
		if n == nil {
			t.Errorf("seed %d batch %d: got replicas on %q; want only nodes of the snapshot", seed, batch, name)
			continue
		}
		if total := n.alloc.Add(add); !n.node.Capacity.Fits(total) {
			t.Errorf("seed %d batch %d node %s: got allocated %+v + placed %+v = %+v; want within capacity %+v",
				seed, batch, name, n.alloc, add, total, n.node.Capacity)
		}
	}
	for _, gr := range resources {
		if gr.rule.AntiAffinity != "hard" {
			continue
		}
		for name, c := range count {
			if c[gr.key] == 0 {
				continue
			}
			if got := before.byName[name].placed[gr.key] + c[gr.key]; got > 1 {
				t.Errorf("seed %d batch %d node %s: got %d replicas of %s (hard anti-affinity); want at most 1",
					seed, batch, name, got, gr.key)
			}
		}
	}
}

// model is the oracle's view of the nodes.
type model struct {
	nodes  []*modelNode // by name
	byName map[string]*modelNode
	names  []string
}

type modelNode struct {
	node    *api.Node // not changed by the scheduler
	health  api.Health
	errored bool
	alloc   api.Capacity
	placed  map[string]int
}

// newModel copies the nodes before the snapshot takes them over.
func newModel(infos []*NodeInfo) *model {
	m := &model{byName: map[string]*modelNode{}}
	for _, n := range infos {
		mn := &modelNode{node: n.Node, health: n.Health, errored: n.Errored, alloc: n.Allocated, placed: map[string]int{}}
		for k, v := range n.Placed {
			mn.placed[k] = v
		}
		m.nodes = append(m.nodes, mn)
		m.byName[n.Node.Name] = mn
		m.names = append(m.names, n.Node.Name)
	}
	slices.SortFunc(m.nodes, func(a, b *modelNode) int { return strings.Compare(a.node.Name, b.node.Name) })
	slices.Sort(m.names)
	return m
}

func (m *model) len() int { return len(m.nodes) }

func (m *model) clone() *model {
	c := &model{byName: map[string]*modelNode{}, names: m.names}
	for _, n := range m.nodes {
		cn := *n
		cn.placed = map[string]int{}
		for k, v := range n.placed {
			cn.placed[k] = v
		}
		c.nodes = append(c.nodes, &cn)
		c.byName[cn.node.Name] = &cn
	}
	return c
}

// why returns the first filter n fails for r, "" if none, checking the
// documented filters in the documented order. The reasons are spelled out
// rather than taken from the package, so a changed message is caught too.
func (m *model) why(n *modelNode, r *Request) string {
	free := n.node.Capacity.Sub(n.alloc)
	checks := []struct {
		fails  bool
		reason string
	}{
		{!slices.ContainsFunc(n.node.Providers, func(p api.NodeProvider) bool { return slices.Contains(p.Kinds, r.Provider) }),
			"does not serve the provider kind"},
		{n.health != api.HealthUp, "not Up"},
		{!n.node.Schedulable, "cordoned"},
		{n.errored, "a condition in Error"},
		{r.Pin != "" && r.Pin != n.node.Name, "not the node holding its volume"},
		{r.Avoid == n.node.Name, "the node it leaves"},
		// The project's equality selector: every label present, equal.
		{!api.SelectorFromMap(r.Rule.NodeSelector).Matches(n.node.Labels), "node selector mismatch"},
		{len(r.Rule.Zones) > 0 && !slices.Contains(r.Rule.Zones, n.node.Zone), "outside the allowed zones"},
		{r.Rule.AntiAffinity == "hard" && n.placed[r.Resource] > 0, "already running a replica (hard anti-affinity)"},
		{free.MilliCPU < r.Need.MilliCPU, "insufficient cpu"},
		{free.MemoryMiB < r.Need.MemoryMiB, "insufficient memory"},
		{free.DiskMiB < r.Need.DiskMiB, "insufficient disk"},
	}
	for _, c := range checks {
		if c.fails {
			return c.reason
		}
	}
	return ""
}

// reason is what the scheduler must say when no node fits r.
func (m *model) reason(r *Request) string {
	if len(m.nodes) == 0 {
		return "no nodes in the region"
	}
	order := []string{"does not serve the provider kind", "not Up", "cordoned", "a condition in Error",
		"not the node holding its volume", "the node it leaves", "node selector mismatch", "outside the allowed zones",
		"already running a replica (hard anti-affinity)", "insufficient cpu", "insufficient memory", "insufficient disk"}
	counts := map[string]int{}
	for _, n := range m.nodes {
		counts[m.why(n, r)]++
	}
	var parts []string
	for _, why := range order {
		if c := counts[why]; c > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c, why))
		}
	}
	return fmt.Sprintf("0/%d nodes fit: %s", len(m.nodes), strings.Join(parts, ", "))
}

// score is the documented score, computed the plain way: resource fit
// (0 to 10), minus 100 per replica of the resource on the node under
// anti-affinity, minus 50 per replica of the resource in the node's zone.
func (m *model) score(n *modelNode, r *Request) float64 {
	share := func(a, b int64) float64 {
		if b <= 0 {
			return 1
		}
		return float64(a) / float64(b)
	}
	after := n.alloc.Add(r.Need)
	util := (share(after.MilliCPU, n.node.Capacity.MilliCPU) + share(after.MemoryMiB, n.node.Capacity.MemoryMiB)) / 2
	fit := 1 - util
	if r.Rule.Strategy == "binpack" {
		fit = util
	}
	score := fit * 10
	if r.Rule.AntiAffinity != "" {
		score -= 100 * float64(n.placed[r.Resource])
	}
	inZone := 0
	for _, o := range m.nodes {
		if o.node.Zone == n.node.Zone {
			inZone += o.placed[r.Resource]
		}
	}
	score -= 50 * float64(inZone)
	return score
}

// check replays one decision: a placed request went to a node that passes
// every filter and scores best (the first by name among equals); an
// unplaced one had no node passing every filter, and its reason counts
// them right.
func (m *model) check(t *testing.T, where string, r *Request, d Decision) {
	t.Helper()
	var best *modelNode
	bestScore := 0.0
	for _, n := range m.nodes {
		if m.why(n, r) != "" {
			continue
		}
		if sc := m.score(n, r); best == nil || sc > bestScore {
			best, bestScore = n, sc
		}
	}
	if d.Node == "" {
		if best != nil {
			t.Errorf("%s: got unplaced (%s); want placed, %s fits", where, d.Reason, best.node.Name)
		} else if want := m.reason(r); d.Reason != want {
			t.Errorf("%s: got reason %q; want %q", where, d.Reason, want)
		}
		return
	}
	n := m.byName[d.Node]
	switch {
	case n == nil:
		t.Errorf("%s: got node %q; want a node of the snapshot", where, d.Node)
		return
	case d.Reason != "":
		t.Errorf("%s: got reason %q with node %s; want none", where, d.Reason, d.Node)
	}
	if why := m.why(n, r); why != "" {
		t.Errorf("%s: got node %s; want a node that passes every filter, it is %s", where, d.Node, why)
	} else if n != best {
		t.Errorf("%s: got node %s (score %v); want %s (score %v)", where, d.Node, m.score(n, r), best.node.Name, bestScore)
	}
	n.alloc = n.alloc.Add(r.Need)
	n.placed[r.Resource]++
}

func (m *model) release(node, resource string, need api.Capacity) {
	n := m.byName[node]
	if n == nil {
		return
	}
	n.alloc = n.alloc.Sub(need)
	if n.placed[resource] > 0 {
		n.placed[resource]--
	}
}

// compare checks that the snapshot's accounting, which it keeps in the
// NodeInfos, is the model's.
func (m *model) compare(t *testing.T, where string, infos map[string]*NodeInfo) {
	t.Helper()
	for _, n := range m.nodes {
		info := infos[n.node.Name]
		if info.Allocated != n.alloc {
			t.Errorf("%s: node %s: got allocated %+v; want %+v", where, n.node.Name, info.Allocated, n.alloc)
		}
		if !mapsEqual(info.Placed, n.placed) {
			t.Errorf("%s: node %s: got placed %v; want %v", where, n.node.Name, info.Placed, n.placed)
		}
	}
}

func describe(r *Request) string {
	return fmt.Sprintf("%s %s need=%+v rule=%+v pin=%q avoid=%q", r.Resource, r.Provider, r.Need, r.Rule, r.Pin, r.Avoid)
}

// genResource is what every replica of one resource shares.
type genResource struct {
	key      string
	provider api.ProviderKind
	need     api.Capacity
	rule     api.ScheduleRule
}

func pick[T any](rng *rand.Rand, xs ...T) T { return xs[rng.IntN(len(xs))] }

// genResources draws from small value sets, so that nodes fill up, labels
// and zones collide and scores tie.
func genResources(rng *rand.Rand) []genResource {
	out := make([]genResource, 1+rng.IntN(5))
	for i := range out {
		flavor := api.FlavorSpec{
			VCPUs:     pick(rng, 0, 0.25, 0.5, 1, 2, 4),
			MemoryMiB: pick[int64](rng, 0, 256, 1024, 4096),
			DiskMiB:   pick[int64](rng, 0, 0, 1024, 4096),
		}
		rule := api.ScheduleRule{
			AntiAffinity: pick(rng, "", "soft", "hard"),
			Strategy:     pick(rng, "", "spread", "binpack"),
		}
		if rng.IntN(4) == 0 {
			rule.NodeSelector = map[string]string{}
			for range 1 + rng.IntN(2) {
				rule.NodeSelector[pick(rng, "disk", "gpu", "tier")] = pick(rng, "", "a", "b")
			}
		}
		if rng.IntN(4) == 0 {
			for _, z := range []string{"z1", "z2", "z3", "z4"} {
				if rng.IntN(2) == 0 {
					rule.Zones = append(rule.Zones, z)
				}
			}
		}
		out[i] = genResource{
			key:      fmt.Sprintf("t/r%d", i),
			provider: pick(rng, api.ProviderContainer, api.ProviderContainer, api.ProviderVM, api.ProviderLoadbalancer),
			need:     flavor.Capacity(),
			rule:     rule,
		}
	}
	return out
}

func genNodes(rng *rand.Rand, resources []genResource) []*NodeInfo {
	out := make([]*NodeInfo, rng.IntN(17))
	for i := range out {
		node := &api.Node{
			Name:        fmt.Sprintf("n%02d", i),
			Zone:        pick(rng, "z1", "z2", "z3", ""),
			Schedulable: rng.IntN(7) != 0,
			Capacity: api.Capacity{
				MilliCPU:  500 * rng.Int64N(17),
				MemoryMiB: 512 * rng.Int64N(17),
				DiskMiB:   1024 * rng.Int64N(11),
			},
		}
		for _, k := range []string{"disk", "gpu", "tier"} {
			if rng.IntN(2) == 0 {
				if node.Labels == nil {
					node.Labels = map[string]string{}
				}
				node.Labels[k] = pick(rng, "", "a", "b")
			}
		}
		var kinds []api.ProviderKind
		for _, k := range api.ProviderKinds {
			if rng.IntN(5) < 4 {
				kinds = append(kinds, k)
			}
		}
		// One provider or one per kind: Serves must look at them all.
		if rng.IntN(2) == 0 {
			node.Providers = []api.NodeProvider{{Name: "all", Kinds: kinds}}
		} else {
			for _, k := range kinds {
				node.Providers = append(node.Providers, api.NodeProvider{Name: string(k), Kinds: []api.ProviderKind{k}})
			}
		}
		n := &NodeInfo{
			Node:    node,
			Health:  pick(rng, api.HealthUp, api.HealthUp, api.HealthUp, api.HealthUp, api.HealthDown, api.HealthSuspect, api.HealthUnknown),
			Errored: rng.IntN(10) == 0,
		}
		// Mostly within capacity; now and then over it, as when a node
		// comes back smaller.
		n.Allocated = api.Capacity{
			MilliCPU:  rng.Int64N(node.Capacity.MilliCPU + 1),
			MemoryMiB: rng.Int64N(node.Capacity.MemoryMiB + 1),
			DiskMiB:   rng.Int64N(node.Capacity.DiskMiB + 1),
		}
		if rng.IntN(20) == 0 {
			n.Allocated.MilliCPU += 1000
		}
		if rng.IntN(2) == 0 { // else nil: NewSnapshot must cope
			n.Placed = map[string]int{}
			for _, gr := range resources {
				if rng.IntN(4) == 0 {
					c := 1 + rng.IntN(2)
					if gr.rule.AntiAffinity == "hard" {
						c = 1
					}
					n.Placed[gr.key] = c
				}
			}
		}
		out[i] = n
	}
	// NewSnapshot sorts; hand it the nodes in any order.
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// genBatch returns up to 20 requests, grouped by resource as the
// controller sends them or mixed.
func genBatch(rng *rand.Rand, resources []genResource, names []string) []Request {
	out := make([]Request, rng.IntN(21))
	for i := range out {
		gr := resources[rng.IntN(len(resources))]
		r := Request{Resource: gr.key, Provider: gr.provider, Need: gr.need, Rule: gr.rule}
		// Now and then a replica of the resource that differs from the
		// others (a new flavor or rule half rolled out): whatever the
		// scheduler shares between replicas of a resource must notice.
		// Anti-affinity stays, which checkInvariants reads per resource.
		if rng.IntN(12) == 0 {
			r.Need.MilliCPU += 250
		}
		if rng.IntN(12) == 0 {
			r.Rule.Strategy = pick(rng, "", "binpack")
		}
		if rng.IntN(12) == 0 {
			r.Rule.NodeSelector = map[string]string{"disk": pick(rng, "", "a")}
		}
		if rng.IntN(12) == 0 {
			r.Rule.Zones = []string{pick(rng, "z1", "z2")}
		}
		if rng.IntN(12) == 0 {
			r.Provider = pick(rng, api.ProviderContainer, api.ProviderVM)
		}
		if rng.IntN(8) == 0 {
			r.Pin = pick(rng, append([]string{"gone"}, names...)...)
		}
		if rng.IntN(8) == 0 {
			r.Avoid = pick(rng, append([]string{"gone"}, names...)...)
		}
		out[i] = r
	}
	if rng.IntN(2) == 0 {
		slices.SortStableFunc(out, func(a, b Request) int { return strings.Compare(a.Resource, b.Resource) })
	}
	return out
}
