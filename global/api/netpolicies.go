package api

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
)

// NetworkPolicies are the tenants' network policies. The master sends
// them to every region (controller.link); their status is asked of the
// regions on each read, so it says where they are enforced now.
type NetworkPolicies struct {
	st    *state.State
	cache *store.Cache[api.NetworkPolicy]
	fan   *regionFan
	wrote written
}

// List lists a tenant's policies, with their status.
func (n *NetworkPolicies) List(ctx context.Context, tenant string) ([]api.NetworkPolicy, error) {
	tenant, err := tenantScope(ctx, readResources, tenant)
	if err != nil {
		return nil, err
	}
	if err := caught(ctx, n.cache, &n.wrote); err != nil {
		return nil, err
	}
	items := n.cache.ListPrefix(tenant + "/")
	out := make([]api.NetworkPolicy, 0, len(items))
	for _, it := range items {
		out = append(out, policyView(it))
	}
	slices.SortFunc(out, func(a, b api.NetworkPolicy) int { return strings.Compare(a.Name, b.Name) })
	n.status(ctx, tenant, out)
	return out, nil
}

// Get returns one policy with its status.
func (n *NetworkPolicies) Get(ctx context.Context, tenant, name string) (api.NetworkPolicy, error) {
	tenant, err := policyScope(ctx, readResources, tenant, name)
	if err != nil {
		return api.NetworkPolicy{}, err
	}
	it, err := n.st.Policies.Get(ctx, state.ResourceName(tenant, name))
	if err != nil {
		return api.NetworkPolicy{}, storeErr(err, "networkpolicy", name)
	}
	out := []api.NetworkPolicy{policyView(it)}
	n.status(ctx, tenant, out)
	return out[0], nil
}

// Create stores a new policy in the caller's tenant (or tenant, for
// admins).
func (n *NetworkPolicies) Create(ctx context.Context, tenant string, in api.NetworkPolicy) (api.NetworkPolicy, error) {
	tenant, err := tenantScope(ctx, writeResources, tenant)
	if err != nil {
		return api.NetworkPolicy{}, err
	}
	if err := admit(ctx, policyAdmission, onRequest, &in); err != nil {
		return api.NetworkPolicy{}, err
	}
	if err := caught(ctx, n.cache, &n.wrote); err != nil {
		return api.NetworkPolicy{}, err
	}
	if have := len(n.cache.ListPrefix(tenant + "/")); have >= api.MaxPoliciesPerTenant {
		return api.NetworkPolicy{}, fmt.Errorf("%w: tenant %s has %d network policies, the most a tenant may have", api.ErrQuotaExceeded, tenant, have)
	}
	if in.UID, err = randomHex(16); err != nil {
		return api.NetworkPolicy{}, err
	}
	in.Tenant, in.Generation, in.Status, in.ResourceVersion = tenant, 1, nil, 0
	in.CreatedAt = now()
	in.UpdatedAt = in.CreatedAt
	rev, err := n.st.Policies.Create(ctx, in.Key(), &in)
	if err != nil {
		return api.NetworkPolicy{}, storeErr(err, "networkpolicy", in.Name)
	}
	n.wrote.note(rev)
	in.ResourceVersion = rev
	return in, nil
}

// Update replaces a policy's selector and rules; a resourceVersion in
// it makes the write conditional. The generation grows when the content
// changes.
func (n *NetworkPolicies) Update(ctx context.Context, tenant string, in api.NetworkPolicy) (api.NetworkPolicy, error) {
	tenant, err := policyScope(ctx, writeResources, tenant, in.Name)
	if err != nil {
		return api.NetworkPolicy{}, err
	}
	if err := admit(ctx, policyAdmission, onRequest, &in); err != nil {
		return api.NetworkPolicy{}, err
	}
	key := state.ResourceName(tenant, in.Name)
	var out api.NetworkPolicy
	err = n.st.Store.RetryConflicts(ctx, "networkpolicy "+in.Name, func() error {
		cur, err := n.st.Policies.Get(ctx, key)
		if err != nil {
			return err
		}
		if in.ResourceVersion != 0 && in.ResourceVersion != cur.ModRevision {
			return fmt.Errorf("networkpolicy %q: resourceVersion %d is stale (it is now %d); read it again: %w", in.Name, in.ResourceVersion, cur.ModRevision, api.ErrConflict)
		}
		next := *cur.Value
		next.Selector, next.Ingress, next.Status = in.Selector, in.Ingress, nil
		if !api.SameJSON(next, *cur.Value) {
			next.Generation++
			next.UpdatedAt = now()
		}
		rev, err := n.st.Policies.Update(ctx, key, &next, cur.ModRevision)
		if err != nil {
			return err
		}
		n.wrote.note(rev)
		next.ResourceVersion = rev
		out = next
		return nil
	})
	if err != nil {
		return api.NetworkPolicy{}, storeErr(err, "networkpolicy", in.Name)
	}
	return out, nil
}

// Delete removes a policy; expect, when not 0, is the resourceVersion
// it must have.
func (n *NetworkPolicies) Delete(ctx context.Context, tenant, name string, expect int64) (api.NetworkPolicy, error) {
	tenant, err := policyScope(ctx, writeResources, tenant, name)
	if err != nil {
		return api.NetworkPolicy{}, err
	}
	key := state.ResourceName(tenant, name)
	it, err := n.st.Policies.Get(ctx, key)
	if err != nil {
		return api.NetworkPolicy{}, storeErr(err, "networkpolicy", name)
	}
	if expect != 0 && expect != it.ModRevision {
		return api.NetworkPolicy{}, fmt.Errorf("networkpolicy %q: resourceVersion %d is stale (it is now %d); read it again: %w", name, expect, it.ModRevision, api.ErrConflict)
	}
	rev, err := n.st.Policies.Delete(ctx, key, it.ModRevision)
	if err != nil {
		return api.NetworkPolicy{}, storeErr(err, "networkpolicy", name)
	}
	n.wrote.note(rev)
	return policyView(it), nil
}

// status fills the policies' status from every region: what each holds
// of them and where it enforces them. A region that does not answer is
// named unreachable.
func (n *NetworkPolicies) status(ctx context.Context, tenant string, items []api.NetworkPolicy) {
	if len(items) == 0 || n.fan == nil {
		return
	}
	byName := map[string][]api.PolicyRegionStatus{}
	var mu sync.Mutex
	unreachable, err := n.fan.all(ctx, func(ctx context.Context, region string, c regionv1.RegionServiceClient) error {
		resp, err := c.PolicyStatus(ctx, &regionv1.PolicyStatusRequest{Tenant: tenant})
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for _, st := range resp.GetItems() {
			byName[st.GetName()] = append(byName[st.GetName()], api.PolicyRegionStatus{
				Region: region, ObservedGeneration: st.GetObservedGeneration(),
				Replicas: int(st.GetReplicas()), Nodes: int(st.GetNodes()),
			})
		}
		return nil
	})
	if err != nil {
		return
	}
	for i := range items {
		st := &api.NetworkPolicyStatus{Regions: byName[items[i].Name], Unreachable: unreachable}
		slices.SortFunc(st.Regions, func(a, b api.PolicyRegionStatus) int { return strings.Compare(a.Region, b.Region) })
		items[i].Status = st
	}
}

// policyScope is resourceScope for policies: another tenant's policy is
// "not found".
func policyScope(ctx context.Context, a action, tenant, name string) (string, error) {
	t, err := resourceScope(ctx, a, tenant, name)
	if errors.Is(err, api.ErrNotFound) {
		return "", api.NotFound("networkpolicy", name)
	}
	return t, err
}

func policyView(it store.Item[api.NetworkPolicy]) api.NetworkPolicy {
	p := *it.Value
	p.ResourceVersion = it.ModRevision
	return p
}
