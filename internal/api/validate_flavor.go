package api

import "math"

// The validation of a Flavor and its spec.

// Validate checks a flavor.
func (f *Flavor) Validate() error {
	var p problems
	p.add(ValidateName("name", f.Name))
	p.add(oneOf("kind", f.Kind, ProviderKinds...))
	p.in("spec", f.Spec.validate(f.Kind))
	return p.err()
}

func (s *FlavorSpec) validate(kind ProviderKind) error {
	var p problems
	switch {
	case math.IsNaN(s.VCPUs) || s.VCPUs <= 0:
		p.add(Invalid("vcpus", "must be greater than 0"))
	case s.VCPUs > 1024:
		p.add(Invalid("vcpus", "%g is more than 1024", s.VCPUs))
	case kind == ProviderVM && s.VCPUs != math.Trunc(s.VCPUs):
		p.add(Invalid("vcpus", "a VM needs a whole number of vCPUs, not %g", s.VCPUs))
	}
	switch {
	case s.MemoryMiB <= 0:
		p.add(Invalid("memoryMiB", "must be greater than 0"))
	case s.MemoryMiB > 4<<20:
		p.add(Invalid("memoryMiB", "%d is more than 4 TiB", s.MemoryMiB))
	}
	if s.DiskMiB < 0 {
		p.add(Invalid("diskMiB", "must not be negative"))
	}
	return p.err()
}
