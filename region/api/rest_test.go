package api

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stratahq/strata/internal/api"
)

func TestREST(t *testing.T) {
	e := newEnv(t, func(o *Options, _ *tuning) {
		o.MaxBodyBytes = 1024
	})
	e.register(testNode("n1"))
	p := testPlacement("acme", "web", "uid-web", 2, 1)
	if _, err := e.srv.placements.apply(e.ctx(), []api.Placement{p}); err != nil {
		t.Fatal(err)
	}

	const auth = "Bearer " + testToken
	tests := []struct {
		name     string
		method   string
		path     string
		auth     string
		body     string
		wantCode int
		wantErr  string // ErrorBody code; "" for a success
		wantBody string // a substring of the body
	}{
		{"health needs no token", "GET", "/healthz", "", "", 200, "", "ok"},
		{"readiness", "GET", "/readyz", "", "", 200, "", "ok"},
		{"no token", "GET", "/v1/nodes", "", "", 401, "Unauthenticated", ""},
		{"wrong token", "GET", "/v1/nodes", "Bearer nope", "", 401, "Unauthenticated", ""},
		{"list nodes", "GET", "/v1/nodes", auth, "", 200, "", `"name":"n1"`},
		{"bad selector", "GET", "/v1/nodes?selector=a%20b%20c", auth, "", 400, "InvalidArgument", ""},
		{"get node", "GET", "/v1/nodes/n1", auth, "", 200, "", `"health":"Up"`},
		{"unknown node", "GET", "/v1/nodes/nope", auth, "", 404, "NotFound", `node \"nope\"`},
		{"bad body", "POST", "/v1/nodes/n1/cordon", auth, `{"reason":`, 400, "InvalidArgument", ""},
		{"unknown field", "POST", "/v1/nodes/n1/cordon", auth, `{"reason":"x","bogus":1}`, 400, "InvalidArgument", "bogus"},
		{"two values", "POST", "/v1/nodes/n1/cordon", auth, `{"reason":"x"} {}`, 400, "InvalidArgument", ""},
		{"body too large", "POST", "/v1/nodes/n1/drain", auth, `{"reason":"` + strings.Repeat("x", 2048) + `"}`, 413, "TooLarge", ""},
		{"invalid drain", "POST", "/v1/nodes/n1/drain", auth, `{"deadline":"-1s"}`, 400, "InvalidArgument", "deadline"},
		{"no drain yet", "GET", "/v1/nodes/n1/drain", auth, "", 404, "NotFound", ""},
		{"cordon", "POST", "/v1/nodes/n1/cordon", auth, `{"reason":"disk"}`, 200, "", `"schedulable":false`},
		{"uncordon without body", "POST", "/v1/nodes/n1/uncordon", auth, "", 200, "", `"schedulable":true`},
		{"drain without body", "POST", "/v1/nodes/n1/drain", auth, "", 200, "", `"state":"running"`},
		{"uncordon during drain", "POST", "/v1/nodes/n1/uncordon", auth, "", 409, "Conflict", "being drained"},
		{"get drain", "GET", "/v1/nodes/n1/drain", auth, "", 200, "", `"node":"n1"`},
		{"resources", "GET", "/v1/resources", auth, "", 200, "", `"uid":"uid-web"`},
		{"replicas of a resource", "GET", "/v1/resources/acme/web/replicas", auth, "", 200, "", `"items":[]`},
		{"replicas of an unknown resource", "GET", "/v1/resources/acme/nope/replicas", auth, "", 404, "NotFound", ""},
		{"replicas without node", "GET", "/v1/replicas", auth, "", 400, "InvalidArgument", ""},
		{"replicas of a node", "GET", "/v1/replicas?node=n1", auth, "", 200, "", `"items":[]`},
		{"events", "GET", "/v1/events?object=node/n1&limit=5", auth, "", 200, "", `"reason":"NodeRegistered"`},
		{"bad limit", "GET", "/v1/events?limit=many", auth, "", 400, "InvalidArgument", "limit"},
		{"bad cursor", "GET", "/v1/events?after=garbage", auth, "", 400, "InvalidArgument", ""},
		{"status", "GET", "/v1/status", auth, "", 200, "", `"leader":"controller-1"`},
		{"delete unknown node", "DELETE", "/v1/nodes/nope", auth, "", 404, "NotFound", ""},
		{"delete node", "DELETE", "/v1/nodes/n1", auth, "", 204, "", ""},
	}
	e.waitEvent("NodeRegistered", "node/n1")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			}
			req, err := http.NewRequestWithContext(e.ctx(), tt.method, e.http.URL+tt.path, body)
			if err != nil {
				t.Fatal(err)
			}
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			if tt.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.wantCode {
				t.Errorf("got status %d (%s); want %d", resp.StatusCode, raw, tt.wantCode)
			}
			if tt.wantErr != "" {
				var eb api.ErrorBody
				if err := json.Unmarshal(raw, &eb); err != nil || eb.Error.Code != tt.wantErr {
					t.Errorf("got body %s (%v); want an error body with code %s", raw, err, tt.wantErr)
				}
			}
			if !strings.Contains(string(raw), tt.wantBody) {
				t.Errorf("got body %s; want it to contain %s", raw, tt.wantBody)
			}
		})
	}
}

// TestSecurityRegionREST replays the browser-borne attacks on the
// operator REST API: every route needs the token, and a request from a
// page elsewhere (cross-site, a form's content type, another host name)
// is refused before any handler, token or not.
func TestSecurityRegionREST(t *testing.T) {
	e := newEnv(t)
	e.register(testNode("n1"))
	tests := []struct {
		name     string
		method   string
		path     string
		body     string
		header   map[string]string
		host     string
		wantCode int
	}{
		{"anonymous read", "GET", "/v1/nodes", "", nil, "", 401},
		{"anonymous cordon", "POST", "/v1/nodes/n1/cordon", "", nil, "", 401},
		{"cross-site text/plain cordon", "POST", "/v1/nodes/n1/cordon", `{"reason":"x"}`,
			map[string]string{"Content-Type": "text/plain", "Origin": "http://evil.example"}, "", 403},
		{"cross-site cordon with the token", "POST", "/v1/nodes/n1/cordon", "",
			map[string]string{"Authorization": "Bearer " + testToken, "Sec-Fetch-Site": "cross-site"}, "", 403},
		{"foreign origin drain with the token", "POST", "/v1/nodes/n1/drain", "",
			map[string]string{"Authorization": "Bearer " + testToken, "Origin": "http://evil.example"}, "", 403},
		{"text/plain body with the token", "POST", "/v1/nodes/n1/cordon", `{"reason":"x"}`,
			map[string]string{"Authorization": "Bearer " + testToken, "Content-Type": "text/plain"}, "", 415},
		{"form body with the token", "POST", "/v1/nodes/n1/cordon", `reason=x`,
			map[string]string{"Authorization": "Bearer " + testToken, "Content-Type": "application/x-www-form-urlencoded"}, "", 415},
		{"rebound host name", "GET", "/v1/nodes", "",
			map[string]string{"Authorization": "Bearer " + testToken}, "evil.example", 403},
		{"rebound host name on a probe", "GET", "/readyz", "", nil, "evil.example:8081", 403},
		{"loopback name", "GET", "/v1/nodes", "", map[string]string{"Authorization": "Bearer " + testToken}, "localhost", 200},
		{"same-origin cordon", "POST", "/v1/nodes/n1/cordon", `{"reason":"x"}`,
			map[string]string{"Authorization": "Bearer " + testToken, "Content-Type": "application/json", "Sec-Fetch-Site": "same-origin"}, "", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			}
			req, err := http.NewRequestWithContext(e.ctx(), tt.method, e.http.URL+tt.path, body)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			if tt.host != "" {
				req.Host = tt.host
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.wantCode {
				t.Fatalf("got %d %s; want %d", resp.StatusCode, raw, tt.wantCode)
			}
		})
	}
}

// TestRESTPaging follows every region list page by page, with limit and
// continue as the global tier's lists take them: every object once, in
// order, and a last page without continue.
func TestRESTPaging(t *testing.T) {
	e := newEnv(t)
	var nodes, placements, replicas []string
	for _, n := range []string{"n1", "n2", "n3", "n4", "n5"} {
		e.register(testNode(n))
		nodes = append(nodes, n)
	}
	var ps []api.Placement
	for _, n := range []string{"a", "b", "c"} {
		ps = append(ps, testPlacement("acme", n, "uid-"+n, 3, 1))
		placements = append(placements, "acme/"+n)
	}
	if _, err := e.srv.placements.apply(e.ctx(), ps); err != nil {
		t.Fatal(err)
	}
	var as []api.Assignment
	for _, id := range []string{"r3", "r1", "r2"} {
		as = append(as, testAssignment(id, "acme", "a", "n1"))
		replicas = append(replicas, id)
	}
	slices.Sort(replicas)
	e.putAssignments(as...)

	get := func(t *testing.T, path string, out any) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(e.ctx(), "GET", e.http.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("GET %s: %v (%s)", path, err, raw)
		}
		return resp.StatusCode
	}
	type item struct {
		Name     string          `json:"name"`
		ID       string          `json:"id"`
		Resource json.RawMessage `json:"resource"`
	}
	placementKey := func(it item) string {
		var r api.Resource
		_ = json.Unmarshal(it.Resource, &r)
		return r.Key()
	}
	follow := func(t *testing.T, path string, key func(item) string) (got []string, pages int) {
		t.Helper()
		cont := ""
		for pages = 1; pages < 10; pages++ {
			var page struct {
				Items    []item `json:"items"`
				Continue string `json:"continue"`
			}
			p := path
			if cont != "" {
				p += "&continue=" + cont
			}
			if code := get(t, p, &page); code != 200 {
				t.Fatalf("GET %s: got %d; want 200", p, code)
			}
			for _, it := range page.Items {
				got = append(got, key(it))
			}
			if page.Continue == "" {
				return got, pages
			}
			cont = page.Continue
		}
		t.Fatalf("GET %s: more than 10 pages", path)
		return nil, 0
	}
	tests := []struct {
		path      string
		key       func(item) string
		want      []string
		wantPages int
	}{
		{"/v1/nodes?limit=2", func(it item) string { return it.Name }, nodes, 3},
		{"/v1/nodes?limit=5", func(it item) string { return it.Name }, nodes, 1},
		{"/v1/nodes?selector=zone=a&limit=4", func(it item) string { return it.Name }, nodes, 2},
		{"/v1/resources?limit=1", placementKey, placements, 3},
		{"/v1/resources/acme/a/replicas?limit=2", func(it item) string { return it.ID }, replicas, 2},
		{"/v1/replicas?node=n1&limit=1", func(it item) string { return it.ID }, replicas, 3},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got, pages := follow(t, tt.path, tt.key)
			if !slices.Equal(got, tt.want) || pages != tt.wantPages {
				t.Errorf("got %v in %d pages; want %v in %d", got, pages, tt.want, tt.wantPages)
			}
		})
	}

	// Events page with a cursor: after (or continue) is the last id seen,
	// and a full page's continue is its last id.
	for _, n := range nodes {
		e.waitEvent("NodeRegistered", "node/"+n)
	}
	type eventPage struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
		Continue string `json:"continue"`
	}
	ids := func(p eventPage) (out []string) {
		for _, ev := range p.Items {
			out = append(out, ev.ID)
		}
		return out
	}
	var all, first, second eventPage
	if code := get(t, "/v1/events?limit=1000", &all); code != 200 || len(all.Items) < 5 || all.Continue != "" {
		t.Fatalf("GET /v1/events?limit=1000: got %d, %d events, continue %q; want 200, 5 or more, none", code, len(all.Items), all.Continue)
	}
	want := ids(all)
	get(t, "/v1/events?limit=2&after="+want[0], &first)
	get(t, "/v1/events?limit=2&continue="+first.Continue, &second)
	if got := append(ids(first), ids(second)...); !slices.Equal(got, want[1:5]) || first.Continue != want[2] {
		t.Errorf("two pages of events after %s: got %v (continue %q); want %v (continue %q)", want[0], got, first.Continue, want[1:5], want[2])
	}

	// A list without a limit is a page of api.DefaultPageSize; a bad
	// limit or continue, or a parameter the list does not take, is a 400
	// that names it.
	for _, tt := range []struct{ path, field string }{
		{"/v1/nodes?limit=-1", "limit"},
		{"/v1/nodes?limit=x", "limit"},
		{"/v1/nodes?continue=garbage", "continue"},
		{"/v1/resources?continue=" + api.ContinueToken("\x01"), "continue"},
		{"/v1/nodes?selecter=zone=a", "selecter"},
		{"/v1/replicas?node=n1&tenant=acme", "tenant"},
		{"/v1/nodes/n1?verbose=true", "verbose"},
		{"/v1/events?after=" + want[0] + "&continue=" + want[1], "continue"},
		{"/v1/events?limit=-2", "limit"},
	} {
		var eb api.ErrorBody
		if code := get(t, tt.path, &eb); code != 400 || eb.Error.Field != tt.field {
			t.Errorf("GET %s: got %d %+v; want 400 naming %s", tt.path, code, eb.Error, tt.field)
		}
	}
}
