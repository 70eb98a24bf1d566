package api

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/audit"
	globalv1 "github.com/stratahq/strata/proto/global/v1"
)

// TestAuditLog: every REST and gRPC call that changes something is
// recorded with who made it (the token's id, name, tenant and role),
// what, and how it ended, refused ones included; reads are not; no
// token or value of a request body reaches the file.
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
