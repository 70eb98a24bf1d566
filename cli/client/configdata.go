package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/stratahq/strata/internal/api"
)

// ---- configs ----

// ListConfigs returns the tenant's configs.
func (c *Client) ListConfigs(ctx context.Context) ([]api.Config, error) {
	return items[api.Config](ctx, c, request{method: http.MethodGet, path: "/v1/configs", query: c.tenantQuery()})
}

// GetConfig returns one config.
func (c *Client) GetConfig(ctx context.Context, name string) (api.Config, error) {
	return call[api.Config](ctx, c, request{method: http.MethodGet, path: "/v1/configs/" + escape(name), query: c.tenantQuery()})
}

// CreateConfig creates a config.
func (c *Client) CreateConfig(ctx context.Context, cf api.Config) (api.Config, error) {
	return call[api.Config](ctx, c, request{method: http.MethodPost, path: "/v1/configs", query: c.tenantQuery(), body: cf})
}

// UpdateConfig replaces a config's labels and data.
func (c *Client) UpdateConfig(ctx context.Context, cf api.Config) (api.Config, error) {
	return call[api.Config](ctx, c, request{method: http.MethodPut, path: "/v1/configs/" + escape(cf.Name), query: c.tenantQuery(), body: cf})
}

// DeleteConfig deletes a config.
func (c *Client) DeleteConfig(ctx context.Context, name string) (api.Config, error) {
	return call[api.Config](ctx, c, request{method: http.MethodDelete, path: "/v1/configs/" + escape(name), query: c.tenantQuery()})
}

// ---- secrets ----

// secretQuery is the tenant query, with reveal=true when asked.
func (c *Client) secretQuery(reveal bool) url.Values {
	q := c.tenantQuery()
	if reveal {
		q.Set("reveal", "true")
	}
	return q
}

// ListSecrets returns the tenant's secrets: their keys, and with reveal
// their values (roles that may read secrets only).
func (c *Client) ListSecrets(ctx context.Context, reveal bool) ([]api.Secret, error) {
	return items[api.Secret](ctx, c, request{method: http.MethodGet, path: "/v1/secrets", query: c.secretQuery(reveal)})
}

// GetSecret returns one secret: its keys, and with reveal its values.
func (c *Client) GetSecret(ctx context.Context, name string, reveal bool) (api.Secret, error) {
	return call[api.Secret](ctx, c, request{method: http.MethodGet, path: "/v1/secrets/" + escape(name), query: c.secretQuery(reveal)})
}

// CreateSecret creates a secret.
func (c *Client) CreateSecret(ctx context.Context, s api.Secret) (api.Secret, error) {
	return call[api.Secret](ctx, c, request{method: http.MethodPost, path: "/v1/secrets", query: c.tenantQuery(), body: s})
}

// UpdateSecret replaces a secret's labels and data.
func (c *Client) UpdateSecret(ctx context.Context, s api.Secret) (api.Secret, error) {
	return call[api.Secret](ctx, c, request{method: http.MethodPut, path: "/v1/secrets/" + escape(s.Name), query: c.tenantQuery(), body: s})
}

// DeleteSecret deletes a secret.
func (c *Client) DeleteSecret(ctx context.Context, name string) (api.Secret, error) {
	return call[api.Secret](ctx, c, request{method: http.MethodDelete, path: "/v1/secrets/" + escape(name), query: c.tenantQuery()})
}
