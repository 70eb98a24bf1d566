package api

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/rest"
)

// tenantHandlers serve the bearer tokens (Tokens) and the tenants'
// records and quotas (Tenants) over REST.
type tenantHandlers struct {
	tokens  *Tokens
	tenants *Tenants
}

func (h *tenantHandlers) routes() []route {
	return []route{
		{"POST /v1/tokens", h.createToken, nil},
		{"GET /v1/tokens", h.listTokens, paged},
		{"DELETE /v1/tokens/{id}", h.deleteToken, nil},

		{"GET /v1/tenants", h.listTenants, nil},
		{"GET /v1/tenants/{name}", h.getTenant, nil},
		{"PUT /v1/tenants/{name}", h.putTenant, nil},
		{"DELETE /v1/tenants/{name}", h.deleteTenant, nil},
		{"GET /v1/tenants/{name}/quota", h.tenantQuota, nil},
	}
}

func (h *tenantHandlers) createToken(r *http.Request) (any, error) {
	var req TokenRequest
	if err := rest.Decode(r, &req); err != nil {
		return nil, err
	}
	out, err := h.tokens.Create(r.Context(), req)
	return rest.Created(out), err
}

func (h *tenantHandlers) listTokens(r *http.Request) (any, error) {
	q, err := pageQuery(r)
	if err != nil {
		return nil, err
	}
	items, next, err := h.tokens.Page(r.Context(), q)
	return rest.List[TokenInfo]{Items: items, Continue: next}, err
}

func (h *tenantHandlers) deleteToken(r *http.Request) (any, error) {
	id := r.PathValue("id")
	if id == "" || len(id) > 64 || strings.ContainsAny(id, "/_ ") {
		return nil, api.Invalid("id", "%q is not a token id", id)
	}
	out, err := h.tokens.Delete(r.Context(), id)
	if err != nil {
		return nil, fmt.Errorf("token %s: %w", id, err)
	}
	return out, nil
}

func (h *tenantHandlers) listTenants(r *http.Request) (any, error) {
	items, err := h.tenants.List(r.Context())
	return rest.List[api.Tenant]{Items: items}, err
}

func (h *tenantHandlers) getTenant(r *http.Request) (any, error) {
	name, err := rest.PathName(r, "name")
	if err != nil {
		return nil, err
	}
	return h.tenants.Get(r.Context(), name)
}

func (h *tenantHandlers) putTenant(r *http.Request) (any, error) {
	name, err := rest.PathName(r, "name")
	if err != nil {
		return nil, err
	}
	var t api.Tenant
	if err := rest.Decode(r, &t); err != nil {
		return nil, err
	}
	if t.Name, err = nameInBody(t.Name, name); err != nil {
		return nil, err
	}
	out, created, err := h.tenants.Put(r.Context(), t)
	if created {
		return rest.Created(out), err
	}
	return out, err
}

func (h *tenantHandlers) deleteTenant(r *http.Request) (any, error) {
	name, err := rest.PathName(r, "name")
	if err != nil {
		return nil, err
	}
	return h.tenants.Delete(r.Context(), name)
}

func (h *tenantHandlers) tenantQuota(r *http.Request) (any, error) {
	name, err := rest.PathName(r, "name")
	if err != nil {
		return nil, err
	}
	return h.tenants.Quota(r.Context(), name)
}
