package api

import "time"

// AutoscalePolicy lets the global master set a Compute resource's
// replicas from what its replicas use, with the behaviour of Kubernetes'
// HorizontalPodAutoscaler (autoscaling/v2): every period it computes the
// count each target asks for, ceil(replicas × used / target), takes the
// largest, ignores a change within the tolerance, holds the highest
// recommendation of the scale-down window (and the lowest of the scale-up
// window) and bounds each step by the rules' rates. The split over
// regions is the schedule's, fitted to their headroom, as for a count
// set by hand.
type AutoscalePolicy struct {
	MinReplicas int `json:"minReplicas"`
	MaxReplicas int `json:"maxReplicas"`
	// CPUPercent is the target average CPU use of the replicas, in
	// percent of their flavor's vCPUs.
	CPUPercent int `json:"cpuPercent,omitempty"`
	// MemoryPercent is the target average memory use, in percent of the
	// flavor's memory.
	MemoryPercent int `json:"memoryPercent,omitempty"`
	// LoadBalancer names a Loadbalancer resource of the same tenant whose
	// traffic the replicas serve; RequestsPerSecond and Sessions are
	// targets per replica on its request rate (HTTP requests, or
	// connections for tcp listeners) and on its open connections, summed
	// over the regions it runs in.
	LoadBalancer      string  `json:"loadBalancer,omitempty"`
	RequestsPerSecond float64 `json:"requestsPerSecond,omitempty"`
	Sessions          float64 `json:"sessions,omitempty"`
	// TolerancePercent is the band around a target inside which nothing
	// changes (DefaultAutoscaleTolerance when 0).
	TolerancePercent int `json:"tolerancePercent,omitempty"`
	// Period is how often the master decides (DefaultAutoscalePeriod
	// when 0).
	Period    Duration     `json:"period,omitzero"`
	ScaleUp   ScalingRules `json:"scaleUp,omitzero"`
	ScaleDown ScalingRules `json:"scaleDown,omitzero"`
}

// ScalingRules bound one direction of autoscaling.
type ScalingRules struct {
	// StabilizationWindow is how far back recommendations count: scaling
	// down goes only as low as the highest of them, scaling up only as
	// high as the lowest. Defaults: 0 up, 5 minutes down (the HPA's).
	StabilizationWindow *Duration `json:"stabilizationWindow,omitempty"`
	// Replicas and Percent bound one step (one period): the larger of
	// the two bounds applies, as the HPA's selectPolicy Max. Defaults:
	// up 4 replicas or 100 %, down 100 %. Zero takes the default; to
	// forbid a direction set MaxReplicas or MinReplicas instead.
	Replicas int `json:"replicas,omitempty"`
	Percent  int `json:"percent,omitempty"`
}

// The autoscaling defaults, Kubernetes' where it has one.
const (
	DefaultAutoscalePeriod    = 15 * time.Second
	DefaultAutoscaleTolerance = 10
	DefaultScaleDownWindow    = 5 * time.Minute
	// MaxAutoscaleWindow bounds a stabilization window (an hour).
	MaxAutoscaleWindow = time.Hour
)

// PeriodOrDefault is the decision period.
func (a *AutoscalePolicy) PeriodOrDefault() time.Duration {
	if a.Period.Duration <= 0 {
		return DefaultAutoscalePeriod
	}
	return a.Period.Duration
}

// Tolerance is the tolerance band as a fraction.
func (a *AutoscalePolicy) Tolerance() float64 {
	if a.TolerancePercent <= 0 {
		return DefaultAutoscaleTolerance / 100.0
	}
	return float64(a.TolerancePercent) / 100
}

// UpWindow and DownWindow are the stabilization windows, defaults
// applied.
func (a *AutoscalePolicy) UpWindow() time.Duration {
	if w := a.ScaleUp.StabilizationWindow; w != nil {
		return w.Duration
	}
	return 0
}

// DownWindow is the scale-down stabilization window.
func (a *AutoscalePolicy) DownWindow() time.Duration {
	if w := a.ScaleDown.StabilizationWindow; w != nil {
		return w.Duration
	}
	return DefaultScaleDownWindow
}

// MaxUp is the most one step may add to current replicas.
func (a *AutoscalePolicy) MaxUp(current int) int {
	n, pct := a.ScaleUp.Replicas, a.ScaleUp.Percent
	if n == 0 && pct == 0 {
		n, pct = 4, 100
	}
	return max(n, current*pct/100)
}

// MaxDown is the most one step may remove from current replicas.
func (a *AutoscalePolicy) MaxDown(current int) int {
	n, pct := a.ScaleDown.Replicas, a.ScaleDown.Percent
	if n == 0 && pct == 0 {
		pct = 100
	}
	return max(n, current*pct/100)
}

// Clamp is n within the policy's bounds; n itself without a policy (or
// with bounds Validate refuses).
func (a *AutoscalePolicy) Clamp(n int) int {
	if a == nil || a.MinReplicas < 1 || a.MaxReplicas < a.MinReplicas {
		return n
	}
	return min(max(n, a.MinReplicas), a.MaxReplicas)
}

// validate checks an autoscale policy of a resource of kind.
func (a *AutoscalePolicy) validate(kind ResourceKind) error {
	var p problems
	if kind != KindCompute {
		p.add(Invalid("", "only a Compute resource scales itself (this is a %s)", kind))
	}
	switch {
	case a.MinReplicas < 1:
		p.add(Invalid("minReplicas", "must be at least 1 (got %d)", a.MinReplicas))
	case a.MaxReplicas < a.MinReplicas:
		p.add(Invalid("maxReplicas", "%d is less than minReplicas (%d)", a.MaxReplicas, a.MinReplicas))
	case a.MaxReplicas > MaxReplicas:
		p.add(Invalid("maxReplicas", "%d is more than %d", a.MaxReplicas, MaxReplicas))
	}
	p.add(a.validateTargets())
	if a.Period.Duration < 0 || a.Period.Duration > 10*time.Minute {
		p.add(Invalid("period", "must be between 0 (the default, %s) and 10m", DefaultAutoscalePeriod))
	}
	p.in("scaleUp", a.ScaleUp.validate())
	p.in("scaleDown", a.ScaleDown.validate())
	return p.err()
}

// validateTargets checks the targets: at least one, each in range, the
// load balancer's with a load balancer.
func (a *AutoscalePolicy) validateTargets() error {
	var p problems
	p.add(percentField("cpuPercent", a.CPUPercent, 1000))
	p.add(percentField("memoryPercent", a.MemoryPercent, 100))
	p.add(percentField("tolerancePercent", a.TolerancePercent, 99))
	if a.RequestsPerSecond < 0 || a.Sessions < 0 {
		p.add(Invalid("requestsPerSecond", "targets must not be negative"))
	}
	lbTarget := a.RequestsPerSecond > 0 || a.Sessions > 0
	switch {
	case a.LoadBalancer != "" && !lbTarget:
		p.add(Invalid("loadBalancer", "needs a target: requestsPerSecond or sessions"))
	case a.LoadBalancer == "" && lbTarget:
		p.add(Invalid("loadBalancer", "is required for requestsPerSecond and sessions (the Loadbalancer whose traffic counts)"))
	case a.LoadBalancer != "":
		p.add(ValidateName("loadBalancer", a.LoadBalancer))
	}
	if a.CPUPercent == 0 && a.MemoryPercent == 0 && !lbTarget {
		p.add(Invalid("", "needs at least one target: cpuPercent, memoryPercent, requestsPerSecond or sessions"))
	}
	return p.err()
}

// percentField checks a percent that may be 0 (unset) up to most.
func percentField(name string, v, most int) error {
	if v < 0 || v > most {
		return Invalid(name, "must be between 1 and %d (got %d)", most, v)
	}
	return nil
}

func (s ScalingRules) validate() error {
	var p problems
	if w := s.StabilizationWindow; w != nil && (w.Duration < 0 || w.Duration > MaxAutoscaleWindow) {
		p.add(Invalid("stabilizationWindow", "must be between 0 and %s", MaxAutoscaleWindow))
	}
	if s.Replicas < 0 {
		p.add(Invalid("replicas", "must not be negative"))
	}
	p.add(percentField("percent", s.Percent, 1000))
	return p.err()
}

// AutoscaleStatus is what the master last measured and decided for a
// resource that scales itself.
type AutoscaleStatus struct {
	// Desired is the count the targets ask for now, before the
	// stabilization window and the step bounds.
	Desired int `json:"desired"`
	// Metrics are the targets' readings, e.g. "cpu 83 % of 60 %".
	Metrics []string `json:"metrics,omitempty"`
	// LastScaleAt is when the master last changed the replicas.
	LastScaleAt time.Time `json:"lastScaleAt,omitzero"`
	// Message says why the count is not what the targets ask (no
	// readings yet, bounds, windows); "" when it is.
	Message string `json:"message,omitempty"`
}

// ResourceLoad is what one region's replicas of a resource use, summed
// over the replicas measured (a region heartbeat carries it for every
// resource with measured replicas).
type ResourceLoad struct {
	Tenant   string `json:"tenant"`
	Resource string `json:"resource"`
	// Replicas is how many replicas the sums cover.
	Replicas  int     `json:"replicas"`
	MilliCPU  float64 `json:"milliCPU,omitempty"`
	MemoryMiB float64 `json:"memoryMiB,omitempty"`
	// RequestRate is requests (or connections) per second, Sessions the
	// open connections, of a load balancer.
	RequestRate float64 `json:"requestRate,omitempty"`
	Sessions    float64 `json:"sessions,omitempty"`
}

// Key is the load's resource as tenant/name.
func (l ResourceLoad) Key() string { return l.Tenant + "/" + l.Resource }
