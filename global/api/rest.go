package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/metrics"
)

// Handler returns the REST API: JSON in and out, every error as an
// api.ErrorBody.
func (s *Service) Handler() http.Handler {
	h := &rest{svc: s, log: s.log}
	mux := http.NewServeMux()
	for _, rt := range h.routes() {
		mux.Handle(rt.pattern, h.endpoint(rt.fn))
	}
	mux.HandleFunc("GET /v1/resources/{name}/logs", noted(h.logs))
	mux.HandleFunc("GET /v1/events", noted(h.events))
	mux.Handle("GET /v1/openapi.json", s.OpenAPIHandler())
	mux.HandleFunc("GET /healthz", h.healthz)
	mux.HandleFunc("GET /readyz", h.readyz)
	return h.recoverPanics(h.logRequests(h.authenticate(h.routed(mux))))
}

// noted records a streaming handler's route for the metrics.
func noted(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		metrics.NoteRoute(r)
		h(w, r)
	}
}

type rest struct {
	svc *Service
	log *slog.Logger
}

// handlerFunc is an endpoint: it returns the status and body of a success,
// or an error that the edge converts, once, to its status and body.
type handlerFunc func(r *http.Request) (int, any, error)

type route struct {
	pattern string
	fn      handlerFunc
}

func (h *rest) routes() []route {
	return []route{
		{"POST /v1/flavors", h.createFlavor},
		{"GET /v1/flavors", h.listFlavors},
		{"GET /v1/flavors/{name}", h.getFlavor},
		{"PUT /v1/flavors/{name}", h.updateFlavor},
		{"DELETE /v1/flavors/{name}", h.deleteFlavor},

		{"POST /v1/resources", h.createResource},
		{"GET /v1/resources", h.listResources},
		{"GET /v1/resources/{name}", h.getResource},
		{"PUT /v1/resources/{name}", h.updateResource},
		{"DELETE /v1/resources/{name}", h.deleteResource},
		{"POST /v1/resources/{name}/scale", h.scaleResource},
		{"POST /v1/resources/{name}/rollback", h.rollbackResource},
		{"GET /v1/resources/{name}/revisions", h.listRevisions},
		{"GET /v1/resources/{name}/replicas", h.listReplicas},
		{"POST /v1/resources/{name}/revisions/{number}/pin", h.pinRevision(true)},
		{"POST /v1/resources/{name}/revisions/{number}/unpin", h.pinRevision(false)},
		{"POST /v1/resources/{name}/rollout/pause", h.pauseRollout(true)},
		{"POST /v1/resources/{name}/rollout/resume", h.pauseRollout(false)},
		{"POST /v1/resources/{name}/rollout/cancel", h.cancelRollout},

		{"POST /v1/regions", h.registerRegion},
		{"GET /v1/regions", h.listRegions},
		{"GET /v1/regions/{name}", h.getRegion},
		{"DELETE /v1/regions/{name}", h.deleteRegion},

		{"GET /v1/nodes", h.listNodes},
		{"GET /v1/regions/{region}/nodes/{node}", h.getNode},
		{"DELETE /v1/regions/{region}/nodes/{node}", h.deleteNode},
		{"POST /v1/regions/{region}/nodes/{node}/cordon", h.cordonNode},
		{"POST /v1/regions/{region}/nodes/{node}/uncordon", h.uncordonNode},
		{"POST /v1/regions/{region}/nodes/{node}/drain", h.drainNode},
		{"GET /v1/regions/{region}/nodes/{node}/drain", h.getDrain},

		{"POST /v1/tokens", h.createToken},
		{"GET /v1/tokens", h.listTokens},
		{"DELETE /v1/tokens/{id}", h.deleteToken},

		{"GET /v1/status", h.status},
	}
}

// ---- flavors ----

func (h *rest) createFlavor(r *http.Request) (int, any, error) {
	var f api.Flavor
	if err := h.decode(r, &f, true); err != nil {
		return 0, nil, err
	}
	out, err := h.svc.CreateFlavor(r.Context(), f)
	return http.StatusCreated, out, err
}

func (h *rest) listFlavors(r *http.Request) (int, any, error) {
	items, err := h.svc.ListFlavors(r.Context())
	return http.StatusOK, list[api.Flavor]{Items: items}, err
}

func (h *rest) getFlavor(r *http.Request) (int, any, error) {
	name, err := pathName(r, "name", "name")
	if err != nil {
		return 0, nil, err
	}
	out, err := h.svc.GetFlavor(r.Context(), name)
	return http.StatusOK, out, err
}

func (h *rest) updateFlavor(r *http.Request) (int, any, error) {
	name, err := pathName(r, "name", "name")
	if err != nil {
		return 0, nil, err
	}
	var f api.Flavor
	if err := h.decode(r, &f, true); err != nil {
		return 0, nil, err
	}
	if f.Name, err = nameInBody(f.Name, name); err != nil {
		return 0, nil, err
	}
	out, err := h.svc.UpdateFlavor(r.Context(), f)
	return http.StatusOK, out, err
}

func (h *rest) deleteFlavor(r *http.Request) (int, any, error) {
	name, err := pathName(r, "name", "name")
	if err != nil {
		return 0, nil, err
	}
	out, err := h.svc.DeleteFlavor(r.Context(), name)
	return http.StatusOK, out, err
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

func (h *rest) createResource(r *http.Request) (int, any, error) {
	var body resourceBody
	if err := h.decode(r, &body, true); err != nil {
		return 0, nil, err
	}
	res, o := body.resource()
	o.IdempotencyKey = r.Header.Get("Idempotency-Key")
	out, err := h.svc.CreateResource(r.Context(), r.URL.Query().Get("tenant"), res, o)
	return http.StatusCreated, out, err
}

func (h *rest) listResources(r *http.Request) (int, any, error) {
	q := r.URL.Query()
	lq := ListQuery{Selector: q.Get("selector"), Kind: q.Get("kind"), Continue: q.Get("continue")}
	if lq.Selector == "" {
		lq.Selector = q.Get("labelSelector")
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, nil, api.Invalid("limit", "%q is not a number", v)
		}
		lq.Limit = n
	}
	out, err := h.svc.ListResources(r.Context(), q.Get("tenant"), lq)
	return http.StatusOK, out, err
}

func (h *rest) getResource(r *http.Request) (int, any, error) {
	name, err := pathName(r, "name", "name")
	if err != nil {
		return 0, nil, err
	}
	out, err := h.svc.GetResource(r.Context(), r.URL.Query().Get("tenant"), name)
	return http.StatusOK, out, err
}

func (h *rest) updateResource(r *http.Request) (int, any, error) {
	name, err := pathName(r, "name", "name")
	if err != nil {
		return 0, nil, err
	}
	var body resourceBody
	if err := h.decode(r, &body, true); err != nil {
		return 0, nil, err
	}
	res, o := body.resource()
	if res.Name, err = nameInBody(res.Name, name); err != nil {
		return 0, nil, err
	}
	o.IdempotencyKey = r.Header.Get("Idempotency-Key")
	out, err := h.svc.UpdateResource(r.Context(), r.URL.Query().Get("tenant"), res, o)
	return http.StatusOK, out, err
}

func (h *rest) deleteResource(r *http.Request) (int, any, error) {
	name, err := pathName(r, "name", "name")
	if err != nil {
		return 0, nil, err
	}
	// 202: the deletion is requested; the master finishes it.
	out, err := h.svc.DeleteResource(r.Context(), r.URL.Query().Get("tenant"), name)
	return http.StatusAccepted, out, err
}

func (h *rest) scaleResource(r *http.Request) (int, any, error) {
	name, err := pathName(r, "name", "name")
	if err != nil {
		return 0, nil, err
	}
	var body struct {
		Replicas *int `json:"replicas"`
	}
	if err := h.decode(r, &body, true); err != nil {
		return 0, nil, err
	}
	if body.Replicas == nil {
		return 0, nil, api.Invalid("replicas", "is required")
	}
	out, err := h.svc.ScaleResource(r.Context(), r.URL.Query().Get("tenant"), name, *body.Replicas)
	return http.StatusOK, out, err
}

func (h *rest) rollbackResource(r *http.Request) (int, any, error) {
	name, err := pathName(r, "name", "name")
	if err != nil {
		return 0, nil, err
	}
	var body struct {
		Revision *int64 `json:"revision"`
	}
	if err := h.decode(r, &body, true); err != nil {
		return 0, nil, err
	}
	if body.Revision == nil {
		return 0, nil, api.Invalid("revision", "is required")
	}
	out, err := h.svc.RollbackResource(r.Context(), r.URL.Query().Get("tenant"), name, *body.Revision)
	return http.StatusOK, out, err
}

func (h *rest) listRevisions(r *http.Request) (int, any, error) {
	name, err := pathName(r, "name", "name")
	if err != nil {
		return 0, nil, err
	}
	items, err := h.svc.ListRevisions(r.Context(), r.URL.Query().Get("tenant"), name)
	return http.StatusOK, list[api.Revision]{Items: items}, err
}

func (h *rest) listReplicas(r *http.Request) (int, any, error) {
	name, err := pathName(r, "name", "name")
	if err != nil {
		return 0, nil, err
	}
	out, err := h.svc.ListReplicas(r.Context(), r.URL.Query().Get("tenant"), name)
	return http.StatusOK, out, err
}

// ---- regions ----

func (h *rest) registerRegion(r *http.Request) (int, any, error) {
	var reg api.Region
	if err := h.decode(r, &reg, true); err != nil {
		return 0, nil, err
	}
	out, created, err := h.svc.RegisterRegion(r.Context(), reg)
	if created {
		return http.StatusCreated, out, err
	}
	return http.StatusOK, out, err
}

func (h *rest) listRegions(r *http.Request) (int, any, error) {
	items, err := h.svc.ListRegions(r.Context())
	return http.StatusOK, list[api.Region]{Items: items}, err
}

func (h *rest) getRegion(r *http.Request) (int, any, error) {
	name, err := pathName(r, "name", "name")
	if err != nil {
		return 0, nil, err
	}
	out, err := h.svc.GetRegion(r.Context(), name)
	return http.StatusOK, out, err
}

func (h *rest) deleteRegion(r *http.Request) (int, any, error) {
	name, err := pathName(r, "name", "name")
	if err != nil {
		return 0, nil, err
	}
	out, err := h.svc.DeleteRegion(r.Context(), name)
	return http.StatusOK, out, err
}

// ---- nodes ----

func (h *rest) listNodes(r *http.Request) (int, any, error) {
	q := r.URL.Query()
	out, err := h.svc.ListNodes(r.Context(), q.Get("region"), q.Get("selector"))
	return http.StatusOK, out, err
}

// nodePath returns the region and node names of a node route.
func nodePath(r *http.Request) (region, node string, err error) {
	if region, err = pathName(r, "region", "region"); err != nil {
		return "", "", err
	}
	node, err = pathName(r, "node", "node")
	return region, node, err
}

func (h *rest) getNode(r *http.Request) (int, any, error) {
	region, node, err := nodePath(r)
	if err != nil {
		return 0, nil, err
	}
	out, err := h.svc.GetNode(r.Context(), region, node)
	return http.StatusOK, out, err
}

func (h *rest) deleteNode(r *http.Request) (int, any, error) {
	region, node, err := nodePath(r)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, struct{}{}, h.svc.DeleteNode(r.Context(), region, node)
}

func (h *rest) cordonNode(r *http.Request) (int, any, error) {
	region, node, err := nodePath(r)
	if err != nil {
		return 0, nil, err
	}
	var body struct {
		Reason string `json:"reason"`
	}
	if err := h.decode(r, &body, false); err != nil {
		return 0, nil, err
	}
	out, err := h.svc.CordonNode(r.Context(), region, node, body.Reason)
	return http.StatusOK, out, err
}

func (h *rest) uncordonNode(r *http.Request) (int, any, error) {
	region, node, err := nodePath(r)
	if err != nil {
		return 0, nil, err
	}
	if err := h.decode(r, &struct{}{}, false); err != nil {
		return 0, nil, err
	}
	out, err := h.svc.UncordonNode(r.Context(), region, node)
	return http.StatusOK, out, err
}

func (h *rest) drainNode(r *http.Request) (int, any, error) {
	region, node, err := nodePath(r)
	if err != nil {
		return 0, nil, err
	}
	var d api.DrainRequest
	if err := h.decode(r, &d, false); err != nil {
		return 0, nil, err
	}
	out, err := h.svc.DrainNode(r.Context(), region, node, d)
	return http.StatusOK, out, err
}

func (h *rest) getDrain(r *http.Request) (int, any, error) {
	region, node, err := nodePath(r)
	if err != nil {
		return 0, nil, err
	}
	out, err := h.svc.GetDrain(r.Context(), region, node)
	return http.StatusOK, out, err
}

// ---- status ----

func (h *rest) status(r *http.Request) (int, any, error) {
	out, err := h.svc.Status(r.Context())
	return http.StatusOK, out, err
}

// healthz says the process serves HTTP; nothing else.
func (h *rest) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz says this replica can serve: etcd answers and the caches are
// loaded. Load balancers take it out of rotation otherwise.
func (h *rest) readyz(w http.ResponseWriter, r *http.Request) {
	if err := h.svc.Ready(r.Context()); err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// ---- plumbing ----

// list is the shape of every list response.
type list[T any] struct {
	Items    []T    `json:"items"`
	Continue string `json:"continue,omitempty"`
}

func (l list[T]) MarshalJSON() ([]byte, error) {
	if l.Items == nil {
		l.Items = []T{} // [] rather than null: clients range over it
	}
	type plain list[T]
	return json.Marshal(plain(l))
}

// endpoint adapts a handlerFunc: the body limit on the way in, the status
// and JSON body (or error) on the way out.
func (h *rest) endpoint(fn handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		metrics.NoteRoute(r)
		r.Body = http.MaxBytesReader(w, r.Body, h.svc.maxBody)
		code, body, err := fn(r)
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		writeJSON(w, code, body)
	})
}

// decode reads a JSON body into v. Unknown fields, trailing data and
// bodies over the limit are refused (other media types are refused before
// any handler, by serving.Guard). An empty body is an error when
// required, else leaves v as it is.
func (h *rest) decode(r *http.Request, v any, required bool) error {
	data, err := io.ReadAll(r.Body)
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return fmt.Errorf("request body is larger than %d bytes: %w", tooBig.Limit, api.ErrTooLarge)
	}
	if err != nil {
		return api.Invalid("", "reading the request body: %v", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		if required {
			return api.Invalid("", "a JSON request body is required")
		}
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return api.Invalid("", "malformed JSON: unexpected data after the JSON object")
	}
	return nil
}

// decodeError turns encoding/json's errors into field errors a client can
// act on.
func decodeError(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return api.Invalid("", "malformed JSON: %v (at byte %d)", syntax, syntax.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return api.Invalid("", "malformed JSON: the body ends in the middle of the object")
	case errors.As(err, &typ):
		if typ.Field == "" {
			return api.Invalid("", "malformed JSON: the body must be a JSON object, not %s", typ.Value)
		}
		return api.Invalid(typ.Field, "must be %s, not %s", jsonType(typ.Type.Kind().String()), typ.Value)
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return api.Invalid(strings.Trim(name, `"`), "unknown field")
	}
	return api.Invalid("", "invalid request body: %v", strings.TrimPrefix(err.Error(), "json: "))
}

// jsonType names a Go kind the way a JSON user thinks of it.
func jsonType(kind string) string {
	switch {
	case strings.HasPrefix(kind, "int"), strings.HasPrefix(kind, "uint"), strings.HasPrefix(kind, "float"):
		return "a number"
	case kind == "string":
		return "a string"
	case kind == "bool":
		return "true or false"
	case kind == "slice", kind == "array":
		return "an array"
	}
	return "an object"
}

// pathName returns a name from the path, which must be a valid name.
func pathName(r *http.Request, key, field string) (string, error) {
	v := r.PathValue(key)
	return v, api.ValidateName(field, v)
}

// nameInBody reconciles the name in a PUT body with the one in its path.
func nameInBody(body, path string) (string, error) {
	if body != "" && body != path {
		return "", api.Invalid("name", "%q does not match the name in the path, %q", body, path)
	}
	return path, nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only a programming error gets here (the API's types marshal).
		code, b = http.StatusInternalServerError, []byte(`{"error":{"code":"Internal","message":"internal error"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

// writeError is the one place a REST error becomes a status and a body.
func (h *rest) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code, body := api.HTTPError(err)
	// The client sees "internal error" for what is unclassified; the
	// cause is for the operator, unless the client had gone away.
	h.log.Log(r.Context(), api.FailureLevel(r.Context(), code), "request failed", "method", r.Method, "path", r.URL.Path, "status", code, "err", err)
	if code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="strata"`)
	}
	writeJSON(w, code, body)
}

// routed serves mux, answering in JSON where the mux itself would answer in
// text: no route (404) and a route without this method (405).
func (h *rest) routed(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		// Let the mux decide between 404, 405 and a redirect (unclean
		// path), and only restate its verdict.
		verdict := &captured{header: http.Header{}}
		mux.ServeHTTP(verdict, r)
		switch verdict.code {
		case http.StatusNotFound:
			writeJSON(w, http.StatusNotFound, api.ErrorBody{Error: api.ErrorDetail{
				Code: "NotFound", Message: fmt.Sprintf("no route %s", r.URL.Path)}})
		case http.StatusMethodNotAllowed:
			allow := verdict.header.Get("Allow")
			w.Header().Set("Allow", allow)
			writeJSON(w, http.StatusMethodNotAllowed, api.ErrorBody{Error: api.ErrorDetail{
				Code: "MethodNotAllowed", Message: fmt.Sprintf("method %s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, allow)}})
		default:
			for k, v := range verdict.header {
				w.Header()[k] = v
			}
			w.WriteHeader(verdict.code)
		}
	})
}

// captured records a response's status and headers and drops its body.
type captured struct {
	header http.Header
	code   int
}

func (c *captured) Header() http.Header { return c.header }
func (c *captured) WriteHeader(code int) {
	if c.code == 0 {
		c.code = code
	}
}

func (c *captured) Write(b []byte) (int, error) {
	c.WriteHeader(http.StatusOK)
	return len(b), nil
}

// authenticate puts the caller's Identity in the request context. Probes
// are open: a load balancer has no token.
func (h *rest) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" || r.URL.Path == "/v1/openapi.json" {
			next.ServeHTTP(w, r)
			return
		}
		id, err := h.identify(r)
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(WithIdentity(r.Context(), id)))
	})
}

func (h *rest) identify(r *http.Request) (Identity, error) {
	bearer, err := bearerToken(r.Header.Get("Authorization"))
	if err != nil {
		return Identity{}, err
	}
	return h.svc.Authenticate(r.Context(), bearer)
}

// bearerToken returns the token of an Authorization header ("" if none).
func bearerToken(header string) (string, error) {
	if header == "" {
		return "", nil
	}
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", fmt.Errorf("the Authorization header must be \"Bearer <token>\": %w", api.ErrUnauthenticated)
	}
	return strings.TrimSpace(token), nil
}

// logRequests logs every request at Debug.
func (h *rest) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		h.log.Debug("http request", "method", r.Method, "path", r.URL.Path, "status", sw.status(), "duration", time.Since(start))
	})
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush lets streaming responses (logs, server-sent events) through the
// logging middleware.
func (w *statusWriter) Flush() {
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *statusWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// recoverPanics turns a panic into a 500, so that a bug in one handler
// costs one request, not the process.
func (h *rest) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			p := recover()
			if p == nil {
				return
			}
			if p == http.ErrAbortHandler {
				panic(p) // the server's own way to abort a response
			}
			h.log.Error("panic in HTTP handler", "method", r.Method, "path", r.URL.Path, "panic", p, "stack", string(debug.Stack()))
			if sw.code == 0 {
				writeJSON(sw, http.StatusInternalServerError, api.ErrorBody{Error: api.ErrorDetail{Code: "Internal", Message: "internal error"}})
			}
		}()
		next.ServeHTTP(sw, r)
	})
}
