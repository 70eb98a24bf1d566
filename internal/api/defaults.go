package api

import "time"

// The defaults a Resource gets for what its client left out.

// Default fills in what a resource leaves out. It runs before Validate.
func (r *Resource) Default() {
	orDefault(&r.Tenant, "default")
	orDefault(&r.MaxRevisionHistory, DefaultRevisionHistory)
	if j := r.Spec.Job; j != nil {
		j.Default()
		if c := r.Spec.Compute; c != nil {
			orDefault(&c.RestartPolicy, RestartNever)
		}
	}
	if c := r.Spec.Compute; c != nil {
		c.defaults()
	}
	if v := r.Spec.Volume; v != nil {
		v.defaults()
	}
	if lb := r.Spec.Loadbalancer; lb != nil {
		lb.defaults()
	}
	for i := range r.Schedule.Regions {
		orDefault(&r.Schedule.Regions[i].Weight, 1)
	}
}

// orDefault sets *field to def when the user left it out (zero).
func orDefault[T comparable](field *T, def T) {
	var zero T
	if *field == zero {
		*field = def
	}
}

func (c *ComputeSpec) defaults() {
	orDefault(&c.RestartPolicy, RestartAlways)
	for i := range c.Ports {
		orDefault(&c.Ports[i].Protocol, "tcp")
	}
}

func (v *VolumeSpec) defaults() {
	orDefault(&v.Provider, ProviderContainer)
	if v.Provider == ProviderVM {
		orDefault(&v.Format, VolumeQcow2)
	}
	orDefault(&v.Format, VolumeDir)
}

func (lb *LoadbalancerSpec) defaults() {
	orDefault(&lb.Algorithm, "roundrobin")
	for i := range lb.Listeners {
		l := &lb.Listeners[i]
		orDefault(&l.Protocol, "tcp")
		orDefault(&l.TargetPort, l.Port)
	}
	if hc := lb.HealthCheck; hc != nil {
		orDefault(&hc.Type, "tcp")
		orDefault(&hc.Interval, D(2*time.Second))
		orDefault(&hc.Rise, 2)
		orDefault(&hc.Fall, 2)
	}
}

// DefaultReplicas is the replica count of a kind when the user says none.
func DefaultReplicas(k ResourceKind) int {
	if k == KindImage {
		return 0
	}
	return 1
}
