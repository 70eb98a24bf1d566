package scheduler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stratahq/strata/internal/api"
)

// TestSortByName sorts random names (a shared prefix or not, names that
// are prefixes of others, names equal in their first bytes past the
// prefix, non-ASCII bytes) and wants the order of a plain string sort.
func TestSortByName(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		prefix := pick(rng, "", "node-", "rack-12-host-")
		seen := map[string]bool{}
		var nodes []*NodeInfo
		for range rng.IntN(60) {
			var b strings.Builder
			b.WriteString(prefix)
			for range rng.IntN(14) {
				b.WriteByte(pick[byte](rng, 'a', 'b', '0', '9', 0, 0xff, 'z'))
			}
			if name := b.String(); !seen[name] {
				seen[name] = true
				nodes = append(nodes, &NodeInfo{Node: &api.Node{Name: name}})
			}
		}
		want := make([]string, 0, len(nodes))
		for _, n := range nodes {
			want = append(want, n.Node.Name)
		}
		slices.Sort(want)
		sortByName(nodes)
		got := make([]string, 0, len(nodes))
		for _, n := range nodes {
			got = append(got, n.Node.Name)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d: got %s; want %s", seed, fmt.Sprintf("%q", got), fmt.Sprintf("%q", want))
		}
	}
}
