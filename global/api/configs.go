package api

import (
	"context"
	"fmt"
	"maps"

	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
)

// Configs are the tenants' Configs: key/value data in plain text that
// Compute resources mount or take as environment. They are read from
// etcd (a tenant's are few and read rarely by people), not a cache.
type Configs struct {
	configs *store.Collection[api.Config]
	// roll rolls out the resources that use a Config whose data changed.
	roll func(ctx context.Context, tenant string, ref api.ConfigRef)
	// resources are read to refuse deleting a config in use.
	resources *store.Collection[api.Resource]
}

// Create adds a Config to a tenant.
func (c *Configs) Create(ctx context.Context, tenant string, in api.Config) (api.Config, error) {
	tenant, err := writeScope(ctx, tenant, in.Tenant, "config", "")
	if err != nil {
		return api.Config{}, err
	}
	if err := admit(ctx, configAdmission, onRequest, &in); err != nil {
		return api.Config{}, err
	}
	t := now()
	out := api.Config{Name: in.Name, Tenant: tenant, Labels: in.Labels, Data: in.Data, Generation: 1, CreatedAt: t, UpdatedAt: t}
	rev, err := c.configs.Create(ctx, state.ResourceName(tenant, in.Name), &out)
	if err != nil {
		return api.Config{}, storeErr(err, "config", in.Name)
	}
	out.ResourceVersion = rev
	return out, nil
}

// Get returns a tenant's Config.
func (c *Configs) Get(ctx context.Context, tenant, name string) (api.Config, error) {
	tenant, err := objectScope(ctx, readResources, tenant, "config", name)
	if err != nil {
		return api.Config{}, err
	}
	it, err := c.configs.Get(ctx, state.ResourceName(tenant, name))
	if err != nil {
		return api.Config{}, storeErr(err, "config", name)
	}
	return configView(it), nil
}

// Page returns one page of a tenant's Configs, by name.
func (c *Configs) Page(ctx context.Context, tenant string, q PageQuery) ([]api.Config, string, error) {
	tenant, err := tenantScope(ctx, readResources, tenant)
	if err != nil {
		return nil, "", err
	}
	limit, err := api.PageSize(q.Limit)
	if err != nil {
		return nil, "", err
	}
	page, err := c.configs.ListPrefixPage(ctx, tenant+"/", store.ListOptions{Limit: int64(limit), Continue: q.Continue})
	if err != nil {
		return nil, "", storeErr(err, "configs", "")
	}
	out := make([]api.Config, len(page.Items))
	for i, it := range page.Items {
		out[i] = configView(it)
	}
	return out, page.Continue, nil
}

// Update replaces a Config's labels and data. A resourceVersion in it
// makes the write conditional; without one a lost race is retried.
func (c *Configs) Update(ctx context.Context, tenant string, in api.Config) (api.Config, error) {
	tenant, err := writeScope(ctx, tenant, in.Tenant, "config", in.Name)
	if err != nil {
		return api.Config{}, err
	}
	if err := admit(ctx, configAdmission, onRequest, &in); err != nil {
		return api.Config{}, err
	}
	key := state.ResourceName(tenant, in.Name)
	var out api.Config
	changed := false
	err = c.configs.Store().RetryConflicts(ctx, "update config "+key, func() error {
		changed = false
		it, err := c.configs.Get(ctx, key)
		if err != nil {
			return err
		}
		if err := fresh("config", in.Name, in.ResourceVersion, it.ModRevision); err != nil {
			return err
		}
		cur := it.Value
		if maps.Equal(cur.Data, in.Data) && maps.Equal(cur.Labels, in.Labels) {
			out = configView(it)
			return nil
		}
		changed = !maps.Equal(cur.Data, in.Data)
		if changed {
			cur.Generation++
		}
		cur.Labels, cur.Data, cur.UpdatedAt = in.Labels, in.Data, now()
		rev, err := c.configs.Update(ctx, key, cur, it.ModRevision)
		if err != nil {
			return err
		}
		it.ModRevision = rev
		out = configView(it)
		return nil
	})
	if err != nil {
		return api.Config{}, storeErr(err, "config", in.Name)
	}
	if changed && c.roll != nil {
		c.roll(ctx, tenant, api.ConfigRef{Config: in.Name})
	}
	return out, nil
}

// Delete removes a tenant's Config and returns it. expect, when not 0, is
// the resourceVersion the client read (If-Match).
func (c *Configs) Delete(ctx context.Context, tenant, name string, expect int64) (api.Config, error) {
	tenant, err := objectScope(ctx, writeResources, tenant, "config", name)
	if err != nil {
		return api.Config{}, err
	}
	key := state.ResourceName(tenant, name)
	var out api.Config
	// A retry is a resource of the tenant written since the check, or
	// the config changed (unless expect pins it: then a conflict).
	err = c.configs.Store().RetryConflicts(ctx, "delete config "+key, func() error {
		it, err := c.configs.Get(ctx, key)
		if err != nil {
			return err
		}
		if err := fresh("config", name, expect, it.ModRevision); err != nil {
			return err
		}
		txn := c.configs.Store().Txn()
		if err := refusedInUse(ctx, c.resources, tenant, api.ConfigRef{Config: name}, txn); err != nil {
			return err
		}
		c.configs.TxnDelete(txn, key, it.ModRevision)
		if _, err := txn.Commit(ctx); err != nil {
			return err
		}
		out = configView(it)
		return nil
	})
	if err != nil {
		return api.Config{}, storeErr(err, "config", name)
	}
	return out, nil
}

func configView(it store.Item[api.Config]) api.Config {
	c := *it.Value
	c.ResourceVersion = it.ModRevision
	return c
}

// fresh checks a client's resourceVersion (0: none) against the stored
// one: another is a conflict, the client's condition and not a race to
// retry.
func fresh(what, name string, expect, cur int64) error {
	if expect != 0 && expect != cur {
		return fmt.Errorf("%s %q: resourceVersion %d is stale (it is now %d); read it again: %w",
			what, name, expect, cur, api.ErrConflict)
	}
	return nil
}
