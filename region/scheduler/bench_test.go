package scheduler

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stratahq/strata/internal/api"
)

// benchCluster is what a region's snapshot is built from, made once per
// benchmark.
type benchCluster struct {
	nodes     []*api.Node
	allocated []api.Capacity
	placed    []map[string]int
	health    []api.Health
}

// newBenchCluster returns n nodes in 3 zones with varied capacity, a fifth
// of them serving VMs as well as containers, most partly used, a few
// cordoned or down, shuffled as a map would hand them over.
func newBenchCluster(n int) *benchCluster {
	rng := rand.New(rand.NewPCG(1, 2))
	c := &benchCluster{}
	for i := range n {
		cores := []int64{8, 16, 32, 64}[rng.IntN(4)]
		node := &api.Node{
			Name:        fmt.Sprintf("node-%05d", i),
			Zone:        fmt.Sprintf("zone-%d", i%3),
			Schedulable: rng.IntN(100) != 0,
			Labels:      map[string]string{"disk": []string{"ssd", "hdd"}[rng.IntN(2)]},
			Providers:   []api.NodeProvider{{Name: "runc", Kinds: []api.ProviderKind{api.ProviderContainer}}},
			Capacity:    api.Capacity{MilliCPU: cores * 1000, MemoryMiB: cores * 4096, DiskMiB: 1 << 20},
		}
		if i%5 == 0 {
			node.Providers = append(node.Providers, api.NodeProvider{Name: "libvirt", Kinds: []api.ProviderKind{api.ProviderVM}})
		}
		used := rng.Float64() * 0.6
		health := api.HealthUp
		if rng.IntN(200) == 0 {
			health = api.HealthDown
		}
		c.nodes = append(c.nodes, node)
		c.allocated = append(c.allocated, api.Capacity{
			MilliCPU:  int64(used * float64(node.Capacity.MilliCPU)),
			MemoryMiB: int64(used * float64(node.Capacity.MemoryMiB)),
		})
		c.health = append(c.health, health)
		// Replicas of other resources, so that Placed maps are not empty.
		placed := map[string]int{}
		for range rng.IntN(4) {
			placed[fmt.Sprintf("t/other-%d", rng.IntN(500))]++
		}
		c.placed = append(c.placed, placed)
	}
	rng.Shuffle(n, func(i, j int) {
		c.nodes[i], c.nodes[j] = c.nodes[j], c.nodes[i]
		c.allocated[i], c.allocated[j] = c.allocated[j], c.allocated[i]
		c.placed[i], c.placed[j] = c.placed[j], c.placed[i]
		c.health[i], c.health[j] = c.health[j], c.health[i]
	})
	return c
}

// infos returns fresh NodeInfos, as the controller builds them each pass.
func (c *benchCluster) infos() []*NodeInfo {
	out := make([]*NodeInfo, len(c.nodes))
	for i, n := range c.nodes {
		placed := make(map[string]int, len(c.placed[i]))
		for k, v := range c.placed[i] {
			placed[k] = v
		}
		out[i] = &NodeInfo{Node: n, Health: c.health[i], Allocated: c.allocated[i], Placed: placed}
	}
	return out
}

// benchRequests returns replicas of resources, perResource each, grouped by
// resource as the controller sends them: half with soft anti-affinity,
// every tenth bin-packed, every seventh on SSD nodes, every third in two
// zones only, the rest spread by the default.
func benchRequests(resources, perResource int) []Request {
	flavors := []api.FlavorSpec{
		{VCPUs: 0.5, MemoryMiB: 512},
		{VCPUs: 1, MemoryMiB: 2048, DiskMiB: 10240},
		{VCPUs: 2, MemoryMiB: 4096, DiskMiB: 20480},
		{VCPUs: 4, MemoryMiB: 8192},
	}
	var out []Request
	for i := range resources {
		r := Request{
			Resource: fmt.Sprintf("tenant-%d/app-%d", i%7, i),
			Provider: api.ProviderContainer,
			Need:     flavors[i%len(flavors)].Capacity(),
		}
		if i%2 == 0 {
			r.Rule.AntiAffinity = "soft"
		}
		if i%10 == 0 {
			r.Rule.Strategy = "binpack"
		}
		if i%7 == 0 {
			r.Rule.NodeSelector = map[string]string{"disk": "ssd"}
		}
		if i%3 == 0 {
			r.Rule.Zones = []string{"zone-0", "zone-2"}
		}
		for range perResource {
			out = append(out, r)
		}
	}
	return out
}

// BenchmarkPlace1000On10000Nodes places 1,000 replicas of 100 resources
// in one batch on 10,000 nodes.
func BenchmarkPlace1000On10000Nodes(b *testing.B) {
	c := newBenchCluster(10000)
	reqs := benchRequests(100, 10)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s := NewSnapshot(c.infos())
		b.StartTimer()
		for _, d := range s.Place(reqs) {
			if d.Node == "" {
				b.Fatalf("got unplaced (%s); want every replica placed", d.Reason)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/replica")
}

// BenchmarkPass1000On10000Nodes is one controller pass as B7 counts it:
// the snapshot of 10,000 nodes built (as every pass builds it) and 1,000
// replicas of 100 resources placed on it. Only collecting the nodes'
// infos, which the controller keeps current between passes, is left out.
func BenchmarkPass1000On10000Nodes(b *testing.B) {
	c := newBenchCluster(10000)
	reqs := benchRequests(100, 10)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		infos := c.infos()
		b.StartTimer()
		for _, d := range NewSnapshot(infos).Place(reqs) {
			if d.Node == "" {
				b.Fatalf("got unplaced (%s); want every replica placed", d.Reason)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/replica")
}

// BenchmarkPlacePerResource places the same replicas one resource at a
// time, as the controller calls Place, so that a cost paid per call shows.
func BenchmarkPlacePerResource(b *testing.B) {
	c := newBenchCluster(10000)
	reqs := benchRequests(100, 10)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s := NewSnapshot(c.infos())
		b.StartTimer()
		for j := 0; j < len(reqs); j += 10 {
			for _, d := range s.Place(reqs[j : j+10]) {
				if d.Node == "" {
					b.Fatalf("got unplaced (%s); want every replica placed", d.Reason)
				}
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/replica")
}

// BenchmarkSnapshotBuild builds a snapshot of 10,000 nodes, once per
// controller pass.
func BenchmarkSnapshotBuild(b *testing.B) {
	c := newBenchCluster(10000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		infos := c.infos()
		b.StartTimer()
		NewSnapshot(infos)
	}
}
