package api

import (
	"bytes"
	"net/http"
	"slices"
	"testing"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/rest"
)

const testAlertSecret = "s3cret-s3cret-s3cret"

func alertRuleBody(name string, mods ...func(map[string]any)) map[string]any {
	m := map[string]any{
		"name": name, "reasons": []string{"NodeDown", "RegionDown"}, "groupWait": "5s",
		"receiver": map[string]any{"type": "webhook", "url": "http://127.0.0.1:9/hook", "secret": testAlertSecret},
	}
	for _, f := range mods {
		f(m)
	}
	return m
}

// TestAlertRulesCRUD writes, reads, updates and deletes a rule: the
// receiver's secret is taken, kept across an update without one, and in
// no answer.
func TestAlertRulesCRUD(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.fixtures(t, nil)
	noSecret := func(t *testing.T, r *response) {
		t.Helper()
		if bytes.Contains(r.body, []byte(testAlertSecret)) {
			t.Fatalf("the answer carries the receiver's secret: %s", r)
		}
	}
	r := e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/alertrules", alertRuleBody("nodes")))
	noSecret(t, r)
	if got := decodeAs[api.AlertRule](t, r); !got.Receiver.HasSecret || got.CreatedAt.IsZero() {
		t.Fatalf("created: got %+v; want hasSecret and createdAt", got)
	}
	e.must(t, http.StatusConflict, e.do(t, "POST", "/v1/alertrules", alertRuleBody("nodes")))
	r = e.must(t, http.StatusOK, e.do(t, "GET", "/v1/alertrules/nodes", nil))
	noSecret(t, r)
	r = e.must(t, http.StatusOK, e.do(t, "GET", "/v1/alertrules", nil))
	noSecret(t, r)
	if l := decodeAs[rest.List[api.AlertRule]](t, r); len(l.Items) != 1 || l.Items[0].Name != "nodes" {
		t.Fatalf("list: got %+v", l)
	}
	// A client writes back what it read: no secret, which keeps it.
	r = e.must(t, http.StatusOK, e.do(t, "PUT", "/v1/alertrules/nodes", alertRuleBody("nodes", func(m map[string]any) {
		m["reasons"] = []string{"NodeSuspect"}
		delete(m["receiver"].(map[string]any), "secret")
	})))
	noSecret(t, r)
	got := decodeAs[api.AlertRule](t, r)
	if !got.Receiver.HasSecret || !slices.Equal(got.Reasons, []string{"NodeSuspect"}) {
		t.Fatalf("updated: got %+v; want the new reasons and the secret kept", got)
	}
	stored, err := e.svc.AlertRules().c.Rules.Get(t.Context(), "nodes")
	if err != nil || stored.Value.Receiver.Secret != testAlertSecret {
		t.Fatalf("stored secret: got %v, %v; want it kept", stored.Value, err)
	}
	noSecret(t, e.must(t, http.StatusOK, e.do(t, "DELETE", "/v1/alertrules/nodes", nil)))
	e.must(t, http.StatusNotFound, e.do(t, "GET", "/v1/alertrules/nodes", nil))
}

// TestAlertRulesRefusals checks the 4xx of bad rules, with the field at
// fault, and who may manage rules.
func TestAlertRulesRefusals(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.fixtures(t, nil)
	tests := []struct {
		name  string
		body  any
		field string
	}{
		{"unknown field", alertRuleBody("a", func(m map[string]any) { m["severity"] = "page" }), "severity"},
		{"unknown receiver field", alertRuleBody("a", func(m map[string]any) { m["receiver"].(map[string]any)["token"] = "x" }), "receiver.token"},
		{"no reasons", alertRuleBody("a", func(m map[string]any) { m["reasons"] = []string{} }), "reasons"},
		{"bad reason", alertRuleBody("a", func(m map[string]any) { m["reasons"] = []string{"NodeDown", "node down"} }), "reasons[1]"},
		{"bad receiver type", alertRuleBody("a", func(m map[string]any) { m["receiver"].(map[string]any)["type"] = "slack" }), "receiver.type"},
		{"not http", alertRuleBody("a", func(m map[string]any) { m["receiver"].(map[string]any)["url"] = "file:///etc/passwd" }), "receiver.url"},
		{"credentials in the url", alertRuleBody("a", func(m map[string]any) { m["receiver"].(map[string]any)["url"] = "https://u:p@example.com/" }), "receiver.url"},
		{"short secret", alertRuleBody("a", func(m map[string]any) { m["receiver"].(map[string]any)["secret"] = "short" }), "receiver.secret"},
		{"bad group wait", alertRuleBody("a", func(m map[string]any) { m["groupWait"] = "soon" }), "groupWait"},
		{"group wait too long", alertRuleBody("a", func(m map[string]any) { m["groupWait"] = "3h" }), "groupWait"},
		{"bad name", alertRuleBody("A_b"), "name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.must(t, http.StatusBadRequest, e.do(t, "POST", "/v1/alertrules", tt.body))
			if got := decodeAs[api.ErrorBody](t, r).Error.Field; got != tt.field {
				t.Fatalf("got field %q; want %q (%s)", got, tt.field, r)
			}
		})
	}
	t.Run("roles", func(t *testing.T) {
		for _, role := range []api.Role{api.RoleOperator, api.RoleMember, api.RoleViewer} {
			tok := e.token(t, DefaultTenant, role)
			e.must(t, http.StatusForbidden, e.do(t, "GET", "/v1/alertrules", nil, withToken(tok)))
			e.must(t, http.StatusForbidden, e.do(t, "POST", "/v1/alertrules", alertRuleBody("x"), withToken(tok)))
		}
		infra := e.token(t, DefaultTenant, api.RoleInfra)
		e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/alertrules", alertRuleBody("by-infra"), withToken(infra)))
	})
}
