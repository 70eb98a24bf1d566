package client

import (
	"context"
	"io"
	"net/http"
	"strconv"

	"github.com/stratahq/strata/internal/api"
)

// Resources is the client of a tenant's resources: their specs and
// counts, revisions, replicas and logs.
type Resources struct{ c *conn }

// ResourceQuery selects resources.
type ResourceQuery struct {
	Selector string
	Kind     string
}

// ResourceWrite is a resource as a client writes it: Replicas nil leaves
// the count to the server (the kind's default on create, the current count
// on update), as the API distinguishes an absent count from 0.
type ResourceWrite struct {
	api.Resource
	Replicas *int `json:"replicas,omitempty"`
}

// List returns every resource that q selects, following the
// pages.
func (rs Resources) List(ctx context.Context, q ResourceQuery) ([]api.Resource, error) {
	query := rs.c.tenantQuery()
	if q.Selector != "" {
		query.Set("selector", q.Selector)
	}
	if q.Kind != "" {
		query.Set("kind", q.Kind)
	}
	return items[api.Resource](ctx, rs.c, request{method: http.MethodGet, path: "/v1/resources", query: query})
}

// Get returns a resource with its status.
func (rs Resources) Get(ctx context.Context, name string) (api.Resource, error) {
	return call[api.Resource](ctx, rs.c, request{method: http.MethodGet, path: "/v1/resources/" + escape(name), query: rs.c.tenantQuery()})
}

// Create creates a resource; the write carries an Idempotency-Key,
// so that a retry after a lost reply cannot create it twice.
func (rs Resources) Create(ctx context.Context, r ResourceWrite) (api.Resource, error) {
	return call[api.Resource](ctx, rs.c, request{
		method: http.MethodPost, path: "/v1/resources", query: rs.c.tenantQuery(), body: r,
		idempotencyKey: NewIdempotencyKey(),
	})
}

// Update replaces the user-settable fields of a resource.
func (rs Resources) Update(ctx context.Context, r ResourceWrite) (api.Resource, error) {
	return call[api.Resource](ctx, rs.c, request{
		method: http.MethodPut, path: "/v1/resources/" + escape(r.Name), query: rs.c.tenantQuery(), body: r,
		idempotencyKey: NewIdempotencyKey(),
	})
}

// Delete requests a resource's deletion; the master finishes it.
func (rs Resources) Delete(ctx context.Context, name string) (api.Resource, error) {
	return call[api.Resource](ctx, rs.c, request{method: http.MethodDelete, path: "/v1/resources/" + escape(name), query: rs.c.tenantQuery()})
}

// Scale sets a resource's replica count.
func (rs Resources) Scale(ctx context.Context, name string, replicas int) (api.Resource, error) {
	return call[api.Resource](ctx, rs.c, request{
		method: http.MethodPost, path: "/v1/resources/" + escape(name) + "/scale", query: rs.c.tenantQuery(),
		body: map[string]int{"replicas": replicas},
	})
}

// Rollback makes a new revision with the spec of revision to.
func (rs Resources) Rollback(ctx context.Context, name string, to int64) (api.Resource, error) {
	return call[api.Resource](ctx, rs.c, request{
		method: http.MethodPost, path: "/v1/resources/" + escape(name) + "/rollback", query: rs.c.tenantQuery(),
		body: map[string]int64{"revision": to},
	})
}

// Revisions returns a resource's revisions, oldest first.
func (rs Resources) Revisions(ctx context.Context, name string) ([]api.Revision, error) {
	return whole[api.Revision](ctx, rs.c, request{method: http.MethodGet, path: "/v1/resources/" + escape(name) + "/revisions", query: rs.c.tenantQuery()})
}

// Replicas returns a resource's replicas in every region it runs in.
func (rs Resources) Replicas(ctx context.Context, name string) (List[api.Replica], error) {
	return call[List[api.Replica]](ctx, rs.c, request{method: http.MethodGet, path: "/v1/resources/" + escape(name) + "/replicas", query: rs.c.tenantQuery()})
}

// LogQuery selects a resource's log lines.
type LogQuery struct {
	// Replica narrows to one replica (default: the server's choice).
	Replica string
	// Follow keeps the stream open for new lines.
	Follow bool
	// Tail starts with the last Tail lines; 0 means the server's default.
	Tail int
	// Container is the container of a pod replica to read (default: the
	// main one).
	Container string
}

// Logs copies a resource's logs (text/plain) to w until the stream ends or,
// when following, ctx is done (it returns nil then).
func (rs Resources) Logs(ctx context.Context, name string, q LogQuery, w io.Writer) error {
	v := rs.c.tenantQuery()
	if q.Replica != "" {
		v.Set("replica", q.Replica)
	}
	if q.Follow {
		v.Set("follow", "true")
	}
	if q.Tail > 0 {
		v.Set("tail", strconv.Itoa(q.Tail))
	}
	if q.Container != "" {
		v.Set("container", q.Container)
	}
	r := request{
		method: http.MethodGet, path: "/v1/resources/" + escape(name) + "/logs", query: v,
		stream: true, accept: "text/plain",
	}
	return rs.c.stream(ctx, r, func(body io.Reader) error {
		if _, err := io.Copy(flushWriter{w}, body); err != nil {
			return rs.c.transportErr(ctx, err)
		}
		return nil
	})
}

// flushWriter flushes after every write when w can, so that followed logs
// show up line by line through a buffered stdout.
type flushWriter struct{ w io.Writer }

func (f flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if fl, ok := f.w.(interface{ Flush() error }); ok && err == nil {
		err = fl.Flush()
	}
	return n, err
}

// PlanWrite is api.PlanRequest as a client writes it: each resource to
// apply as a ResourceWrite (its replicas may be left to the server).
type PlanWrite struct {
	LoseRegions []string        `json:"loseRegions,omitempty"`
	Scale       map[string]int  `json:"scale,omitempty"`
	Apply       []ResourceWrite `json:"apply,omitempty"`
}

// Plan asks what the actions would do, changing nothing.
func (rs Resources) Plan(ctx context.Context, p PlanWrite) (api.Plan, error) {
	return call[api.Plan](ctx, rs.c, request{method: http.MethodPost, path: "/v1/plan", query: rs.c.tenantQuery(), body: p})
}
