package clitest

import (
	"maps"
	"net/http"
	"slices"

	"github.com/stratahq/strata/internal/api"
)

// tenantRoutes serves the tenants' records, quotas and usage.
type tenantRoutes struct{ *Server }

func (s tenantRoutes) routes() map[string]handler {
	return map[string]handler{
		"GET /v1/tenants":              s.listTenants,
		"GET /v1/tenants/{name}":       s.getTenant,
		"PUT /v1/tenants/{name}":       s.putTenant,
		"GET /v1/tenants/{name}/quota": s.tenantQuota,
	}
}

func (s tenantRoutes) listTenants(r *http.Request) (int, any, error) {
	out := []api.Tenant{}
	for _, n := range slices.Sorted(maps.Keys(s.Tenants)) {
		out = append(out, s.Tenants[n])
	}
	return http.StatusOK, map[string]any{"items": out}, nil
}

func (s tenantRoutes) getTenant(r *http.Request) (int, any, error) {
	t, ok := s.Tenants[r.PathValue("name")]
	if !ok {
		t = api.Tenant{Name: r.PathValue("name")}
	}
	return http.StatusOK, t, nil
}

func (s tenantRoutes) putTenant(r *http.Request) (int, any, error) {
	var t api.Tenant
	if err := decode(r, &t); err != nil {
		return 0, nil, err
	}
	if t.Name != r.PathValue("name") {
		return 0, nil, api.Invalid("name", "%q does not match the path", t.Name)
	}
	if err := t.Validate(); err != nil {
		return 0, nil, err
	}
	s.rev++
	t.ResourceVersion = s.rev
	s.Tenants[t.Name] = t
	return http.StatusOK, t, nil
}

func (s tenantRoutes) tenantQuota(r *http.Request) (int, any, error) {
	name := r.PathValue("name")
	t := s.Tenants[name]
	return http.StatusOK, map[string]any{
		"tenant": name, "quota": t.Quota, "regionQuotas": t.RegionQuotas,
		"usage": s.Usage[name], "regionUsage": map[string]api.Quota{},
	}, nil
}
