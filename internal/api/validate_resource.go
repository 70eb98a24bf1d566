package api

import "fmt"

// The validation of a Resource: its name, labels, replicas, schedule,
// overrides, failover and rollout, and its spec by kind (the kinds' own
// parts in validate_compute.go, validate_volume.go, validate_image.go,
// validate_loadbalancer.go).

// Validate checks a resource as a user sent it. Server-set fields are not
// checked; the API overwrites them.
func (r *Resource) Validate() error {
	// Every check runs, so that the client hears of every mistake at
	// once; replicas first, as their errors name the field the client
	// wrote ("replicas", not "spec.replicas").
	var p problems
	p.add(ValidateReplicas(r.Kind, r.Replicas))
	p.add(ValidateName("name", r.Name))
	if r.Tenant != "" {
		p.add(ValidateName("tenant", r.Tenant))
	}
	kindErr := oneOf("kind", r.Kind, ResourceKinds...)
	p.add(kindErr)
	p.add(ValidateLabels("labels", r.Labels))
	if kindErr == nil {
		// The spec's sections depend on the kind: without one, every
		// section would be reported for nothing.
		p.in("spec", r.Spec.validate(r.Kind))
	}
	p.in("schedule", r.Schedule.validate())
	p.add(validateOverrides(r.Overrides))
	if f := r.Failover; f != nil {
		p.in("failover", f.validate())
	}
	p.in("rollout", r.Rollout.validate(r.Replicas))
	if a := r.Autoscale; a != nil {
		p.in("autoscale", a.validate(r.Kind))
	}
	if r.MaxRevisionHistory < 0 || r.MaxRevisionHistory > MaxRevisionHistory {
		p.add(Invalid("maxRevisionHistory", "must be between 0 and %d", MaxRevisionHistory))
	}
	return p.err()
}

// validateOverrides checks the per-region overrides: registered-looking
// region names, a flavor name, an image, an environment.
func validateOverrides(overrides map[string]SpecOverride) error {
	var p problems
	for _, region := range sortedKeys(overrides) {
		if err := ValidateName("overrides", region); err != nil {
			p.add(err)
			continue
		}
		o := overrides[region]
		if o.Flavor != "" {
			p.add(ValidateName("overrides."+region+".flavor", o.Flavor))
		}
		if o.Image != "" {
			p.add(validImage("overrides."+region+".image", o.Image))
		}
		p.add(validateEnv("overrides."+region+".env", o.Env))
	}
	return p.err()
}

func (f *FailoverPolicy) validate() error {
	var p problems
	if f.After.Duration < 0 {
		p.add(Invalid("after", "must not be negative"))
	}
	for i, name := range f.ToRegions {
		p.add(ValidateName(fmt.Sprintf("toRegions[%d]", i), name))
	}
	return p.err()
}

// validate checks a rollout policy for a resource of replicas.
func (ro RolloutPolicy) validate(replicas int) error {
	var p problems
	if ro.MaxUnavailable < 0 {
		p.add(Invalid("maxUnavailable", "must not be negative"))
	}
	if ro.MaxSurge < 0 {
		p.add(Invalid("maxSurge", "must not be negative"))
	}
	switch {
	case ro.MinHealthy < 0:
		p.add(Invalid("minHealthy", "must not be negative"))
	case ro.MinHealthy > replicas && replicas > 0:
		p.add(Invalid("minHealthy", "%d is more than the %d replicas", ro.MinHealthy, replicas))
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"minReadySeconds", ro.MinReadySeconds}, {"progressDeadlineSeconds", ro.ProgressDeadlineSeconds}} {
		switch {
		case f.v < 0:
			p.add(Invalid(f.name, "must not be negative"))
		case f.v > MaxRolloutSeconds:
			p.add(Invalid(f.name, "%d is more than %d (a week)", f.v, MaxRolloutSeconds))
		}
	}
	if ro.MinReadySeconds >= 0 && ro.ProgressDeadlineSeconds >= 0 && ro.ProgressDeadline() <= ro.MinReady() {
		p.add(Invalid("progressDeadlineSeconds", "%s must be more than minReadySeconds (%d)", ro.ProgressDeadline(), ro.MinReadySeconds))
	}
	return p.err()
}

// ValidateReplicas checks a replica count against the limits of kind
// (none for "").
func ValidateReplicas(kind ResourceKind, n int) error {
	switch {
	case n < 0:
		return Invalid("replicas", "must not be negative (got %d)", n)
	case n > MaxReplicas:
		return Invalid("replicas", "%d is more than %d", n, MaxReplicas)
	case kind == KindVolume && n > 1:
		return Invalid("replicas", "a Volume lives on one node: replicas must be 0 or 1, not %d", n)
	case kind == KindJob && n > 1:
		return Invalid("replicas", "a Job runs in one region (its attempts are job.parallelism): replicas must be 0 or 1, not %d", n)
	case kind == KindImage && n != 0:
		return Invalid("replicas", "an Image has no replicas (agents fetch it when needed): omit it or set 0")
	}
	return nil
}

func (s *ResourceSpec) validate(kind ResourceKind) error {
	sections := map[ResourceKind]bool{
		KindCompute:      s.Compute != nil,
		KindVolume:       s.Volume != nil,
		KindImage:        s.Image != nil,
		KindLoadbalancer: s.Loadbalancer != nil,
		KindJob:          s.Job != nil,
	}
	field := map[ResourceKind]string{
		KindCompute: "compute", KindVolume: "volume", KindImage: "image", KindLoadbalancer: "loadbalancer", KindJob: "job",
	}
	if kind == KindJob {
		// A Job's attempts run its compute section.
		sections[KindCompute] = false
	}
	for _, k := range ResourceKinds {
		if k != kind && sections[k] {
			return Invalid(field[k], "is set but the resource's kind is %s", kind)
		}
	}
	if !sections[kind] {
		return Invalid(field[kind], "is required for kind %s", kind)
	}
	if s.Flavor != "" {
		if err := ValidateName("flavor", s.Flavor); err != nil {
			return err
		}
	}
	switch kind {
	case KindCompute:
		if s.Flavor == "" {
			return Invalid("flavor", "is required for kind Compute")
		}
		return within("compute", s.Compute.validate())
	case KindVolume:
		return within("volume", s.Volume.validate())
	case KindImage:
		return within("image", s.Image.validate())
	case KindLoadbalancer:
		return within("loadbalancer", s.Loadbalancer.validate())
	case KindJob:
		return s.validateJob()
	}
	return nil
}

func (s *ScheduleRule) validate() error {
	var p problems
	seen := map[string]bool{}
	for i, r := range s.Regions {
		f := fmt.Sprintf("regions[%d]", i)
		if err := ValidateName(f+".name", r.Name); err != nil {
			p.add(err)
		} else if seen[r.Name] {
			p.add(Invalid(f+".name", "region %q is listed twice", r.Name))
		}
		seen[r.Name] = true
		if r.Weight < 0 {
			p.add(Invalid(f+".weight", "must not be negative"))
		}
	}
	switch {
	case s.SpreadRegions < 0:
		p.add(Invalid("spreadRegions", "must not be negative"))
	case len(s.Regions) > 0 && s.SpreadRegions > len(s.Regions):
		p.add(Invalid("spreadRegions", "%d is more than the %d regions listed", s.SpreadRegions, len(s.Regions)))
	}
	for i, z := range s.Zones {
		p.add(ValidateName(fmt.Sprintf("zones[%d]", i), z))
	}
	p.add(ValidateLabels("nodeSelector", s.NodeSelector))
	p.add(oneOf("antiAffinity", s.AntiAffinity, "", "soft", "hard"))
	p.add(oneOf("strategy", s.Strategy, "", "spread", "binpack"))
	if _, ok := s.ReserveLosses(); !ok {
		p.add(Invalid("reserve", "%q is not N+1 to N+9 (the number of its largest regions whose loss the others must absorb)", s.Reserve))
	}
	return p.err()
}

// ReserveLosses is how many of the resource's largest regions
// schedule.reserve asks the others to absorb the loss of: k for "N+k",
// 0 without a reserve. ok is false for a value that is not "N+1" to
// "N+9".
func (s *ScheduleRule) ReserveLosses() (k int, ok bool) {
	if s.Reserve == "" {
		return 0, true
	}
	if len(s.Reserve) != 3 || s.Reserve[:2] != "N+" || s.Reserve[2] < '1' || s.Reserve[2] > '9' {
		return 0, false
	}
	return int(s.Reserve[2] - '0'), true
}
