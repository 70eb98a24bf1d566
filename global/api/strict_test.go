package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
)

// TestValidationErrors checks what a refused write says: the JSON path
// of every field at fault (array indices included), all of a request's
// mistakes at once, values repeated at most MaxQuoted bytes, and a stale
// resourceVersion reported only for a request that is otherwise valid.
func TestValidationErrors(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.fixtures(t, nil)
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", computeBody("web")))
	big := strings.Repeat("v", 200_000)
	tests := []struct {
		name       string
		method     string
		path       string
		body       any
		wantCode   int
		wantFields []string
	}{
		{"type error in an array", "POST", "/v1/resources",
			`{"name":"a","kind":"Compute","spec":{"flavor":"small","compute":{"image":"x"}},"schedule":{"regions":[{"name":"r1","weight":"heavy"}]}}`,
			400, []string{"schedule.regions[0].weight"}},
		{"bad duration names its field", "POST", "/v1/resources",
			computeBody("a", func(m map[string]any) { m["failover"] = map[string]any{"after": "soon"} }),
			400, []string{"failover.after"}},
		{"every validation error at once", "POST", "/v1/resources",
			`{"name":"Bad_Name","kind":"Compute","replicas":-1,"labels":{"ok":"-bad-"},"spec":{"flavor":"small","compute":{"image":""}},"schedule":{"regions":[{"name":"r1","weight":-1}]},"rollout":{"maxSurge":-1}}`,
			400, []string{"replicas", "name", "labels.ok", "spec.compute.image", "schedule.regions[0].weight", "rollout.maxSurge"}},
		{"unknown nested field", "POST", "/v1/resources",
			computeBody("a", func(m map[string]any) {
				m["spec"].(map[string]any)["compute"] = map[string]any{"image": "x", "imagePullPolicy": "Always"}
			}),
			400, []string{"spec.compute.imagePullPolicy"}},
		{"duplicate key", "POST", "/v1/resources",
			`{"name":"a","kind":"Compute","spec":{"flavor":"small","compute":{"image":"x","image":"y"}}}`,
			400, []string{"spec.compute.image"}},
		{"stale resourceVersion of an invalid update is the validation error", "PUT", "/v1/resources/web",
			computeBody("web", func(m map[string]any) { m["resourceVersion"] = 1; m["replicas"] = -3 }),
			400, []string{"replicas"}},
		{"stale resourceVersion of an invalid flavor update", "PUT", "/v1/flavors/small",
			`{"kind":"container","spec":{"vcpus":0,"memoryMiB":256},"resourceVersion":1}`,
			400, []string{"spec.vcpus"}},
		{"huge label value is clipped", "POST", "/v1/resources",
			computeBody("a", func(m map[string]any) { m["labels"] = map[string]string{"k": big} }),
			400, []string{"labels.k"}},
		{"NUL in a command", "POST", "/v1/resources",
			computeBody("a", func(m map[string]any) {
				m["spec"].(map[string]any)["compute"] = map[string]any{"image": "x", "command": []string{"sh", "-c", "true\x00rm -rf /"}}
			}),
			400, []string{"spec.compute.command[2]"}},
		{"terminal escape in an argument", "POST", "/v1/resources",
			computeBody("a", func(m map[string]any) {
				m["spec"].(map[string]any)["compute"] = map[string]any{"image": "x", "args": []string{"ok", "\x1b[2Jhidden"}}
			}),
			400, []string{"spec.compute.args[1]"}},
		{"RTL override in env", "POST", "/v1/resources",
			computeBody("a", func(m map[string]any) {
				m["spec"].(map[string]any)["compute"] = map[string]any{"image": "x", "env": map[string]string{"A": "txt.\u202eexe"}}
			}),
			400, []string{"spec.compute.env.A"}},
		{"C1 control in env", "POST", "/v1/resources",
			computeBody("a", func(m map[string]any) {
				m["spec"].(map[string]any)["compute"] = map[string]any{"image": "x", "env": map[string]string{"A": "a\u009bb"}}
			}),
			400, []string{"spec.compute.env.A"}},
		{"NUL in a label key", "POST", "/v1/resources",
			computeBody("a", func(m map[string]any) { m["labels"] = map[string]string{"a\x00b": "c"} }),
			400, []string{"labels"}},
		{"escape in a token name", "POST", "/v1/tokens", `{"tenant":"default","role":"viewer","name":"ci\u001b]0;owned\u0007"}`,
			400, []string{"name"}},
		{"RTL override in a token name", "POST", "/v1/tokens", `{"tenant":"default","role":"viewer","name":"deploy\u202egnp.exe"}`,
			400, []string{"name"}},
		{"NUL in a token name", "POST", "/v1/tokens", `{"tenant":"default","role":"viewer","name":"a\u0000b"}`,
			400, []string{"name"}},
		{"misspelt query parameter", "GET", "/v1/resources?limt=5&selecter=app=web", nil,
			400, []string{"limt", "selecter"}},
		{"query parameter of another route", "DELETE", "/v1/resources/web?force=true", nil,
			400, []string{"force"}},
		{"query parameter on a stream", "GET", "/v1/events?limit=5&since=1h", nil,
			400, []string{"since"}},
		{"newlines stay allowed in a script", "POST", "/v1/resources",
			computeBody("script", func(m map[string]any) {
				m["spec"].(map[string]any)["compute"] = map[string]any{"image": "x", "command": []string{"sh", "-c", "echo a\n\techo b"}}
			}),
			201, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(t, tt.method, tt.path, tt.body)
			if r.code != tt.wantCode {
				t.Fatalf("got %s; want status %d", r, tt.wantCode)
			}
			if tt.wantFields == nil {
				return
			}
			if n := len(r.body); n > 4096 {
				t.Errorf("got an error of %d bytes; want at most 4096 (values clipped to %d bytes)", n, api.MaxQuoted)
			}
			got := decodeAs[api.ErrorBody](t, r).Error
			var fields []string
			for _, d := range got.Details {
				fields = append(fields, d.Field)
			}
			if !slices.Equal(fields, tt.wantFields) {
				t.Errorf("got fields %q; want %q (%s)", fields, tt.wantFields, r)
			}
			if got.Field != tt.wantFields[0] {
				t.Errorf("got field %q; want the first, %q", got.Field, tt.wantFields[0])
			}
		})
	}
}

// TestEveryAnswerIsJSON sends requests the routes do not take, in the
// ways a client or a scanner gets paths wrong: each answer is an
// api.ErrorBody in JSON, never a redirect or Go's plain text.
func TestEveryAnswerIsJSON(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.fixtures(t, nil)
	tests := []struct {
		method, path string
		body         any
		opts         []reqOption
		wantCode     int
	}{
		{"GET", "//v1/flavors", nil, nil, 404},
		{"GET", "/v1//flavors", nil, nil, 404},
		{"GET", "/v1/flavors/../flavors/small", nil, nil, 404},
		{"GET", "/v1/./flavors", nil, nil, 404},
		{"PUT", "/v1/flavors/small/", `{}`, nil, 404},
		{"GET", "/v1/flavors/", nil, nil, 404},
		{"GET", "/v1/nope", nil, nil, 404},
		{"GET", "/", nil, nil, 404},
		{"PATCH", "/v1/flavors/small", `{}`, nil, 405},
		{"DELETE", "/v1/flavors", nil, nil, 405},
		{"POST", "/v1/flavors", `{"name":"x"`, nil, 400},
		{"POST", "/v1/flavors", `{}`, []reqOption{withHeader("Content-Type", "text/plain")}, 415},
		{"GET", "/v1/flavors", nil, []reqOption{withToken("")}, 401},
		{"GET", "//v1/flavors", nil, []reqOption{withToken("")}, 401},
		{"GET", "/v1/flavors/small", nil, []reqOption{withHeader("If-Match", "W/\"1\"")}, 400},
		{"GET", "/v1/resources?limit=-5", nil, nil, 400},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			r := e.do(t, tt.method, tt.path, tt.body, tt.opts...)
			if r.code != tt.wantCode {
				t.Errorf("got %s; want status %d", r, tt.wantCode)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("got Content-Type %q; want application/json", ct)
			}
			var eb api.ErrorBody
			if err := json.Unmarshal(r.body, &eb); err != nil || eb.Error.Code == "" || eb.Error.Message == "" {
				t.Errorf("got body %q (%v); want an api.ErrorBody", r.body, err)
			}
		})
	}
}

// TestIfMatch checks ETag and If-Match on GET, PUT and DELETE of
// resources and flavors: the ETag is the quoted resourceVersion, a write
// whose If-Match is stale is a conflict that writes nothing, one whose
// If-Match is current succeeds.
func TestIfMatch(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.fixtures(t, nil)
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", computeBody("web")))
	ifMatch := func(tag string) reqOption { return withHeader("If-Match", tag) }
	etag := func(t *testing.T, r *response, version int64) string {
		t.Helper()
		tag := r.header.Get("ETag")
		if want := fmt.Sprintf("%q", fmt.Sprint(version)); tag != want {
			t.Fatalf("got ETag %q; want %q (the resourceVersion)", tag, want)
		}
		return tag
	}
	objects := []struct {
		name, path string
		update     func(i int) string
		deleteCode int
	}{
		{"resource", "/v1/resources/web", func(i int) string {
			b, _ := json.Marshal(computeBody("web", func(m map[string]any) { m["labels"] = map[string]string{"i": fmt.Sprint(i)} }))
			return string(b)
		}, http.StatusAccepted},
		{"flavor", "/v1/flavors/vmx", func(i int) string {
			return fmt.Sprintf(`{"kind":"vm","spec":{"vcpus":2,"memoryMiB":%d}}`, 2048+i)
		}, http.StatusOK},
	}
	for _, o := range objects {
		t.Run(o.name, func(t *testing.T) {
			get := e.must(t, http.StatusOK, e.do(t, "GET", o.path, nil))
			v1 := decodeAs[struct{ ResourceVersion int64 }](t, get).ResourceVersion
			tag1 := etag(t, get, v1)
			e.must(t, http.StatusOK, e.do(t, "GET", o.path, nil, ifMatch(tag1)))
			e.must(t, http.StatusOK, e.do(t, "GET", o.path, nil, ifMatch("*")))

			put := e.must(t, http.StatusOK, e.do(t, "PUT", o.path, o.update(1), ifMatch(tag1)))
			v2 := decodeAs[struct{ ResourceVersion int64 }](t, put).ResourceVersion
			tag2 := etag(t, put, v2)
			if v2 <= v1 {
				t.Fatalf("got resourceVersion %d after a write; want more than %d", v2, v1)
			}
			for _, r := range []*response{
				e.do(t, "PUT", o.path, o.update(2), ifMatch(tag1)),
				e.do(t, "DELETE", o.path, nil, ifMatch(tag1)),
				e.do(t, "GET", o.path, nil, ifMatch(tag1)),
			} {
				if r.code != http.StatusConflict || decodeAs[api.ErrorBody](t, r).Error.Code != "Conflict" {
					t.Errorf("got %s with a stale If-Match; want 409 Conflict", r)
				}
			}
			if r := e.do(t, "PUT", o.path, strings.Replace(o.update(3), "{", fmt.Sprintf(`{"resourceVersion":%d,`, v1), 1), ifMatch(tag2)); r.code != http.StatusBadRequest {
				t.Errorf("got %s with If-Match and another resourceVersion; want 400", r)
			}
			now := decodeAs[struct{ ResourceVersion int64 }](t, e.must(t, http.StatusOK, e.do(t, "GET", o.path, nil))).ResourceVersion
			if now != v2 {
				t.Fatalf("got resourceVersion %d after refused writes; want %d (nothing written)", now, v2)
			}
			if o.name == "flavor" {
				return // a flavor in use stays; deleting the resource's is below
			}
			e.must(t, o.deleteCode, e.do(t, "DELETE", o.path, nil, ifMatch(tag2)))
		})
	}
	t.Run("flavor delete", func(t *testing.T) {
		e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/flavors", `{"name":"spare","kind":"container","spec":{"vcpus":1,"memoryMiB":64}}`))
		tag := e.must(t, http.StatusOK, e.do(t, "GET", "/v1/flavors/spare", nil)).header.Get("ETag")
		e.must(t, http.StatusConflict, e.do(t, "DELETE", "/v1/flavors/spare", nil, ifMatch(`"1"`)))
		e.must(t, http.StatusOK, e.do(t, "DELETE", "/v1/flavors/spare", nil, ifMatch(tag)))
	})
}

// TestIdempotencyExpiry checks that an idempotency record older than
// RequestTTL binds its key no more, and that PruneRequests removes
// exactly the old records, however many pages of them there are.
func TestIdempotencyExpiry(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.fixtures(t, nil)
	ctx := t.Context()
	old := now().Add(-RequestTTL - time.Minute)
	plant := func(key string, at time.Time) {
		t.Helper()
		req := state.Request{Key: key, BodyHash: "other", Operation: "create", Resource: "elsewhere", ResourceUID: "x", CreatedAt: at}
		if _, err := e.st.Requests.Put(ctx, requestName(DefaultTenant, key), &req); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("an expired key is free", func(t *testing.T) {
		plant("stale-key", old)
		key := withHeader("Idempotency-Key", "stale-key")
		e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", computeBody("fresh"), key))
		// Recorded anew: the retry is answered from it.
		e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", computeBody("fresh"), key))
		plant("live-key", now())
		e.must(t, http.StatusConflict, e.do(t, "POST", "/v1/resources", computeBody("other"), withHeader("Idempotency-Key", "live-key")))
	})
	t.Run("prune pages through old records", func(t *testing.T) {
		const stale = prunePage + 100
		for i := range stale {
			plant(fmt.Sprintf("old-%04d", i), old)
		}
		n, err := e.svc.Resources().PruneRequests(ctx, RequestTTL)
		if err != nil || n != stale {
			t.Fatalf("got %d pruned, %v; want %d", n, err, stale)
		}
		left, _, err := e.st.Requests.ListAll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, it := range left {
			keys = append(keys, it.Value.Key)
		}
		slices.Sort(keys)
		if want := []string{"live-key", "stale-key"}; !slices.Equal(keys, want) {
			t.Errorf("got records %q left; want %q (the recent ones)", keys, want)
		}
	})
}
