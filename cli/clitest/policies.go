package clitest

import (
	"net/http"

	"github.com/stratahq/strata/internal/api"
)

// policyRoutes serves the tenants' network policies.
type policyRoutes struct{ *Server }

func (s policyRoutes) routes() map[string]handler {
	return map[string]handler{
		"GET /v1/networkpolicies":           s.listPolicies,
		"POST /v1/networkpolicies":          s.createPolicy,
		"GET /v1/networkpolicies/{name}":    s.getPolicy,
		"PUT /v1/networkpolicies/{name}":    s.updatePolicy,
		"DELETE /v1/networkpolicies/{name}": s.deletePolicy,
	}
}

func (s policyRoutes) listPolicies(r *http.Request) (int, any, error) {
	out := []api.NetworkPolicy{}
	for _, p := range sortedValues(s.Policies) {
		if p.Tenant == tenantOf(r, "") {
			out = append(out, p)
		}
	}
	return http.StatusOK, list[api.NetworkPolicy]{Items: out}, nil
}

func (s policyRoutes) getPolicy(r *http.Request) (int, any, error) {
	p, ok := s.Policies[tenantOf(r, "")+"/"+r.PathValue("name")]
	if !ok {
		return 0, nil, api.NotFound("networkpolicy", r.PathValue("name"))
	}
	return http.StatusOK, p, nil
}

func (s policyRoutes) createPolicy(r *http.Request) (int, any, error) {
	var p api.NetworkPolicy
	if err := decode(r, &p); err != nil {
		return 0, nil, err
	}
	if err := p.Validate(); err != nil {
		return 0, nil, err
	}
	p.Tenant = tenantOf(r, "")
	if _, ok := s.Policies[p.Key()]; ok {
		return 0, nil, api.AlreadyExists("networkpolicy", p.Name)
	}
	p.Generation, p.CreatedAt, p.ResourceVersion = 1, s.now(), s.version()
	s.Policies[p.Key()] = p
	return http.StatusCreated, p, nil
}

func (s policyRoutes) updatePolicy(r *http.Request) (int, any, error) {
	var p api.NetworkPolicy
	if err := decode(r, &p); err != nil {
		return 0, nil, err
	}
	p.Name, p.Tenant = r.PathValue("name"), tenantOf(r, "")
	if err := p.Validate(); err != nil {
		return 0, nil, err
	}
	cur, ok := s.Policies[p.Key()]
	if !ok {
		return 0, nil, api.NotFound("networkpolicy", p.Name)
	}
	cur.Selector, cur.Ingress, cur.Generation, cur.ResourceVersion = p.Selector, p.Ingress, cur.Generation+1, s.version()
	s.Policies[p.Key()] = cur
	return http.StatusOK, cur, nil
}

func (s policyRoutes) deletePolicy(r *http.Request) (int, any, error) {
	key := tenantOf(r, "") + "/" + r.PathValue("name")
	p, ok := s.Policies[key]
	if !ok {
		return 0, nil, api.NotFound("networkpolicy", r.PathValue("name"))
	}
	delete(s.Policies, key)
	return http.StatusOK, p, nil
}
