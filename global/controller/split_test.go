package controller

import (
	"fmt"
	"testing"

	"github.com/stratahq/strata/internal/api"
)

func TestWeighted(t *testing.T) {
	r := func(w ...int) []api.RegionTarget {
		out := make([]api.RegionTarget, len(w))
		for i, x := range w {
			out[i] = api.RegionTarget{Name: fmt.Sprintf("r%d", i+1), Weight: x}
		}
		return out
	}
	cases := []struct {
		name    string
		total   int
		targets []api.RegionTarget
		want    map[string]int
	}{
		{"one region", 3, r(1), map[string]int{"r1": 3}},
		{"2:1 of 3", 3, r(2, 1), map[string]int{"r1": 2, "r2": 1}},
		{"equal, remainder to the first listed", 5, r(1, 1), map[string]int{"r1": 3, "r2": 2}},
		{"largest remainder", 10, r(1, 1, 1), map[string]int{"r1": 4, "r2": 3, "r3": 3}},
		{"zero weight gets none", 4, r(1, 0), map[string]int{"r1": 4, "r2": 0}},
		{"zero replicas", 0, r(2, 1), map[string]int{"r1": 0, "r2": 0}},
		{"fewer replicas than regions", 1, r(1, 1, 1), map[string]int{"r1": 1, "r2": 0, "r3": 0}},
		{"weights 3:1 of 8", 8, r(3, 1), map[string]int{"r1": 6, "r2": 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := weighted(c.total, c.targets)
			sum := 0
			for _, n := range got {
				sum += n
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) || (sum != c.total && len(c.targets) > 0 && c.targets[0].Weight > 0) {
				t.Errorf("weighted(%d, %v): got %v; want %v", c.total, c.targets, got, c.want)
			}
		})
	}
}

func TestOrderOf(t *testing.T) {
	r := &api.Resource{Schedule: api.ScheduleRule{Regions: []api.RegionTarget{{Name: "b"}, {Name: "a"}}}}
	got := orderOf(r, map[string]int{"a": 1, "b": 1, "z": 1, "c": 1})
	if fmt.Sprint(got) != "[b a c z]" {
		t.Errorf("orderOf: got %v; want the schedule's order, then stand-ins by name: [b a c z]", got)
	}
}
