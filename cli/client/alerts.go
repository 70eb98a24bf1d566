package client

import (
	"context"
	"net/http"

	"github.com/stratahq/strata/internal/api"
)

// ListAlertRules returns every alert rule with its delivery state.
func (c *Client) ListAlertRules(ctx context.Context) ([]api.AlertRule, error) {
	return items[api.AlertRule](ctx, c, request{method: http.MethodGet, path: "/v1/alertrules"})
}

// GetAlertRule returns one alert rule with its delivery state.
func (c *Client) GetAlertRule(ctx context.Context, name string) (api.AlertRule, error) {
	return call[api.AlertRule](ctx, c, request{method: http.MethodGet, path: "/v1/alertrules/" + escape(name)})
}

// CreateAlertRule creates an alert rule.
func (c *Client) CreateAlertRule(ctx context.Context, r api.AlertRule) (api.AlertRule, error) {
	return call[api.AlertRule](ctx, c, request{method: http.MethodPost, path: "/v1/alertrules", body: r})
}

// UpdateAlertRule replaces an alert rule; without a receiver secret the
// server keeps the one it has.
func (c *Client) UpdateAlertRule(ctx context.Context, r api.AlertRule) (api.AlertRule, error) {
	return call[api.AlertRule](ctx, c, request{method: http.MethodPut, path: "/v1/alertrules/" + escape(r.Name), body: r})
}

// DeleteAlertRule deletes an alert rule.
func (c *Client) DeleteAlertRule(ctx context.Context, name string) (api.AlertRule, error) {
	return call[api.AlertRule](ctx, c, request{method: http.MethodDelete, path: "/v1/alertrules/" + escape(name)})
}
