package scheduler

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"testing"

	"github.com/stratahq/strata/internal/api"
)

// goldenDecisions pins, per seed, a digest of every decision the
// scheduler made when each replica read the score of every node, on a
// large randomized cluster: one zone, a few, tens, or about as many as
// nodes; hundreds of resources with every rule, pins, avoids,
// addresses, releases and exhausted blocks, over several Place calls.
// Place's shortcuts (blocks of nodes, caches per snapshot) must keep
// every decision and every reason: a changed digest is a changed
// placement.
var goldenDecisions = map[uint64]string{
	1: "e4f3c877420bbd49",
	2: "25df6eb75e206d83",
	3: "71536640db75dd17",
	4: "ba73cf94e8dce74e",
	5: "163b1c7f97ebed70",
	6: "75401a2d7aa6af42",
	7: "1f4abe9a56ffdc19",
	8: "e192b3d84b4c9b0d",
}

// TestPlaceGolden replays the randomized passes of goldenDecisions.
func TestPlaceGolden(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		got := goldenPass(seed)
		if want, ok := goldenDecisions[seed]; !ok || got != want {
			t.Errorf("seed %d: got decisions digest %s; want %s", seed, got, want)
		}
	}
}

// goldenPass runs one randomized pass and returns the digest of its
// decisions.
func goldenPass(seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, 0x601de2))
	n := 500 + rng.IntN(3000)
	zones := pick(rng, 1, 3, 40, n)
	c := newBenchCluster(n)
	infos := c.infos()
	for i, ni := range infos {
		ni.Node = cloneNode(ni.Node)
		ni.Node.Zone = fmt.Sprintf("zone-%d", rng.IntN(zones))
		ni.Addresses = rng.IntN(4)
		ni.Errored = rng.IntN(50) == 0
		if i%97 == 0 {
			// Equal nodes, so that scores tie.
			ni.Node.Capacity = api.Capacity{MilliCPU: 16000, MemoryMiB: 65536, DiskMiB: 1 << 20}
			ni.Allocated = api.Capacity{}
		}
	}
	s := NewSnapshot(infos)
	h := fnv.New64a()
	for range 8 {
		reqs := goldenRequests(rng, s)
		ds := s.Place(reqs)
		for i, d := range ds {
			fmt.Fprintf(h, "%d:%s:%s;", i, d.Node, d.Reason)
		}
		goldenAfter(rng, s, reqs, ds)
	}
	return fmt.Sprintf("%016x", h.Sum64())
}

func cloneNode(n *api.Node) *api.Node {
	c := *n
	return &c
}

// goldenRequests returns the replicas of one Place call: runs of
// resources with random rules, some replicas pinned or leaving a node.
func goldenRequests(rng *rand.Rand, s *Snapshot) []Request {
	var out []Request
	for range 5 + rng.IntN(40) {
		req := Request{
			Resource: fmt.Sprintf("t/app-%d", rng.IntN(60)),
			Provider: pick(rng, api.ProviderContainer, api.ProviderContainer, api.ProviderVM),
			Need:     api.Capacity{MilliCPU: pick[int64](rng, 0, 250, 1000, 4000, 24000), MemoryMiB: pick[int64](rng, 0, 512, 4096, 70000), DiskMiB: pick[int64](rng, 0, 1024)},
			Address:  rng.IntN(3) == 0,
		}
		req.Rule.AntiAffinity = pick(rng, "", "soft", "hard")
		req.Rule.Strategy = pick(rng, "", "spread", "binpack")
		if rng.IntN(4) == 0 {
			req.Rule.NodeSelector = map[string]string{"disk": pick(rng, "ssd", "hdd", "")}
		}
		if rng.IntN(4) == 0 {
			req.Rule.Zones = []string{fmt.Sprintf("zone-%d", rng.IntN(5)), fmt.Sprintf("zone-%d", rng.IntN(5))}
		}
		for range 1 + rng.IntN(30) {
			x := req
			switch rng.IntN(20) {
			case 0:
				x.Pin = s.nodes[rng.IntN(s.Len())].Node.Name
			case 1:
				x.Avoid = s.nodes[rng.IntN(s.Len())].Node.Name
			case 2:
				x.Need.MilliCPU += 100
			}
			out = append(out, x)
		}
	}
	return out
}

// goldenAfter gives some replicas back and runs some blocks dry, as the
// controller does between Place calls.
func goldenAfter(rng *rand.Rand, s *Snapshot, reqs []Request, ds []Decision) {
	for i, d := range ds {
		if d.Node != "" && rng.IntN(10) == 0 {
			s.Release(d.Node, reqs[i].Resource, reqs[i].Need)
		}
		if d.Node != "" && reqs[i].Address && rng.IntN(10) == 0 {
			s.NoAddresses(d.Node)
		}
	}
}
