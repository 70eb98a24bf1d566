package quota

import (
	"testing"

	"github.com/stratahq/strata/internal/api"
)

func TestNearFull(t *testing.T) {
	limit := api.Quota{Replicas: 10, VCPUs: 4, MemoryMiB: 1000}
	tests := []struct {
		name string
		use  api.Quota
		want string
	}{
		{"well within", api.Quota{Replicas: 8, VCPUs: 3, MemoryMiB: 800}, ""},
		{"replicas at 90%", api.Quota{Replicas: 9}, "replicas 9 of 10"},
		{"over", api.Quota{Replicas: 12}, "replicas 12 of 10"},
		{"vcpus", api.Quota{VCPUs: 3.6}, "vcpus 3.6 of 4"},
		{"memory", api.Quota{MemoryMiB: 950}, "memoryMiB 950 of 1000"},
		{"an unlimited amount never is", api.Quota{Resources: 1000, Loadbalancers: 50}, ""},
	}
	for _, tt := range tests {
		if got := NearFull(limit, tt.use, 0.9); got != tt.want {
			t.Errorf("%s: NearFull(%+v) = %q; want %q", tt.name, tt.use, got, tt.want)
		}
	}
}
