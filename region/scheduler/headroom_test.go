package scheduler

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/stratahq/strata/internal/api"
)

func flavor(name string, kind api.ProviderKind, vcpus float64, mem, disk int64) api.Flavor {
	return api.Flavor{Name: name, Kind: kind, Spec: api.FlavorSpec{VCPUs: vcpus, MemoryMiB: mem, DiskMiB: disk}}
}

func addresses(n int) func(*NodeInfo) { return func(ni *NodeInfo) { ni.Addresses = n } }

func TestHeadroom(t *testing.T) {
	small := flavor("small", api.ProviderContainer, 0.5, 512, 0)
	big := flavor("big", api.ProviderContainer, 2, 6144, 0)
	vm := flavor("vm", api.ProviderVM, 1, 1024, 0)
	for _, tc := range []struct {
		name    string
		nodes   []*NodeInfo
		flavors []api.Flavor
		address bool
		want    []api.FlavorHeadroom
	}{
		{"by the scarcest resource, per zone", []*NodeInfo{
			mk("a"),                                // 4 CPUs, 8 GiB: 8 small by CPU, 16 by memory; 1 big by memory
			mk("b", zone("z2"), alloc(3000, 0, 0)), // 1 CPU left: 2 small; no big
			mk("c", zone("z2"), capacity(16000, 2048, 0)), // 2 GiB: 4 small by memory
		}, []api.Flavor{small, big}, false, []api.FlavorHeadroom{
			{Flavor: "small", Replicas: 14, Zones: map[string]int{"z1": 8, "z2": 6}},
			{Flavor: "big", Replicas: 1, Zones: map[string]int{"z1": 1, "z2": 0}},
		}},
		{"only nodes that take replicas of the flavor's kind", []*NodeInfo{
			mk("a"), mk("b", cordoned), mk("c", errored), mk("d", health(api.HealthSuspect)),
			mk("e", serves(api.ProviderVM)),
		}, []api.Flavor{small, vm}, false, []api.FlavorHeadroom{
			{Flavor: "small", Replicas: 8, Zones: map[string]int{"z1": 8}},
			{Flavor: "vm", Replicas: 4, Zones: map[string]int{"z1": 4}},
		}},
		{"free addresses bound compute replicas", []*NodeInfo{
			mk("a", addresses(3)), mk("b", addresses(0)),
		}, []api.Flavor{small}, true, []api.FlavorHeadroom{
			{Flavor: "small", Replicas: 3, Zones: map[string]int{"z1": 3}},
		}},
		{"overcommitted nodes hold none", []*NodeInfo{
			mk("a", alloc(5000, 0, 0)),
		}, []api.Flavor{small, flavor("none", api.ProviderContainer, 0, 0, 0)}, false, []api.FlavorHeadroom{
			{Flavor: "small", Replicas: 0, Zones: map[string]int{"z1": 0}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := NewSnapshot(tc.nodes).Headroom(tc.flavors, tc.address)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v; want %+v", got, tc.want)
			}
		})
	}
}

// The headroom of a flavor is exactly how many replicas of it the
// scheduler places, one after another, before nothing fits (no rule:
// each node's count is its own), on random worlds.
func TestHeadroomIsWhatPlaces(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 34))
	for world := range 200 {
		var nodes, copies []*NodeInfo
		for i := range 1 + rng.IntN(12) {
			edits := []func(*NodeInfo){
				zone([]string{"z1", "z2", "z3"}[rng.IntN(3)]),
				capacity(int64(1000+rng.IntN(8000)), int64(512+rng.IntN(16384)), int64(rng.IntN(3)*10240)),
				alloc(int64(rng.IntN(3000)), int64(rng.IntN(4096)), 0),
				addresses(rng.IntN(20)),
			}
			if rng.IntN(5) == 0 {
				edits = append(edits, cordoned)
			}
			nodes = append(nodes, mk(string(rune('a'+i)), edits...))
			copies = append(copies, mk(string(rune('a'+i)), edits...))
		}
		f := flavor("f", api.ProviderContainer, float64(1+rng.IntN(4))/4, int64(256*(1+rng.IntN(8))), int64(rng.IntN(2)*1024))
		address := rng.IntN(2) == 0
		h := NewSnapshot(nodes).Headroom([]api.Flavor{f}, address)
		want := 0
		if len(h) == 1 {
			want = h[0].Replicas
		}
		s := NewSnapshot(copies)
		placed := 0
		for ; placed <= want+1; placed++ {
			d := s.Place([]Request{{Resource: "t/r", Provider: api.ProviderContainer, Need: f.Spec.Capacity(), Address: address}})
			if d[0].Node == "" {
				break
			}
		}
		if placed != want {
			t.Fatalf("world %d: headroom %d; the scheduler placed %d (flavor %+v, address %v)", world, want, placed, f.Spec, address)
		}
	}
}
