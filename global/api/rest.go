package api

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stratahq/strata/internal/api"
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

// restAPI declares the routes; the edge does the rest.
func (s *Server) restAPI() *rest.API {
	h := &restHandlers{s: s}
	opts := []rest.Option{rest.WithMaxBody(s.maxBody), rest.WithLogger(s.log)}
	if s.audit != nil {
		opts = append(opts, rest.WithAudit(s.auditREST))
	}
	a := rest.New(s.tokens.authenticate, opts...)
	for _, rt := range slices.Concat(h.routes(), h.configDataRoutes(), h.alertRoutes()) {
		a.Handle(rt.pattern, rt.fn, rt.query...)
	}
	h.stream = a.Error
	a.HandleStream("GET /v1/resources/{name}/logs", h.logs, "tenant", "replica", "follow", "tail")
	a.HandleStream("GET /v1/events", h.events, "region", "after", "limit", "object", "watch", "continue")
	a.HandlePublic("GET /v1/openapi.json", OpenAPIHandler())
	a.HandlePublic("GET /healthz", http.HandlerFunc(h.healthz))
	a.HandlePublic("GET /readyz", http.HandlerFunc(h.readyz))
	return a
}

// restHandlers turn REST requests into calls of the services.
type restHandlers struct {
	s *Server
	// stream reports the error of a streaming handler (rest.API.Error).
	stream func(w http.ResponseWriter, r *http.Request, err error)
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

func (h *restHandlers) routes() []route {
	return []route{
		{"POST /v1/flavors", h.createFlavor, nil},
		{"GET /v1/flavors", h.listFlavors, paged},
		{"GET /v1/flavors/{name}", h.getFlavor, nil},
		{"PUT /v1/flavors/{name}", h.updateFlavor, nil},
		{"DELETE /v1/flavors/{name}", h.deleteFlavor, nil},

		{"POST /v1/resources", h.createResource, inTenant},
		{"GET /v1/resources", h.listResources, []string{"tenant", "selector", "labelSelector", "kind", "limit", "continue"}},
		{"GET /v1/resources/{name}", h.getResource, inTenant},
		{"PUT /v1/resources/{name}", h.updateResource, inTenant},
		{"DELETE /v1/resources/{name}", h.deleteResource, inTenant},
		{"POST /v1/resources/{name}/scale", h.scaleResource, inTenant},
		{"POST /v1/resources/{name}/rollback", h.rollbackResource, inTenant},
		{"GET /v1/resources/{name}/revisions", h.listRevisions, inTenant},
		{"GET /v1/resources/{name}/replicas", h.listReplicas, inTenant},
		{"POST /v1/resources/{name}/revisions/{number}/pin", h.pinRevision(true), inTenant},
		{"POST /v1/resources/{name}/revisions/{number}/unpin", h.pinRevision(false), inTenant},
		{"POST /v1/resources/{name}/rollout/pause", h.pauseRollout(true), inTenant},
		{"POST /v1/resources/{name}/rollout/resume", h.pauseRollout(false), inTenant},
		{"POST /v1/resources/{name}/rollout/cancel", h.cancelRollout, inTenant},

		{"POST /v1/regions", h.registerRegion, nil},
		{"GET /v1/regions", h.listRegions, nil},
		{"GET /v1/regions/{name}", h.getRegion, nil},
		{"DELETE /v1/regions/{name}", h.deleteRegion, nil},

		{"GET /v1/nodes", h.listNodes, []string{"region", "selector", "limit", "continue"}},
		{"GET /v1/regions/{region}/nodes/{node}", h.getNode, nil},
		{"DELETE /v1/regions/{region}/nodes/{node}", h.deleteNode, nil},
		{"POST /v1/regions/{region}/nodes/{node}/cordon", h.cordonNode, nil},
		{"POST /v1/regions/{region}/nodes/{node}/uncordon", h.uncordonNode, nil},
		{"POST /v1/regions/{region}/nodes/{node}/drain", h.drainNode, nil},
		{"GET /v1/regions/{region}/nodes/{node}/drain", h.getDrain, nil},

		{"POST /v1/tokens", h.createToken, nil},
		{"GET /v1/tokens", h.listTokens, paged},
		{"DELETE /v1/tokens/{id}", h.deleteToken, nil},

		{"GET /v1/tenants", h.listTenants, nil},
		{"GET /v1/tenants/{name}", h.getTenant, nil},
		{"PUT /v1/tenants/{name}", h.putTenant, nil},
		{"DELETE /v1/tenants/{name}", h.deleteTenant, nil},
		{"GET /v1/tenants/{name}/quota", h.tenantQuota, nil},

		{"POST /v1/networkpolicies", h.createPolicy, inTenant},
		{"GET /v1/networkpolicies", h.listPolicies, inTenant},
		{"GET /v1/networkpolicies/{name}", h.getPolicy, inTenant},
		{"PUT /v1/networkpolicies/{name}", h.updatePolicy, inTenant},
		{"DELETE /v1/networkpolicies/{name}", h.deletePolicy, inTenant},

		{"GET /v1/status", h.status, nil},
	}
}

// ---- flavors ----

func (h *restHandlers) createFlavor(r *http.Request) (any, error) {
	var f api.Flavor
	if err := rest.Decode(r, &f); err != nil {
		return nil, err
	}
	out, err := h.s.flavors.Create(r.Context(), f)
	return rest.Created(out), err
}

func (h *restHandlers) listFlavors(r *http.Request) (any, error) {
	q, err := pageQuery(r)
	if err != nil {
		return nil, err
	}
	items, next, err := h.s.flavors.Page(r.Context(), q)
	return rest.List[api.Flavor]{Items: items, Continue: next}, err
}

// pageQuery reads a list's limit and continue.
func pageQuery(r *http.Request) (PageQuery, error) {
	limit, err := rest.QueryInt(r, "limit")
	return PageQuery{Limit: limit, Continue: r.URL.Query().Get("continue")}, err
}

func (h *restHandlers) getFlavor(r *http.Request) (any, error) {
	name, err := rest.PathName(r, "name")
	if err != nil {
		return nil, err
	}
	return h.s.flavors.Get(r.Context(), name)
}

func (h *restHandlers) updateFlavor(r *http.Request) (any, error) {
	var f api.Flavor
	if err := rest.Decode(r, &f); err != nil {
		return nil, err
	}
	if err := putTarget(r, &f.Name, &f.ResourceVersion); err != nil {
		return nil, err
	}
	return h.s.flavors.Update(r.Context(), f)
}

func (h *restHandlers) deleteFlavor(r *http.Request) (any, error) {
	name, expect, err := deleteTarget(r)
	if err != nil {
		return nil, err
	}
	return h.s.flavors.Delete(r.Context(), name, expect)
}

// ---- resources ----

// resourceBody is a resource as a client writes it. Replicas shadows the
// embedded field so that an absent count (nil) can be told from 0.
type resourceBody struct {
	api.Resource
	Replicas *int `json:"replicas"`
}

func (b *resourceBody) resource() (api.Resource, WriteOptions) {
	r := b.Resource
	if b.Replicas != nil {
		r.Replicas = *b.Replicas
	}
	return r, WriteOptions{ReplicasUnset: b.Replicas == nil}
}

func (h *restHandlers) createResource(r *http.Request) (any, error) {
	var body resourceBody
	if err := rest.Decode(r, &body); err != nil {
		return nil, err
	}
	res, o := body.resource()
	o.IdempotencyKey = r.Header.Get("Idempotency-Key")
	out, err := h.s.resources.Create(r.Context(), tenantOf(r), res, o)
	return rest.Created(out), err
}

func (h *restHandlers) listResources(r *http.Request) (any, error) {
	q := r.URL.Query()
	pq, err := pageQuery(r)
	if err != nil {
		return nil, err
	}
	lq := ListQuery{Selector: q.Get("selector"), Kind: q.Get("kind"), Limit: pq.Limit, Continue: pq.Continue}
	if lq.Selector == "" {
		// Its errors name the parameter the client wrote.
		lq.Selector = q.Get("labelSelector")
		if err := api.ValidateSelector("labelSelector", lq.Selector); err != nil {
			return nil, err
		}
	}
	return h.s.resources.List(r.Context(), tenantOf(r), lq)
}

// tenantOf is the tenant a request names (?tenant=), "" for the caller's.
func tenantOf(r *http.Request) string { return r.URL.Query().Get("tenant") }

func (h *restHandlers) getResource(r *http.Request) (any, error) {
	name, err := rest.PathName(r, "name")
	if err != nil {
		return nil, err
	}
	return h.s.resources.Get(r.Context(), tenantOf(r), name)
}

func (h *restHandlers) updateResource(r *http.Request) (any, error) {
	var body resourceBody
	if err := rest.Decode(r, &body); err != nil {
		return nil, err
	}
	res, o := body.resource()
	if err := putTarget(r, &res.Name, &res.ResourceVersion); err != nil {
		return nil, err
	}
	o.IdempotencyKey = r.Header.Get("Idempotency-Key")
	return h.s.resources.Update(r.Context(), tenantOf(r), res, o)
}

func (h *restHandlers) deleteResource(r *http.Request) (any, error) {
	name, expect, err := deleteTarget(r)
	if err != nil {
		return nil, err
	}
	// 202: the deletion is requested; the master finishes it.
	out, err := h.s.resources.Delete(r.Context(), tenantOf(r), name, expect)
	return rest.Accepted(out), err
}

func (h *restHandlers) scaleResource(r *http.Request) (any, error) {
	name, err := rest.PathName(r, "name")
	if err != nil {
		return nil, err
	}
	var body struct {
		Replicas *int `json:"replicas"`
	}
	if err := rest.Decode(r, &body); err != nil {
		return nil, err
	}
	if body.Replicas == nil {
		return nil, api.Invalid("replicas", "is required")
	}
	return h.s.resources.Scale(r.Context(), tenantOf(r), name, *body.Replicas)
}

func (h *restHandlers) rollbackResource(r *http.Request) (any, error) {
	name, err := rest.PathName(r, "name")
	if err != nil {
		return nil, err
	}
	var body struct {
		Revision *int64 `json:"revision"`
	}
	if err := rest.Decode(r, &body); err != nil {
		return nil, err
	}
	if body.Revision == nil {
		return nil, api.Invalid("revision", "is required")
	}
	return h.s.resources.Rollback(r.Context(), tenantOf(r), name, *body.Revision)
}

func (h *restHandlers) listRevisions(r *http.Request) (any, error) {
	name, err := rest.PathName(r, "name")
	if err != nil {
		return nil, err
	}
	items, err := h.s.resources.Revisions(r.Context(), tenantOf(r), name)
	return rest.List[api.Revision]{Items: items}, err
}

func (h *restHandlers) listReplicas(r *http.Request) (any, error) {
	name, err := rest.PathName(r, "name")
	if err != nil {
		return nil, err
	}
	return h.s.replicas.List(r.Context(), tenantOf(r), name)
}

func (h *restHandlers) pinRevision(pinned bool) rest.Func {
	return func(r *http.Request) (any, error) {
		name, err := rest.PathName(r, "name")
		if err != nil {
			return nil, err
		}
		n, err := strconv.ParseInt(r.PathValue("number"), 10, 64)
		if err != nil || n <= 0 {
			return nil, api.Invalid("revision", "%q is not a revision number", r.PathValue("number"))
		}
		return h.s.resources.PinRevision(r.Context(), tenantOf(r), name, n, pinned)
	}
}

func (h *restHandlers) pauseRollout(paused bool) rest.Func {
	return func(r *http.Request) (any, error) {
		name, err := rest.PathName(r, "name")
		if err != nil {
			return nil, err
		}
		return h.s.resources.PauseRollout(r.Context(), tenantOf(r), name, paused)
	}
}

func (h *restHandlers) cancelRollout(r *http.Request) (any, error) {
	name, err := rest.PathName(r, "name")
	if err != nil {
		return nil, err
	}
	return h.s.resources.CancelRollout(r.Context(), tenantOf(r), name)
}

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

// ---- regions ----

func (h *restHandlers) registerRegion(r *http.Request) (any, error) {
	var reg api.Region
	if err := rest.Decode(r, &reg); err != nil {
		return nil, err
	}
	out, created, err := h.s.regions.Register(r.Context(), reg)
	if created {
		return rest.Created(out), err
	}
	return out, err
}

func (h *restHandlers) listRegions(r *http.Request) (any, error) {
	items, err := h.s.regions.List(r.Context())
	return rest.List[api.Region]{Items: items}, err
}

func (h *restHandlers) getRegion(r *http.Request) (any, error) {
	name, err := rest.PathName(r, "name")
	if err != nil {
		return nil, err
	}
	return h.s.regions.Get(r.Context(), name)
}

func (h *restHandlers) deleteRegion(r *http.Request) (any, error) {
	name, err := rest.PathName(r, "name")
	if err != nil {
		return nil, err
	}
	return h.s.regions.Delete(r.Context(), name)
}

// ---- nodes ----

func (h *restHandlers) listNodes(r *http.Request) (any, error) {
	pq, err := pageQuery(r)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	return h.s.nodes.Page(r.Context(), q.Get("region"), q.Get("selector"), pq)
}

// nodePath returns the region and node names of a node route.
func nodePath(r *http.Request) (region, node string, err error) {
	if region, err = rest.PathName(r, "region"); err != nil {
		return "", "", err
	}
	node, err = rest.PathName(r, "node")
	return region, node, err
}

func (h *restHandlers) getNode(r *http.Request) (any, error) {
	region, node, err := nodePath(r)
	if err != nil {
		return nil, err
	}
	return h.s.nodes.Get(r.Context(), region, node)
}

func (h *restHandlers) deleteNode(r *http.Request) (any, error) {
	region, node, err := nodePath(r)
	if err != nil {
		return nil, err
	}
	return struct{}{}, h.s.nodes.Delete(r.Context(), region, node)
}

func (h *restHandlers) cordonNode(r *http.Request) (any, error) {
	region, node, err := nodePath(r)
	if err != nil {
		return nil, err
	}
	var body struct {
		Reason string `json:"reason"`
	}
	if err := rest.DecodeOptional(r, &body); err != nil {
		return nil, err
	}
	return h.s.nodes.Cordon(r.Context(), region, node, body.Reason)
}

func (h *restHandlers) uncordonNode(r *http.Request) (any, error) {
	region, node, err := nodePath(r)
	if err != nil {
		return nil, err
	}
	if err := rest.DecodeOptional(r, &struct{}{}); err != nil {
		return nil, err
	}
	return h.s.nodes.Uncordon(r.Context(), region, node)
}

func (h *restHandlers) drainNode(r *http.Request) (any, error) {
	region, node, err := nodePath(r)
	if err != nil {
		return nil, err
	}
	var d api.DrainRequest
	if err := rest.DecodeOptional(r, &d); err != nil {
		return nil, err
	}
	return h.s.nodes.Drain(r.Context(), region, node, d)
}

func (h *restHandlers) getDrain(r *http.Request) (any, error) {
	region, node, err := nodePath(r)
	if err != nil {
		return nil, err
	}
	return h.s.nodes.GetDrain(r.Context(), region, node)
}

// ---- tokens ----

func (h *restHandlers) createToken(r *http.Request) (any, error) {
	var req TokenRequest
	if err := rest.Decode(r, &req); err != nil {
		return nil, err
	}
	out, err := h.s.tokens.Create(r.Context(), req)
	return rest.Created(out), err
}

func (h *restHandlers) listTokens(r *http.Request) (any, error) {
	q, err := pageQuery(r)
	if err != nil {
		return nil, err
	}
	items, next, err := h.s.tokens.Page(r.Context(), q)
	return rest.List[TokenInfo]{Items: items, Continue: next}, err
}

func (h *restHandlers) deleteToken(r *http.Request) (any, error) {
	id := r.PathValue("id")
	if id == "" || len(id) > 64 || strings.ContainsAny(id, "/_ ") {
		return nil, api.Invalid("id", "%q is not a token id", id)
	}
	out, err := h.s.tokens.Delete(r.Context(), id)
	if err != nil {
		return nil, fmt.Errorf("token %s: %w", id, err)
	}
	return out, nil
}

// ---- tenants ----

func (h *restHandlers) listTenants(r *http.Request) (any, error) {
	items, err := h.s.tenants.List(r.Context())
	return rest.List[api.Tenant]{Items: items}, err
}

func (h *restHandlers) getTenant(r *http.Request) (any, error) {
	name, err := rest.PathName(r, "name")
	if err != nil {
		return nil, err
	}
	return h.s.tenants.Get(r.Context(), name)
}

func (h *restHandlers) putTenant(r *http.Request) (any, error) {
	name, err := rest.PathName(r, "name")
	if err != nil {
		return nil, err
	}
	var t api.Tenant
	if err := rest.Decode(r, &t); err != nil {
		return nil, err
	}
	if t.Name, err = nameInBody(t.Name, name); err != nil {
		return nil, err
	}
	out, created, err := h.s.tenants.Put(r.Context(), t)
	if created {
		return rest.Created(out), err
	}
	return out, err
}

func (h *restHandlers) deleteTenant(r *http.Request) (any, error) {
	name, err := rest.PathName(r, "name")
	if err != nil {
		return nil, err
	}
	return h.s.tenants.Delete(r.Context(), name)
}

func (h *restHandlers) tenantQuota(r *http.Request) (any, error) {
	name, err := rest.PathName(r, "name")
	if err != nil {
		return nil, err
	}
	return h.s.tenants.Quota(r.Context(), name)
}

// ---- status and probes ----

func (h *restHandlers) status(r *http.Request) (any, error) {
	return h.s.Status(r.Context())
}

// healthz says the process serves HTTP; nothing else.
func (h *restHandlers) healthz(w http.ResponseWriter, r *http.Request) {
	rest.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz says this replica can serve: etcd answers and the caches are
// loaded. Load balancers take it out of rotation otherwise.
func (h *restHandlers) readyz(w http.ResponseWriter, r *http.Request) {
	if err := h.s.Ready(r.Context()); err != nil {
		h.stream(w, r, err)
		return
	}
	rest.WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// ---- streams ----

// logs streams text/plain: GET /v1/resources/{name}/logs?replica=&follow=&tail=
func (h *restHandlers) logs(w http.ResponseWriter, r *http.Request) {
	name, o, err := logRequest(r)
	if err != nil {
		h.stream(w, r, err)
		return
	}
	lw := &lazyWriter{w: w}
	err = h.s.replicas.Logs(r.Context(), tenantOf(r), name, o, lw)
	switch {
	case err != nil && !lw.started:
		h.stream(w, r, err)
	case err != nil:
		fmt.Fprintf(w, "\n[strata: log stream ended: %v]\n", err)
	default:
		lw.Start() // an empty log is still a text/plain 200
	}
}

func logRequest(r *http.Request) (string, LogOptions, error) {
	name, err := rest.PathName(r, "name")
	if err != nil {
		return "", LogOptions{}, err
	}
	o := LogOptions{Replica: r.URL.Query().Get("replica")}
	if o.Follow, err = rest.QueryBool(r, "follow"); err != nil {
		return "", LogOptions{}, err
	}
	if o.TailLines, err = rest.QueryInt(r, "tail"); err != nil || o.TailLines < 0 {
		return "", LogOptions{}, api.Invalid("tail", "%q is not a number of lines", r.URL.Query().Get("tail"))
	}
	return name, o, nil
}

// lazyWriter sends the streaming headers only with the first byte, so
// that an error before any output still becomes a JSON error.
type lazyWriter struct {
	w       http.ResponseWriter
	started bool
}

func (l *lazyWriter) Write(p []byte) (int, error) {
	l.Start()
	return l.w.Write(p)
}

// Start sends the headers of the stream, once, and flushes them: from
// then on an error can only end the stream.
func (l *lazyWriter) Start() {
	if l.started {
		return
	}
	l.started = true
	l.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	l.w.Header().Set("X-Content-Type-Options", "nosniff")
	l.w.WriteHeader(http.StatusOK)
	l.Flush()
}

func (l *lazyWriter) Flush() {
	if f, ok := l.w.(http.Flusher); ok {
		f.Flush()
	}
}

// events answers GET /v1/events, or with watch=true streams server-sent
// events, polling the regions once a second.
func (h *restHandlers) events(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	eq := EventQuery{Region: q.Get("region"), After: q.Get("after"), Object: q.Get("object")}
	if c := q.Get("continue"); c != "" {
		if eq.After != "" && eq.After != c {
			h.stream(w, r, api.Invalid("continue", "is another cursor than after; send one"))
			return
		}
		eq.After = c
	}
	var err error
	if eq.Limit, err = rest.QueryInt(r, "limit"); err != nil {
		h.stream(w, r, err)
		return
	}
	watch, err := rest.QueryBool(r, "watch")
	if err != nil {
		h.stream(w, r, err)
		return
	}
	page, err := h.s.events.List(r.Context(), eq)
	if err != nil {
		h.stream(w, r, err)
		return
	}
	if !watch {
		rest.WriteJSON(w, http.StatusOK, page)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		h.stream(w, r, fmt.Errorf("streaming is not supported here: %w", api.ErrUnavailable))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	h.watchEvents(r, eq, page, &sse{w: w, flusher: flusher})
}

// watchEvents sends page, then what comes after it, until the client
// leaves.
func (h *restHandlers) watchEvents(r *http.Request, eq EventQuery, page EventList, out *sse) {
	if !out.send(page) {
		return
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
		eq.After = page.Cursor
		next, err := h.s.events.List(r.Context(), eq)
		if err != nil {
			continue
		}
		if next.Cursor != "" {
			page.Cursor = next.Cursor
		}
		if len(next.Items) > 0 && !out.send(next) {
			return
		}
		if !out.keepalive() {
			return
		}
	}
}

// sse writes server-sent events.
type sse struct {
	w       io.Writer
	flusher http.Flusher
}

// send writes the events of p, each with p's cursor as its id; false
// when the client is gone.
func (s *sse) send(p EventList) bool {
	for _, ev := range p.Items {
		b, _ := json.Marshal(ev)
		if _, err := fmt.Fprintf(s.w, "id: %s\ndata: %s\n\n", p.Cursor, b); err != nil {
			return false
		}
	}
	s.flusher.Flush()
	return true
}

// keepalive writes a comment line, which keeps proxies from closing an
// idle stream; false when the client is gone.
func (s *sse) keepalive() bool {
	if _, err := io.WriteString(s.w, ": keepalive\n\n"); err != nil {
		return false
	}
	s.flusher.Flush()
	return true
}

// ---- network policies ----

func (h *restHandlers) createPolicy(r *http.Request) (any, error) {
	var p api.NetworkPolicy
	if err := rest.Decode(r, &p); err != nil {
		return nil, err
	}
	out, err := h.s.policies.Create(r.Context(), tenantOf(r), p)
	return rest.Created(out), err
}

func (h *restHandlers) listPolicies(r *http.Request) (any, error) {
	items, err := h.s.policies.List(r.Context(), tenantOf(r))
	return rest.List[api.NetworkPolicy]{Items: items}, err
}

func (h *restHandlers) getPolicy(r *http.Request) (any, error) {
	name, err := rest.PathName(r, "name")
	if err != nil {
		return nil, err
	}
	return h.s.policies.Get(r.Context(), tenantOf(r), name)
}

func (h *restHandlers) updatePolicy(r *http.Request) (any, error) {
	var p api.NetworkPolicy
	if err := rest.Decode(r, &p); err != nil {
		return nil, err
	}
	if err := putTarget(r, &p.Name, &p.ResourceVersion); err != nil {
		return nil, err
	}
	return h.s.policies.Update(r.Context(), tenantOf(r), p)
}

func (h *restHandlers) deletePolicy(r *http.Request) (any, error) {
	name, expect, err := deleteTarget(r)
	if err != nil {
		return nil, err
	}
	return h.s.policies.Delete(r.Context(), tenantOf(r), name, expect)
}
