package placement

import (
	"fmt"
	"maps"

	"github.com/stratahq/strata/internal/api"
)

// placement builds what region should run of the resource: the spec with
// the region's overrides, its share of the replicas, the flavor and image
// resolved.
func (v *view) placement(region string, replicas int) (*api.Placement, error) {
	res := regionSpec(v.r, region)
	res.Replicas = replicas
	p := &api.Placement{Region: region, Resource: res}
	if res.Spec.Flavor != "" {
		f, ok := v.in.Catalog.Flavor(res.Spec.Flavor)
		if !ok {
			return nil, fmt.Errorf("flavor %q not found (region %s)", res.Spec.Flavor, region)
		}
		fl := *f
		fl.ResourceVersion = 0
		p.Flavor = &fl
	}
	if cs := res.Spec.Compute; cs != nil && cs.Image != "" {
		if img, ok := v.in.Catalog.Image(v.r.Tenant, cs.Image); ok {
			spec := *img
			p.Image = &spec
		}
	}
	return p, nil
}

// regionSpec is the resource as region runs it: a copy with the region's
// overrides (flavor, image, environment) applied, without status or
// store revision.
func regionSpec(r *api.Resource, region string) api.Resource {
	res := *r
	res.Status = nil
	res.ResourceVersion = 0
	res.Spec = copySpec(r.Spec)
	o, ok := r.Overrides[region]
	if !ok {
		return res
	}
	if o.Flavor != "" {
		res.Spec.Flavor = o.Flavor
	}
	cs := res.Spec.Compute
	if cs == nil {
		return res
	}
	if o.Image != "" {
		cs.Image = o.Image
	}
	if len(o.Env) > 0 {
		env := maps.Clone(cs.Env)
		if env == nil {
			env = map[string]string{}
		}
		maps.Copy(env, o.Env)
		cs.Env = env
	}
	return res
}

func copySpec(s api.ResourceSpec) api.ResourceSpec {
	if s.Compute != nil {
		cs := *s.Compute
		s.Compute = &cs
	}
	return s
}
