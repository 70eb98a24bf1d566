package api

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/stratahq/strata/global/quota"
	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
)

// Tenants are the tenants' records, which hold their quotas, and the
// usage counted against them.
type Tenants struct {
	st     *state.State
	cache  *store.Cache[api.Tenant]
	quotas *quotas
	// regions are what regionQuotas may name.
	regions *Regions
	// wrote is this replica's latest tenant write, for read-your-writes.
	wrote *written
}

// TenantQuota is a tenant's quotas with what it holds.
type TenantQuota struct {
	Tenant       string               `json:"tenant"`
	Quota        api.Quota            `json:"quota"`
	RegionQuotas map[string]api.Quota `json:"regionQuotas,omitempty"`
	Usage        api.Quota            `json:"usage"`
	// RegionUsage is the usage in each region that has a quota.
	RegionUsage map[string]api.Quota `json:"regionUsage,omitempty"`
}

// List lists the tenants that have a record (admins only).
func (t *Tenants) List(ctx context.Context) ([]api.Tenant, error) {
	if _, err := authorize(ctx, manageTenants); err != nil {
		return nil, err
	}
	if err := caught(ctx, t.cache, t.wrote); err != nil {
		return nil, err
	}
	items := t.cache.List()
	out := make([]api.Tenant, 0, len(items))
	for _, it := range items {
		out = append(out, tenantView(it))
	}
	slices.SortFunc(out, func(a, b api.Tenant) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Get returns a tenant's record (admins, and the tenant's own tokens).
// A tenant without a record is one without quotas.
func (t *Tenants) Get(ctx context.Context, name string) (api.Tenant, error) {
	if _, err := tenantScope(ctx, readTenant, name); err != nil {
		return api.Tenant{}, err
	}
	it, err := t.st.Tenants.Get(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return api.Tenant{Name: name}, nil
	}
	if err != nil {
		return api.Tenant{}, storeErr(err, "tenant", name)
	}
	return tenantView(it), nil
}

// Put creates or replaces a tenant's record (admins only). A
// resourceVersion in it makes the write conditional. A quota lower than
// what the tenant holds is allowed: it refuses growth from then on. A
// region quota must name a registered region (checkRegionQuotas).
func (t *Tenants) Put(ctx context.Context, in api.Tenant) (api.Tenant, bool, error) {
	if _, err := authorize(ctx, manageTenants); err != nil {
		return api.Tenant{}, false, err
	}
	w := &tenantWrite{tenants: t, in: &in}
	if err := admit(ctx, tenantAdmission, onRequest, w); err != nil {
		return api.Tenant{}, false, err
	}
	expect := in.ResourceVersion
	in.ResourceVersion, in.UpdatedAt = 0, now()
	cur, err := t.st.Tenants.Get(ctx, in.Name)
	if err == nil || errors.Is(err, store.ErrNotFound) {
		w.stored = cur.Value
		if rerr := admit(ctx, tenantAdmission, onStored, w); rerr != nil {
			return api.Tenant{}, false, rerr
		}
	}
	var rev int64
	switch {
	case errors.Is(err, store.ErrNotFound):
		if expect != 0 {
			return api.Tenant{}, false, api.NotFound("tenant", in.Name)
		}
		in.CreatedAt = in.UpdatedAt
		rev, err = t.st.Tenants.Create(ctx, in.Name, &in)
	case err != nil:
	case expect != 0 && expect != cur.ModRevision:
		err = fmt.Errorf("tenant %q: resourceVersion %d is stale (it is now %d); read it again: %w", in.Name, expect, cur.ModRevision, api.ErrConflict)
	default:
		in.CreatedAt = cur.Value.CreatedAt
		rev, err = t.st.Tenants.Update(ctx, in.Name, &in, cur.ModRevision)
	}
	if err != nil {
		return api.Tenant{}, false, storeErr(err, "tenant", in.Name)
	}
	t.wrote.note(rev)
	in.ResourceVersion = rev
	return in, cur.Value == nil, nil
}

// checkRegionQuotas checks that the regions in's region quotas name are
// registered, every one at once, as a resource's regions are. A region
// quota that cur (the stored record, nil for none) already holds is not
// checked again: its region may have been deleted since, or the quota
// written by a release that did not check, and a write that changes
// something else (set-quota reads, changes and writes the whole record)
// must not be refused for it. Removing it is the operator's choice.
func (t *Tenants) checkRegionQuotas(ctx context.Context, in api.Tenant, cur *api.Tenant) error {
	var held map[string]api.Quota
	if cur != nil {
		held = cur.RegionQuotas
	}
	var added []string
	for _, region := range sortedKeys(in.RegionQuotas) {
		if _, ok := held[region]; !ok {
			added = append(added, region)
		}
	}
	if len(added) == 0 {
		return nil
	}
	known, err := t.regions.known(ctx)
	if err != nil {
		return err
	}
	errs := make([]error, len(added))
	for i, region := range added {
		errs[i] = registered(known, "regionQuotas."+region, region)
	}
	return api.Join(errs...)
}

// Delete removes a tenant's record, and with it its quotas (admins only);
// its resources and tokens stay.
func (t *Tenants) Delete(ctx context.Context, name string) (api.Tenant, error) {
	if _, err := authorize(ctx, manageTenants); err != nil {
		return api.Tenant{}, err
	}
	if err := api.ValidateName("name", name); err != nil {
		return api.Tenant{}, err
	}
	it, err := t.st.Tenants.Get(ctx, name)
	if err != nil {
		return api.Tenant{}, storeErr(err, "tenant", name)
	}
	rev, err := t.st.Tenants.Delete(ctx, name, it.ModRevision)
	if err != nil {
		return api.Tenant{}, storeErr(err, "tenant", name)
	}
	t.wrote.note(rev)
	return tenantView(it), nil
}

// Quota returns a tenant's quotas and what it holds (admins, and the
// tenant's own tokens).
func (t *Tenants) Quota(ctx context.Context, name string) (TenantQuota, error) {
	if _, err := tenantScope(ctx, readTenant, name); err != nil {
		return TenantQuota{}, err
	}
	if err := caught(ctx, t.cache, t.wrote); err != nil {
		return TenantQuota{}, err
	}
	out := TenantQuota{Tenant: name}
	if it, ok := t.cache.Get(name); ok {
		out.Quota, out.RegionQuotas = it.Value.Quota, it.Value.RegionQuotas
	}
	if err := t.quotas.current(ctx, 0); err != nil {
		return TenantQuota{}, err
	}
	out.Usage, out.RegionUsage = t.quotas.count.Usage(name, "", slices.Sorted(maps.Keys(out.RegionQuotas)))
	return out, nil
}

func tenantView(it store.Item[api.Tenant]) api.Tenant {
	t := *it.Value
	t.ResourceVersion = it.ModRevision
	return t
}

// quotas admit the writes that may grow what a tenant holds.
//
// A limited tenant (one whose record sets a quota) is admitted one write
// at a time: each write that grows its usage rewrites the tenant's
// Admission in its own transaction, conditional on the Admission's
// revision the decision was made on, and computes the usage from the
// resources cache once that holds every write up to that revision. Two
// concurrent admissions decided on the same usage therefore cannot both
// commit; the loser starts over (store.RetryConflicts) and decides on the
// winner's result. Every write also compares the tenant's record, so a
// quota set in between is not missed. Usage is never stored as the
// truth, so there is nothing to repair after a crash: it is the sum of
// the resources.
type quotas struct {
	st         *state.State
	tenants    *store.Cache[api.Tenant]
	admissions *store.Cache[state.Admission]
	resources  *store.Cache[api.Resource]
	count      quota.Counter
	// The latest writes of this replica, for read-your-writes.
	wroteTenants, wroteAdmissions, wroteResources *written
}

// admit checks that next's tenant may hold next where it held cur (nil
// for a new resource), and adds to txn what keeps the decision true:
// the tenant's record unchanged, and for a limited tenant whose usage
// grows, its Admission rewritten at the revision decided on. The error
// wraps api.ErrQuotaExceeded, naming the quota and the numbers.
func (q *quotas) admit(ctx context.Context, txn *store.Txn, cur, next *api.Resource) error {
	tenant := next.Tenant
	if err := caught(ctx, q.tenants, q.wroteTenants); err != nil {
		return err
	}
	var t *api.Tenant
	var tenantRev int64
	if it, ok := q.tenants.Get(tenant); ok {
		t, tenantRev = it.Value, it.ModRevision
	}
	q.st.Tenants.TxnUnchanged(txn, tenant, tenantRev)
	if !t.Limited() {
		return nil
	}
	regions := slices.Sorted(maps.Keys(t.RegionQuotas))
	was, wasIn := q.count.Charge(cur, regions)
	will, willIn := q.count.Charge(next, regions)
	if !grows(was, will, wasIn, willIn) {
		// A write that grows nothing cannot break a quota, whatever
		// runs beside it.
		return nil
	}
	if err := caught(ctx, q.admissions, q.wroteAdmissions); err != nil {
		return err
	}
	var admitted int64
	if it, ok := q.admissions.Get(tenant); ok {
		admitted = it.ModRevision
	}
	if err := q.current(ctx, max(admitted, tenantRev)); err != nil {
		return err
	}
	others, othersIn := q.count.Usage(tenant, next.Key(), regions)
	after := others.Add(will)
	if over := t.Quota.Exceeded(others.Add(was), after); over != "" {
		return fmt.Errorf("%w: %s in use after this request (tenant %s)", api.ErrQuotaExceeded, over, tenant)
	}
	for _, region := range regions {
		if over := t.RegionQuotas[region].Exceeded(othersIn[region].Add(wasIn[region]), othersIn[region].Add(willIn[region])); over != "" {
			return fmt.Errorf("%w: %s in region %s in use after this request (tenant %s)", api.ErrQuotaExceeded, over, region, tenant)
		}
	}
	q.st.Admissions.TxnUnchanged(txn, tenant, admitted)
	return q.st.Admissions.TxnPut(txn, tenant, &state.Admission{Tenant: tenant, Usage: after, At: now()})
}

// committed notes the revision of a transaction admit added to.
func (q *quotas) committed(rev int64) {
	q.wroteAdmissions.note(rev)
	q.wroteResources.note(rev)
}

// grows reports whether any amount, in total or in a region, is larger
// in will than in was.
func grows(was, will api.Quota, wasIn, willIn map[string]api.Quota) bool {
	if larger(was, will) {
		return true
	}
	for region, q := range willIn {
		if larger(wasIn[region], q) {
			return true
		}
	}
	return false
}

// larger reports whether any amount of b is larger than a's.
func larger(a, b api.Quota) bool {
	return b.Resources > a.Resources || b.Replicas > a.Replicas || b.VCPUs > a.VCPUs ||
		b.MemoryMiB > a.MemoryMiB || b.VolumeGiB > a.VolumeGiB || b.Loadbalancers > a.Loadbalancers
}

// current waits until the resources cache holds this replica's latest
// write and revision rev.
func (q *quotas) current(ctx context.Context, rev int64) error {
	w := &written{}
	w.note(max(rev, q.wroteResources.rev.Load()))
	return caught(ctx, q.resources, w)
}
