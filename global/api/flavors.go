package api

import (
	"context"
	"errors"
	"fmt"

	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
)

// CreateFlavor adds a flavor to the catalog.
func (s *Service) CreateFlavor(ctx context.Context, f api.Flavor) (api.Flavor, error) {
	if _, err := authorize(ctx, writeFlavors); err != nil {
		return api.Flavor{}, err
	}
	if err := f.Validate(); err != nil {
		return api.Flavor{}, err
	}
	t := now()
	f = api.Flavor{Name: f.Name, Kind: f.Kind, Spec: f.Spec, CreatedAt: t, UpdatedAt: t}
	rev, err := s.st.Flavors.Create(ctx, f.Name, &f)
	if err != nil {
		return api.Flavor{}, storeErr(err, "flavor", f.Name)
	}
	f.ResourceVersion = rev
	return f, nil
}

// GetFlavor returns a flavor.
func (s *Service) GetFlavor(ctx context.Context, name string) (api.Flavor, error) {
	if _, err := authorize(ctx, readFlavors); err != nil {
		return api.Flavor{}, err
	}
	if err := api.ValidateName("name", name); err != nil {
		return api.Flavor{}, err
	}
	it, err := s.st.Flavors.Get(ctx, name)
	if err != nil {
		return api.Flavor{}, storeErr(err, "flavor", name)
	}
	return flavorView(it), nil
}

// ListFlavors returns every flavor, by name. The catalog is small and read
// rarely, so it comes from etcd rather than a cache.
func (s *Service) ListFlavors(ctx context.Context) ([]api.Flavor, error) {
	if _, err := authorize(ctx, readFlavors); err != nil {
		return nil, err
	}
	items, _, err := s.st.Flavors.ListAll(ctx)
	if err != nil {
		return nil, storeErr(err, "flavors", "")
	}
	out := make([]api.Flavor, len(items))
	for i, it := range items {
		out[i] = flavorView(it)
	}
	return out, nil
}

// UpdateFlavor changes a flavor's spec; its kind is immutable, because the
// resources using it were checked against it. A resourceVersion in f makes
// the write conditional. Running replicas keep their size until their
// resource's next revision, which snapshots the new spec.
func (s *Service) UpdateFlavor(ctx context.Context, f api.Flavor) (api.Flavor, error) {
	if _, err := authorize(ctx, writeFlavors); err != nil {
		return api.Flavor{}, err
	}
	if err := f.Validate(); err != nil {
		return api.Flavor{}, err
	}
	for attempt := 1; ; attempt++ {
		it, err := s.st.Flavors.Get(ctx, f.Name)
		if err != nil {
			return api.Flavor{}, storeErr(err, "flavor", f.Name)
		}
		cur := it.Value
		switch {
		case f.ResourceVersion != 0 && f.ResourceVersion != it.ModRevision:
			return api.Flavor{}, fmt.Errorf("flavor %q: resourceVersion %d is stale (it is now %d); read it again: %w",
				f.Name, f.ResourceVersion, it.ModRevision, api.ErrConflict)
		case f.Kind != cur.Kind:
			return api.Flavor{}, api.Invalid("kind", "is immutable: flavor %q is a %s flavor, not %s", f.Name, cur.Kind, f.Kind)
		case cur.Spec == f.Spec:
			return flavorView(it), nil
		}
		cur.Spec, cur.UpdatedAt = f.Spec, now()
		rev, err := s.st.Flavors.Update(ctx, f.Name, cur, it.ModRevision)
		if errors.Is(err, store.ErrConflict) && f.ResourceVersion == 0 && attempt < writeAttempts {
			continue
		}
		if err != nil {
			return api.Flavor{}, storeErr(err, "flavor", f.Name)
		}
		it.ModRevision = rev
		return flavorView(it), nil
	}
}

// DeleteFlavor removes a flavor no resource uses, and returns it.
func (s *Service) DeleteFlavor(ctx context.Context, name string) (api.Flavor, error) {
	if _, err := authorize(ctx, writeFlavors); err != nil {
		return api.Flavor{}, err
	}
	if err := api.ValidateName("name", name); err != nil {
		return api.Flavor{}, err
	}
	it, err := s.st.Flavors.Get(ctx, name)
	if err != nil {
		return api.Flavor{}, storeErr(err, "flavor", name)
	}
	// From etcd, not the cache: deleting a flavor in use would strand its
	// resources, so the check reads the latest state. A resource created
	// between this read and the delete is still possible; the region then
	// reports its flavor missing.
	resources, _, err := s.st.Resources.ListAll(ctx)
	if err != nil {
		return api.Flavor{}, storeErr(err, "resources", "")
	}
	for _, r := range resources {
		if usesFlavor(r.Value, name) {
			tenant, rname := state.SplitResourceName(r.Name)
			return api.Flavor{}, fmt.Errorf("flavor %q is used by resource %q of tenant %q: %w", name, rname, tenant, api.ErrConflict)
		}
	}
	if _, err := s.st.Flavors.Delete(ctx, name, it.ModRevision); err != nil {
		return api.Flavor{}, storeErr(err, "flavor", name)
	}
	return flavorView(it), nil
}

func usesFlavor(r *api.Resource, flavor string) bool {
	if r.Spec.Flavor == flavor {
		return true
	}
	for _, o := range r.Overrides {
		if o.Flavor == flavor {
			return true
		}
	}
	return false
}

func flavorView(it store.Item[api.Flavor]) api.Flavor {
	f := *it.Value
	f.ResourceVersion = it.ModRevision
	return f
}
