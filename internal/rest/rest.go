// Package rest is the edge every Strata REST API shares. A tier (global,
// region) declares its routes and handlers on an API; this package does
// the rest, once for both:
//
//   - authentication: "Authorization: Bearer <token>", which the tier
//     resolves to the caller's identity in the request's context; probes
//     and the API's description are the only routes without a token;
//   - routing on http.ServeMux patterns, answering in JSON where the mux
//     would answer in text: no route (404), a method the route does not
//     take (405, with Allow);
//   - request bodies: JSON only (application/json, UTF-8, or no
//     Content-Type; 415 otherwise, checked after authentication), a
//     size limit and strict decoding (Decode: unknown fields, trailing
//     data and oversized bodies are refused);
//   - query strings: each route declares the parameters it takes; any
//     other, or one given twice, is refused with a 400 that names it;
//   - errors: one JSON shape, api.ErrorBody, and one mapping from api
//     sentinels to HTTP statuses (api.HTTPError); unclassified errors are
//     500s whose cause is logged, never sent;
//   - request metrics labelled by route pattern (metrics.NoteRoute), a
//     debug log line per request, and a panic costing one request only;
//   - Guard, the checks in front of every HTTP server of Strata (Host
//     names, cross-origin writes), which serving.NewHTTP puts before
//     any handler.
package rest

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/metrics"
)

// DefaultMaxBody bounds a request body when WithMaxBody does not.
const DefaultMaxBody = 1 << 20

// Authenticator resolves a bearer token (the text after "Bearer ", empty
// when the request has none) to the context the handlers run with, which
// carries the caller's identity. It returns an error wrapping
// api.ErrUnauthenticated for a missing or invalid token. gRPC token
// authentication (transport.Policy's Token) has the same shape, so a tier
// authenticates both edges with one function.
type Authenticator func(ctx context.Context, bearer string) (context.Context, error)

// Func answers one route: a value sent as JSON with status 200 (a Reply
// for another status; nil for 204 No Content), or an error, which the edge
// turns into its status and api.ErrorBody. The value is ignored when the
// error is not nil.
type Func func(r *http.Request) (any, error)

// Reply is a JSON answer with a status other than 200.
type Reply struct {
	Code int
	Body any
}

// Created is a 201 answer.
func Created(v any) Reply { return Reply{Code: http.StatusCreated, Body: v} }

// Accepted is a 202 answer: the request is taken, its effect comes later.
func Accepted(v any) Reply { return Reply{Code: http.StatusAccepted, Body: v} }

// API is one tier's REST API: its routes behind the shared edge. Declare
// the routes with Handle, HandleStream and HandlePublic, then serve
// Handler.
type API struct {
	mux      *http.ServeMux
	public   map[string]bool
	routed   map[string]bool
	patterns []string
	query    map[string][]string // pattern -> the query parameters it takes
	auth     Authenticator
	maxBody  int64
	realm    string
	mapErr   func(error) error
	audit    Auditor
	log      *slog.Logger
}

// Auditor records a call that changes something (any method but GET,
// HEAD and OPTIONS), refused ones included, once it is answered: r
// carries the caller's identity when the token was accepted.
type Auditor func(r *http.Request, status int, took time.Duration)

// Option configures an API.
type Option func(*API)

// WithMaxBody bounds request bodies (n <= 0: DefaultMaxBody).
func WithMaxBody(n int64) Option {
	return func(a *API) {
		if n > 0 {
			a.maxBody = n
		}
	}
}

// WithLogger sets where failed requests, panics and (at debug) every
// request are logged; the default discards.
func WithLogger(l *slog.Logger) Option {
	return func(a *API) {
		if l != nil {
			a.log = l
		}
	}
}

// WithRealm names the API in the WWW-Authenticate header of a 401.
func WithRealm(realm string) Option { return func(a *API) { a.realm = realm } }

// WithErrorMapping translates a tier's own sentinels (its store's, say)
// into api sentinels before api.HTTPError maps them to a status: for
// tiers whose gRPC edge shares the translation.
func WithErrorMapping(fn func(error) error) Option { return func(a *API) { a.mapErr = fn } }

// WithAudit has every call that changes something recorded by fn.
func WithAudit(fn Auditor) Option { return func(a *API) { a.audit = fn } }

// New returns an API whose routes, except public ones, need a token that
// auth accepts.
func New(auth Authenticator, opts ...Option) *API {
	a := &API{
		mux:     http.NewServeMux(),
		public:  map[string]bool{},
		routed:  map[string]bool{},
		query:   map[string][]string{},
		auth:    auth,
		maxBody: DefaultMaxBody,
		realm:   "strata",
		log:     slog.New(slog.DiscardHandler),
	}
	for _, o := range opts {
		o(a)
	}
	return a
}

// Handle serves pattern (an http.ServeMux pattern: "GET /v1/nodes/{name}")
// with fn, for authenticated callers. query names the query parameters
// the route takes: a request with any other is refused (400) before fn
// runs, and so is one that gives a parameter twice.
func (a *API) Handle(pattern string, fn Func, query ...string) {
	a.register(pattern, query, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.begin(w, r, query) {
			return
		}
		v, err := fn(r)
		if err == nil && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			err = checkIfMatch(r, v)
		}
		if err != nil {
			a.Error(w, r, err)
			return
		}
		switch v := v.(type) {
		case nil:
			w.WriteHeader(http.StatusNoContent)
		case Reply:
			setETag(w, v.Body)
			WriteJSON(w, v.Code, v.Body)
		default:
			setETag(w, v)
			WriteJSON(w, http.StatusOK, v)
		}
	}))
}

// HandleStream serves pattern with h, which writes its own answer (a log
// stream, server-sent events), for authenticated callers. h reports an
// error that comes before its first byte with Error. query is as for
// Handle.
func (a *API) HandleStream(pattern string, h http.HandlerFunc, query ...string) {
	a.register(pattern, query, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.begin(w, r, query) {
			h(w, r)
		}
	}))
}

// HandlePublic serves pattern with h without a token: the probes a load
// balancer calls and the API's own description. They take no query
// parameters.
func (a *API) HandlePublic(pattern string, h http.Handler) {
	a.public[pattern] = true
	a.register(pattern, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.begin(w, r, nil) {
			h.ServeHTTP(w, r)
		}
	}))
}

func (a *API) register(pattern string, query []string, h http.Handler) {
	a.mux.Handle(pattern, h)
	a.routed[pattern] = true
	a.patterns = append(a.patterns, pattern)
	a.query[pattern] = slices.Clone(query)
}

// begin is what every route does first, once the caller is known (serve
// authenticates before routing): note the route for the metrics (the
// request is a copy carrying the identity, which the metrics middleware
// never sees), check that a body is JSON (checkMediaType), bound it, and
// check the query against what the route takes (query). It answers the
// request and returns false when the body or the query is refused.
func (a *API) begin(w http.ResponseWriter, r *http.Request, query []string) bool {
	metrics.NoteRoute(r)
	err := checkMediaType(r)
	if err == nil {
		r.Body = http.MaxBytesReader(w, r.Body, a.maxBody)
		err = checkQuery(r, query)
	}
	if err != nil {
		a.Error(w, r, err)
		return false
	}
	return true
}

// Patterns returns the patterns served, in the order they were declared.
func (a *API) Patterns() []string { return append([]string(nil), a.patterns...) }

// Query returns the query parameters a pattern takes, as declared.
func (a *API) Query(pattern string) []string { return slices.Clone(a.query[pattern]) }

// Handler returns the API with its edge.
func (a *API) Handler() http.Handler {
	return a.recoverPanics(a.logRequests(http.HandlerFunc(a.serve)))
}

// serve authenticates every request but those of public routes, then
// routes it. Authenticating before routing answers 401, not 404, to a
// caller without a token, whatever the path.
func (a *API) serve(w http.ResponseWriter, r *http.Request) {
	if a.audit != nil && r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodOptions {
		start, sw := time.Now(), &statusWriter{ResponseWriter: w}
		w = sw
		// r, not a copy: the call is audited with the identity that
		// authentication puts in it below.
		defer func() { a.audit(r, sw.status(), time.Since(start)) }()
	}
	// A pattern the API did not declare is the mux's own answer: no
	// route, another method, or a redirect to the clean path.
	_, pattern := a.mux.Handler(r)
	routed := a.routed[pattern] && isClean(r.URL.EscapedPath())
	if routed && a.public[pattern] {
		a.mux.ServeHTTP(w, r)
		return
	}
	bearer, err := bearerToken(r.Header.Get("Authorization"))
	if err == nil {
		var ctx context.Context
		if ctx, err = a.auth(r.Context(), bearer); err == nil {
			r = r.WithContext(ctx) // the audit above sees this r
		}
	}
	if err != nil {
		a.Error(w, r, err)
		return
	}
	if !routed {
		a.unrouted(w, r)
		return
	}
	a.mux.ServeHTTP(w, r)
}

// isClean reports whether p is in the form the mux serves rather than
// redirects: rooted, no empty, "." or ".." segments (a trailing slash is
// part of a path).
func isClean(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	return clean == p
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

// unrouted restates in JSON the mux's verdict on a request no route
// takes: 404, or 405 for a path served with other methods. A path that is
// not in its clean form ("//v1/flavors", "/v1/./flavors") is a 404 that
// names the clean form, not the mux's HTML redirect: an API client
// should send the path it means, and a redirect of a write would be
// followed as a GET by some clients.
func (a *API) unrouted(w http.ResponseWriter, r *http.Request) {
	verdict := &captured{header: http.Header{}}
	a.mux.ServeHTTP(verdict, r)
	path := api.Clip(r.URL.Path)
	switch code := verdict.code; {
	case code == http.StatusMethodNotAllowed:
		allow := verdict.header.Get("Allow")
		w.Header().Set("Allow", allow)
		WriteJSON(w, http.StatusMethodNotAllowed, api.ErrorBody{Error: api.ErrorDetail{
			Code: "MethodNotAllowed", Message: fmt.Sprintf("method %s is not allowed on %s (allowed: %s)", api.Clip(r.Method), path, allow)}})
	case code >= 300 && code < 400:
		WriteJSON(w, http.StatusNotFound, api.ErrorBody{Error: api.ErrorDetail{
			Code: "NotFound", Message: fmt.Sprintf("no route %s: the path is not in its clean form (%s)", path, api.Quote(verdict.header.Get("Location")))}})
	default: // 404: the mux has no other verdict
		WriteJSON(w, http.StatusNotFound, api.ErrorBody{Error: api.ErrorDetail{
			Code: "NotFound", Message: fmt.Sprintf("no route %s", path)}})
	}
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

// Error is the one place a REST error becomes a status and a body. The
// client of an unclassified error sees "internal error"; the cause is
// logged for the operator, at the level api.FailureLevel gives (ERROR for
// a server's fault only, not for a client that went away).
func (a *API) Error(w http.ResponseWriter, r *http.Request, err error) {
	if a.mapErr != nil {
		err = a.mapErr(err)
	}
	code, body := api.HTTPError(err)
	a.log.Log(r.Context(), api.FailureLevel(r.Context(), code), "request failed", "method", r.Method, "path", r.URL.Path, "status", code, "err", err)
	if code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="`+a.realm+`"`)
	}
	WriteJSON(w, code, body)
}

// logRequests logs every request at Debug.
func (a *API) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		a.log.Debug("http request", "method", r.Method, "path", r.URL.Path, "status", sw.status(), "duration", time.Since(start))
	})
}

// recoverPanics turns a panic into a 500, so that a bug in one handler
// costs one request, not the process.
func (a *API) recoverPanics(next http.Handler) http.Handler {
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
			a.log.Error("panic in HTTP handler", "method", r.Method, "path", r.URL.Path, "panic", p, "stack", string(debug.Stack()))
			if sw.code == 0 {
				WriteJSON(sw, http.StatusInternalServerError, api.ErrorBody{Error: api.ErrorDetail{Code: "Internal", Message: "internal error"}})
			}
		}()
		next.ServeHTTP(sw, r)
	})
}

// statusWriter remembers the status a handler sent.
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

// Flush lets streaming answers (logs, server-sent events) through.
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
