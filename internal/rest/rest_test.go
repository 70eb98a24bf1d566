package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/metrics"
)

const token = "s3cret"

type callerKey struct{}

// testAPI is an API whose one valid token is token, with routes that
// exercise the edge.
func testAPI(t *testing.T, logs *bytes.Buffer, opts ...Option) *API {
	t.Helper()
	auth := func(ctx context.Context, bearer string) (context.Context, error) {
		if bearer != token {
			return nil, fmt.Errorf("bad token: %w", api.ErrUnauthenticated)
		}
		return context.WithValue(ctx, callerKey{}, "tester"), nil
	}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a := New(auth, append([]Option{WithLogger(log), WithMaxBody(64)}, opts...)...)
	a.Handle("GET /v1/things/{name}", func(r *http.Request) (any, error) {
		name, err := PathName(r, "name")
		if err != nil {
			return nil, err
		}
		return map[string]any{"name": name, "caller": r.Context().Value(callerKey{})}, nil
	})
	a.Handle("POST /v1/things", func(r *http.Request) (any, error) {
		var body struct {
			Name  string `json:"name"`
			Count int    `json:"count"`
		}
		if err := Decode(r, &body); err != nil {
			return nil, err
		}
		return Created(body), nil
	})
	a.Handle("POST /v1/things/{name}/poke", func(r *http.Request) (any, error) {
		var body struct {
			Why string `json:"why"`
		}
		if err := DecodeOptional(r, &body); err != nil {
			return nil, err
		}
		return Accepted(body), nil
	})
	a.Handle("DELETE /v1/things/{name}", func(r *http.Request) (any, error) { return nil, nil })
	a.Handle("GET /v1/broken", func(r *http.Request) (any, error) {
		return nil, errors.New("connect: database password rejected")
	})
	a.Handle("GET /v1/busy", func(r *http.Request) (any, error) {
		return nil, fmt.Errorf("etcd: %w", api.ErrUnavailable)
	})
	a.Handle("GET /v1/panic", func(r *http.Request) (any, error) { panic("boom") })
	a.Handle("GET /v1/list", func(r *http.Request) (any, error) { return List[string]{}, nil })
	a.Handle("GET /v1/paged", func(r *http.Request) (any, error) {
		return map[string]string{"limit": r.URL.Query().Get("limit")}, nil
	}, "limit", "continue")
	a.HandleStream("GET /v1/stream", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "line\n")
	})
	a.HandlePublic("GET /healthz", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok\n")
	}))
	return a
}

func TestEdge(t *testing.T) {
	var logs bytes.Buffer
	h := testAPI(t, &logs).Handler()
	const auth = "Bearer " + token
	tests := []struct {
		name       string
		method     string
		path       string
		auth       string
		body       string
		wantCode   int
		wantErr    string // api.ErrorBody code; "" for no error body
		wantField  string
		wantBody   string // a substring of the body
		wantHeader [2]string
	}{
		{name: "public route needs no token", method: "GET", path: "/healthz", wantCode: 200, wantBody: "ok"},
		{name: "no token", method: "GET", path: "/v1/things/a", wantCode: 401, wantErr: "Unauthenticated",
			wantHeader: [2]string{"WWW-Authenticate", `Bearer realm="strata"`}},
		{name: "wrong token", method: "GET", path: "/v1/things/a", auth: "Bearer nope", wantCode: 401, wantErr: "Unauthenticated"},
		{name: "not a bearer", method: "GET", path: "/v1/things/a", auth: "Basic abc", wantCode: 401, wantErr: "Unauthenticated", wantBody: `must be \"Bearer \u003ctoken\u003e\"`},
		{name: "scheme is case-insensitive", method: "GET", path: "/v1/things/a", auth: "bearer " + token, wantCode: 200},
		{name: "unknown route without a token is 401, not 404", method: "GET", path: "/v1/nope", wantCode: 401, wantErr: "Unauthenticated"},
		{name: "identity reaches the handler", method: "GET", path: "/v1/things/a", auth: auth, wantCode: 200, wantBody: `"caller":"tester"`},
		{name: "invalid path name", method: "GET", path: "/v1/things/Not_A_Name", auth: auth, wantCode: 400, wantErr: "InvalidArgument", wantField: "name"},
		{name: "no route", method: "GET", path: "/v1/nope", auth: auth, wantCode: 404, wantErr: "NotFound", wantBody: "no route /v1/nope"},
		{name: "unclean path is a JSON 404, not a redirect", method: "GET", path: "/v1//things/a", auth: auth, wantCode: 404, wantErr: "NotFound", wantBody: "clean form"},
		{name: "dot segments are a JSON 404", method: "DELETE", path: "/v1/things/./a", auth: auth, wantCode: 404, wantErr: "NotFound", wantBody: "clean form"},
		{name: "duplicate key", method: "POST", path: "/v1/things", auth: auth, body: `{"name":"a","name":"b"}`, wantCode: 400, wantErr: "InvalidArgument", wantField: "name", wantBody: "given twice"},
		{name: "long value is clipped", method: "POST", path: "/v1/things", auth: auth, body: `{"count":"` + strings.Repeat("9", 50) + `"}`, wantCode: 400, wantErr: "InvalidArgument", wantField: "count"},
		{name: "wrong method", method: "PATCH", path: "/v1/things/a", auth: auth, wantCode: 405, wantErr: "MethodNotAllowed",
			wantHeader: [2]string{"Allow", "DELETE, GET, HEAD"}},
		{name: "created", method: "POST", path: "/v1/things", auth: auth, body: `{"name":"a","count":2}`, wantCode: 201, wantBody: `"count":2`},
		{name: "required body missing", method: "POST", path: "/v1/things", auth: auth, wantCode: 400, wantErr: "InvalidArgument", wantBody: "body is required"},
		{name: "unknown field", method: "POST", path: "/v1/things", auth: auth, body: `{"name":"a","colour":"red"}`, wantCode: 400, wantErr: "InvalidArgument", wantField: "colour"},
		{name: "wrong type", method: "POST", path: "/v1/things", auth: auth, body: `{"count":"two"}`, wantCode: 400, wantErr: "InvalidArgument", wantField: "count", wantBody: "must be a whole number"},
		{name: "malformed", method: "POST", path: "/v1/things", auth: auth, body: `{"name" "a"}`, wantCode: 400, wantErr: "InvalidArgument", wantBody: "malformed JSON"},
		{name: "truncated", method: "POST", path: "/v1/things", auth: auth, body: `{"name":`, wantCode: 400, wantErr: "InvalidArgument", wantBody: "ends in the middle"},
		{name: "two values", method: "POST", path: "/v1/things", auth: auth, body: `{"name":"a"} {}`, wantCode: 400, wantErr: "InvalidArgument", wantBody: "after the JSON value"},
		{name: "not an object", method: "POST", path: "/v1/things", auth: auth, body: `[1]`, wantCode: 400, wantErr: "InvalidArgument", wantBody: "must be an object"},
		{name: "too large", method: "POST", path: "/v1/things", auth: auth, body: `{"name":"` + strings.Repeat("x", 100) + `"}`, wantCode: 413, wantErr: "TooLarge"},
		{name: "optional body absent", method: "POST", path: "/v1/things/a/poke", auth: auth, wantCode: 202, wantBody: `"why":""`},
		{name: "optional body given", method: "POST", path: "/v1/things/a/poke", auth: auth, body: `{"why":"test"}`, wantCode: 202, wantBody: `"why":"test"`},
		{name: "nil is 204", method: "DELETE", path: "/v1/things/a", auth: auth, wantCode: 204},
		{name: "unclassified error hides its cause", method: "GET", path: "/v1/broken", auth: auth, wantCode: 500, wantErr: "Internal", wantBody: `"message":"internal error"`},
		{name: "sentinel maps to its status", method: "GET", path: "/v1/busy", auth: auth, wantCode: 503, wantErr: "Unavailable"},
		{name: "panic is one 500", method: "GET", path: "/v1/panic", auth: auth, wantCode: 500, wantErr: "Internal"},
		{name: "empty list is []", method: "GET", path: "/v1/list", auth: auth, wantCode: 200, wantBody: `{"items":[]}`},
		{name: "stream writes its own answer", method: "GET", path: "/v1/stream", auth: auth, wantCode: 200, wantBody: "line"},
		{name: "declared query parameter", method: "GET", path: "/v1/paged?limit=5&continue=", auth: auth, wantCode: 200, wantBody: `"limit":"5"`},
		{name: "unknown query parameter", method: "GET", path: "/v1/paged?limt=5", auth: auth, wantCode: 400, wantErr: "InvalidArgument", wantField: "limt",
			wantBody: "is not a query parameter of GET /v1/paged (it takes limit, continue)"},
		{name: "query on a route that takes none", method: "GET", path: "/v1/things/a?verbose=1", auth: auth, wantCode: 400, wantErr: "InvalidArgument", wantField: "verbose",
			wantBody: "(it takes none)"},
		{name: "query on a write", method: "DELETE", path: "/v1/things/a?force=true", auth: auth, wantCode: 400, wantErr: "InvalidArgument", wantField: "force"},
		{name: "query on a stream", method: "GET", path: "/v1/stream?follow=1", auth: auth, wantCode: 400, wantErr: "InvalidArgument", wantField: "follow"},
		{name: "query on a public route", method: "GET", path: "/healthz?x=1", wantCode: 400, wantErr: "InvalidArgument", wantField: "x"},
		{name: "query parameter given twice", method: "GET", path: "/v1/paged?limit=1&limit=2", auth: auth, wantCode: 400, wantErr: "InvalidArgument", wantField: "limit", wantBody: "given 2 times"},
		{name: "every bad parameter is listed", method: "GET", path: "/v1/paged?b=1&a=2", auth: auth, wantCode: 400, wantErr: "InvalidArgument", wantField: "a", wantBody: `"field":"b"`},
		{name: "query that does not parse", method: "GET", path: "/v1/paged?limit=%zz", auth: auth, wantCode: 400, wantErr: "InvalidArgument", wantField: "query"},
		{name: "query is checked after the token", method: "GET", path: "/v1/paged?limt=5", wantCode: 401, wantErr: "Unauthenticated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			}
			req := httptest.NewRequest(tt.method, tt.path, body)
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.wantCode {
				t.Errorf("got status %d (%s); want %d", rec.Code, rec.Body, tt.wantCode)
			}
			if tt.wantErr != "" {
				var eb api.ErrorBody
				if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error.Code != tt.wantErr || eb.Error.Field != tt.wantField {
					t.Errorf("got body %s (%v); want an error body with code %s, field %q", rec.Body, err, tt.wantErr, tt.wantField)
				}
				if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
					t.Errorf("got Content-Type %q; want application/json", ct)
				}
			}
			if !strings.Contains(rec.Body.String(), tt.wantBody) {
				t.Errorf("got body %s; want it to contain %s", rec.Body, tt.wantBody)
			}
			if k := tt.wantHeader[0]; k != "" && rec.Header().Get(k) != tt.wantHeader[1] {
				t.Errorf("got %s %q; want %q", k, rec.Header().Get(k), tt.wantHeader[1])
			}
		})
	}
	for _, want := range []string{
		`level=ERROR msg="request failed" method=GET path=/v1/broken status=500 err="connect: database password rejected"`, // the cause, for the operator
		`level=ERROR msg="panic in HTTP handler"`,
		// Unavailable is no error: the reason is logged where it arises,
		// and probes would repeat it every second.
		`level=DEBUG msg="request failed" method=GET path=/v1/busy status=503`,
		`level=DEBUG msg="http request" method=GET path=/v1/things/a status=200 duration=`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %q:\n%s", want, logs.String())
		}
	}
}

// TestEdgeClientGone checks that what a handler fails with after its
// client went away (a load balancer's /readyz probe that timed out, a CLI
// stopped with Ctrl-C) is logged at debug, not as an error of the server.
func TestEdgeClientGone(t *testing.T) {
	for _, cause := range []error{
		errors.New("etcdserver: request canceled"),
		fmt.Errorf("etcd: %w: %w", api.ErrUnavailable, context.Canceled),
	} {
		var logs bytes.Buffer
		a := testAPI(t, &logs)
		a.Handle("GET /v1/gone", func(r *http.Request) (any, error) { return nil, cause })
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		req := httptest.NewRequest("GET", "/v1/gone", nil).WithContext(ctx)
		req.Header.Set("Authorization", "Bearer "+token)
		a.Handler().ServeHTTP(httptest.NewRecorder(), req)
		if strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), `level=DEBUG msg="request failed"`) {
			t.Errorf("%q after the client left: got logs %q; want it at DEBUG", cause, logs.String())
		}
	}
}

// TestEdgeMediaType checks what the edge takes as a request body: JSON,
// declared or not, in UTF-8; and that it judges the body only once the
// caller is known, so that an anonymous caller is a 401 whatever it sends.
func TestEdgeMediaType(t *testing.T) {
	h := testAPI(t, &bytes.Buffer{}).Handler()
	tests := []struct {
		name, auth, ctype string
		wantCode          int
		wantErr, wantBody string
	}{
		{"application/json", token, "application/json", 201, "", `"name":"a"`},
		{"no Content-Type is JSON", token, "", 201, "", `"name":"a"`},
		{"charset utf-8", token, "application/json; charset=utf-8", 201, "", ""},
		{"charset UTF-8", token, "Application/JSON; Charset=\"UTF-8\"", 201, "", ""},
		{"another charset", token, "application/json; charset=latin1", 415, "UnsupportedMediaType", `charset \"latin1\" is not utf-8`},
		{"UTF-16", token, "application/json; charset=utf-16", 415, "UnsupportedMediaType", `charset \"utf-16\"`},
		{"text/plain", token, "text/plain", 415, "UnsupportedMediaType", `\"text/plain\" is not application/json`},
		{"a form", token, "application/x-www-form-urlencoded", 415, "UnsupportedMediaType", ""},
		{"malformed", token, "application/json; charset", 415, "UnsupportedMediaType", ""},
		{"anonymous text/plain is 401", "", "text/plain", 401, "Unauthenticated", ""},
		{"anonymous latin1 is 401", "", "application/json; charset=latin1", 401, "Unauthenticated", ""},
		{"wrong token, form is 401", "nope", "multipart/form-data; boundary=x", 401, "Unauthenticated", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "/v1/things", strings.NewReader(`{"name":"a"}`))
			if tt.auth != "" {
				req.Header.Set("Authorization", "Bearer "+tt.auth)
			}
			if tt.ctype != "" {
				req.Header.Set("Content-Type", tt.ctype)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.wantCode {
				t.Fatalf("got status %d (%s); want %d", rec.Code, rec.Body, tt.wantCode)
			}
			if tt.wantErr != "" {
				var eb api.ErrorBody
				if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error.Code != tt.wantErr {
					t.Errorf("got body %s (%v); want an error body with code %s", rec.Body, err, tt.wantErr)
				}
			}
			if !strings.Contains(rec.Body.String(), tt.wantBody) {
				t.Errorf("got body %s; want it to contain %s", rec.Body, tt.wantBody)
			}
		})
	}
}

func TestEdgeOptions(t *testing.T) {
	mapped := errors.New("the tier's own not-found")
	a := testAPI(t, &bytes.Buffer{}, WithRealm("strata-region"), WithErrorMapping(func(err error) error {
		if errors.Is(err, mapped) {
			return fmt.Errorf("%w: %w", err, api.ErrNotFound)
		}
		return err
	}))
	a.Handle("GET /v1/mapped", func(r *http.Request) (any, error) { return nil, mapped })
	h := a.Handler()

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/things/a", nil))
	if got := rec.Header().Get("WWW-Authenticate"); got != `Bearer realm="strata-region"` {
		t.Errorf("got WWW-Authenticate %q; want the realm set", got)
	}
	req := httptest.NewRequest("GET", "/v1/mapped", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotFound {
		t.Errorf("got %d %s; want 404 from the mapped error", rec.Code, rec.Body)
	}
	want := []string{"GET /v1/things/{name}", "POST /v1/things", "POST /v1/things/{name}/poke", "DELETE /v1/things/{name}",
		"GET /v1/broken", "GET /v1/busy", "GET /v1/panic", "GET /v1/list", "GET /v1/paged", "GET /v1/stream", "GET /healthz", "GET /v1/mapped"}
	if got := a.Patterns(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got patterns %q; want %q", got, want)
	}
	if got := a.Query("GET /v1/paged"); strings.Join(got, ",") != "limit,continue" {
		t.Errorf("Query(GET /v1/paged): got %q; want [limit continue]", got)
	}
}

// TestEdgeMetricsRoutes checks that requests are counted by the route
// pattern that matched, never by their raw path, also for routes behind
// authentication (whose handlers see a copy of the request).
func TestEdgeMetricsRoutes(t *testing.T) {
	reg := metrics.New("test")
	h := reg.HTTP(testAPI(t, &bytes.Buffer{}).Handler())
	for _, path := range []string{"/v1/things/a", "/v1/things/b", "/healthz", "/v1/nope"} {
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	out := rec.Body.String()
	for _, want := range []string{
		`code="200",method="GET",route="GET /v1/things/{name}",tier="test"} 2`,
		`code="200",method="GET",route="GET /healthz",tier="test"} 1`,
		`code="404",method="GET",route="unmatched",tier="test"} 1`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(out, `/v1/things/a"`) {
		t.Error("metrics name a raw path")
	}
}
