package placement

import (
	"fmt"
	"maps"

	"github.com/stratahq/strata/internal/api"
)

// placement builds what region should run of r (the resource, or the
// resource at an earlier revision): the spec with the region's overrides,
// its share of the replicas, the flavor and image resolved.
func (v *view) placement(r *api.Resource, region string, replicas int) (*api.Placement, error) {
	res := regionSpec(r, region)
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

// held is the placement of a region the rollout holds back: the revision
// it runs, with the resource's current replicas, overrides and policies,
// so that scaling reaches it before its turn (and when the rollout is
// paused or failed). nil when that revision is no longer stored or its
// placement cannot be built: the region then keeps what it has.
func (v *view) held(region string, sh *Share, replicas int) *api.Placement {
	reg := v.regions[region]
	if reg == nil || !reg.Linked || sh.Revision == 0 {
		return nil
	}
	rev, ok := v.in.Catalog.Revision(v.r.Tenant, v.r.Name, v.r.UID, sh.Revision)
	if !ok {
		return nil
	}
	r := *v.r
	r.Spec, r.Revision = rev.Spec, rev.Number
	p, err := v.placement(&r, region, replicas)
	if err != nil {
		return nil
	}
	return p
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
