package api

import (
	"context"
	"crypto/subtle"
	"fmt"
	"io"
	"net/http"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/rest"
)

// restAPI owns the operator REST API: its routes (Server.Handler lists
// them) over the node, placement and replica services, the bearer token
// that guards them, and the freshness of the reads served from the caches.
type restAPI struct {
	core
	nodes      *nodes
	placements *placements
	replicas   *replicas
	summary    func() (api.RegionStatus, error)
	token      string
	maxBody    int64
	audit      *auditor // nil records nothing
}

// CordonRequest is the body of POST /v1/nodes/{name}/cordon (optional).
type CordonRequest struct {
	Reason string `json:"reason,omitempty"`
}

// Event is an event as the REST API shows it.
type Event = api.Event

// handler is Server.Handler.
func (s *restAPI) handler() http.Handler {
	opts := []rest.Option{rest.WithMaxBody(s.maxBody), rest.WithLogger(s.log), rest.WithRealm("strata-region"), rest.WithErrorMapping(apiErr)}
	if s.audit != nil {
		opts = append(opts, rest.WithAudit(s.audit.rest))
	}
	a := rest.New(s.authenticate, opts...)
	a.Handle("GET /v1/nodes", s.fresh(func(r *http.Request) (any, error) {
		limit, after, err := rest.Page(r)
		if err != nil {
			return nil, err
		}
		// One more than the page says whether another follows.
		nodes, err := s.nodes.list(r.URL.Query().Get("selector"), after, limit+1)
		page, next := api.Paginate(nodes, func(n api.Node) string { return n.Name }, "", limit)
		return rest.List[api.Node]{Items: page, Continue: next}, err
	}), "selector", "limit", "continue")
	a.Handle("GET /v1/nodes/{name}", s.fresh(func(r *http.Request) (any, error) {
		return s.nodes.get(r.PathValue("name"))
	}))
	a.Handle("DELETE /v1/nodes/{name}", func(r *http.Request) (any, error) {
		return nil, s.nodes.delete(r.Context(), r.PathValue("name"))
	})
	a.Handle("POST /v1/nodes/{name}/cordon", func(r *http.Request) (any, error) {
		var req CordonRequest
		if err := rest.DecodeOptional(r, &req); err != nil {
			return nil, err
		}
		return s.nodes.cordon(r.Context(), r.PathValue("name"), req.Reason)
	})
	a.Handle("POST /v1/nodes/{name}/uncordon", func(r *http.Request) (any, error) {
		if err := rest.DecodeOptional(r, &struct{}{}); err != nil {
			return nil, err
		}
		return s.nodes.uncordon(r.Context(), r.PathValue("name"))
	})
	a.Handle("POST /v1/nodes/{name}/drain", func(r *http.Request) (any, error) {
		var req api.DrainRequest
		if err := rest.DecodeOptional(r, &req); err != nil {
			return nil, err
		}
		return s.nodes.drain(r.Context(), r.PathValue("name"), req)
	})
	a.Handle("GET /v1/nodes/{name}/drain", s.fresh(func(r *http.Request) (any, error) {
		return s.nodes.getDrain(r.PathValue("name"))
	}))
	a.Handle("GET /v1/resources", s.fresh(func(r *http.Request) (any, error) {
		limit, after, err := rest.Page(r)
		if err != nil {
			return nil, err
		}
		page, next := api.Paginate(s.placements.list(after, limit+1), placementKey, "", limit)
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
		return s.summary()
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
func (s *restAPI) fresh(h func(r *http.Request) (any, error)) func(r *http.Request) (any, error) {
	return func(r *http.Request) (any, error) {
		if err := s.current(r.Context()); err != nil {
			return nil, err
		}
		return h(r)
	}
}

// restReplicas is a page of replicas.list.
func (s *restAPI) restReplicas(r *http.Request, tenant, resource, node string) (any, error) {
	limit, after, err := rest.Page(r)
	if err != nil {
		return nil, err
	}
	reps, err := s.replicas.list(tenant, resource, node)
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
func (s *restAPI) restEvents(r *http.Request) (any, error) {
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
	evs, err := listEvents(r.Context(), s.events, after, limit, q.Get("object"), q.Get("tenant"))
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
func (s *restAPI) authenticate(ctx context.Context, bearer string) (context.Context, error) {
	if bearer == "" || subtle.ConstantTimeCompare([]byte(bearer), []byte(s.token)) != 1 {
		return nil, fmt.Errorf("a valid bearer token is required: %w", api.ErrUnauthenticated)
	}
	return context.WithValue(ctx, operatorKey{}, true), nil
}
