package api

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/audit"
	globalv1 "github.com/stratahq/strata/proto/global/v1"
)

// TestAuditLog: every REST and gRPC call that changes something is
// recorded with who made it (the token's id, name, tenant and role),
// what, and how it ended, refused ones included; reads of the caller's
// own tenant are not (TestAuditedReads has those that are); no token or
// value of a request body reaches the file.
func TestAuditLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	log, err := audit.Open(path, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envConfig{audit: log})
	e.fixtures(t, nil)
	plain, tok, err := e.svc.Tokens().New(t.Context(), "team-a", api.RoleMember, "ci")
	if err != nil {
		t.Fatal(err)
	}
	const secret = "s3cret-env-value"
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", computeBody("app", func(m map[string]any) {
		m["spec"].(map[string]any)["compute"].(map[string]any)["env"] = map[string]string{"DB_PASSWORD": secret}
	}), withToken(plain)))
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources/app", nil, withToken(plain)))
	e.must(t, http.StatusUnauthorized, e.do(t, "DELETE", "/v1/resources/app", nil, withToken("strata_nope0001_0123456789abcdef0123")))
	cc := e.dialTenant(t, e.serveGRPC(t))
	if _, err := globalv1.NewResourceServiceClient(cc).DeleteResource(bearer(t.Context(), plain), &globalv1.ResourceRef{Name: "app"}); err != nil {
		t.Fatal(err)
	}
	if _, err := globalv1.NewResourceServiceClient(cc).ListResources(bearer(t.Context(), plain), &globalv1.ListResourcesRequest{}); err != nil {
		t.Fatal(err)
	}

	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{secret, plain, strings.Split(plain, "_")[2], e.admin} {
		if strings.Contains(string(raw), leak) {
			t.Errorf("the audit log holds %q:\n%s", leak, raw)
		}
	}
	var got []audit.Entry
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	for sc.Scan() {
		var en audit.Entry
		if err := json.Unmarshal(sc.Bytes(), &en); err != nil {
			t.Fatal(err)
		}
		if en.Path != "/v1/flavors" { // the fixtures
			got = append(got, en)
		}
	}
	member := audit.Who{TokenID: tok.ID, TokenName: "ci", Tenant: "team-a", Role: "member"}
	want := []audit.Entry{
		{Method: "POST", Path: "/v1/resources", Status: 201, Who: member},
		{Method: "DELETE", Path: "/v1/resources/app", Status: 401},
		{Method: "gRPC", Path: "/strata.global.v1.ResourceService/DeleteResource", Code: "OK", Object: "app", Who: member},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d entries %+v; want %d", len(got), got, len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Method != w.Method || g.Path != w.Path || g.Status != w.Status || g.Code != w.Code || g.Object != w.Object || g.Who != w.Who || g.Tier != "global:global-1" || g.Time.IsZero() {
			t.Errorf("entry %d: got %+v; want %+v in tier global:global-1 with a time", i, g, w)
		}
	}
}

// readAuditEntries are the entries of the audit file at path.
func readAuditEntries(t *testing.T, path string) (string, []audit.Entry) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []audit.Entry
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	for sc.Scan() {
		var en audit.Entry
		if err := json.Unmarshal(sc.Bytes(), &en); err != nil {
			t.Fatal(err)
		}
		out = append(out, en)
	}
	return string(raw), out
}

// TestAuditedReads: a read that returns, or tries to, secret values, a
// replica's logs or another tenant's objects is recorded with who made
// it, the tenant and why, over REST and gRPC, refused ones included; the
// other reads are not; no secret value reaches the file.
func TestAuditedReads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	log, err := audit.Open(path, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envConfig{audit: log})
	e.fixtures(t, nil)
	const value = "Audit-Canary-5e1f"
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources?tenant=acme", computeBody("app")))
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/secrets?tenant=acme", `{"name":"db","data":{"password":"`+value+`"}}`))
	member, _, err := e.svc.Tokens().New(t.Context(), "acme", api.RoleMember, "acme-ci")
	if err != nil {
		t.Fatal(err)
	}
	viewer := e.token(t, "acme", api.RoleViewer)
	other := e.token(t, "team-a", api.RoleMember)

	// The reads to record, in order, and those not to.
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/secrets/db?tenant=acme&reveal=true", nil))
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/secrets?reveal=true", nil, withToken(member)))
	e.must(t, http.StatusForbidden, e.do(t, "GET", "/v1/secrets/db?reveal=true", nil, withToken(viewer)))
	e.must(t, http.StatusNotFound, e.do(t, "GET", "/v1/secrets/db?tenant=acme", nil, withToken(other)))
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources?tenant=acme", nil))
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/tenants/acme/quota", nil))
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/events?object=resource/acme/app", nil))
	logs := e.do(t, "GET", "/v1/resources/app/logs", nil, withToken(member))
	cc := e.dialTenant(t, e.serveGRPC(t))
	if _, err := globalv1.NewResourceServiceClient(cc).GetResource(bearer(t.Context(), e.admin), &globalv1.ResourceRef{Tenant: "acme", Name: "app"}); err != nil {
		t.Fatal(err)
	}
	// Not recorded: a tenant's reads of its own, keys without values,
	// what is shared.
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/secrets/db", nil, withToken(viewer)))
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources/app", nil, withToken(member)))
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources", nil))
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/status", nil, withToken(member)))
	if _, err := globalv1.NewResourceServiceClient(cc).ListResources(bearer(t.Context(), member), &globalv1.ListResourcesRequest{}); err != nil {
		t.Fatal(err)
	}

	raw, entries := readAuditEntries(t, path)
	for _, leak := range []string{value, member, viewer, e.admin} {
		if strings.Contains(raw, leak) {
			t.Errorf("the audit log holds %q:\n%s", leak, raw)
		}
	}
	var reads []audit.Entry
	for _, en := range entries {
		if len(en.Reads) > 0 {
			reads = append(reads, en)
		} else if en.Method == "GET" || en.Method == "gRPC" && !audit.MutatingRPC(en.Path) {
			t.Errorf("a read recorded without a reason: %+v", en)
		}
		if en.Method == "POST" && en.Path == "/v1/secrets" && en.Tenant != "acme" {
			t.Errorf("the secret's create: got tenant %q; want acme", en.Tenant)
		}
	}
	adminWho := func(en audit.Entry) bool { return en.Who.Tenant == DefaultTenant && en.Who.Role == "admin" }
	want := []struct {
		method, path string
		status       int
		code         string
		reads        []string
		who          func(audit.Entry) bool
	}{
		{"GET", "/v1/secrets/db", 200, "", []string{audit.ReadOtherTenant, audit.ReadSecretValues}, adminWho},
		{"GET", "/v1/secrets", 200, "", []string{audit.ReadSecretValues}, func(en audit.Entry) bool { return en.Who.TokenName == "acme-ci" && en.Who.Role == "member" }},
		{"GET", "/v1/secrets/db", 403, "", []string{audit.ReadSecretValues}, func(en audit.Entry) bool { return en.Who.Role == "viewer" }},
		{"GET", "/v1/secrets/db", 404, "", []string{audit.ReadOtherTenant}, func(en audit.Entry) bool { return en.Who.Tenant == "team-a" }},
		{"GET", "/v1/resources", 200, "", []string{audit.ReadOtherTenant}, adminWho},
		{"GET", "/v1/tenants/acme/quota", 200, "", []string{audit.ReadOtherTenant}, adminWho},
		{"GET", "/v1/events", 200, "", []string{audit.ReadOtherTenant}, adminWho},
		{"GET", "/v1/resources/app/logs", logs.code, "", []string{audit.ReadLogs}, func(en audit.Entry) bool { return en.Who.TokenName == "acme-ci" }},
		{"gRPC", "/strata.global.v1.ResourceService/GetResource", 0, "OK", []string{audit.ReadOtherTenant}, adminWho},
	}
	if len(reads) != len(want) {
		t.Fatalf("got %d recorded reads %+v; want %d", len(reads), reads, len(want))
	}
	for i, w := range want {
		g := reads[i]
		if g.Method != w.method || g.Path != w.path || g.Status != w.status || g.Code != w.code || !slices.Equal(g.Reads, w.reads) || g.Tenant != "acme" || !w.who(g) {
			t.Errorf("read %d: got %+v; want %s %s %d%s reading %v of tenant acme", i, g, w.method, w.path, w.status, w.code, w.reads)
		}
	}
}
