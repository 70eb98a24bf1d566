package api

import (
	"net/http"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/rest"
)

// What every REST handler reads of a request: its route, its page, its
// tenant, and the target of a PUT or DELETE.

// restKind is the REST face of one kind (or of two that go together):
// the routes its handlers serve. Each is a small type holding the
// services it calls, in a rest_<kind>.go of its own.
type restKind interface {
	routes() []route
}

type route struct {
	pattern string
	fn      rest.Func
	// query are the query parameters the route takes (rest.API.Handle).
	query []string
}

// The query parameters of lists, and of the routes of one resource,
// which may name its tenant.
var (
	paged    = []string{"limit", "continue"}
	inTenant = []string{"tenant"}
)

// pageQuery reads a list's limit and continue.
func pageQuery(r *http.Request) (PageQuery, error) {
	limit, err := rest.QueryInt(r, "limit")
	return PageQuery{Limit: limit, Continue: r.URL.Query().Get("continue")}, err
}

// tenantOf is the tenant a request names (?tenant=), "" for the caller's.
func tenantOf(r *http.Request) string { return r.URL.Query().Get("tenant") }

// putTarget reconciles a decoded PUT body with its request: the name in
// the path (the body may leave it out, and must not name another) and the
// precondition (the body's resourceVersion or If-Match).
func putTarget(r *http.Request, name *string, version *int64) error {
	path, err := rest.PathName(r, "name")
	if err != nil {
		return err
	}
	if *name, err = nameInBody(*name, path); err != nil {
		return err
	}
	*version, err = rest.Precondition(r, *version)
	return err
}

// deleteTarget is what a DELETE names: the object in its path and the
// version If-Match asks for (0: any).
func deleteTarget(r *http.Request) (name string, expect int64, err error) {
	if name, err = rest.PathName(r, "name"); err != nil {
		return "", 0, err
	}
	expect, err = rest.IfMatch(r)
	return name, expect, err
}

// nameInBody reconciles the name in a PUT body with the one in its path.
func nameInBody(body, path string) (string, error) {
	if body != "" && body != path {
		return "", api.Invalid("name", "%q does not match the name in the path, %q", body, path)
	}
	return path, nil
}
