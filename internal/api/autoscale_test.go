package api

import (
	"strings"
	"testing"
)

func TestAutoscaleValidate(t *testing.T) {
	ok := AutoscalePolicy{MinReplicas: 1, MaxReplicas: 5, CPUPercent: 60}
	for _, c := range []struct {
		name string
		kind ResourceKind
		edit func(a *AutoscalePolicy)
		want string // "" for valid
	}{
		{"cpu target", KindCompute, func(*AutoscalePolicy) {}, ""},
		{"load balancer target", KindCompute, func(a *AutoscalePolicy) { a.CPUPercent, a.LoadBalancer, a.RequestsPerSecond = 0, "lb", 50 }, ""},
		{"not compute", KindVolume, func(*AutoscalePolicy) {}, "only a Compute resource"},
		{"no target", KindCompute, func(a *AutoscalePolicy) { a.CPUPercent = 0 }, "needs at least one target"},
		{"min 0", KindCompute, func(a *AutoscalePolicy) { a.MinReplicas = 0 }, "autoscale.minReplicas: must be at least 1"},
		{"max under min", KindCompute, func(a *AutoscalePolicy) { a.MaxReplicas = 0 }, "autoscale.maxReplicas: 0 is less than minReplicas"},
		{"requests without a balancer", KindCompute, func(a *AutoscalePolicy) { a.RequestsPerSecond = 5 }, "autoscale.loadBalancer: is required"},
		{"balancer without a target", KindCompute, func(a *AutoscalePolicy) { a.LoadBalancer = "lb" }, "autoscale.loadBalancer: needs a target"},
		{"memory over 100", KindCompute, func(a *AutoscalePolicy) { a.MemoryPercent = 120 }, "autoscale.memoryPercent"},
		{"window too long", KindCompute, func(a *AutoscalePolicy) { w := D(2 * MaxAutoscaleWindow); a.ScaleDown.StabilizationWindow = &w }, "autoscale.scaleDown.stabilizationWindow"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := ok
			c.edit(&a)
			r := Resource{Name: "web", Kind: c.kind, Replicas: 1, Autoscale: &a}
			switch c.kind {
			case KindCompute:
				r.Spec = ResourceSpec{Flavor: "small", Compute: &ComputeSpec{Image: "busybox"}}
			case KindVolume:
				r.Spec = ResourceSpec{Volume: &VolumeSpec{SizeMiB: 64}}
			}
			r.Default()
			err := r.Validate()
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("Validate: %v; want %q", err, c.want)
			}
		})
	}
}

func TestAutoscaleDefaults(t *testing.T) {
	var a AutoscalePolicy
	if a.PeriodOrDefault() != DefaultAutoscalePeriod || a.Tolerance() != 0.1 || a.UpWindow() != 0 || a.DownWindow() != DefaultScaleDownWindow {
		t.Errorf("defaults: period %s tolerance %v windows %s/%s", a.PeriodOrDefault(), a.Tolerance(), a.UpWindow(), a.DownWindow())
	}
	if a.MaxUp(2) != 4 || a.MaxUp(10) != 10 || a.MaxDown(10) != 10 {
		t.Errorf("steps: up from 2 %d, from 10 %d, down from 10 %d; want 4, 10, 10", a.MaxUp(2), a.MaxUp(10), a.MaxDown(10))
	}
	b := AutoscalePolicy{MinReplicas: 2, MaxReplicas: 4}
	if b.Clamp(0) != 2 || b.Clamp(9) != 4 || b.Clamp(3) != 3 || (*AutoscalePolicy)(nil).Clamp(9) != 9 {
		t.Error("Clamp does not keep counts within 2..4 (or changes them without a policy)")
	}
}

func TestSumLoad(t *testing.T) {
	got := SumLoad([]map[string]float64{
		{"replicas": 3, "load/acme/web/replicas": 2, "load/acme/web/milli_cpu": 300, "load/acme/lb/request_rate": 40},
		{"load/acme/web/replicas": 1, "load/acme/web/milli_cpu": 100, "load/acme/web/memory_mib": 12, "load/bad": 1, "load/a//replicas": 1},
	})
	want := []ResourceLoad{
		{Tenant: "acme", Resource: "lb", RequestRate: 40},
		{Tenant: "acme", Resource: "web", Replicas: 3, MilliCPU: 400, MemoryMiB: 12},
	}
	if !SameJSON(got, want) {
		t.Errorf("SumLoad = %+v; want %+v", got, want)
	}
}
