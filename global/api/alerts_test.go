package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stratahq/strata/global/alerts"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/hostpolicy"
	"github.com/stratahq/strata/internal/rest"
	"github.com/stratahq/strata/internal/secretbox"
)

const testAlertSecret = "s3cret-s3cret-s3cret"

func alertRuleBody(name string, mods ...func(map[string]any)) map[string]any {
	m := map[string]any{
		"name": name, "reasons": []string{"NodeDown", "RegionDown"}, "groupWait": "5s",
		"receiver": map[string]any{"type": "webhook", "url": "https://hooks.example.com/hook", "secret": testAlertSecret},
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
	r := e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/alertrules", alertRuleBody("nodes", func(m map[string]any) {
		m["selector"] = "severity=critical,region in (eu,us)"
	})))
	noSecret(t, r)
	if got := decodeAs[api.AlertRule](t, r); !got.Receiver.HasSecret || got.CreatedAt.IsZero() || got.Selector != "severity=critical,region in (eu,us)" {
		t.Fatalf("created: got %+v; want hasSecret, createdAt and the selector", got)
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
	if err != nil {
		t.Fatal(err)
	}
	if secret, err := stored.Value.Secret(e.svc.secrets.ring); err != nil || secret != testAlertSecret {
		t.Fatalf("stored secret: got %v; want it kept", err)
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
		{"bad selector", alertRuleBody("a", func(m map[string]any) { m["selector"] = "severity=crit ical" }), "selector"},
		{"bad selector set", alertRuleBody("a", func(m map[string]any) { m["selector"] = "region in eu" }), "selector"},
		{"long selector", alertRuleBody("a", func(m map[string]any) { m["selector"] = "a=" + strings.Repeat("b", 1100) }), "selector"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.must(t, http.StatusBadRequest, e.do(t, "POST", "/v1/alertrules", tt.body))
			if got := decodeAs[api.ErrorBody](t, r).Error.Field; got != tt.field {
				t.Fatalf("got field %q; want %q (%s)", got, tt.field, r)
			}
		})
	}
	t.Run("every mistake at once", func(t *testing.T) {
		body := alertRuleBody("A_b", func(m map[string]any) {
			m["reasons"] = []string{"node down"}
			m["groupWait"] = "3h"
			m["receiver"].(map[string]any)["secret"] = "short"
		})
		got := decodeAs[api.ErrorBody](t, e.must(t, http.StatusBadRequest, e.do(t, "POST", "/v1/alertrules", body))).Error
		var fields []string
		for _, d := range got.Details {
			fields = append(fields, d.Field)
		}
		if want := []string{"name", "reasons[0]", "groupWait", "receiver.secret"}; !slices.Equal(fields, want) || got.Field != "name" {
			t.Fatalf("got field %q, details %q; want %q", got.Field, fields, want)
		}
	})
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

// rawAlertRules are the bytes etcd holds under the alert rules' prefix.
func (e *testEnv) rawAlertRules(t *testing.T) map[string][]byte {
	t.Helper()
	rules := e.svc.AlertRules().c.Rules
	kvs, _, err := e.st.Store.ListAll(t.Context(), rules.Prefix())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, kv := range kvs {
		out[kv.Key] = kv.Value
	}
	return out
}

// TestAlertRuleSecretSealed: the receiver's secret is sealed in etcd
// (its bytes do not hold it, an envelope of the primary key does); a
// rule written before secrets were sealed (plain text in etcd) still
// delivers with its secret and is sealed by ReencryptSecrets, as is one
// sealed by an old key after a rotation; a server without key files
// refuses a rule with a secret (503 naming secrets.keyFiles), not one
// without.
func TestAlertRuleSecretSealed(t *testing.T) {
	dir := t.TempDir()
	oldKey, err := secretbox.GenerateKey(filepath.Join(dir, "old"))
	if err != nil {
		t.Fatal(err)
	}
	newKey, err := secretbox.GenerateKey(filepath.Join(dir, "new"))
	if err != nil {
		t.Fatal(err)
	}
	oldRing, _ := secretbox.NewKeyring(oldKey)
	bothRing, _ := secretbox.NewKeyring(newKey, oldKey)

	e := newEnv(t, envConfig{secrets: oldRing})
	e.fixtures(t, nil)
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/alertrules", alertRuleBody("sealed")))
	// A rule as it was stored before receiver secrets were sealed.
	legacy := alerts.StoredRule{AlertRule: api.AlertRule{
		Name: "legacy", Reasons: []string{"NodeDown"},
		Receiver: api.AlertReceiver{Type: api.ReceiverWebhook, URL: "https://hooks.example.com/hook", Secret: testAlertSecret + "-legacy"},
	}}
	if _, err := e.svc.AlertRules().c.Rules.Create(t.Context(), "legacy", &legacy); err != nil {
		t.Fatal(err)
	}
	keyIDs := func(wantPlain int) map[string]int {
		t.Helper()
		out := map[string]int{}
		plain := 0
		for k, v := range e.rawAlertRules(t) {
			if bytes.Contains(v, []byte(testAlertSecret)) {
				plain++
				if !strings.HasSuffix(k, "/legacy") {
					t.Fatalf("etcd holds the receiver secret of %s in plain text: %s", k, v)
				}
			}
			var r alerts.StoredRule
			if err := json.Unmarshal(v, &r); err != nil {
				t.Fatal(err)
			}
			if r.SealedSecret != nil {
				out[r.SealedSecret.KeyID]++
			}
		}
		if plain != wantPlain {
			t.Fatalf("%d rules hold their secret in plain text in etcd; want %d", plain, wantPlain)
		}
		return out
	}
	if got := keyIDs(1); got[oldKey.ID] != 1 || len(got) != 1 {
		t.Fatalf("key ids in etcd %v; want 1 of the old key %s", got, oldKey.ID)
	}
	// Reads say a secret is there, for both.
	for _, n := range []string{"sealed", "legacy"} {
		r := e.must(t, http.StatusOK, e.do(t, "GET", "/v1/alertrules/"+n, nil))
		if bytes.Contains(r.body, []byte(testAlertSecret)) || !decodeAs[api.AlertRule](t, r).Receiver.HasSecret {
			t.Fatalf("GET %s: %s; want hasSecret and no secret", n, r.body)
		}
	}

	// Rotation: the new key first; reencrypt seals both with it.
	res, err := ReencryptSecrets(t.Context(), e.st, bothRing)
	if err != nil {
		t.Fatal(err)
	}
	if res.AlertRules != 2 || res.AlertRulesResealed != 2 {
		t.Fatalf("ReencryptSecrets = %+v; want 2 alert rules, 2 resealed", res)
	}
	if got := keyIDs(0); got[newKey.ID] != 2 || len(got) != 1 {
		t.Fatalf("key ids in etcd after reencrypt %v; want 2 of the new key %s", got, newKey.ID)
	}
	if res, err := ReencryptSecrets(t.Context(), e.st, bothRing); err != nil || res.AlertRulesResealed != 0 {
		t.Fatalf("second ReencryptSecrets = %+v, %v; want 0 resealed", res, err)
	}
	newRing, _ := secretbox.NewKeyring(newKey)
	for n, want := range map[string]string{"sealed": testAlertSecret, "legacy": testAlertSecret + "-legacy"} {
		it, err := e.svc.AlertRules().c.Rules.Get(t.Context(), n)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := it.Value.Secret(newRing); err != nil || got != want {
			t.Fatalf("rule %s's secret with the new key only: %v; want it", n, err)
		}
		if _, err := it.Value.Secret(oldRing); err == nil || strings.Contains(err.Error(), want) {
			t.Fatalf("rule %s's secret with the old key only: %v; want an error without the secret", n, err)
		}
	}

	// Without key files: a secret is refused, a rule without one is not.
	bare, err := New(Options{State: e.st, ID: "bare", Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	admin := WithIdentity(t.Context(), Identity{Tenant: DefaultTenant, Role: api.RoleAdmin})
	withSecret := api.AlertRule{Name: "x", Reasons: []string{"NodeDown"},
		Receiver: api.AlertReceiver{Type: api.ReceiverWebhook, URL: "https://hooks.example.com/x", Secret: testAlertSecret}}
	if _, err := bare.AlertRules().Create(admin, withSecret); !errors.Is(err, api.ErrUnavailable) || !strings.Contains(err.Error(), "secrets.keyFiles") {
		t.Fatalf("Create with a secret and no keys: %v; want unavailable naming secrets.keyFiles", err)
	}
	withSecret.Receiver.Secret = ""
	if _, err := bare.AlertRules().Create(admin, withSecret); err != nil {
		t.Fatalf("Create without a secret and no keys: %v", err)
	}
}

// TestSecurityAlertReceiverAddresses: a rule whose receiver URL names
// an internal address (loopback, the clouds' metadata, a region
// network, localhost) is refused on create and update, naming
// receiver.url, unless the operator allows that network; a name is left
// to the master, which checks the address it dials.
func TestSecurityAlertReceiverAddresses(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.fixtures(t, nil)
	internal := []string{
		"http://127.0.0.1:8080/hook",
		"http://127.1.2.3/",
		"http://169.254.169.254/latest/meta-data/",
		"http://[::1]:9/hook",
		"http://[::ffff:127.0.0.1]/",
		"http://localhost:9/hook",
		"http://LocalHost./hook",
		"http://10.90.0.5:8080/",
		"http://192.168.1.1/",
		"http://[fe80::1%25eth0]/",
		"http://0.0.0.0:22/",
	}
	for _, u := range internal {
		t.Run(u, func(t *testing.T) {
			body := alertRuleBody("a", func(m map[string]any) { m["receiver"].(map[string]any)["url"] = u })
			got := decodeAs[api.ErrorBody](t, e.must(t, http.StatusBadRequest, e.do(t, "POST", "/v1/alertrules", body))).Error
			if got.Field != "receiver.url" || !strings.Contains(got.Message, "alerts.receiverNetworks") {
				t.Fatalf("got %+v; want receiver.url refused, naming alerts.receiverNetworks", got)
			}
		})
	}
	// An update cannot move a rule there either, and the refusal comes
	// with the rule's other mistakes.
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/alertrules", alertRuleBody("nodes")))
	got := decodeAs[api.ErrorBody](t, e.must(t, http.StatusBadRequest, e.do(t, "PUT", "/v1/alertrules/nodes", alertRuleBody("nodes", func(m map[string]any) {
		m["receiver"].(map[string]any)["url"] = "http://169.254.169.254/"
		m["groupWait"] = "3h"
	})))).Error
	var fields []string
	for _, d := range got.Details {
		fields = append(fields, d.Field)
	}
	if !slices.Equal(fields, []string{"groupWait", "receiver.url"}) {
		t.Fatalf("update to the metadata address: got fields %q; want groupWait and receiver.url (%s)", fields, got.Message)
	}
	for _, u := range []string{"https://hooks.example.com/strata", "http://203.0.113.7:9093/api/v2/alerts", "http://localhost.example.com/"} {
		e.must(t, http.StatusOK, e.do(t, "PUT", "/v1/alertrules/nodes", alertRuleBody("nodes", func(m map[string]any) { m["receiver"].(map[string]any)["url"] = u })))
	}

	// The operator allows loopback: a receiver there is taken; the
	// metadata address still is not.
	loop, err := hostpolicy.ParseNetworks([]string{"127.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Options{State: e.st, ID: "loop", Version: "test", AlertReceivers: loop})
	if err != nil {
		t.Fatal(err)
	}
	admin := WithIdentity(t.Context(), Identity{Tenant: DefaultTenant, Role: api.RoleAdmin})
	for i, u := range []string{"http://127.0.0.1:9/hook", "http://localhost:9/hook"} {
		r := api.AlertRule{Name: fmt.Sprintf("local-%d", i), Reasons: []string{"NodeDown"}, Receiver: api.AlertReceiver{Type: api.ReceiverWebhook, URL: u}}
		if _, err := srv.AlertRules().Create(admin, r); err != nil {
			t.Errorf("Create with %s and loopback allowed: %v", u, err)
		}
	}
	r := api.AlertRule{Name: "metadata", Reasons: []string{"NodeDown"}, Receiver: api.AlertReceiver{Type: api.ReceiverWebhook, URL: "http://169.254.169.254/"}}
	if _, err := srv.AlertRules().Create(admin, r); !errors.Is(err, api.ErrInvalid) {
		t.Errorf("Create with the metadata address and loopback allowed: got %v; want invalid", err)
	}
}
