// Package clitest is an in-memory stand-in for the global REST API, for
// stratactl's tests: the routes, JSON shapes, error bodies and the
// create/update/no-change rules of the real API (internal/api's defaults
// and validation), without etcd or regions behind it.
package clitest

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
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
	// Logs is each resource's output; Follow keeps the stream open.
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

func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	routes := map[string]handler{
		"GET /v1/flavors":           s.listFlavors,
		"POST /v1/flavors":          s.createFlavor,
		"GET /v1/flavors/{name}":    s.getFlavor,
		"PUT /v1/flavors/{name}":    s.updateFlavor,
		"DELETE /v1/flavors/{name}": s.deleteFlavor,

		"GET /v1/resources":                  s.listResources,
		"POST /v1/resources":                 s.createResource,
		"GET /v1/resources/{name}":           s.getResource,
		"PUT /v1/resources/{name}":           s.updateResource,
		"DELETE /v1/resources/{name}":        s.deleteResource,
		"POST /v1/resources/{name}/scale":    s.scale,
		"POST /v1/resources/{name}/rollback": s.rollback,
		"GET /v1/resources/{name}/revisions": s.listRevisions,
		"GET /v1/resources/{name}/replicas":  s.listReplicas,

		"GET /v1/regions":           s.listRegions,
		"POST /v1/regions":          s.registerRegion,
		"GET /v1/regions/{name}":    s.getRegion,
		"DELETE /v1/regions/{name}": s.deleteRegion,

		"GET /v1/nodes":                                   s.listNodes,
		"GET /v1/regions/{region}/nodes/{node}":           s.getNode,
		"POST /v1/regions/{region}/nodes/{node}/cordon":   s.cordon(false),
		"POST /v1/regions/{region}/nodes/{node}/uncordon": s.cordon(true),
		"POST /v1/regions/{region}/nodes/{node}/drain":    s.drain,
		"GET /v1/regions/{region}/nodes/{node}/drain":     s.getDrain,

		"POST /v1/tokens":              s.createToken,
		"GET /v1/tokens":               s.listTokens,
		"DELETE /v1/tokens/{id}":       s.deleteToken,
		"GET /v1/tenants":              s.listTenants,
		"GET /v1/tenants/{name}":       s.getTenant,
		"PUT /v1/tenants/{name}":       s.putTenant,
		"GET /v1/tenants/{name}/quota": s.tenantQuota,

		"GET /v1/networkpolicies":           s.listPolicies,
		"POST /v1/networkpolicies":          s.createPolicy,
		"GET /v1/networkpolicies/{name}":    s.getPolicy,
		"PUT /v1/networkpolicies/{name}":    s.updatePolicy,
		"DELETE /v1/networkpolicies/{name}": s.deletePolicy,

		"GET /v1/status": s.status,
	}
	maps.Copy(routes, s.alertRoutes())
	for pattern, h := range routes {
		mux.Handle(pattern, s.endpoint(h))
	}
	mux.HandleFunc("GET /v1/events", s.events)
	mux.HandleFunc("GET /v1/resources/{name}/logs", s.logs)
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

// ---- flavors ----

func (s *Server) listFlavors(*http.Request) (int, any, error) {
	return http.StatusOK, list[api.Flavor]{Items: sortedValues(s.Flavors)}, nil
}

func (s *Server) getFlavor(r *http.Request) (int, any, error) {
	return named(s.Flavors, "flavor", r)
}

func (s *Server) createFlavor(r *http.Request) (int, any, error) {
	var f api.Flavor
	if err := decode(r, &f); err != nil {
		return 0, nil, err
	}
	if err := f.Validate(); err != nil {
		return 0, nil, err
	}
	if _, ok := s.Flavors[f.Name]; ok {
		return 0, nil, api.AlreadyExists("flavor", f.Name)
	}
	f = api.Flavor{Name: f.Name, Kind: f.Kind, Spec: f.Spec, CreatedAt: s.now(), UpdatedAt: s.now(), ResourceVersion: s.version()}
	s.Flavors[f.Name] = f
	return http.StatusCreated, f, nil
}

func (s *Server) updateFlavor(r *http.Request) (int, any, error) {
	var f api.Flavor
	if err := decode(r, &f); err != nil {
		return 0, nil, err
	}
	f.Name = r.PathValue("name")
	if err := f.Validate(); err != nil {
		return 0, nil, err
	}
	cur, ok := s.Flavors[f.Name]
	switch {
	case !ok:
		return 0, nil, api.NotFound("flavor", f.Name)
	case cur.Kind != f.Kind:
		return 0, nil, api.Invalid("kind", "is immutable: flavor %q is a %s flavor, not %s", f.Name, cur.Kind, f.Kind)
	case cur.Spec == f.Spec:
		return http.StatusOK, cur, nil
	}
	cur.Spec, cur.UpdatedAt, cur.ResourceVersion = f.Spec, s.now(), s.version()
	s.Flavors[f.Name] = cur
	return http.StatusOK, cur, nil
}

func (s *Server) deleteFlavor(r *http.Request) (int, any, error) {
	name := r.PathValue("name")
	f, ok := s.Flavors[name]
	if !ok {
		return 0, nil, api.NotFound("flavor", name)
	}
	for _, res := range s.Resources {
		if res.Spec.Flavor == name {
			return 0, nil, fmt.Errorf("flavor %q is used by resource %q: %w", name, res.Name, api.ErrConflict)
		}
	}
	delete(s.Flavors, name)
	return http.StatusOK, f, nil
}

// ---- resources ----

func tenantOf(r *http.Request, body string) string {
	return cmp.Or(r.URL.Query().Get("tenant"), body, "default")
}

type resourceBody struct {
	api.Resource
	Replicas *int `json:"replicas"`
}

func (s *Server) listResources(r *http.Request) (int, any, error) {
	q := r.URL.Query()
	sel, err := api.ParseSelector(q.Get("selector"))
	if err != nil {
		return 0, nil, err
	}
	tenant := tenantOf(r, "")
	var all []api.Resource
	for _, res := range s.Resources {
		if res.Tenant == tenant && (q.Get("kind") == "" || string(res.Kind) == q.Get("kind")) && sel.Matches(res.Labels) {
			all = append(all, res)
		}
	}
	slices.SortFunc(all, func(a, b api.Resource) int { return cmp.Compare(a.Name, b.Name) })
	limit, _ := strconv.Atoi(q.Get("limit"))
	if s.PageSize > 0 {
		limit = s.PageSize
	}
	if limit <= 0 {
		limit = 100
	}
	out := list[api.Resource]{Items: []api.Resource{}}
	for _, res := range all {
		if res.Name <= q.Get("continue") {
			continue
		}
		if len(out.Items) == limit {
			out.Continue = out.Items[limit-1].Name
			break
		}
		out.Items = append(out.Items, res)
	}
	return http.StatusOK, out, nil
}

func (s *Server) lookup(r *http.Request) (api.Resource, string, error) {
	name := r.PathValue("name")
	key := tenantOf(r, "") + "/" + name
	res, ok := s.Resources[key]
	if !ok {
		return api.Resource{}, key, api.NotFound("resource", name)
	}
	return res, key, nil
}

func (s *Server) getResource(r *http.Request) (int, any, error) {
	res, key, err := s.lookup(r)
	if err != nil {
		return 0, nil, err
	}
	if res.Deleting() {
		// The master finishes a deletion by the next look.
		delete(s.Resources, key)
		return 0, nil, api.NotFound("resource", res.Name)
	}
	return http.StatusOK, res, nil
}

func (s *Server) checkRefs(res api.Resource) error {
	if f := res.Spec.Flavor; f != "" {
		if _, ok := s.Flavors[f]; !ok {
			return api.Invalid("spec.flavor", "flavor %q does not exist", f)
		}
	}
	for i, t := range res.Schedule.Regions {
		if _, ok := s.Regions[t.Name]; !ok {
			return api.Invalid(fmt.Sprintf("schedule.regions[%d].name", i), "region %q is not registered", t.Name)
		}
	}
	return nil
}

func (s *Server) createResource(r *http.Request) (int, any, error) {
	var b resourceBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	res := b.Resource.Settable()
	if q := r.URL.Query().Get("tenant"); q != "" && res.Tenant != "" && res.Tenant != q {
		return 0, nil, api.Invalid("tenant", "%q does not match the tenant of the request, %q", res.Tenant, q)
	}
	res.Tenant = tenantOf(r, res.Tenant)
	res.Default()
	if b.Replicas != nil {
		res.Replicas = *b.Replicas
	} else {
		res.Replicas = api.DefaultReplicas(res.Kind)
	}
	if err := api.ValidateReplicas(res.Kind, res.Replicas); err != nil {
		return 0, nil, err
	}
	if err := res.Validate(); err != nil {
		return 0, nil, err
	}
	if err := s.checkRefs(res); err != nil {
		return 0, nil, err
	}
	key := res.Tenant + "/" + res.Name
	if _, ok := s.Resources[key]; ok {
		return 0, nil, api.AlreadyExists("resource", res.Name)
	}
	now := s.now()
	res.UID = fmt.Sprintf("uid-%s", res.Name)
	res.Revision, res.Generation, res.CreatedAt, res.UpdatedAt = 1, 1, now, now
	res.ResourceVersion = s.version()
	res.Status = &api.ResourceStatus{UID: res.UID, Phase: api.PhaseCreated, Since: now, Replicas: res.Replicas}
	s.Resources[key] = res
	s.Revisions[key] = []api.Revision{{Resource: res.Name, Tenant: res.Tenant, UID: res.UID, Number: 1, Spec: res.Spec, Cause: "create", CreatedAt: now}}
	return http.StatusCreated, res, nil
}

func (s *Server) updateResource(r *http.Request) (int, any, error) {
	cur, key, err := s.lookup(r)
	if err != nil {
		return 0, nil, err
	}
	var b resourceBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	next := b.Resource.Settable()
	next.Name, next.Tenant = cur.Name, cur.Tenant
	next.Default()
	if b.Replicas != nil {
		next.Replicas = *b.Replicas
	} else {
		next.Replicas = cur.Replicas
	}
	switch {
	case cur.Deleting():
		return 0, nil, fmt.Errorf("resource %q is being deleted: %w", cur.Name, api.ErrConflict)
	case next.Kind != cur.Kind:
		return 0, nil, api.Invalid("kind", "is immutable: %q is a %s, not a %s", cur.Name, cur.Kind, next.Kind)
	case api.SameJSON(cur.Settable(), next):
		return http.StatusOK, cur, nil
	}
	if err := api.ValidateReplicas(next.Kind, next.Replicas); err != nil {
		return 0, nil, err
	}
	if err := next.Validate(); err != nil {
		return 0, nil, err
	}
	if err := s.checkRefs(next); err != nil {
		return 0, nil, err
	}
	newSpec := !api.SameJSON(cur.Spec, next.Spec)
	cur.Labels, cur.Spec, cur.Replicas, cur.Schedule = next.Labels, next.Spec, next.Replicas, next.Schedule
	cur.Overrides, cur.Failover, cur.Rollout, cur.MaxRevisionHistory = next.Overrides, next.Failover, next.Rollout, next.MaxRevisionHistory
	cur.Generation++
	cur.UpdatedAt, cur.ResourceVersion = s.now(), s.version()
	if newSpec {
		cur.Revision++
		s.Revisions[key] = append(s.Revisions[key], api.Revision{Resource: cur.Name, Tenant: cur.Tenant, UID: cur.UID, Number: cur.Revision, Spec: cur.Spec, Cause: "update", CreatedAt: s.now()})
	}
	s.Resources[key] = cur
	return http.StatusOK, cur, nil
}

func (s *Server) deleteResource(r *http.Request) (int, any, error) {
	cur, key, err := s.lookup(r)
	if err != nil {
		return 0, nil, err
	}
	if !cur.Deleting() {
		t := s.now()
		cur.DeletionRequestedAt = &t
		s.Resources[key] = cur
	}
	return http.StatusAccepted, cur, nil
}

func (s *Server) scale(r *http.Request) (int, any, error) {
	cur, key, err := s.lookup(r)
	if err != nil {
		return 0, nil, err
	}
	var b struct {
		Replicas *int `json:"replicas"`
	}
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	if b.Replicas == nil {
		return 0, nil, api.Invalid("replicas", "is required")
	}
	if err := api.ValidateReplicas(cur.Kind, *b.Replicas); err != nil {
		return 0, nil, err
	}
	if cur.Replicas != *b.Replicas {
		cur.Replicas = *b.Replicas
		cur.Generation++
		s.Resources[key] = cur
	}
	return http.StatusOK, cur, nil
}

func (s *Server) rollback(r *http.Request) (int, any, error) {
	cur, key, err := s.lookup(r)
	if err != nil {
		return 0, nil, err
	}
	var b struct {
		Revision *int64 `json:"revision"`
	}
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	if b.Revision == nil {
		return 0, nil, api.Invalid("revision", "is required")
	}
	i := slices.IndexFunc(s.Revisions[key], func(rv api.Revision) bool { return rv.Number == *b.Revision })
	if i < 0 {
		return 0, nil, fmt.Errorf("resource %q has no revision %d: %w", cur.Name, *b.Revision, api.ErrNotFound)
	}
	target := s.Revisions[key][i]
	if api.SameJSON(cur.Spec, target.Spec) {
		return http.StatusOK, cur, nil
	}
	cur.Spec = target.Spec
	cur.Revision++
	cur.Generation++
	s.Revisions[key] = append(s.Revisions[key], api.Revision{Resource: cur.Name, Tenant: cur.Tenant, UID: cur.UID, Number: cur.Revision, Spec: cur.Spec, Cause: fmt.Sprintf("rollback to %d", *b.Revision), CreatedAt: s.now()})
	s.Resources[key] = cur
	return http.StatusOK, cur, nil
}

func (s *Server) listRevisions(r *http.Request) (int, any, error) {
	_, key, err := s.lookup(r)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, list[api.Revision]{Items: append([]api.Revision{}, s.Revisions[key]...)}, nil
}

func (s *Server) listReplicas(r *http.Request) (int, any, error) {
	res, _, err := s.lookup(r)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, list[api.Replica]{Items: append([]api.Replica{}, s.Replicas[res.Name]...)}, nil
}

// ---- regions ----

func (s *Server) listRegions(*http.Request) (int, any, error) {
	return http.StatusOK, list[api.Region]{Items: sortedValues(s.Regions)}, nil
}

func (s *Server) getRegion(r *http.Request) (int, any, error) {
	return named(s.Regions, "region", r)
}

func (s *Server) registerRegion(r *http.Request) (int, any, error) {
	var reg api.Region
	if err := decode(r, &reg); err != nil {
		return 0, nil, err
	}
	if err := reg.Validate(); err != nil {
		return 0, nil, err
	}
	cur, ok := s.Regions[reg.Name]
	// Every registration refreshes registeredAt, as the global API does.
	reg.RegisteredAt, reg.Status = s.now(), nil
	if ok {
		reg.Status = cur.Status
	}
	reg.ResourceVersion = s.version()
	s.Regions[reg.Name] = reg
	if ok {
		return http.StatusOK, reg, nil
	}
	return http.StatusCreated, reg, nil
}

func (s *Server) deleteRegion(r *http.Request) (int, any, error) {
	reg, ok := s.Regions[r.PathValue("name")]
	if !ok {
		return 0, nil, api.NotFound("region", r.PathValue("name"))
	}
	delete(s.Regions, reg.Name)
	return http.StatusOK, reg, nil
}

// ---- nodes ----

func (s *Server) listNodes(r *http.Request) (int, any, error) {
	q := r.URL.Query()
	sel, err := api.ParseSelector(q.Get("selector"))
	if err != nil {
		return 0, nil, err
	}
	out := list[api.Node]{Items: []api.Node{}}
	for _, n := range s.Nodes {
		if (q.Get("region") == "" || n.Region == q.Get("region")) && sel.Matches(n.Labels) {
			out.Items = append(out.Items, n)
		}
	}
	return http.StatusOK, out, nil
}

func (s *Server) node(r *http.Request) (int, error) {
	region, name := r.PathValue("region"), r.PathValue("node")
	if _, ok := s.Regions[region]; !ok {
		return -1, api.NotFound("region", region)
	}
	i := slices.IndexFunc(s.Nodes, func(n api.Node) bool { return n.Region == region && n.Name == name })
	if i < 0 {
		return -1, fmt.Errorf("region %q: node %q %w", region, name, api.ErrNotFound)
	}
	return i, nil
}

func (s *Server) getNode(r *http.Request) (int, any, error) {
	i, err := s.node(r)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, s.Nodes[i], nil
}

func (s *Server) cordon(uncordon bool) handler {
	return func(r *http.Request) (int, any, error) {
		i, err := s.node(r)
		if err != nil {
			return 0, nil, err
		}
		var b struct {
			Reason string `json:"reason"`
		}
		if err := decode(r, &b); err != nil {
			return 0, nil, err
		}
		n := &s.Nodes[i]
		n.Schedulable, n.CordonReason = uncordon, b.Reason
		return http.StatusOK, *n, nil
	}
}

func (s *Server) drain(r *http.Request) (int, any, error) {
	i, err := s.node(r)
	if err != nil {
		return 0, nil, err
	}
	var d api.DrainRequest
	if err := decode(r, &d); err != nil {
		return 0, nil, err
	}
	if err := d.Validate(); err != nil {
		return 0, nil, err
	}
	s.Nodes[i].Schedulable = false
	script := s.Drains[r.PathValue("region")+"/"+r.PathValue("node")]
	if len(script) == 0 {
		return http.StatusOK, api.DrainStatus{Node: r.PathValue("node"), State: api.DrainSucceeded, StartedAt: s.now(), FinishedAt: s.now()}, nil
	}
	return http.StatusOK, script[0], nil
}

func (s *Server) getDrain(r *http.Request) (int, any, error) {
	if _, err := s.node(r); err != nil {
		return 0, nil, err
	}
	key := r.PathValue("region") + "/" + r.PathValue("node")
	script := s.Drains[key]
	if len(script) == 0 {
		return 0, nil, fmt.Errorf("node %q has no drain: %w", r.PathValue("node"), api.ErrNotFound)
	}
	ds := script[0]
	if len(script) > 1 {
		s.Drains[key] = script[1:]
	}
	return http.StatusOK, ds, nil
}

// ---- status, events, logs ----

func (s *Server) status(*http.Request) (int, any, error) {
	return http.StatusOK, map[string]any{"id": "global-0", "leader": "global-0", "isLeader": true, "version": s.Version, "regions": []api.Region{}}, nil
}

// matching returns the events q selects: after the cursor (an event ID),
// of the region, about the object or below it.
func (s *Server) matching(r *http.Request) []api.Event {
	q := r.URL.Query()
	after, _ := strconv.Atoi(q.Get("after"))
	var out []api.Event
	for _, e := range s.Events {
		id, _ := strconv.Atoi(e.ID)
		obj := q.Get("object")
		if id > after && (q.Get("region") == "" || e.Region == q.Get("region")) &&
			(obj == "" || e.Object == obj || strings.HasPrefix(e.Object, strings.TrimSuffix(obj, "/")+"/")) {
			out = append(out, e)
		}
	}
	if limit, _ := strconv.Atoi(q.Get("limit")); limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out
}

func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	s.Mu.Lock()
	items := s.matching(r)
	wake := s.newEvts
	s.Mu.Unlock()
	cursor := r.URL.Query().Get("after")
	if len(items) > 0 {
		cursor = items[len(items)-1].ID
	}
	if r.URL.Query().Get("watch") == "true" && s.noStreaming() {
		writeError(w, fmt.Errorf("streaming is not supported here: %w", api.ErrUnavailable))
		return
	}
	if r.URL.Query().Get("watch") != "true" {
		writeJSON(w, http.StatusOK, map[string]any{"items": append([]api.Event{}, items...), "cursor": cursor})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for {
		for _, e := range items {
			b, _ := json.Marshal(e)
			fmt.Fprintf(w, "id: %s\ndata: %s\n\n", e.ID, b)
		}
		fmt.Fprint(w, ": keepalive\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			return
		case <-wake:
		}
		if len(items) > 0 {
			cursor = items[len(items)-1].ID
		}
		s.Mu.Lock()
		q := r.URL.Query()
		q.Set("after", cursor)
		r.URL.RawQuery = q.Encode()
		items = s.matching(r)
		wake = s.newEvts
		s.Mu.Unlock()
	}
}

func (s *Server) noStreaming() bool {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	return s.NoStreaming
}

func (s *Server) logs(w http.ResponseWriter, r *http.Request) {
	s.Mu.Lock()
	_, _, err := s.lookup(r)
	text := s.Logs[r.PathValue("name")]
	s.Mu.Unlock()
	if err != nil {
		writeError(w, err)
		return
	}
	if n, _ := strconv.Atoi(r.URL.Query().Get("tail")); n > 0 {
		lines := strings.SplitAfter(strings.TrimSuffix(text, "\n"), "\n")
		text = strings.Join(lines[max(len(lines)-n, 0):], "")
		if !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, text)
	w.(http.Flusher).Flush()
	if r.URL.Query().Get("follow") == "true" {
		<-r.Context().Done()
	}
}

// Token is a token as GET /v1/tokens shows it.
type Token struct {
	ID        string   `json:"id"`
	Name      string   `json:"name,omitempty"`
	Tenant    string   `json:"tenant"`
	Role      api.Role `json:"role"`
	CreatedAt string   `json:"createdAt"`
	ExpiresAt string   `json:"expiresAt,omitempty"`
}

func (s *Server) createToken(r *http.Request) (int, any, error) {
	var req struct {
		Tenant    string    `json:"tenant"`
		Role      api.Role  `json:"role"`
		Name      string    `json:"name,omitempty"`
		ExpiresAt time.Time `json:"expiresAt,omitzero"`
	}
	if err := decode(r, &req); err != nil {
		return 0, nil, err
	}
	if !slices.Contains(api.Roles, req.Role) {
		return 0, nil, api.Invalid("role", "%q is not one of %v", req.Role, api.Roles)
	}
	if !req.ExpiresAt.IsZero() && !req.ExpiresAt.After(s.now()) {
		return 0, nil, api.Invalid("expiresAt", "is not in the future")
	}
	tenant := cmp.Or(req.Tenant, "default")
	id := fmt.Sprintf("%08x", s.version())
	t := Token{ID: id, Name: req.Name, Tenant: tenant, Role: req.Role, CreatedAt: s.now().UTC().Format(time.RFC3339)}
	if !req.ExpiresAt.IsZero() {
		t.ExpiresAt = req.ExpiresAt.UTC().Format(time.RFC3339)
	}
	s.Tokens[id] = t
	return http.StatusCreated, struct {
		Token
		Secret string `json:"token"`
	}{t, "strata_" + id + "_0123456789abcdef0123456789abcdef"}, nil
}

func (s *Server) listTokens(*http.Request) (int, any, error) {
	return http.StatusOK, list[Token]{Items: sortedValues(s.Tokens)}, nil
}

func (s *Server) deleteToken(r *http.Request) (int, any, error) {
	id := r.PathValue("id")
	t, ok := s.Tokens[id]
	if !ok {
		return 0, nil, fmt.Errorf("token %s: %w", id, api.ErrNotFound)
	}
	delete(s.Tokens, id)
	return http.StatusOK, t, nil
}
func (s *Server) listTenants(r *http.Request) (int, any, error) {
	out := []api.Tenant{}
	for _, n := range slices.Sorted(maps.Keys(s.Tenants)) {
		out = append(out, s.Tenants[n])
	}
	return http.StatusOK, map[string]any{"items": out}, nil
}

func (s *Server) getTenant(r *http.Request) (int, any, error) {
	t, ok := s.Tenants[r.PathValue("name")]
	if !ok {
		t = api.Tenant{Name: r.PathValue("name")}
	}
	return http.StatusOK, t, nil
}

func (s *Server) putTenant(r *http.Request) (int, any, error) {
	var t api.Tenant
	if err := decode(r, &t); err != nil {
		return 0, nil, err
	}
	if t.Name != r.PathValue("name") {
		return 0, nil, api.Invalid("name", "%q does not match the path", t.Name)
	}
	if err := t.Validate(); err != nil {
		return 0, nil, err
	}
	s.rev++
	t.ResourceVersion = s.rev
	s.Tenants[t.Name] = t
	return http.StatusOK, t, nil
}

func (s *Server) tenantQuota(r *http.Request) (int, any, error) {
	name := r.PathValue("name")
	t := s.Tenants[name]
	return http.StatusOK, map[string]any{
		"tenant": name, "quota": t.Quota, "regionQuotas": t.RegionQuotas,
		"usage": s.Usage[name], "regionUsage": map[string]api.Quota{},
	}, nil
}

// ---- network policies ----

func (s *Server) listPolicies(r *http.Request) (int, any, error) {
	out := []api.NetworkPolicy{}
	for _, p := range sortedValues(s.Policies) {
		if p.Tenant == tenantOf(r, "") {
			out = append(out, p)
		}
	}
	return http.StatusOK, list[api.NetworkPolicy]{Items: out}, nil
}

func (s *Server) getPolicy(r *http.Request) (int, any, error) {
	p, ok := s.Policies[tenantOf(r, "")+"/"+r.PathValue("name")]
	if !ok {
		return 0, nil, api.NotFound("networkpolicy", r.PathValue("name"))
	}
	return http.StatusOK, p, nil
}

func (s *Server) createPolicy(r *http.Request) (int, any, error) {
	var p api.NetworkPolicy
	if err := decode(r, &p); err != nil {
		return 0, nil, err
	}
	if err := p.Validate(); err != nil {
		return 0, nil, err
	}
	p.Tenant = tenantOf(r, "")
	if _, ok := s.Policies[p.Key()]; ok {
		return 0, nil, api.AlreadyExists("networkpolicy", p.Name)
	}
	p.Generation, p.CreatedAt, p.ResourceVersion = 1, s.now(), s.version()
	s.Policies[p.Key()] = p
	return http.StatusCreated, p, nil
}

func (s *Server) updatePolicy(r *http.Request) (int, any, error) {
	var p api.NetworkPolicy
	if err := decode(r, &p); err != nil {
		return 0, nil, err
	}
	p.Name, p.Tenant = r.PathValue("name"), tenantOf(r, "")
	if err := p.Validate(); err != nil {
		return 0, nil, err
	}
	cur, ok := s.Policies[p.Key()]
	if !ok {
		return 0, nil, api.NotFound("networkpolicy", p.Name)
	}
	cur.Selector, cur.Ingress, cur.Generation, cur.ResourceVersion = p.Selector, p.Ingress, cur.Generation+1, s.version()
	s.Policies[p.Key()] = cur
	return http.StatusOK, cur, nil
}

func (s *Server) deletePolicy(r *http.Request) (int, any, error) {
	key := tenantOf(r, "") + "/" + r.PathValue("name")
	p, ok := s.Policies[key]
	if !ok {
		return 0, nil, api.NotFound("networkpolicy", r.PathValue("name"))
	}
	delete(s.Policies, key)
	return http.StatusOK, p, nil
}
