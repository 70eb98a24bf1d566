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

// call makes the request r and decodes the reply into a T.
func call[T any](ctx context.Context, c *conn, r request) (T, error) {
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
func all[T any](ctx context.Context, c *conn, r request) (List[T], error) {
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
func items[T any](ctx context.Context, c *conn, r request) ([]T, error) {
	l, err := all[T](ctx, c, r)
	return l.Items, err
}

// whole is the items of a list that comes in one answer (regions,
// tenants, a resource's revisions: lists bounded by configuration).
func whole[T any](ctx context.Context, c *conn, r request) ([]T, error) {
	l, err := call[List[T]](ctx, c, r)
	return l.Items, err
}

// Objects is the client of one kind of named object that the API lists,
// reads, creates, updates and deletes at one path (flavors, network
// policies, configs, alert rules).
type Objects[T any] struct {
	c    *conn
	path string
	// tenanted routes take ?tenant= (the tenant's own objects).
	tenanted bool
	// paged lists come in pages (limit, continue), the others in one answer.
	paged bool
	name  func(T) string
}

func (o Objects[T]) request(method, path string, body any) request {
	r := request{method: method, path: path, body: body}
	if o.tenanted {
		r.query = o.c.tenantQuery()
	}
	return r
}

// List returns every object.
func (o Objects[T]) List(ctx context.Context) ([]T, error) {
	r := o.request(http.MethodGet, o.path, nil)
	if o.paged {
		return items[T](ctx, o.c, r)
	}
	return whole[T](ctx, o.c, r)
}

// Get returns one object, with its status where it has one.
func (o Objects[T]) Get(ctx context.Context, name string) (T, error) {
	return call[T](ctx, o.c, o.request(http.MethodGet, o.path+"/"+escape(name), nil))
}

// Create creates an object.
func (o Objects[T]) Create(ctx context.Context, v T) (T, error) {
	return call[T](ctx, o.c, o.request(http.MethodPost, o.path, v))
}

// Update replaces what can be set of an object (an alert rule without a
// receiver secret keeps the one the server has).
func (o Objects[T]) Update(ctx context.Context, v T) (T, error) {
	return call[T](ctx, o.c, o.request(http.MethodPut, o.path+"/"+escape(o.name(v)), v))
}

// Delete deletes an object.
func (o Objects[T]) Delete(ctx context.Context, name string) (T, error) {
	return call[T](ctx, o.c, o.request(http.MethodDelete, o.path+"/"+escape(name), nil))
}
