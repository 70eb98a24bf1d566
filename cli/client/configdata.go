package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/stratahq/strata/internal/api"
)

// Secrets is the client of a tenant's secrets, whose values it reads only
// when asked to reveal them (configs are Objects: Client.Configs).
type Secrets struct{ c *conn }

// secretQuery is the tenant query, with reveal=true when asked.
func (sc Secrets) query(reveal bool) url.Values {
	q := sc.c.tenantQuery()
	if reveal {
		q.Set("reveal", "true")
	}
	return q
}

// List returns the tenant's secrets: their keys, and with reveal
// their values (roles that may read secrets only).
func (sc Secrets) List(ctx context.Context, reveal bool) ([]api.Secret, error) {
	return items[api.Secret](ctx, sc.c, request{method: http.MethodGet, path: "/v1/secrets", query: sc.query(reveal)})
}

// Get returns one secret: its keys, and with reveal its values.
func (sc Secrets) Get(ctx context.Context, name string, reveal bool) (api.Secret, error) {
	return call[api.Secret](ctx, sc.c, request{method: http.MethodGet, path: "/v1/secrets/" + escape(name), query: sc.query(reveal)})
}

// Create creates a secret.
func (sc Secrets) Create(ctx context.Context, s api.Secret) (api.Secret, error) {
	return call[api.Secret](ctx, sc.c, request{method: http.MethodPost, path: "/v1/secrets", query: sc.c.tenantQuery(), body: s})
}

// Update replaces a secret's labels and data.
func (sc Secrets) Update(ctx context.Context, s api.Secret) (api.Secret, error) {
	return call[api.Secret](ctx, sc.c, request{method: http.MethodPut, path: "/v1/secrets/" + escape(s.Name), query: sc.c.tenantQuery(), body: s})
}

// Delete deletes a secret.
func (sc Secrets) Delete(ctx context.Context, name string) (api.Secret, error) {
	return call[api.Secret](ctx, sc.c, request{method: http.MethodDelete, path: "/v1/secrets/" + escape(name), query: sc.c.tenantQuery()})
}
