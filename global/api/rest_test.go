package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stratahq/strata/internal/api"
)

// TestBadRequests checks that every refusal is a clear JSON error: the
// right status, a code, a message saying what is wrong and, for a field,
// which one.
func TestBadRequests(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.fixtures(t, map[string]string{"eu": "127.0.0.1:1"})
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", computeBody("web")))
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources?tenant=other", computeBody("secret")))
	viewer := e.token(t, DefaultTenant, api.RoleViewer)
	member := e.token(t, "acme", api.RoleMember)

	huge := `{"name":"big","kind":"Compute","labels":{"x":"` + strings.Repeat("a", 10<<20) + `"}}`

	tests := []struct {
		name      string
		method    string
		path      string
		body      any
		opts      []reqOption
		wantCode  int
		wantError string // ErrorBody code
		wantField string
		wantMsg   string // substring of the message
	}{
		{
			name: "malformed JSON", method: "POST", path: "/v1/resources",
			body:     `{"name" "web2"}`,
			wantCode: 400, wantError: "InvalidArgument", wantMsg: "malformed JSON: invalid character",
		},
		{
			name: "truncated JSON", method: "POST", path: "/v1/resources",
			body:     `{"name": "web2",`,
			wantCode: 400, wantError: "InvalidArgument", wantMsg: "malformed JSON",
		},
		{
			name: "unknown field", method: "POST", path: "/v1/resources",
			body:     computeBody("web2", func(m map[string]any) { m["colour"] = "red" }),
			wantCode: 400, wantError: "InvalidArgument", wantField: "colour", wantMsg: "colour: unknown field",
		},
		{
			name: "wrong JSON type", method: "POST", path: "/v1/resources",
			body:     computeBody("web2", func(m map[string]any) { m["replicas"] = "three" }),
			wantCode: 400, wantError: "InvalidArgument", wantField: "replicas", wantMsg: "must be a whole number",
		},
		{
			name: "missing body", method: "POST", path: "/v1/resources",
			body:     "",
			wantCode: 400, wantError: "InvalidArgument", wantMsg: "body is required",
		},
		{
			name: "missing name", method: "POST", path: "/v1/resources",
			body:     computeBody("", func(m map[string]any) { delete(m, "name") }),
			wantCode: 400, wantError: "InvalidArgument", wantField: "name", wantMsg: "is required",
		},
		{
			name: "bad name", method: "POST", path: "/v1/resources",
			body:     computeBody("Web_2"),
			wantCode: 400, wantError: "InvalidArgument", wantField: "name", wantMsg: `"Web_2" must be lower case`,
		},
		{
			name: "unknown flavor", method: "POST", path: "/v1/resources",
			body:     computeBody("web2", func(m map[string]any) { m["spec"].(map[string]any)["flavor"] = "huge" }),
			wantCode: 400, wantError: "InvalidArgument", wantField: "spec.flavor", wantMsg: `flavor "huge" does not exist`,
		},
		{
			name: "flavor kind mismatch", method: "POST", path: "/v1/resources",
			body:     computeBody("web2", func(m map[string]any) { m["spec"].(map[string]any)["flavor"] = "lbf" }),
			wantCode: 400, wantError: "InvalidArgument", wantField: "spec.flavor", wantMsg: "needs a container or vm flavor",
		},
		{
			name: "VM image that is no Image resource", method: "POST", path: "/v1/resources",
			body:     computeBody("web2", func(m map[string]any) { m["spec"].(map[string]any)["flavor"] = "vmx" }),
			wantCode: 400, wantError: "InvalidArgument", wantField: "spec.compute.image", wantMsg: "a VM boots from an Image resource",
		},
		{
			name: "unknown region", method: "POST", path: "/v1/resources",
			body: computeBody("web2", func(m map[string]any) {
				m["schedule"] = map[string]any{"regions": []any{map[string]any{"name": "mars"}}}
			}),
			wantCode: 400, wantError: "InvalidArgument", wantField: "schedule.regions[0].name",
			wantMsg: `schedule.regions[0].name: region "mars" is not registered`,
		},
		{
			name: "unknown failover region", method: "POST", path: "/v1/resources",
			body: computeBody("web2", func(m map[string]any) {
				m["failover"] = map[string]any{"enabled": true, "toRegions": []string{"eu", "venus"}}
			}),
			wantCode: 400, wantError: "InvalidArgument", wantField: "failover.toRegions[1]", wantMsg: `region "venus" is not registered`,
		},
		// Pods and probes: each mistake a 400 naming its field.
		{
			name: "probe port out of range", method: "POST", path: "/v1/resources",
			body: computeBody("web2", withCompute(map[string]any{
				"readinessProbe": map[string]any{"httpGet": map[string]any{"port": 70000}}})),
			wantCode: 400, wantError: "InvalidArgument", wantField: "spec.compute.readinessProbe.httpGet.port", wantMsg: "70000 is out of range 1-65535",
		},
		{
			name: "probe path that is not a path", method: "POST", path: "/v1/resources",
			body: computeBody("web2", withCompute(map[string]any{
				"livenessProbe": map[string]any{"httpGet": map[string]any{"port": 80, "path": "ready"}}})),
			wantCode: 400, wantError: "InvalidArgument", wantField: "spec.compute.livenessProbe.httpGet.path", wantMsg: `must start with "/"`,
		},
		{
			name: "exec probe without a command", method: "POST", path: "/v1/resources",
			body: computeBody("web2", withCompute(map[string]any{
				"startupProbe": map[string]any{"exec": map[string]any{"command": []string{}}}})),
			wantCode: 400, wantError: "InvalidArgument", wantField: "spec.compute.startupProbe.exec.command",
		},
		{
			name: "probe threshold of 0", method: "POST", path: "/v1/resources",
			body: computeBody("web2", withCompute(map[string]any{
				"readinessProbe": map[string]any{"tcpSocket": map[string]any{"port": 80}, "failureThreshold": 0}})),
			wantCode: 400, wantError: "InvalidArgument", wantField: "spec.compute.readinessProbe.failureThreshold", wantMsg: "0 is out of range",
		},
		{
			name: "guest agent probe on a container", method: "POST", path: "/v1/resources",
			body: computeBody("web2", withCompute(map[string]any{
				"livenessProbe": map[string]any{"guestAgent": map[string]any{}}})),
			wantCode: 400, wantError: "InvalidArgument", wantField: "spec.compute.livenessProbe.guestAgent", wantMsg: "is for VMs",
		},
		{
			name: "container names that collide", method: "POST", path: "/v1/resources",
			body: computeBody("web2", withCompute(map[string]any{"containers": []any{
				map[string]any{"name": "side", "image": "docker.io/library/busybox:latest"},
				map[string]any{"name": "side", "image": "docker.io/library/busybox:latest"}}})),
			wantCode: 400, wantError: "InvalidArgument", wantField: "spec.compute.containers[1].name", wantMsg: "also the name of containers[0]",
		},
		{
			name: "containers above the flavor", method: "POST", path: "/v1/resources",
			body: computeBody("web2", withCompute(map[string]any{"containers": []any{
				map[string]any{"name": "side", "image": "docker.io/library/busybox:latest", "resources": map[string]any{"memoryMiB": 256}}}})),
			wantCode: 400, wantError: "InvalidArgument", wantField: "spec.compute.containers[0].resources.memoryMiB", wantMsg: "leave nothing of the flavor's 256 MiB",
		},
		{
			name: "negative replicas", method: "POST", path: "/v1/resources",
			body:     computeBody("web2", func(m map[string]any) { m["replicas"] = -1 }),
			wantCode: 400, wantError: "InvalidArgument", wantField: "replicas", wantMsg: "must not be negative",
		},
		{
			name: "image not an OCI reference", method: "POST", path: "/v1/resources",
			body: computeBody("web2", func(m map[string]any) {
				m["spec"].(map[string]any)["compute"] = map[string]any{"image": "registry:99999/x"}
			}),
			wantCode: 400, wantError: "InvalidArgument", wantField: "spec.compute.image", wantMsg: "registry port 99999 is not between 1 and 65535",
		},
		{
			name: "Image ref not an OCI reference", method: "POST", path: "/v1/resources",
			body:     `{"name":"img","kind":"Image","spec":{"image":{"ref":"busybox@sha256:abc"}}}`,
			wantCode: 400, wantError: "InvalidArgument", wantField: "spec.image.ref", wantMsg: `the digest "sha256:abc"`,
		},
		{
			name: "replicas on an Image", method: "POST", path: "/v1/resources",
			body:     `{"name":"img","kind":"Image","spec":{"image":{"ref":"docker.io/library/busybox:latest"}},"replicas":2}`,
			wantCode: 400, wantError: "InvalidArgument", wantField: "replicas", wantMsg: "an Image has no replicas",
		},
		{
			name: "10 MiB body", method: "POST", path: "/v1/resources",
			body:     huge,
			wantCode: 413, wantError: "TooLarge", wantMsg: "larger than 1048576 bytes",
		},
		{
			name: "wrong content type", method: "POST", path: "/v1/resources",
			body:     `{"name":"web2"}`,
			opts:     []reqOption{withHeader("Content-Type", "text/plain")},
			wantCode: 415, wantError: "UnsupportedMediaType", wantMsg: `"text/plain" is not application/json`,
		},
		{
			name: "trailing garbage", method: "POST", path: "/v1/resources",
			body:     `{"name":"web2","kind":"Compute"} {"again":true}`,
			wantCode: 400, wantError: "InvalidArgument", wantMsg: "unexpected data after the JSON value",
		},
		{
			name: "duplicate create", method: "POST", path: "/v1/resources",
			body:     computeBody("web"),
			wantCode: 409, wantError: "AlreadyExists", wantMsg: `resource "web" already exists`,
		},
		{
			name: "update changing kind", method: "PUT", path: "/v1/resources/web",
			body:     `{"name":"web","kind":"Volume","spec":{"volume":{"sizeMiB":10}}}`,
			wantCode: 400, wantError: "InvalidArgument", wantField: "kind", wantMsg: "kind: is immutable",
		},
		{
			name: "update with stale resourceVersion", method: "PUT", path: "/v1/resources/web",
			body:     computeBody("web", func(m map[string]any) { m["resourceVersion"] = 1; m["labels"] = map[string]string{"a": "b"} }),
			wantCode: 409, wantError: "Conflict", wantMsg: "resourceVersion 1 is stale",
		},
		{
			name: "update with another name", method: "PUT", path: "/v1/resources/web",
			body:     computeBody("web3"),
			wantCode: 400, wantError: "InvalidArgument", wantField: "name", wantMsg: "does not match the name in the path",
		},
		{
			name: "scale negative", method: "POST", path: "/v1/resources/web/scale",
			body:     `{"replicas":-2}`,
			wantCode: 400, wantError: "InvalidArgument", wantField: "replicas", wantMsg: "must not be negative",
		},
		{
			name: "scale without replicas", method: "POST", path: "/v1/resources/web/scale",
			body:     `{}`,
			wantCode: 400, wantError: "InvalidArgument", wantField: "replicas", wantMsg: "is required",
		},
		{
			name: "rollback to a missing revision", method: "POST", path: "/v1/resources/web/rollback",
			body:     `{"revision":42}`,
			wantCode: 404, wantError: "NotFound", wantMsg: `resource "web" has no revision 42`,
		},
		{
			name: "delete unknown", method: "DELETE", path: "/v1/resources/ghost",
			wantCode: 404, wantError: "NotFound", wantMsg: `resource "ghost" not found`,
		},
		{
			name: "bad name in path", method: "GET", path: "/v1/resources/Not_A_Name",
			wantCode: 400, wantError: "InvalidArgument", wantField: "name",
		},
		{
			name: "bad selector", method: "GET", path: "/v1/resources?selector=a%20in%20b",
			wantCode: 400, wantError: "InvalidArgument", wantField: "selector",
		},
		{
			name: "bad limit", method: "GET", path: "/v1/resources?limit=many",
			wantCode: 400, wantError: "InvalidArgument", wantField: "limit", wantMsg: `"many" is not a number`,
		},
		{
			name: "bad continue", method: "GET", path: "/v1/resources?continue=%21%21",
			wantCode: 400, wantError: "InvalidArgument", wantField: "continue",
		},
		{
			name: "unknown path", method: "GET", path: "/v1/widgets",
			wantCode: 404, wantError: "NotFound", wantMsg: "no route /v1/widgets",
		},
		{
			name: "wrong method", method: "PATCH", path: "/v1/resources/web",
			body:     `{}`,
			wantCode: 405, wantError: "MethodNotAllowed", wantMsg: "method PATCH is not allowed",
		},
		{
			name: "unauthenticated", method: "GET", path: "/v1/resources",
			opts:     []reqOption{withToken("")},
			wantCode: 401, wantError: "Unauthenticated", wantMsg: "a bearer token is required",
		},
		{
			name: "invalid token", method: "GET", path: "/v1/resources",
			opts:     []reqOption{withToken("strata_0123456789abcdef_" + strings.Repeat("0", 64))},
			wantCode: 401, wantError: "Unauthenticated", wantMsg: "invalid token",
		},
		{
			name: "malformed token", method: "GET", path: "/v1/resources",
			opts:     []reqOption{withToken("hunter2")},
			wantCode: 401, wantError: "Unauthenticated", wantMsg: "malformed token",
		},
		{
			name: "viewer POST", method: "POST", path: "/v1/resources",
			body:     computeBody("web2"),
			opts:     []reqOption{withToken(viewer)},
			wantCode: 403, wantError: "Forbidden", wantMsg: `role "viewer" may not do this`,
		},
		{
			name: "member on nodes", method: "GET", path: "/v1/nodes",
			opts:     []reqOption{withToken(member)},
			wantCode: 403, wantError: "Forbidden",
		},
		{
			name: "member listing another tenant", method: "GET", path: "/v1/resources?tenant=other",
			opts:     []reqOption{withToken(member)},
			wantCode: 403, wantError: "Forbidden", wantMsg: `tenant "other" is not yours`,
		},
		{
			name: "other tenant's resource", method: "GET", path: "/v1/resources/secret?tenant=other",
			opts:     []reqOption{withToken(member)},
			wantCode: 404, wantError: "NotFound", wantMsg: `resource "secret" not found`,
		},
		{
			name: "other tenant's missing resource looks the same", method: "GET", path: "/v1/resources/nothing?tenant=other",
			opts:     []reqOption{withToken(member)},
			wantCode: 404, wantError: "NotFound", wantMsg: `resource "nothing" not found`,
		},
		{
			name: "other tenant's resource is not deletable", method: "DELETE", path: "/v1/resources/secret?tenant=other",
			opts:     []reqOption{withToken(member)},
			wantCode: 404, wantError: "NotFound", wantMsg: `resource "secret" not found`,
		},
		{
			name: "flavor in use", method: "DELETE", path: "/v1/flavors/small",
			wantCode: 409, wantError: "Conflict", wantMsg: `flavor "small" is used by resource "web" of tenant "default"`,
		},
		{
			name: "unknown region's node", method: "GET", path: "/v1/regions/mars/nodes/n1",
			wantCode: 404, wantError: "NotFound", wantMsg: `region "mars" not found`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(t, tt.method, tt.path, tt.body, tt.opts...)
			if r.code != tt.wantCode {
				t.Fatalf("got %s; want status %d", r, tt.wantCode)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("got Content-Type %q; want application/json", ct)
			}
			got := decodeAs[api.ErrorBody](t, r).Error
			if got.Code != tt.wantError {
				t.Errorf("got code %q; want %q (%s)", got.Code, tt.wantError, r)
			}
			if got.Field != tt.wantField {
				t.Errorf("got field %q; want %q (%s)", got.Field, tt.wantField, r)
			}
			if got.Message == "" || !strings.Contains(got.Message, tt.wantMsg) {
				t.Errorf("got message %q; want one containing %q", got.Message, tt.wantMsg)
			}
		})
	}

	t.Run("nothing was written by refused creates", func(t *testing.T) {
		list := decodeAs[ResourceList](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources", nil)))
		if len(list.Items) != 1 || list.Items[0].Name != "web" {
			t.Fatalf("got %d resources; want only web", len(list.Items))
		}
		if list.Items[0].Generation != 1 {
			t.Fatalf("got web at generation %d; want 1 (refused updates wrote nothing)", list.Items[0].Generation)
		}
	})
	t.Run("wrong method says what is allowed", func(t *testing.T) {
		r := e.do(t, "PATCH", "/v1/resources/web", nil)
		if allow := r.header.Get("Allow"); !strings.Contains(allow, "GET") || !strings.Contains(allow, "PUT") {
			t.Fatalf("got Allow %q; want GET, PUT and DELETE", allow)
		}
	})
}

func TestProbes(t *testing.T) {
	e := newEnv(t, envConfig{})
	for _, path := range []string{"/healthz", "/readyz"} {
		t.Run(path, func(t *testing.T) {
			// No token: load balancers probe without one.
			e.must(t, http.StatusOK, e.do(t, "GET", path, nil, withToken("")))
		})
	}
	t.Run("not ready before the caches load", func(t *testing.T) {
		svc, err := New(Options{State: e.st, ID: "cold"})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		svc.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "cache not loaded") {
			t.Fatalf("got %d %s; want 503 naming the cache", rec.Code, rec.Body)
		}
	})
}

// withCompute sets more fields of a computeBody's spec.compute.
func withCompute(fields map[string]any) func(map[string]any) {
	return func(m map[string]any) {
		c := m["spec"].(map[string]any)["compute"].(map[string]any)
		for k, v := range fields {
			c[k] = v
		}
	}
}
