package api

import (
	"net/http"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/rest"
)

// policyHandlers serve the tenants' network policies (NetworkPolicies)
// over REST.
type policyHandlers struct {
	policies *NetworkPolicies
}

func (h *policyHandlers) routes() []route {
	return []route{
		{"POST /v1/networkpolicies", h.createPolicy, inTenant},
		{"GET /v1/networkpolicies", h.listPolicies, inTenant},
		{"GET /v1/networkpolicies/{name}", h.getPolicy, inTenant},
		{"PUT /v1/networkpolicies/{name}", h.updatePolicy, inTenant},
		{"DELETE /v1/networkpolicies/{name}", h.deletePolicy, inTenant},
	}
}

func (h *policyHandlers) createPolicy(r *http.Request) (any, error) {
	var p api.NetworkPolicy
	if err := rest.Decode(r, &p); err != nil {
		return nil, err
	}
	out, err := h.policies.Create(r.Context(), tenantOf(r), p)
	return rest.Created(out), err
}

func (h *policyHandlers) listPolicies(r *http.Request) (any, error) {
	items, err := h.policies.List(r.Context(), tenantOf(r))
	return rest.List[api.NetworkPolicy]{Items: items}, err
}

func (h *policyHandlers) getPolicy(r *http.Request) (any, error) {
	name, err := rest.PathName(r, "name")
	if err != nil {
		return nil, err
	}
	return h.policies.Get(r.Context(), tenantOf(r), name)
}

func (h *policyHandlers) updatePolicy(r *http.Request) (any, error) {
	var p api.NetworkPolicy
	if err := rest.Decode(r, &p); err != nil {
		return nil, err
	}
	if err := putTarget(r, &p.Name, &p.ResourceVersion); err != nil {
		return nil, err
	}
	return h.policies.Update(r.Context(), tenantOf(r), p)
}

func (h *policyHandlers) deletePolicy(r *http.Request) (any, error) {
	name, expect, err := deleteTarget(r)
	if err != nil {
		return nil, err
	}
	return h.policies.Delete(r.Context(), tenantOf(r), name, expect)
}
