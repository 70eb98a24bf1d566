package client

import (
	"context"
	"net/http"

	"github.com/stratahq/strata/internal/api"
)

// Tenants is the client of the tenants' records: quotas, and usage
// against them.
type Tenants struct{ c *conn }

// TenantQuota is a tenant's quotas with what it holds
// (GET /v1/tenants/<t>/quota).
type TenantQuota struct {
	Tenant       string               `json:"tenant"`
	Quota        api.Quota            `json:"quota"`
	RegionQuotas map[string]api.Quota `json:"regionQuotas,omitempty"`
	Usage        api.Quota            `json:"usage"`
	RegionUsage  map[string]api.Quota `json:"regionUsage,omitempty"`
}

// List returns the tenants that have a record (admins only).
func (tn Tenants) List(ctx context.Context) ([]api.Tenant, error) {
	return whole[api.Tenant](ctx, tn.c, request{method: http.MethodGet, path: "/v1/tenants"})
}

// Get returns a tenant's record (one without a record: its name).
func (tn Tenants) Get(ctx context.Context, name string) (api.Tenant, error) {
	return call[api.Tenant](ctx, tn.c, request{method: http.MethodGet, path: "/v1/tenants/" + escape(name)})
}

// Put creates or replaces a tenant's record; a ResourceVersion in
// t makes it conditional.
func (tn Tenants) Put(ctx context.Context, t api.Tenant) (api.Tenant, error) {
	return call[api.Tenant](ctx, tn.c, request{method: http.MethodPut, path: "/v1/tenants/" + escape(t.Name), body: t})
}

// Quota returns a tenant's quotas and usage.
func (tn Tenants) Quota(ctx context.Context, name string) (TenantQuota, error) {
	return call[TenantQuota](ctx, tn.c, request{method: http.MethodGet, path: "/v1/tenants/" + escape(name) + "/quota"})
}
