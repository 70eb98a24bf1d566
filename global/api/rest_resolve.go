package api

import (
	"net/http"
)

// resolveHandlers serve what the nodes' name servers answer (Replicas)
// over REST.
type resolveHandlers struct {
	replicas *Replicas
}

func (h *resolveHandlers) routes() []route {
	return []route{
		{"GET /v1/resolve", h.resolve, []string{"tenant", "name", "type", "region"}},
	}
}

// resolve: GET /v1/resolve?name=&type=&region=&tenant=
func (h *resolveHandlers) resolve(r *http.Request) (any, error) {
	q := r.URL.Query()
	return h.replicas.Resolve(r.Context(), tenantOf(r), ResolveQuery{Name: q.Get("name"), Type: q.Get("type"), Region: q.Get("region")})
}
