package api

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/audit"
	"github.com/stratahq/strata/internal/secretbox"
)

// testKeyring is a keyring of one new key.
func testKeyring(t testing.TB) *secretbox.Keyring {
	t.Helper()
	k, err := secretbox.GenerateKey(filepath.Join(t.TempDir(), "secrets.key"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := secretbox.NewKeyring(k)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// rawSecrets are the bytes etcd holds under the secrets' prefix.
func (e *testEnv) rawSecrets(t *testing.T) map[string][]byte {
	t.Helper()
	kvs, _, err := e.st.Store.ListAll(t.Context(), e.st.Secrets.Prefix())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, kv := range kvs {
		out[kv.Key] = kv.Value
	}
	return out
}

func TestConfigs(t *testing.T) {
	e := newEnv(t, envConfig{})
	member := e.token(t, "team-a", api.RoleMember)
	viewer := e.token(t, "team-a", api.RoleViewer)
	other := e.token(t, "team-b", api.RoleMember)

	created := e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/configs",
		`{"name":"app","labels":{"app":"web"},"data":{"app.conf":"listen 8080\n","MODE":"prod"}}`, withToken(member)))
	c := decodeAs[api.Config](t, created)
	if c.Tenant != "team-a" || c.Data["MODE"] != "prod" || c.ResourceVersion == 0 {
		t.Fatalf("created %+v; want tenant team-a, data, a resourceVersion", c)
	}
	// Viewers read configs; other tenants do not see them.
	got := decodeAs[api.Config](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/configs/app", nil, withToken(viewer))))
	if got.Data["app.conf"] != "listen 8080\n" {
		t.Fatalf("GET: %+v", got)
	}
	e.must(t, http.StatusNotFound, e.do(t, "GET", "/v1/configs/app", nil, withToken(other)))
	e.must(t, http.StatusNotFound, e.do(t, "GET", "/v1/configs/app?tenant=team-a", nil, withToken(other)))
	if l := decodeAs[struct{ Items []api.Config }](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/configs", nil, withToken(other)))); len(l.Items) != 0 {
		t.Fatalf("team-b lists %d configs; want 0", len(l.Items))
	}
	e.must(t, http.StatusForbidden, e.do(t, "POST", "/v1/configs", `{"name":"x"}`, withToken(viewer)))

	// Update: conditional, and a stale version is a conflict.
	e.must(t, http.StatusOK, e.do(t, "PUT", "/v1/configs/app", `{"data":{"MODE":"dev"}}`, withToken(member),
		withHeader("If-Match", created.header.Get("ETag"))))
	e.must(t, http.StatusConflict, e.do(t, "PUT", "/v1/configs/app", `{"data":{"MODE":"x"}}`, withToken(member),
		withHeader("If-Match", created.header.Get("ETag"))))
	l := decodeAs[struct{ Items []api.Config }](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/configs?limit=1", nil, withToken(member))))
	if len(l.Items) != 1 || l.Items[0].Data["MODE"] != "dev" || len(l.Items[0].Data) != 1 {
		t.Fatalf("list after update: %+v", l.Items)
	}

	// Clear 4xx field errors.
	for _, tc := range []struct{ body, want string }{
		{`{"name":"Bad"}`, `name: \"Bad\" must be lower case`},
		{`{"name":"a","data":{"../x":"v"}}`, `bad key \"../x\"`},
		{`{"name":"a","data":{"k":1}}`, `data.k: must be a string`},
		{`{"name":"a","data":{"k":"` + strings.Repeat("v", api.MaxDataBytes) + `"}}`, `holds 262145 bytes of keys and values; at most 262144`},
		{`{"name":"a","extra":1}`, `extra: unknown field`},
	} {
		r := e.do(t, "POST", "/v1/configs", tc.body, withToken(member))
		if r.code != http.StatusBadRequest || !strings.Contains(string(r.body), tc.want) {
			t.Errorf("POST %.60s: got %.300s; want 400 with %q", tc.body, r, tc.want)
		}
	}
	e.must(t, http.StatusOK, e.do(t, "DELETE", "/v1/configs/app", nil, withToken(member)))
	e.must(t, http.StatusNotFound, e.do(t, "GET", "/v1/configs/app", nil, withToken(member)))
}

// TestSecretsAtRest: etcd holds no value in plain text; reads show keys,
// values only to a role that may read secrets and asks for them.
func TestSecretsAtRest(t *testing.T) {
	e := newEnv(t, envConfig{})
	member := e.token(t, "team-a", api.RoleMember)
	viewer := e.token(t, "team-a", api.RoleViewer)
	const value = "s3cr3t-Value-7f1e"
	created := e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/secrets",
		`{"name":"db","data":{"password":"`+value+`","user":"app"}}`, withToken(member)))
	if strings.Contains(string(created.body), value) {
		t.Fatalf("the create answer holds the value: %s", created)
	}
	s := decodeAs[api.Secret](t, created)
	if s.Type != api.SecretOpaque || !slices.Equal(s.Keys, []string{"password", "user"}) || s.Data != nil {
		t.Fatalf("created %+v; want type opaque, keys [password user], no data", s)
	}
	raw := e.rawSecrets(t)
	if len(raw) != 1 {
		t.Fatalf("etcd holds %d secrets; want 1", len(raw))
	}
	for k, v := range raw {
		if bytes.Contains(v, []byte(value)) || bytes.Contains(v, []byte(`"app"`)) {
			t.Fatalf("etcd key %s holds a value in plain text: %s", k, v)
		}
	}

	for _, path := range []string{"/v1/secrets/db", "/v1/secrets"} {
		for _, tok := range []string{member, viewer} {
			if r := e.must(t, http.StatusOK, e.do(t, "GET", path, nil, withToken(tok))); strings.Contains(string(r.body), value) {
				t.Errorf("GET %s without reveal holds the value: %s", path, r)
			}
		}
		if r := e.do(t, "GET", path+"?reveal=true", nil, withToken(viewer)); r.code != http.StatusForbidden || strings.Contains(string(r.body), value) {
			t.Errorf("GET %s?reveal=true as a viewer: got %s; want 403 without the value", path, r)
		}
		if r := e.must(t, http.StatusOK, e.do(t, "GET", path+"?reveal=true", nil, withToken(member))); !strings.Contains(string(r.body), value) {
			t.Errorf("GET %s?reveal=true as a member: got %s; want the value", path, r)
		}
	}

	// The type is immutable; registry secrets need their three keys.
	e.must(t, http.StatusBadRequest, e.do(t, "PUT", "/v1/secrets/db", `{"type":"registry","data":{"registry":"r.example:5000","username":"u","password":"p"}}`, withToken(member)))
	r := e.do(t, "POST", "/v1/secrets", `{"name":"reg","type":"registry","data":{"registry":"r.example:5000","password":"`+value+`"}}`, withToken(member))
	if r.code != http.StatusBadRequest || !strings.Contains(string(r.body), "data.username: is required") || strings.Contains(string(r.body), value) {
		t.Fatalf("registry secret without a username: got %s; want 400 naming data.username, not the value", r)
	}
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/secrets", `{"name":"reg","type":"registry","data":{"registry":"r.example:5000","username":"u","password":"p"}}`, withToken(member)))

	// An update re-seals; the same data writes nothing.
	before := decodeAs[api.Secret](t, e.do(t, "GET", "/v1/secrets/db", nil, withToken(member)))
	same := decodeAs[api.Secret](t, e.must(t, http.StatusOK, e.do(t, "PUT", "/v1/secrets/db", `{"data":{"password":"`+value+`","user":"app"}}`, withToken(member))))
	if same.ResourceVersion != before.ResourceVersion {
		t.Fatalf("the same data wrote a new version (%d -> %d)", before.ResourceVersion, same.ResourceVersion)
	}
	e.must(t, http.StatusOK, e.do(t, "PUT", "/v1/secrets/db", `{"data":{"password":"new"}}`, withToken(member)))
	got := decodeAs[api.Secret](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/secrets/db?reveal=true", nil, withToken(member))))
	if len(got.Data) != 1 || got.Data["password"] != "new" {
		t.Fatalf("after update: %+v", got)
	}
	e.must(t, http.StatusOK, e.do(t, "DELETE", "/v1/secrets/db", nil, withToken(member)))
}

// TestSecretsWithoutKeys: a server without key files refuses to store a
// Secret, with a message that says what to configure.
func TestSecretsWithoutKeys(t *testing.T) {
	e := newEnv(t, envConfig{})
	bare, err := New(Options{State: e.st, ID: "bare", Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := WithIdentity(t.Context(), Identity{Tenant: "team-a", Role: api.RoleMember})
	_, err = bare.Secrets().Create(ctx, "", api.Secret{Name: "x", Data: map[string]string{"k": "v"}})
	if err == nil || !strings.Contains(err.Error(), "secrets.keyFiles") {
		t.Fatalf("Create without keys: %v; want an error naming secrets.keyFiles", err)
	}
}

// TestSecretsRotation: values sealed by an old key stay readable once a
// new key comes first; ReencryptSecrets seals them with the new key
// (checked in etcd's bytes), after which the old key can go.
func TestSecretsRotation(t *testing.T) {
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
	newRing, _ := secretbox.NewKeyring(newKey)

	e := newEnv(t, envConfig{secrets: oldRing})
	for _, n := range []string{"a", "b", "c"} {
		e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/secrets", `{"name":"`+n+`","data":{"k":"value-`+n+`"}}`))
	}
	keyIDs := func() map[string]int {
		out := map[string]int{}
		for _, v := range e.rawSecrets(t) {
			var s state.SealedSecret
			if err := json.Unmarshal(v, &s); err != nil {
				t.Fatal(err)
			}
			out[s.Sealed.KeyID]++
		}
		return out
	}
	if got := keyIDs(); got[oldKey.ID] != 3 {
		t.Fatalf("key ids in etcd %v; want 3 of the old key %s", got, oldKey.ID)
	}

	admin := WithIdentity(t.Context(), Identity{Tenant: DefaultTenant, Role: api.RoleAdmin})
	rotated, err := New(Options{State: e.st, ID: "rotated", Version: "test", Secrets: bothRing})
	if err != nil {
		t.Fatal(err)
	}
	// Old data readable with the new key first.
	if s, err := rotated.Secrets().Get(admin, "", "b", true); err != nil || s.Data["k"] != "value-b" {
		t.Fatalf("Get with both keys: %+v, %v", s, err)
	}
	// A write meanwhile seals with the new key.
	if _, err := rotated.Secrets().Update(admin, "", api.Secret{Name: "c", Data: map[string]string{"k": "value-c2"}}); err != nil {
		t.Fatal(err)
	}
	res, err := ReencryptSecrets(t.Context(), e.st, bothRing)
	if err != nil {
		t.Fatal(err)
	}
	if res.Secrets != 3 || res.Resealed != 2 || res.PrimaryKey != newKey.ID {
		t.Fatalf("ReencryptSecrets = %+v; want 3 secrets, 2 resealed, primary %s", res, newKey.ID)
	}
	if got := keyIDs(); got[newKey.ID] != 3 {
		t.Fatalf("key ids in etcd after reencrypt %v; want 3 of the new key %s", got, newKey.ID)
	}
	// A second run has nothing to do.
	if res, err := ReencryptSecrets(t.Context(), e.st, bothRing); err != nil || res.Resealed != 0 {
		t.Fatalf("second ReencryptSecrets = %+v, %v; want 0 resealed", res, err)
	}
	// The old key can go; a server with only the old key cannot read.
	onlyNew, _ := New(Options{State: e.st, ID: "new", Version: "test", Secrets: newRing})
	for n, want := range map[string]string{"a": "value-a", "b": "value-b", "c": "value-c2"} {
		if s, err := onlyNew.Secrets().Get(admin, "", n, true); err != nil || s.Data["k"] != want {
			t.Fatalf("Get %s with the new key only: %+v, %v", n, s, err)
		}
	}
	onlyOld, _ := New(Options{State: e.st, ID: "old", Version: "test", Secrets: oldRing})
	if _, err := onlyOld.Secrets().Get(admin, "", "a", true); err == nil || !strings.Contains(err.Error(), "not configured") {
		t.Fatalf("Get with the old key only: %v; want a key that is not configured", err)
	}
}

// TestSecretValuesNeverLogged drives every secret operation, good and
// bad, with debug logs and the audit log on, and finds the value in
// neither, nor in any error answer.
func TestSecretValuesNeverLogged(t *testing.T) {
	const value = "Leak-Canary-93b2"
	var logs syncBuffer
	auditPath := filepath.Join(t.TempDir(), "audit.log")
	alog, err := audit.Open(auditPath, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envConfig{audit: alog, logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	viewer := e.token(t, DefaultTenant, api.RoleViewer)
	var answers []string
	send := func(method, path, body string, opts ...reqOption) {
		r := e.do(t, method, path, body, opts...)
		if r.code >= 400 {
			answers = append(answers, r.String())
		}
	}
	send("POST", "/v1/secrets", `{"name":"s","data":{"k":"`+value+`"}}`)
	send("POST", "/v1/secrets", `{"name":"s","data":{"k":"`+value+`"}}`)                          // exists
	send("POST", "/v1/secrets", `{"name":"Bad!","data":{"k":"`+value+`"}}`)                       // bad name
	send("POST", "/v1/secrets", `{"name":"t","data":{"bad/key":"`+value+`"}}`)                    // bad key
	send("POST", "/v1/secrets", `{"name":"t","type":"registry","data":{"password":"`+value+`"}}`) // missing keys
	send("POST", "/v1/secrets", `{"name":"t","data":"`+value+`"}`)                                // wrong type
	send("POST", "/v1/secrets", `{"name":"t","data":{"k":"`+value+`"`)                            // malformed
	send("PUT", "/v1/secrets/s", `{"type":"registry","data":{"k":"`+value+`"}}`)                  // type change
	send("PUT", "/v1/secrets/s", `{"data":{"k":"`+value+`x"}}`, withHeader("If-Match", `"1"`))    // stale
	send("PUT", "/v1/secrets/s", `{"data":{"k":"`+value+`y"}}`)
	send("GET", "/v1/secrets/s?reveal=true", "", withToken(viewer))
	send("GET", "/v1/secrets?reveal=true", "", withToken(viewer))
	send("DELETE", "/v1/secrets/s", "")
	if err := alog.Close(); err != nil {
		t.Fatal(err)
	}
	if len(answers) != 10 {
		t.Errorf("got %d error answers; want 10: %q", len(answers), answers)
	}
	auditRaw, err := os.ReadFile(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(auditRaw) == 0 {
		t.Fatal("the audit log is empty: the test proves nothing")
	}
	for what, text := range map[string]string{"logs": logs.String(), "audit log": string(auditRaw), "error answers": strings.Join(answers, "\n")} {
		if strings.Contains(text, value) || strings.Contains(text, "Leak-Canary") {
			t.Errorf("the %s hold the secret value:\n%s", what, text)
		}
	}
}
