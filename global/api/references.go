package api

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
)

// checkReferences checks what a resource names outside itself: its flavor
// (which must exist and fit its kind), the regions it names (which must be
// registered), its Configs and Secrets, a compute image (an Image
// resource of the tenant, or an OCI reference) and that a VM has no
// securityContext. It returns the flavor, nil if none. txn is the
// transaction that writes r: what must still hold when it commits (the
// Configs and Secrets named) is compared in it.
func (s *Resources) checkReferences(ctx context.Context, r *api.Resource, txn *store.Txn) (*api.Flavor, error) {
	flavor, err := s.fittingFlavor(ctx, r, "spec.flavor", r.Spec.Flavor)
	if err != nil {
		return nil, err
	}
	known, err := s.regions.known(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkRegions(r, known); err != nil {
		return nil, err
	}
	if err := s.checkOverrides(ctx, r, flavor); err != nil {
		return nil, err
	}
	if c := r.Spec.Compute; c != nil {
		if flavor != nil && flavor.Kind == api.ProviderVM && c.SecurityContext != nil {
			// Refused rather than ignored: a VM's users are its guest's.
			return nil, api.Invalid("spec.compute.securityContext", "is for containers: a VM's users are its guest's (flavor %q is a vm flavor)", flavor.Name)
		}
		if err := s.checkConfigRefs(ctx, r, flavor, txn); err != nil {
			return nil, err
		}
		if err := s.checkImage(ctx, r.Tenant, "spec.compute.image", c.Image, flavor); err != nil {
			return nil, err
		}
		if err := s.checkPod(ctx, r.Tenant, c, flavor); err != nil {
			return nil, err
		}
	}
	return flavor, nil
}

// checkPod checks what a pod adds against the flavor: pods and exec
// probes are for containers, the containers' resources fit in the flavor,
// and every container's image is one the tenant may run.
func (s *Resources) checkPod(ctx context.Context, tenant string, c *api.ComputeSpec, flavor *api.Flavor) error {
	if flavor != nil {
		if err := api.Join(c.CheckForKind(flavor.Kind), c.CheckResources(flavor.Spec)); err != nil {
			return err
		}
	}
	for _, list := range []struct {
		field string
		cs    []api.Container
	}{{"initContainers", c.InitContainers}, {"containers", c.Containers}} {
		for i, ct := range list.cs {
			if err := s.checkImage(ctx, tenant, fmt.Sprintf("spec.compute.%s[%d].image", list.field, i), ct.Image, flavor); err != nil {
				return err
			}
		}
	}
	return nil
}

// registered checks that the region name, which field names, is
// registered (known is Regions.known's).
func registered(known func(string) bool, field, name string) error {
	if !known(name) {
		return api.Invalid(field, "region %q is not registered", name)
	}
	return nil
}

// checkRegions checks that every region r names is registered.
func checkRegions(r *api.Resource, known func(string) bool) error {
	registered := func(field, name string) error { return registered(known, field, name) }
	for i, t := range r.Schedule.Regions {
		if err := registered(fmt.Sprintf("schedule.regions[%d].name", i), t.Name); err != nil {
			return err
		}
	}
	for _, region := range sortedKeys(r.Overrides) {
		if err := registered("overrides."+region, region); err != nil {
			return err
		}
	}
	if f := r.Failover; f != nil {
		for i, name := range f.ToRegions {
			if err := registered(fmt.Sprintf("failover.toRegions[%d]", i), name); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkOverrides checks the flavor and image each region's override
// names: a flavor of the same kind as the spec's, an image as for the
// spec.
func (s *Resources) checkOverrides(ctx context.Context, r *api.Resource, flavor *api.Flavor) error {
	for _, region := range sortedKeys(r.Overrides) {
		field := "overrides." + region
		o := r.Overrides[region]
		of, err := s.fittingFlavor(ctx, r, field+".flavor", o.Flavor)
		if err != nil {
			return err
		}
		if of != nil && flavor != nil && of.Kind != flavor.Kind {
			return api.Invalid(field+".flavor", "flavor %q is a %s flavor but spec.flavor %q is a %s flavor", of.Name, of.Kind, flavor.Name, flavor.Kind)
		}
		if o.Image != "" {
			if err := s.checkImage(ctx, r.Tenant, field+".image", o.Image, flavor); err != nil {
				return err
			}
		}
	}
	return nil
}

// fittingFlavor reads flavor name (nil for "") and checks that it fits r's
// kind.
func (s *Resources) fittingFlavor(ctx context.Context, r *api.Resource, field, name string) (*api.Flavor, error) {
	if name == "" {
		return nil, nil
	}
	f, err := s.flavor(ctx, field, name)
	if err != nil {
		return nil, err
	}
	var fits bool
	want := ""
	switch r.Kind {
	case api.KindCompute:
		fits, want = f.Kind == api.ProviderContainer || f.Kind == api.ProviderVM, "a container or vm flavor"
	case api.KindJob:
		fits, want = f.Kind == api.ProviderContainer || f.Kind == api.ProviderVM, "a container or vm flavor"
		if f.Kind == api.ProviderVM && r.Spec.Compute != nil && len(r.Spec.Compute.Command)+len(r.Spec.Compute.Args) == 0 {
			// The guest's init runs the command and powers off with its
			// exit code; a VM without one never ends.
			return nil, api.Invalid("spec.compute.command", "a Job of a vm flavor (%q) needs a command: the guest runs it to its end and powers off", name)
		}
	case api.KindLoadbalancer:
		fits, want = f.Kind == api.ProviderLoadbalancer, "a loadbalancer flavor"
	case api.KindVolume:
		fits, want = r.Spec.Volume != nil && f.Kind == r.Spec.Volume.Provider, "a flavor of the volume's provider"
	case api.KindImage:
		return nil, api.Invalid(field, "an Image takes no flavor")
	}
	if !fits {
		return nil, api.Invalid(field, "flavor %q is a %s flavor; a %s resource needs %s", name, f.Kind, r.Kind, want)
	}
	return f, nil
}

// flavor reads a flavor that field names. The cache answers the common
// case without an etcd round trip; a miss may be a flavor another replica
// just wrote, so etcd decides.
func (s *Resources) flavor(ctx context.Context, field, name string) (*api.Flavor, error) {
	if it, ok := s.flavors.Get(name); ok {
		return it.Value, nil
	}
	it, err := s.st.Flavors.Get(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, api.Invalid(field, "flavor %q does not exist", name)
	}
	if err != nil {
		return nil, storeErr(err, "flavor", name)
	}
	return it.Value, nil
}

// checkImage accepts an Image resource of the tenant, or, for containers,
// an OCI reference (Validate checked its grammar); the region resolves it.
func (s *Resources) checkImage(ctx context.Context, tenant, field, image string, flavor *api.Flavor) error {
	vm := flavor != nil && flavor.Kind == api.ProviderVM
	if api.ValidateName(field, image) == nil {
		found, err := s.imageResource(ctx, tenant, image, vm)
		if err != nil || found {
			return err
		}
	}
	if vm {
		return api.Invalid(field, "a VM boots from an Image resource, and tenant %q has no Image %q", tenant, image)
	}
	return nil // an OCI reference, whose grammar Validate checked (api.ValidateImageRef)
}

// imageResource reports whether tenant has an Image resource called name.
// A container accepts an OCI reference anyway, so only a VM (vm) needs
// etcd's word when the cache has no such Image (another replica may have
// just created it).
func (s *Resources) imageResource(ctx context.Context, tenant, name string, vm bool) (bool, error) {
	if it, ok := s.resources.Get(state.ResourceName(tenant, name)); ok && it.Value.Kind == api.KindImage {
		return true, nil
	}
	if !vm {
		return false, nil
	}
	it, err := s.st.Resources.Get(ctx, state.ResourceName(tenant, name))
	switch {
	case err == nil:
		return it.Value.Kind == api.KindImage, nil
	case errors.Is(err, store.ErrNotFound):
		return false, nil
	}
	return false, storeErr(err, "image", name)
}

func flavorSpec(f *api.Flavor) *api.FlavorSpec {
	if f == nil {
		return nil
	}
	spec := f.Spec
	return &spec
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
