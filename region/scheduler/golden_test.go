package scheduler

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"testing"

	"github.com/stratahq/strata/internal/api"
)

// goldenDecisions pins, per seed, a digest of every decision that the
// plain scheduler (every node filtered and scored for every replica)
// made on a large randomized cluster: tens of zones or a few, hundreds
// of resources with every rule, pins, avoids, addresses, releases and
// exhausted blocks, over several Place calls. Place's shortcuts must
// keep every decision and every reason: a changed digest is a changed
// placement. The digests were taken from the plain scan, before the
// per-zone trees and the per-snapshot caches.
var goldenDecisions = map[uint64]string{
	1: "cf02b971cce030bd",
	2: "25df6eb75e206d83",
	3: "772a28b6588fb038",
	4: "35e98f4c5c34cd01",
	5: "f5529dd3610f262e",
	6: "75401a2d7aa6af42",
}

// TestPlaceGolden replays the randomized passes of goldenDecisions.
func TestPlaceGolden(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
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
	zones := pick(rng, 1, 3, 40)
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
