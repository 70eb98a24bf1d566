package api

import (
	"net/http"

	"github.com/stratahq/strata/internal/rest"
)

// Handler returns the REST API (described by openapi.json): JSON in and
// out, every error an api.ErrorBody, on the edge every Strata REST API
// shares (internal/rest).
func (s *Server) Handler() http.Handler {
	h := s.restAPI().Handler()
	if s.audit != nil {
		h = s.auditReads(h)
	}
	return h
}

// restAPI declares the routes, each kind's from its own handlers; the
// edge does the rest.
func (s *Server) restAPI() *rest.API {
	opts := []rest.Option{rest.WithMaxBody(s.maxBody), rest.WithLogger(s.log)}
	if s.audit != nil {
		opts = append(opts, rest.WithAudit(s.auditREST))
	}
	a := rest.New(s.tokens.authenticate, opts...)
	resources := &resourceHandlers{resources: s.resources, replicas: s.replicas, stream: a.Error}
	status := &statusHandlers{s: s, stream: a.Error}
	kinds := []restKind{
		&flavorHandlers{flavors: s.flavors},
		resources,
		&regionHandlers{regions: s.regions, nodes: s.nodes},
		&tenantHandlers{tokens: s.tokens, tenants: s.tenants},
		&policyHandlers{policies: s.policies},
		status,
		&configDataHandlers{configs: s.configs, secrets: s.secrets},
		&alertHandlers{rules: s.AlertRules},
		&planHandlers{s: s},
		&resolveHandlers{replicas: s.replicas},
	}
	for _, k := range kinds {
		for _, rt := range k.routes() {
			a.Handle(rt.pattern, rt.fn, rt.query...)
		}
	}
	events := &eventHandlers{events: s.events, stream: a.Error}
	a.HandleStream("GET /v1/resources/{name}/logs", resources.logs, "tenant", "replica", "follow", "tail", "container")
	a.HandleStream("GET /v1/events", events.serve, "region", "after", "limit", "object", "watch", "continue")
	a.HandlePublic("GET /v1/openapi.json", OpenAPIHandler())
	a.HandlePublic("GET /healthz", http.HandlerFunc(status.healthz))
	a.HandlePublic("GET /readyz", http.HandlerFunc(status.readyz))
	return a
}
