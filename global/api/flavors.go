package api

import (
	"context"
	"fmt"

	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
)

// Flavors is the flavor catalog: the sizes resources are made in.
type Flavors struct {
	flavors *store.Collection[api.Flavor]
	// resources are read to refuse deleting a flavor in use.
	resources *store.Collection[api.Resource]
}

// Create adds a flavor to the catalog.
func (c *Flavors) Create(ctx context.Context, f api.Flavor) (api.Flavor, error) {
	if _, err := authorize(ctx, writeFlavors); err != nil {
		return api.Flavor{}, err
	}
	if err := admit(ctx, flavorAdmission, onRequest, &f); err != nil {
		return api.Flavor{}, err
	}
	t := now()
	f = api.Flavor{Name: f.Name, Kind: f.Kind, Spec: f.Spec, CreatedAt: t, UpdatedAt: t}
	rev, err := c.flavors.Create(ctx, f.Name, &f)
	if err != nil {
		return api.Flavor{}, storeErr(err, "flavor", f.Name)
	}
	f.ResourceVersion = rev
	return f, nil
}

// Get returns a flavor.
func (c *Flavors) Get(ctx context.Context, name string) (api.Flavor, error) {
	if _, err := authorize(ctx, readFlavors); err != nil {
		return api.Flavor{}, err
	}
	if err := api.ValidateName("name", name); err != nil {
		return api.Flavor{}, err
	}
	it, err := c.flavors.Get(ctx, name)
	if err != nil {
		return api.Flavor{}, storeErr(err, "flavor", name)
	}
	return flavorView(it), nil
}

// List returns every flavor, by name. The catalog is small and read
// rarely, so it comes from etcd rather than a cache.
func (c *Flavors) List(ctx context.Context) ([]api.Flavor, error) {
	if _, err := authorize(ctx, readFlavors); err != nil {
		return nil, err
	}
	items, _, err := c.flavors.ListAll(ctx)
	if err != nil {
		return nil, storeErr(err, "flavors", "")
	}
	out := make([]api.Flavor, len(items))
	for i, it := range items {
		out[i] = flavorView(it)
	}
	return out, nil
}

// PageQuery asks for one page of a list: at most Limit items (0:
// api.DefaultPageSize, at most api.MaxPageSize) after those of the page
// whose Continue token it carries ("": the first page).
type PageQuery struct {
	Limit    int
	Continue string
}

// Page returns one page of the flavors, by name, and the continue token
// of the next one ("" for the last). The pages are read from etcd at the
// revision of the first, so together they are one snapshot; a token
// whose revision etcd has compacted since is refused, and the client
// starts over.
func (c *Flavors) Page(ctx context.Context, q PageQuery) ([]api.Flavor, string, error) {
	if _, err := authorize(ctx, readFlavors); err != nil {
		return nil, "", err
	}
	limit, err := api.PageSize(q.Limit)
	if err != nil {
		return nil, "", err
	}
	page, err := c.flavors.List(ctx, store.ListOptions{Limit: int64(limit), Continue: q.Continue})
	if err != nil {
		return nil, "", storeErr(err, "flavors", "")
	}
	out := make([]api.Flavor, len(page.Items))
	for i, it := range page.Items {
		out[i] = flavorView(it)
	}
	return out, page.Continue, nil
}

// Update changes a flavor's spec; its kind is immutable, because the
// resources using it were checked against it. A resourceVersion in f makes
// the write conditional; without one a lost race is retried. Running
// replicas keep their size until their resource's next revision, which
// snapshots the new spec.
func (c *Flavors) Update(ctx context.Context, f api.Flavor) (api.Flavor, error) {
	if _, err := authorize(ctx, writeFlavors); err != nil {
		return api.Flavor{}, err
	}
	if err := admit(ctx, flavorAdmission, onRequest, &f); err != nil {
		return api.Flavor{}, err
	}
	var out api.Flavor
	err := c.flavors.Store().RetryConflicts(ctx, "update flavor "+f.Name, func() error {
		it, err := c.flavors.Get(ctx, f.Name)
		if err != nil {
			return err
		}
		cur := it.Value
		switch {
		case f.Kind != cur.Kind:
			return api.Invalid("kind", "is immutable: flavor %q is a %s flavor, not %s", f.Name, cur.Kind, f.Kind)
		case f.ResourceVersion != 0 && f.ResourceVersion != it.ModRevision:
			// The client's condition (after the checks of its request),
			// not a race to retry.
			return fmt.Errorf("flavor %q: resourceVersion %d is stale (it is now %d); read it again: %w",
				f.Name, f.ResourceVersion, it.ModRevision, api.ErrConflict)
		case cur.Spec == f.Spec:
			out = flavorView(it)
			return nil
		}
		cur.Spec, cur.UpdatedAt = f.Spec, now()
		rev, err := c.flavors.Update(ctx, f.Name, cur, it.ModRevision)
		if err != nil {
			return err // a conflict starts over, and re-checks resourceVersion
		}
		it.ModRevision = rev
		out = flavorView(it)
		return nil
	})
	if err != nil {
		return api.Flavor{}, storeErr(err, "flavor", f.Name)
	}
	return out, nil
}

// Delete removes a flavor no resource uses, and returns it. expect, when
// not 0, is the resourceVersion the client read (If-Match): another one
// is a conflict.
func (c *Flavors) Delete(ctx context.Context, name string, expect int64) (api.Flavor, error) {
	if _, err := authorize(ctx, writeFlavors); err != nil {
		return api.Flavor{}, err
	}
	if err := api.ValidateName("name", name); err != nil {
		return api.Flavor{}, err
	}
	it, err := c.flavors.Get(ctx, name)
	if err != nil {
		return api.Flavor{}, storeErr(err, "flavor", name)
	}
	if expect != 0 && expect != it.ModRevision {
		return api.Flavor{}, fmt.Errorf("flavor %q: resourceVersion %d is stale (it is now %d); read it again: %w",
			name, expect, it.ModRevision, api.ErrConflict)
	}
	// From etcd, not the cache: deleting a flavor in use would strand its
	// resources, so the check reads the latest state. A resource created
	// between this read and the delete is still possible; the region then
	// reports its flavor missing.
	resources, _, err := c.resources.ListAll(ctx)
	if err != nil {
		return api.Flavor{}, storeErr(err, "resources", "")
	}
	for _, r := range resources {
		if usesFlavor(r.Value, name) {
			tenant, rname := state.SplitResourceName(r.Name)
			return api.Flavor{}, fmt.Errorf("flavor %q is used by resource %q of tenant %q: %w", name, rname, tenant, api.ErrConflict)
		}
	}
	if _, err := c.flavors.Delete(ctx, name, it.ModRevision); err != nil {
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
