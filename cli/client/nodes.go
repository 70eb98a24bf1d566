package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/stratahq/strata/internal/api"
)

// Nodes is the client of the regions' nodes: reading them, cordon,
// uncordon, drain and removal.
type Nodes struct{ c *conn }

// List returns the nodes of region, or of every region for "".
func (n Nodes) List(ctx context.Context, region, selector string) (List[api.Node], error) {
	q := url.Values{}
	if region != "" {
		q.Set("region", region)
	}
	if selector != "" {
		q.Set("selector", selector)
	}
	return all[api.Node](ctx, n.c, request{method: http.MethodGet, path: "/v1/nodes", query: q})
}

func nodePath(region, node string) string {
	return "/v1/regions/" + escape(region) + "/nodes/" + escape(node)
}

// Get returns a node as its region sees it.
func (n Nodes) Get(ctx context.Context, region, node string) (api.Node, error) {
	return call[api.Node](ctx, n.c, request{method: http.MethodGet, path: nodePath(region, node)})
}

// Delete removes a node from its region.
func (n Nodes) Delete(ctx context.Context, region, node string) error {
	return n.c.do(ctx, request{method: http.MethodDelete, path: nodePath(region, node)}, nil)
}

// Cordon stops new replicas from landing on a node.
func (n Nodes) Cordon(ctx context.Context, region, node, reason string) (api.Node, error) {
	var body any
	if reason != "" {
		body = map[string]string{"reason": reason}
	}
	return call[api.Node](ctx, n.c, request{method: http.MethodPost, path: nodePath(region, node) + "/cordon", body: body})
}

// Uncordon makes a node schedulable again.
func (n Nodes) Uncordon(ctx context.Context, region, node string) (api.Node, error) {
	return call[api.Node](ctx, n.c, request{method: http.MethodPost, path: nodePath(region, node) + "/uncordon"})
}

// Drain starts moving a node's replicas elsewhere.
func (n Nodes) Drain(ctx context.Context, region, node string, d api.DrainRequest) (api.DrainStatus, error) {
	return call[api.DrainStatus](ctx, n.c, request{method: http.MethodPost, path: nodePath(region, node) + "/drain", body: d})
}

// DrainStatus returns the progress of a node's drain.
func (n Nodes) DrainStatus(ctx context.Context, region, node string) (api.DrainStatus, error) {
	return call[api.DrainStatus](ctx, n.c, request{method: http.MethodGet, path: nodePath(region, node) + "/drain"})
}
