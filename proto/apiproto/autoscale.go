package apiproto

import (
	"slices"

	"github.com/stratahq/strata/internal/api"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
	"google.golang.org/protobuf/types/known/durationpb"
)

// ---- Autoscaling ----

func autoscalePolicyToPB(a *api.AutoscalePolicy) *resourcev1.AutoscalePolicy {
	if a == nil {
		return nil
	}
	return &resourcev1.AutoscalePolicy{
		MinReplicas:       int32ToPB(a.MinReplicas),
		MaxReplicas:       int32ToPB(a.MaxReplicas),
		CpuPercent:        int32ToPB(a.CPUPercent),
		MemoryPercent:     int32ToPB(a.MemoryPercent),
		LoadBalancer:      a.LoadBalancer,
		RequestsPerSecond: a.RequestsPerSecond,
		Sessions:          a.Sessions,
		TolerancePercent:  int32ToPB(a.TolerancePercent),
		Period:            durationToPB(a.Period),
		ScaleUp:           scalingRulesToPB(&a.ScaleUp),
		ScaleDown:         scalingRulesToPB(&a.ScaleDown),
	}
}

func autoscalePolicyFromPB(p *resourcev1.AutoscalePolicy) api.AutoscalePolicy {
	return api.AutoscalePolicy{
		MinReplicas:       int(p.GetMinReplicas()),
		MaxReplicas:       int(p.GetMaxReplicas()),
		CPUPercent:        int(p.GetCpuPercent()),
		MemoryPercent:     int(p.GetMemoryPercent()),
		LoadBalancer:      p.GetLoadBalancer(),
		RequestsPerSecond: p.GetRequestsPerSecond(),
		Sessions:          p.GetSessions(),
		TolerancePercent:  int(p.GetTolerancePercent()),
		Period:            durationFromPB(p.GetPeriod()),
		ScaleUp:           scalingRulesFromPB(p.GetScaleUp()),
		ScaleDown:         scalingRulesFromPB(p.GetScaleDown()),
	}
}

func scalingRulesToPB(s *api.ScalingRules) *resourcev1.ScalingRules {
	if s == nil {
		return nil
	}
	out := &resourcev1.ScalingRules{Replicas: int32ToPB(s.Replicas), Percent: int32ToPB(s.Percent)}
	if w := s.StabilizationWindow; w != nil {
		out.StabilizationWindow = durationpb.New(w.Duration)
	}
	return out
}

func scalingRulesFromPB(p *resourcev1.ScalingRules) api.ScalingRules {
	out := api.ScalingRules{Replicas: int(p.GetReplicas()), Percent: int(p.GetPercent())}
	if w := p.GetStabilizationWindow(); w != nil {
		d := api.D(w.AsDuration())
		out.StabilizationWindow = &d
	}
	return out
}

func autoscaleStatusToPB(s *api.AutoscaleStatus) *resourcev1.AutoscaleStatus {
	if s == nil {
		return nil
	}
	return &resourcev1.AutoscaleStatus{
		Desired: int32ToPB(s.Desired), Metrics: slices.Clone(s.Metrics), LastScaleAt: timeToPB(s.LastScaleAt), Message: s.Message,
	}
}

func autoscaleStatusFromPB(p *resourcev1.AutoscaleStatus) api.AutoscaleStatus {
	return api.AutoscaleStatus{
		Desired: int(p.GetDesired()), Metrics: slices.Clone(p.GetMetrics()), LastScaleAt: timeFromPB(p.GetLastScaleAt()), Message: p.GetMessage(),
	}
}

func resourceLoadToPB(l *api.ResourceLoad) *resourcev1.ResourceLoad {
	if l == nil {
		return nil
	}
	return &resourcev1.ResourceLoad{
		Tenant: l.Tenant, Resource: l.Resource, Replicas: int32ToPB(l.Replicas),
		MilliCpu: l.MilliCPU, MemoryMib: l.MemoryMiB, RequestRate: l.RequestRate, Sessions: l.Sessions,
	}
}

func resourceLoadFromPB(p *resourcev1.ResourceLoad) api.ResourceLoad {
	return api.ResourceLoad{
		Tenant: p.GetTenant(), Resource: p.GetResource(), Replicas: int(p.GetReplicas()),
		MilliCPU: p.GetMilliCpu(), MemoryMiB: p.GetMemoryMib(), RequestRate: p.GetRequestRate(), Sessions: p.GetSessions(),
	}
}
