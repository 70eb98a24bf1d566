package api

import (
	"context"
	"crypto/subtle"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/audit"
	"github.com/stratahq/strata/internal/rest"
)

// CordonRequest is the body of POST /v1/nodes/{name}/cordon (optional).
type CordonRequest struct {
	Reason string `json:"reason,omitempty"`
}

// Event is an event as the REST API shows it.
type Event = api.Event

// Handler returns the operator REST API:
//
//	GET    /v1/nodes?selector=&limit=&continue=   nodes with their status
//	GET    /v1/nodes/{name}
//	DELETE /v1/nodes/{name}
//	POST   /v1/nodes/{name}/cordon        CordonRequest (optional)
//	POST   /v1/nodes/{name}/uncordon
//	POST   /v1/nodes/{name}/drain         api.DrainRequest (optional)
//	GET    /v1/nodes/{name}/drain
//	GET    /v1/resources?limit=&continue= placements, the region's share as status
//	GET    /v1/resources/{tenant}/{name}/replicas?limit=&continue=
//	GET    /v1/replicas?node=&limit=&continue=
//	GET    /v1/events?after=&continue=&limit=&object=&tenant=
//	GET    /v1/status
//	GET    /healthz, /readyz              unauthenticated probes
//
// Everything else requires "Authorization: Bearer <token>" (api.token;
// there is no anonymous mode). Lists are rest.List, paged as the global
// tier's (rest.Page, api.Paginate); errors are api.ErrorBody; a query
// parameter a route does not take is refused: the edge (internal/rest) is
// the global tier's too. The reads served from the caches (nodes, drains,
// resources, replicas) never go back in time (fresh).
func (s *Server) Handler() http.Handler {
	opts := []rest.Option{rest.WithMaxBody(s.maxBody), rest.WithLogger(s.log), rest.WithRealm("strata-region"), rest.WithErrorMapping(apiErr)}
	if s.audit != nil {
		opts = append(opts, rest.WithAudit(s.auditREST))
	}
	a := rest.New(s.authenticate, opts...)
	a.Handle("GET /v1/nodes", s.fresh(func(r *http.Request) (any, error) {
		limit, after, err := rest.Page(r)
		if err != nil {
			return nil, err
		}
		// One more than the page says whether another follows.
		nodes, err := s.listNodes(r.URL.Query().Get("selector"), after, limit+1)
		page, next := api.Paginate(nodes, func(n api.Node) string { return n.Name }, "", limit)
		return rest.List[api.Node]{Items: page, Continue: next}, err
	}), "selector", "limit", "continue")
	a.Handle("GET /v1/nodes/{name}", s.fresh(func(r *http.Request) (any, error) {
		return s.getNode(r.PathValue("name"))
	}))
	a.Handle("DELETE /v1/nodes/{name}", func(r *http.Request) (any, error) {
		return nil, s.deleteNode(r.Context(), r.PathValue("name"))
	})
	a.Handle("POST /v1/nodes/{name}/cordon", func(r *http.Request) (any, error) {
		var req CordonRequest
		if err := rest.DecodeOptional(r, &req); err != nil {
			return nil, err
		}
		return s.cordon(r.Context(), r.PathValue("name"), req.Reason)
	})
	a.Handle("POST /v1/nodes/{name}/uncordon", func(r *http.Request) (any, error) {
		if err := rest.DecodeOptional(r, &struct{}{}); err != nil {
			return nil, err
		}
		return s.uncordon(r.Context(), r.PathValue("name"))
	})
	a.Handle("POST /v1/nodes/{name}/drain", func(r *http.Request) (any, error) {
		var req api.DrainRequest
		if err := rest.DecodeOptional(r, &req); err != nil {
			return nil, err
		}
		return s.drain(r.Context(), r.PathValue("name"), req)
	})
	a.Handle("GET /v1/nodes/{name}/drain", s.fresh(func(r *http.Request) (any, error) {
		return s.getDrain(r.PathValue("name"))
	}))
	a.Handle("GET /v1/resources", s.fresh(func(r *http.Request) (any, error) {
		limit, after, err := rest.Page(r)
		if err != nil {
			return nil, err
		}
		page, next := api.Paginate(s.listResources(after, limit+1), placementKey, "", limit)
		return rest.List[api.Placement]{Items: page, Continue: next}, nil
	}), "limit", "continue")
	a.Handle("GET /v1/resources/{tenant}/{name}/replicas", s.fresh(func(r *http.Request) (any, error) {
		return s.restReplicas(r, r.PathValue("tenant"), r.PathValue("name"), "")
	}), "limit", "continue")
	a.Handle("GET /v1/replicas", s.fresh(func(r *http.Request) (any, error) {
		node := r.URL.Query().Get("node")
		if node == "" {
			return nil, api.Invalid("node", "is required")
		}
		return s.restReplicas(r, "", "", node)
	}), "node", "limit", "continue")
	a.Handle("GET /v1/events", s.restEvents, "after", "continue", "limit", "object", "tenant")
	a.Handle("GET /v1/status", func(r *http.Request) (any, error) {
		return s.Summary()
	})
	a.HandlePublic("GET /healthz", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	}))
	a.HandlePublic("GET /readyz", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.caches.IsSynced() {
			a.Error(w, r, fmt.Errorf("region caches are still loading: %w", api.ErrUnavailable))
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	}))
	return a.Handler()
}

// fresh serves h only once the caches are as new as etcd was when the
// request arrived (current): the reads served from the caches never go
// back in time, whichever replica the load balancer picks.
func (s *Server) fresh(h func(r *http.Request) (any, error)) func(r *http.Request) (any, error) {
	return func(r *http.Request) (any, error) {
		if err := s.current(r.Context()); err != nil {
			return nil, err
		}
		return h(r)
	}
}

// restReplicas is a page of listReplicas.
func (s *Server) restReplicas(r *http.Request, tenant, resource, node string) (any, error) {
	limit, after, err := rest.Page(r)
	if err != nil {
		return nil, err
	}
	reps, err := s.listReplicas(tenant, resource, node)
	if err != nil {
		return nil, err
	}
	page, next := api.Paginate(reps, replicaKey, after, limit)
	return rest.List[api.Replica]{Items: page, Continue: next}, nil
}

// placementKey is the name of a placement in the region's store, by
// which placements are sorted and paged.
func placementKey(p api.Placement) string { return p.Key() }

// restEvents pages events with a cursor, as the global tier's: after (or
// continue) is the id of the last event of the previous page, and a full
// page's continue is its last id, as more may follow at once.
func (s *Server) restEvents(r *http.Request) (any, error) {
	limit, err := rest.QueryInt(r, "limit")
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	after := q.Get("after")
	if c := q.Get("continue"); c != "" {
		if after != "" && after != c {
			return nil, api.Invalid("continue", "is another cursor than after; send one")
		}
		after = c
	}
	evs, err := s.listEvents(r.Context(), after, limit, q.Get("object"), q.Get("tenant"))
	if err != nil {
		return nil, err
	}
	out := rest.List[Event]{Items: make([]Event, len(evs))}
	for i, ev := range evs {
		out.Items[i] = Event(ev)
	}
	if n, _ := api.PageSize(limit); len(evs) > 0 && len(evs) >= n {
		out.Continue = evs[len(evs)-1].ID
	}
	return out, nil
}

// authenticate checks the bearer token: the region's REST API has one,
// its operators'.
func (s *Server) authenticate(ctx context.Context, bearer string) (context.Context, error) {
	if bearer == "" || subtle.ConstantTimeCompare([]byte(bearer), []byte(s.token)) != 1 {
		return nil, fmt.Errorf("a valid bearer token is required: %w", api.ErrUnauthenticated)
	}
	return context.WithValue(ctx, operatorKey{}, true), nil
}

// operatorKey marks a request that presented the region's token.
type operatorKey struct{}

// auditREST records a REST call that changes something: by the region
// token's holder, or by nobody known when the token was refused.
func (s *Server) auditREST(r *http.Request, code int, took time.Duration) {
	e := audit.HTTPEntry("region:"+s.region, r, code, took)
	if ok, _ := r.Context().Value(operatorKey{}).(bool); ok {
		e.Who.Identity = "region-token"
	}
	s.audit.Record(e)
}

// auditGRPC records a gRPC call that changes something.
func (s *Server) auditGRPC(ctx context.Context, method string, req any, err error, took time.Duration) {
	if audit.MutatingRPC(method) {
		s.audit.Record(audit.GRPCEntry(ctx, "region:"+s.region, method, req, err, took))
	}
}
