package api

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/stratahq/strata/global/placement"
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
// what the tenant holds is allowed: it refuses growth from then on.
func (t *Tenants) Put(ctx context.Context, in api.Tenant) (api.Tenant, bool, error) {
	if _, err := authorize(ctx, manageTenants); err != nil {
		return api.Tenant{}, false, err
	}
	if err := in.Validate(); err != nil {
		return api.Tenant{}, false, err
	}
	expect := in.ResourceVersion
	in.ResourceVersion, in.UpdatedAt = 0, now()
	cur, err := t.st.Tenants.Get(ctx, in.Name)
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
	out.Usage, out.RegionUsage = t.quotas.usage(name, "", slices.Sorted(maps.Keys(out.RegionQuotas)))
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
	flavors    *store.Cache[api.Flavor]
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
	was, wasIn := q.charge(cur, regions)
	will, willIn := q.charge(next, regions)
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
	others, othersIn := q.usage(tenant, next.Key(), regions)
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

// usage is what tenant holds, in total and in each of regions, over its
// resources but the one whose key is skip.
func (q *quotas) usage(tenant, skip string, regions []string) (api.Quota, map[string]api.Quota) {
	var total api.Quota
	in := make(map[string]api.Quota, len(regions))
	for _, it := range q.resources.ListPrefix(tenant + "/") {
		if it.Name == skip {
			continue
		}
		t, rs := q.charge(it.Value, regions)
		total = total.Add(t)
		for region, c := range rs {
			in[region] = in[region].Add(c)
		}
	}
	return total, in
}

// charge is what r counts against its tenant's quotas: in total, and in
// each of regions. A resource being deleted counts nothing (its deletion
// cannot be undone). A region gets its share of the static split of the
// regions the schedule names; where placement picks the regions, every
// region it may pick is charged all the replicas.
func (q *quotas) charge(r *api.Resource, regions []string) (api.Quota, map[string]api.Quota) {
	if r == nil || r.Deleting() {
		return api.Quota{}, nil
	}
	split, static := placement.StaticSplit(r)
	total := q.total(r, split, static)
	if len(regions) == 0 {
		return total, nil
	}
	in := map[string]api.Quota{}
	for _, region := range regions {
		n, named := split[region]
		switch {
		case static && named && (n > 0 || r.Kind == api.KindImage):
			in[region] = q.amount(r, region, n)
		case !static && (len(r.Schedule.Regions) == 0 || slices.ContainsFunc(r.Schedule.Regions, func(t api.RegionTarget) bool { return t.Name == region })):
			in[region] = q.amount(r, region, r.Replicas)
		}
	}
	return total, in
}

// total is r's amount over every region. A region's override may name
// a larger flavor: the total counts each region's own, or where the
// regions are placement's choice, the largest the replicas may get.
func (q *quotas) total(r *api.Resource, split map[string]int, static bool) api.Quota {
	total := q.amount(r, "", r.Replicas)
	if len(r.Overrides) == 0 {
		return total
	}
	if static {
		total.VCPUs, total.MemoryMiB = 0, 0
		for region, n := range split {
			a := q.amount(r, region, n)
			total.VCPUs, total.MemoryMiB = total.VCPUs+a.VCPUs, total.MemoryMiB+a.MemoryMiB
		}
		return total
	}
	for region := range r.Overrides {
		a := q.amount(r, region, r.Replicas)
		total.VCPUs, total.MemoryMiB = max(total.VCPUs, a.VCPUs), max(total.MemoryMiB, a.MemoryMiB)
	}
	return total
}

// amount is one resource with n replicas in region ("" for its spec
// without overrides).
func (q *quotas) amount(r *api.Resource, region string, n int) api.Quota {
	if j := r.Spec.Job; j != nil && n > 0 {
		// A Job's share runs up to parallelism attempts at once.
		n = max(j.Parallelism, 1)
	}
	a := api.Quota{Resources: 1, Replicas: n}
	if r.Kind == api.KindLoadbalancer {
		a.Loadbalancers = 1
	}
	if v := r.Spec.Volume; v != nil {
		a.VolumeGiB = int64(n) * ((v.SizeMiB + 1023) / 1024)
	}
	flavor := r.Spec.Flavor
	if o, ok := r.Overrides[region]; ok && o.Flavor != "" {
		flavor = o.Flavor
	}
	if it, ok := q.flavors.Get(flavor); ok && flavor != "" {
		a.VCPUs = float64(n) * it.Value.Spec.VCPUs
		a.MemoryMiB = int64(n) * it.Value.Spec.MemoryMiB
	}
	return a
}
