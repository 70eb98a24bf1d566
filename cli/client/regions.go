package client

import (
	"context"
	"net/http"

	"github.com/stratahq/strata/internal/api"
)

// Regions is the client of the region registrations.
type Regions struct{ c *conn }

// List returns every region with its status.
func (rg Regions) List(ctx context.Context) ([]api.Region, error) {
	return whole[api.Region](ctx, rg.c, request{method: http.MethodGet, path: "/v1/regions"})
}

// Get returns one region.
func (rg Regions) Get(ctx context.Context, name string) (api.Region, error) {
	return call[api.Region](ctx, rg.c, request{method: http.MethodGet, path: "/v1/regions/" + escape(name)})
}

// Register registers a region or replaces its registration.
func (rg Regions) Register(ctx context.Context, r api.Region) (api.Region, error) {
	return call[api.Region](ctx, rg.c, request{method: http.MethodPost, path: "/v1/regions", body: r})
}

// Delete removes a region no resource names.
func (rg Regions) Delete(ctx context.Context, name string) (api.Region, error) {
	return call[api.Region](ctx, rg.c, request{method: http.MethodDelete, path: "/v1/regions/" + escape(name)})
}
