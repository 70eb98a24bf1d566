package client

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// List is the shape of every list reply.
type List[T any] struct {
	Items    []T    `json:"items"`
	Continue string `json:"continue,omitempty"`
	// Unreachable names the regions that did not answer a fan-out (nodes,
	// replicas): the list is partial.
	Unreachable []string `json:"unreachable,omitempty"`
}

// Status is the global tier's overview (GET /v1/status).
type Status struct {
	ID          string       `json:"id"`
	Leader      string       `json:"leader,omitempty"`
	LeaderSince time.Time    `json:"leaderSince,omitzero"`
	IsLeader    bool         `json:"isLeader"`
	Version     string       `json:"version"`
	Regions     []api.Region `json:"regions"`
}

// ResourceQuery selects resources.
type ResourceQuery struct {
	Selector string
	Kind     string
}

// call makes the request r and decodes the reply into a T.
func call[T any](ctx context.Context, c *Client, r request) (T, error) {
	var out T
	err := c.do(ctx, r, &out)
	return out, err
}

// pageSize is the limit the client asks pages of; the server cuts a
// larger one to its maximum.
const pageSize = 500

// all makes the list request r and follows its pages (continue) to the
// end, so that a list shows everything however the server pages it. The
// regions unreachable on any page are all named. r must be a paged list
// (one that takes limit and continue): the API refuses a query parameter
// a route does not take.
func all[T any](ctx context.Context, c *Client, r request) (List[T], error) {
	var out List[T]
	q := url.Values{}
	for k, v := range r.query {
		q[k] = v
	}
	q.Set("limit", strconv.Itoa(pageSize))
	r.query = q
	for {
		var l List[T]
		if err := c.do(ctx, r, &l); err != nil {
			return List[T]{}, err
		}
		out.Items = append(out.Items, l.Items...)
		for _, u := range l.Unreachable {
			if !slices.Contains(out.Unreachable, u) {
				out.Unreachable = append(out.Unreachable, u)
			}
		}
		if l.Continue == "" {
			return out, nil
		}
		q.Set("continue", l.Continue)
	}
}

// items is all's items.
func items[T any](ctx context.Context, c *Client, r request) ([]T, error) {
	l, err := all[T](ctx, c, r)
	return l.Items, err
}

// whole is the items of a list that comes in one answer (regions,
// tenants, a resource's revisions: lists bounded by configuration).
func whole[T any](ctx context.Context, c *Client, r request) ([]T, error) {
	l, err := call[List[T]](ctx, c, r)
	return l.Items, err
}

// ---- flavors ----

// ListFlavors returns every flavor.
func (c *Client) ListFlavors(ctx context.Context) ([]api.Flavor, error) {
	return items[api.Flavor](ctx, c, request{method: http.MethodGet, path: "/v1/flavors"})
}

// GetFlavor returns one flavor.
func (c *Client) GetFlavor(ctx context.Context, name string) (api.Flavor, error) {
	return call[api.Flavor](ctx, c, request{method: http.MethodGet, path: "/v1/flavors/" + escape(name)})
}

// CreateFlavor creates a flavor.
func (c *Client) CreateFlavor(ctx context.Context, f api.Flavor) (api.Flavor, error) {
	return call[api.Flavor](ctx, c, request{method: http.MethodPost, path: "/v1/flavors", body: f})
}

// UpdateFlavor replaces a flavor's spec.
func (c *Client) UpdateFlavor(ctx context.Context, f api.Flavor) (api.Flavor, error) {
	return call[api.Flavor](ctx, c, request{method: http.MethodPut, path: "/v1/flavors/" + escape(f.Name), body: f})
}

// DeleteFlavor deletes a flavor.
func (c *Client) DeleteFlavor(ctx context.Context, name string) (api.Flavor, error) {
	return call[api.Flavor](ctx, c, request{method: http.MethodDelete, path: "/v1/flavors/" + escape(name)})
}

// ---- network policies ----

// ListPolicies returns the tenant's network policies.
func (c *Client) ListPolicies(ctx context.Context) ([]api.NetworkPolicy, error) {
	return whole[api.NetworkPolicy](ctx, c, request{method: http.MethodGet, path: "/v1/networkpolicies", query: c.tenantQuery()})
}

// GetPolicy returns a network policy with its status.
func (c *Client) GetPolicy(ctx context.Context, name string) (api.NetworkPolicy, error) {
	return call[api.NetworkPolicy](ctx, c, request{method: http.MethodGet, path: "/v1/networkpolicies/" + escape(name), query: c.tenantQuery()})
}

// CreatePolicy creates a network policy.
func (c *Client) CreatePolicy(ctx context.Context, p api.NetworkPolicy) (api.NetworkPolicy, error) {
	return call[api.NetworkPolicy](ctx, c, request{method: http.MethodPost, path: "/v1/networkpolicies", query: c.tenantQuery(), body: p})
}

// UpdatePolicy replaces a network policy's selector and rules.
func (c *Client) UpdatePolicy(ctx context.Context, p api.NetworkPolicy) (api.NetworkPolicy, error) {
	return call[api.NetworkPolicy](ctx, c, request{method: http.MethodPut, path: "/v1/networkpolicies/" + escape(p.Name), query: c.tenantQuery(), body: p})
}

// DeletePolicy deletes a network policy.
func (c *Client) DeletePolicy(ctx context.Context, name string) (api.NetworkPolicy, error) {
	return call[api.NetworkPolicy](ctx, c, request{method: http.MethodDelete, path: "/v1/networkpolicies/" + escape(name), query: c.tenantQuery()})
}

// ---- resources ----

// ResourceWrite is a resource as a client writes it: Replicas nil leaves
// the count to the server (the kind's default on create, the current count
// on update), as the API distinguishes an absent count from 0.
type ResourceWrite struct {
	api.Resource
	Replicas *int `json:"replicas,omitempty"`
}

// ListResources returns every resource that q selects, following the
// pages.
func (c *Client) ListResources(ctx context.Context, q ResourceQuery) ([]api.Resource, error) {
	query := c.tenantQuery()
	if q.Selector != "" {
		query.Set("selector", q.Selector)
	}
	if q.Kind != "" {
		query.Set("kind", q.Kind)
	}
	return items[api.Resource](ctx, c, request{method: http.MethodGet, path: "/v1/resources", query: query})
}

// GetResource returns a resource with its status.
func (c *Client) GetResource(ctx context.Context, name string) (api.Resource, error) {
	return call[api.Resource](ctx, c, request{method: http.MethodGet, path: "/v1/resources/" + escape(name), query: c.tenantQuery()})
}

// CreateResource creates a resource; the write carries an Idempotency-Key,
// so that a retry after a lost reply cannot create it twice.
func (c *Client) CreateResource(ctx context.Context, r ResourceWrite) (api.Resource, error) {
	return call[api.Resource](ctx, c, request{
		method: http.MethodPost, path: "/v1/resources", query: c.tenantQuery(), body: r,
		idempotencyKey: NewIdempotencyKey(),
	})
}

// UpdateResource replaces the user-settable fields of a resource.
func (c *Client) UpdateResource(ctx context.Context, r ResourceWrite) (api.Resource, error) {
	return call[api.Resource](ctx, c, request{
		method: http.MethodPut, path: "/v1/resources/" + escape(r.Name), query: c.tenantQuery(), body: r,
		idempotencyKey: NewIdempotencyKey(),
	})
}

// DeleteResource requests a resource's deletion; the master finishes it.
func (c *Client) DeleteResource(ctx context.Context, name string) (api.Resource, error) {
	return call[api.Resource](ctx, c, request{method: http.MethodDelete, path: "/v1/resources/" + escape(name), query: c.tenantQuery()})
}

// ScaleResource sets a resource's replica count.
func (c *Client) ScaleResource(ctx context.Context, name string, replicas int) (api.Resource, error) {
	return call[api.Resource](ctx, c, request{
		method: http.MethodPost, path: "/v1/resources/" + escape(name) + "/scale", query: c.tenantQuery(),
		body: map[string]int{"replicas": replicas},
	})
}

// RollbackResource makes a new revision with the spec of revision to.
func (c *Client) RollbackResource(ctx context.Context, name string, to int64) (api.Resource, error) {
	return call[api.Resource](ctx, c, request{
		method: http.MethodPost, path: "/v1/resources/" + escape(name) + "/rollback", query: c.tenantQuery(),
		body: map[string]int64{"revision": to},
	})
}

// ListRevisions returns a resource's revisions, oldest first.
func (c *Client) ListRevisions(ctx context.Context, name string) ([]api.Revision, error) {
	return whole[api.Revision](ctx, c, request{method: http.MethodGet, path: "/v1/resources/" + escape(name) + "/revisions", query: c.tenantQuery()})
}

// ListReplicas returns a resource's replicas in every region it runs in.
func (c *Client) ListReplicas(ctx context.Context, name string) (List[api.Replica], error) {
	return call[List[api.Replica]](ctx, c, request{method: http.MethodGet, path: "/v1/resources/" + escape(name) + "/replicas", query: c.tenantQuery()})
}

// ---- regions ----

// ListRegions returns every region with its status.
func (c *Client) ListRegions(ctx context.Context) ([]api.Region, error) {
	return whole[api.Region](ctx, c, request{method: http.MethodGet, path: "/v1/regions"})
}

// GetRegion returns one region.
func (c *Client) GetRegion(ctx context.Context, name string) (api.Region, error) {
	return call[api.Region](ctx, c, request{method: http.MethodGet, path: "/v1/regions/" + escape(name)})
}

// RegisterRegion registers a region or replaces its registration.
func (c *Client) RegisterRegion(ctx context.Context, r api.Region) (api.Region, error) {
	return call[api.Region](ctx, c, request{method: http.MethodPost, path: "/v1/regions", body: r})
}

// DeleteRegion removes a region no resource names.
func (c *Client) DeleteRegion(ctx context.Context, name string) (api.Region, error) {
	return call[api.Region](ctx, c, request{method: http.MethodDelete, path: "/v1/regions/" + escape(name)})
}

// ---- nodes ----

// ListNodes returns the nodes of region, or of every region for "".
func (c *Client) ListNodes(ctx context.Context, region, selector string) (List[api.Node], error) {
	q := url.Values{}
	if region != "" {
		q.Set("region", region)
	}
	if selector != "" {
		q.Set("selector", selector)
	}
	return all[api.Node](ctx, c, request{method: http.MethodGet, path: "/v1/nodes", query: q})
}

func nodePath(region, node string) string {
	return "/v1/regions/" + escape(region) + "/nodes/" + escape(node)
}

// GetNode returns a node as its region sees it.
func (c *Client) GetNode(ctx context.Context, region, node string) (api.Node, error) {
	return call[api.Node](ctx, c, request{method: http.MethodGet, path: nodePath(region, node)})
}

// DeleteNode removes a node from its region.
func (c *Client) DeleteNode(ctx context.Context, region, node string) error {
	return c.do(ctx, request{method: http.MethodDelete, path: nodePath(region, node)}, nil)
}

// CordonNode stops new replicas from landing on a node.
func (c *Client) CordonNode(ctx context.Context, region, node, reason string) (api.Node, error) {
	var body any
	if reason != "" {
		body = map[string]string{"reason": reason}
	}
	return call[api.Node](ctx, c, request{method: http.MethodPost, path: nodePath(region, node) + "/cordon", body: body})
}

// UncordonNode makes a node schedulable again.
func (c *Client) UncordonNode(ctx context.Context, region, node string) (api.Node, error) {
	return call[api.Node](ctx, c, request{method: http.MethodPost, path: nodePath(region, node) + "/uncordon"})
}

// DrainNode starts moving a node's replicas elsewhere.
func (c *Client) DrainNode(ctx context.Context, region, node string, d api.DrainRequest) (api.DrainStatus, error) {
	return call[api.DrainStatus](ctx, c, request{method: http.MethodPost, path: nodePath(region, node) + "/drain", body: d})
}

// GetDrain returns the progress of a node's drain.
func (c *Client) GetDrain(ctx context.Context, region, node string) (api.DrainStatus, error) {
	return call[api.DrainStatus](ctx, c, request{method: http.MethodGet, path: nodePath(region, node) + "/drain"})
}

// ---- tokens ----

// Token is a bearer token as the API lists it: never its secret.
type Token struct {
	ID        string    `json:"id"`
	Name      string    `json:"name,omitempty"`
	Tenant    string    `json:"tenant"`
	Role      api.Role  `json:"role"`
	CreatedAt time.Time `json:"createdAt"`
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
}

// NewToken is a token just created, with its plaintext (shown once).
type NewToken struct {
	Token
	Secret string `json:"token"`
}

// TokenRequest asks for a token (POST /v1/tokens).
type TokenRequest struct {
	Name      string    `json:"name,omitempty"`
	Tenant    string    `json:"tenant,omitempty"`
	Role      api.Role  `json:"role"`
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
}

// CreateToken makes a token (admins only).
func (c *Client) CreateToken(ctx context.Context, r TokenRequest) (NewToken, error) {
	return call[NewToken](ctx, c, request{method: http.MethodPost, path: "/v1/tokens", body: r})
}

// ListTokens returns every token (admins only).
func (c *Client) ListTokens(ctx context.Context) ([]Token, error) {
	return items[Token](ctx, c, request{method: http.MethodGet, path: "/v1/tokens"})
}

// RevokeToken deletes a token by its id (admins only).
func (c *Client) RevokeToken(ctx context.Context, id string) (Token, error) {
	return call[Token](ctx, c, request{method: http.MethodDelete, path: "/v1/tokens/" + escape(id)})
}

// ---- status ----

// Status returns the global tier's overview, with the server's version.
func (c *Client) Status(ctx context.Context) (Status, error) {
	return call[Status](ctx, c, request{method: http.MethodGet, path: "/v1/status"})
}

func itoa(n int) string { return strconv.Itoa(n) }

// ---- tenants ----

// TenantQuota is a tenant's quotas with what it holds
// (GET /v1/tenants/<t>/quota).
type TenantQuota struct {
	Tenant       string               `json:"tenant"`
	Quota        api.Quota            `json:"quota"`
	RegionQuotas map[string]api.Quota `json:"regionQuotas,omitempty"`
	Usage        api.Quota            `json:"usage"`
	RegionUsage  map[string]api.Quota `json:"regionUsage,omitempty"`
}

// ListTenants returns the tenants that have a record (admins only).
func (c *Client) ListTenants(ctx context.Context) ([]api.Tenant, error) {
	return whole[api.Tenant](ctx, c, request{method: http.MethodGet, path: "/v1/tenants"})
}

// GetTenant returns a tenant's record (one without a record: its name).
func (c *Client) GetTenant(ctx context.Context, name string) (api.Tenant, error) {
	return call[api.Tenant](ctx, c, request{method: http.MethodGet, path: "/v1/tenants/" + escape(name)})
}

// PutTenant creates or replaces a tenant's record; a ResourceVersion in
// t makes it conditional.
func (c *Client) PutTenant(ctx context.Context, t api.Tenant) (api.Tenant, error) {
	return call[api.Tenant](ctx, c, request{method: http.MethodPut, path: "/v1/tenants/" + escape(t.Name), body: t})
}

// TenantQuota returns a tenant's quotas and usage.
func (c *Client) TenantQuota(ctx context.Context, name string) (TenantQuota, error) {
	return call[TenantQuota](ctx, c, request{method: http.MethodGet, path: "/v1/tenants/" + escape(name) + "/quota"})
}
