package api

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/metrics"
	"github.com/stratahq/strata/internal/serving"
)

// CordonRequest is the body of POST /v1/nodes/{name}/cordon (optional).
type CordonRequest struct {
	Reason string `json:"reason,omitempty"`
}

// Event is an event as the REST API shows it.
type Event = api.Event

// List is the body of every REST list response.
type List[T any] struct {
	Items []T `json:"items"`
}

// Handler returns the operator REST API:
//
//	GET    /v1/nodes?selector=            nodes with their status
//	GET    /v1/nodes/{name}
//	DELETE /v1/nodes/{name}
//	POST   /v1/nodes/{name}/cordon        CordonRequest (optional)
//	POST   /v1/nodes/{name}/uncordon
//	POST   /v1/nodes/{name}/drain         api.DrainRequest (optional)
//	GET    /v1/nodes/{name}/drain
//	GET    /v1/resources                  placements, the region's share as status
//	GET    /v1/resources/{tenant}/{name}/replicas
//	GET    /v1/replicas?node=
//	GET    /v1/events?after=&limit=&object=
//	GET    /v1/status
//	GET    /healthz, /readyz              unauthenticated probes
//
// /v1 requires "Authorization: Bearer <token>" (api.token; there is no
// anonymous mode). Errors are api.ErrorBody.
func (s *Server) Handler() http.Handler {
	v1 := http.NewServeMux()
	v1.Handle("GET /v1/nodes", s.endpoint(func(r *http.Request) (any, error) {
		nodes, err := s.listNodes(r.URL.Query().Get("selector"))
		return List[api.Node]{Items: nodes}, err
	}))
	v1.Handle("GET /v1/nodes/{name}", s.endpoint(func(r *http.Request) (any, error) {
		return s.getNode(r.PathValue("name"))
	}))
	v1.Handle("DELETE /v1/nodes/{name}", s.endpoint(func(r *http.Request) (any, error) {
		return nil, s.deleteNode(r.Context(), r.PathValue("name"))
	}))
	v1.Handle("POST /v1/nodes/{name}/cordon", s.endpointBody(func(r *http.Request, dec decodeFunc) (any, error) {
		var req CordonRequest
		if err := dec(&req); err != nil {
			return nil, err
		}
		return s.cordon(r.Context(), r.PathValue("name"), req.Reason)
	}))
	v1.Handle("POST /v1/nodes/{name}/uncordon", s.endpointBody(func(r *http.Request, dec decodeFunc) (any, error) {
		if err := dec(&struct{}{}); err != nil {
			return nil, err
		}
		return s.uncordon(r.Context(), r.PathValue("name"))
	}))
	v1.Handle("POST /v1/nodes/{name}/drain", s.endpointBody(func(r *http.Request, dec decodeFunc) (any, error) {
		var req api.DrainRequest
		if err := dec(&req); err != nil {
			return nil, err
		}
		return s.drain(r.Context(), r.PathValue("name"), req)
	}))
	v1.Handle("GET /v1/nodes/{name}/drain", s.endpoint(func(r *http.Request) (any, error) {
		return s.getDrain(r.PathValue("name"))
	}))
	v1.Handle("GET /v1/resources", s.endpoint(func(r *http.Request) (any, error) {
		return List[api.Placement]{Items: s.listResources()}, nil
	}))
	v1.Handle("GET /v1/resources/{tenant}/{name}/replicas", s.endpoint(func(r *http.Request) (any, error) {
		reps, err := s.listReplicas(r.PathValue("tenant"), r.PathValue("name"), "")
		return List[api.Replica]{Items: reps}, err
	}))
	v1.Handle("GET /v1/replicas", s.endpoint(func(r *http.Request) (any, error) {
		node := r.URL.Query().Get("node")
		if node == "" {
			return nil, api.Invalid("node", "is required")
		}
		reps, err := s.listReplicas("", "", node)
		return List[api.Replica]{Items: reps}, err
	}))
	v1.Handle("GET /v1/events", s.endpoint(func(r *http.Request) (any, error) {
		q := r.URL.Query()
		limit := 0
		if l := q.Get("limit"); l != "" {
			n, err := strconv.Atoi(l)
			if err != nil {
				return nil, api.Invalid("limit", "%q is not a number", l)
			}
			limit = n
		}
		evs, err := s.listEvents(r.Context(), q.Get("after"), limit, q.Get("object"))
		out := List[Event]{Items: make([]Event, len(evs))}
		for i, ev := range evs {
			out.Items[i] = Event(ev)
		}
		return out, err
	}))
	v1.Handle("GET /v1/status", s.endpoint(func(r *http.Request) (any, error) {
		return s.Summary()
	}))

	mux := http.NewServeMux()
	mux.Handle("/v1/", s.authenticate(v1))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if !s.caches.IsSynced() {
			s.writeError(w, r, fmt.Errorf("region caches are still loading: %w", api.ErrUnavailable))
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	})
	return mux
}

// authenticate checks the bearer token.
func (s *Server) authenticate(next http.Handler) http.Handler {
	want := []byte(s.token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="strata-region"`)
			s.writeError(w, r, fmt.Errorf("a valid bearer token is required: %w", api.ErrUnauthenticated))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// decodeFunc decodes the request body into v; an empty body leaves v as is.
type decodeFunc func(v any) error

// endpoint adapts a handler returning a value (nil: 204) or an error.
func (s *Server) endpoint(h func(r *http.Request) (any, error)) http.Handler {
	return s.endpointBody(func(r *http.Request, _ decodeFunc) (any, error) { return h(r) })
}

// endpointBody is endpoint for handlers that read a JSON body: at most
// MaxBodyBytes, unknown fields rejected, nothing after the object.
func (s *Server) endpointBody(h func(r *http.Request, dec decodeFunc) (any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		metrics.NoteRoute(r)
		r.Body = http.MaxBytesReader(w, r.Body, s.maxBody)
		v, err := h(r, func(v any) error { return decodeBody(r.Body, v) })
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if v == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		writeJSON(w, http.StatusOK, v)
	})
}

func decodeBody(body io.Reader, v any) error {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if errors.Is(err, io.EOF) {
		return nil // no body: the defaults
	}
	if err == nil {
		// A second value, or garbage, after the object.
		if err = dec.Decode(&struct{}{}); errors.Is(err, io.EOF) {
			return nil
		}
		if err == nil {
			err = errors.New("more than one JSON value")
		}
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return fmt.Errorf("request body is larger than %d bytes: %w", tooBig.Limit, api.ErrTooLarge)
	}
	return api.Invalid("body", "%v", err)
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code, body := api.HTTPError(apiErr(err))
	s.log.Log(r.Context(), serving.FailureLevel(r.Context(), code), "REST request failed", "method", r.Method, "path", r.URL.Path, "status", code, "err", err)
	writeJSON(w, code, body)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	// The status is sent; an encoding error can only mean the client left.
	_ = json.NewEncoder(w).Encode(v)
}
