package api

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stratahq/strata/internal/api"
)

func TestREST(t *testing.T) {
	e := newEnv(t, func(o *Options, _ *tuning) {
		o.Token = "s3cret"
		o.MaxBodyBytes = 1024
	})
	e.register(testNode("n1"))
	p := testPlacement("acme", "web", "uid-web", 2, 1)
	if _, err := e.srv.applyPlacements(e.ctx(), []api.Placement{p}); err != nil {
		t.Fatal(err)
	}

	const auth = "Bearer s3cret"
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
