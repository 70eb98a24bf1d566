// Package clitest is an in-memory stand-in for the global REST API, for
// stratactl's tests: the routes, JSON shapes, error bodies and the
// create/update/no-change rules of the real API (internal/api's defaults
// and validation), without etcd or regions behind it.
package clitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// Server is the fake API. Its fields are the state; lock Mu to touch them
// while the server runs.
type Server struct {
	*httptest.Server

	Mu sync.Mutex
	// Token, when set, is the only bearer token accepted.
	Token     string
	Flavors   map[string]api.Flavor
	Resources map[string]api.Resource // by tenant/name
	Revisions map[string][]api.Revision
	Replicas  map[string][]api.Replica // by resource name
	Regions   map[string]api.Region
	Nodes     []api.Node
	Events    []api.Event
	// Tenants are the tenants' records; Usage what each holds.
	Tenants map[string]api.Tenant
	Usage   map[string]api.Quota
	// Policies are the network policies, by tenant/name.
	Policies map[string]api.NetworkPolicy
	// Drains scripts GET .../drain per REGION/NODE: each GET takes the
	// next status, the last one repeats. POST .../drain answers the first.
	Drains map[string][]api.DrainStatus
	// Logs is each resource's output, by name, or name.container for
	// ?container= (an absent one is a 404); Follow keeps the stream open.
	Logs map[string]string
	// Tokens are the tokens by id, as the API lists them (no secrets).
	Tokens map[string]Token
	// AlertRules are the rules as the API answers them; AlertSecrets
	// their receivers' secrets, by rule.
	AlertRules   map[string]api.AlertRule
	AlertSecrets map[string]string
	// Version is what /v1/status reports.
	Version string
	// NoStreaming answers watch=true with 503, as a server behind a
	// proxy that does not stream would.
	NoStreaming bool
	// PageSize, when set, overrides the page size clients ask for, to
	// make them follow continue tokens.
	PageSize int

	// Requests records "METHOD /path" of every request, for tests that
	// check what was (not) written.
	Requests []string

	now     func() time.Time
	rev     int64
	newEvts chan struct{}
}

// New starts a fake API with two regions (dev-1, dev-2) and nothing else;
// it stops when the test ends.
func New(t testing.TB, now func() time.Time) *Server {
	s := &Server{
		Flavors:   map[string]api.Flavor{},
		Resources: map[string]api.Resource{},
		Revisions: map[string][]api.Revision{},
		Replicas:  map[string][]api.Replica{},
		Regions:   map[string]api.Region{},
		Tenants:   map[string]api.Tenant{},
		Policies:  map[string]api.NetworkPolicy{},
		Usage:     map[string]api.Quota{},
		Drains:    map[string][]api.DrainStatus{},
		Logs:      map[string]string{},
		Tokens:    map[string]Token{},

		AlertRules:   map[string]api.AlertRule{},
		AlertSecrets: map[string]string{},
		Version:      "v0.0.0-test",
		now:          now,
		newEvts:      make(chan struct{}),
	}
	for _, r := range []string{"dev-1", "dev-2"} {
		s.Regions[r] = api.Region{Name: r, Endpoint: "127.0.0.1:9090", RegisteredAt: now()}
	}
	s.Server = httptest.NewServer(s.handler())
	t.Cleanup(s.Close)
	return s
}

// AddEvent appends an event and wakes the event streams.
func (s *Server) AddEvent(e api.Event) {
	s.Mu.Lock()
	if e.ID == "" {
		e.ID = fmt.Sprintf("%d", len(s.Events)+1)
	}
	s.Events = append(s.Events, e)
	ch := s.newEvts
	s.newEvts = make(chan struct{})
	s.Mu.Unlock()
	close(ch)
}

// Writes returns the recorded requests that were not GETs.
func (s *Server) Writes() []string {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	var out []string
	for _, r := range s.Requests {
		if !strings.HasPrefix(r, "GET ") {
			out = append(out, r)
		}
	}
	return out
}

type handler func(r *http.Request) (int, any, error)

// handler composes the routes of every kind of object, one group a file
// (flavorRoutes in flavors.go, resourceRoutes in resources.go, ...): each
// group is the Server seen through its routes, its state under the
// Server's Mu. It records and authenticates every request first.
func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	routes := map[string]handler{"GET /v1/status": s.status}
	for _, g := range []interface{ routes() map[string]handler }{
		flavorRoutes{s}, resourceRoutes{s}, regionRoutes{s}, nodeRoutes{s},
		tokenRoutes{s}, tenantRoutes{s}, policyRoutes{s}, alertRoutes{s}, resolveRoutes{s},
	} {
		maps.Copy(routes, g.routes())
	}
	for pattern, h := range routes {
		mux.Handle(pattern, s.endpoint(h))
	}
	mux.HandleFunc("GET /v1/events", eventRoutes{s}.events)
	mux.HandleFunc("GET /v1/resources/{name}/logs", resourceRoutes{s}.logs)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.Mu.Lock()
		s.Requests = append(s.Requests, r.Method+" "+r.URL.Path)
		token := s.Token
		s.Mu.Unlock()
		if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
			writeError(w, fmt.Errorf("a bearer token is required: %w", api.ErrUnauthenticated))
			return
		}
		if _, pattern := mux.Handler(r); pattern == "" {
			writeJSON(w, http.StatusNotFound, api.ErrorBody{Error: api.ErrorDetail{Code: "NotFound", Message: "no route " + r.URL.Path}})
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func (s *Server) endpoint(h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Encoded under the lock: replies share pointers (a status) with
		// the state that tests change.
		s.Mu.Lock()
		code, body, err := h(r)
		b, _ := json.Marshal(body)
		s.Mu.Unlock()
		if err != nil {
			writeError(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = w.Write(append(b, '\n'))
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, err error) {
	code, body := api.HTTPError(err)
	writeJSON(w, code, body)
}

// decode reads a JSON body strictly, as the API does.
func decode(r *http.Request, v any) error {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return api.Invalid("", "reading the body: %v", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		return api.Invalid("", "content type %q is not application/json", ct)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return api.Invalid("", "malformed JSON: %v", err)
	}
	return nil
}

type list[T any] struct {
	Items    []T    `json:"items"`
	Continue string `json:"continue,omitempty"`
}

func (s *Server) version() int64 { s.rev++; return s.rev }

// sortedValues lists m's values by their keys (the names); never nil, as
// the API's lists are never null.
func sortedValues[T any](m map[string]T) []T {
	out := make([]T, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[k])
	}
	return out
}

// named answers GET of the object of m the path names, or NotFound.
func named[T any](m map[string]T, kind string, r *http.Request) (int, any, error) {
	v, ok := m[r.PathValue("name")]
	if !ok {
		return 0, nil, api.NotFound(kind, r.PathValue("name"))
	}
	return http.StatusOK, v, nil
}

func (s *Server) status(*http.Request) (int, any, error) {
	return http.StatusOK, map[string]any{"id": "global-0", "leader": "global-0", "isLeader": true, "version": s.Version, "regions": []api.Region{}}, nil
}
