package api

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/rest"
)

func TestRoles(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.fixtures(t, map[string]string{"eu": "127.0.0.1:1"})
	tokens := map[api.Role]string{api.RoleAdmin: e.admin}
	for _, role := range []api.Role{api.RoleOperator, api.RoleMember, api.RoleViewer, api.RoleInfra} {
		tokens[role] = e.token(t, DefaultTenant, role)
	}
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources?tenant=acme", computeBody("acme-app")))

	type call struct {
		method, path string
		body         any
	}
	var (
		readResources  = call{"GET", "/v1/resources", nil}
		writeResources = call{"POST", "/v1/resources", computeBody("app")}
		readFlavors    = call{"GET", "/v1/flavors", nil}
		writeFlavors   = call{"POST", "/v1/flavors", `{"name":"tiny","kind":"container","spec":{"vcpus":0.1,"memoryMiB":64}}`}
		readRegions    = call{"GET", "/v1/regions", nil}
		writeRegions   = call{"POST", "/v1/regions", `{"name":"us","endpoint":"127.0.0.1:2"}`}
		status         = call{"GET", "/v1/status", nil}
		otherTenant    = call{"GET", "/v1/resources/acme-app?tenant=acme", nil}
		readNodes      = call{"GET", "/v1/nodes", nil}
		cordon         = call{"POST", "/v1/regions/eu/nodes/n1/cordon", nil}
		drain          = call{"POST", "/v1/regions/eu/nodes/n1/drain", nil}
		deleteNode     = call{"DELETE", "/v1/regions/eu/nodes/n1", nil}
		events         = call{"GET", "/v1/events", nil}
		tenants        = call{"GET", "/v1/tenants", nil}
		resolve        = call{"GET", "/v1/resolve?name=app", nil}
		resolveOther   = call{"GET", "/v1/resolve?name=acme-app&tenant=acme", nil}
	)
	tests := []struct {
		role api.Role
		call call
		want int
	}{
		{api.RoleViewer, readResources, 200},
		{api.RoleViewer, writeResources, 403},
		{api.RoleViewer, readFlavors, 200},
		{api.RoleViewer, readRegions, 403},
		{api.RoleViewer, status, 200},
		{api.RoleMember, writeResources, 201},
		{api.RoleMember, writeFlavors, 403},
		{api.RoleMember, readRegions, 403},
		{api.RoleMember, otherTenant, 404},
		{api.RoleOperator, readRegions, 200},
		{api.RoleOperator, writeRegions, 403},
		{api.RoleOperator, otherTenant, 404},
		// Nodes are the infrastructure's: not every tenant's operator's.
		{api.RoleOperator, readNodes, 403},
		{api.RoleOperator, cordon, 403},
		{api.RoleOperator, drain, 403},
		{api.RoleOperator, deleteNode, 403},
		{api.RoleOperator, tenants, 403},
		{api.RoleInfra, readNodes, 200},
		{api.RoleInfra, readRegions, 200},
		{api.RoleInfra, readResources, 403},
		{api.RoleInfra, writeResources, 403},
		{api.RoleInfra, writeRegions, 403},
		{api.RoleInfra, tenants, 403},
		// Every role reads events: its tenant's, or with infra every one
		// (the region is unreachable here: 200 with it listed).
		{api.RoleViewer, events, 200},
		{api.RoleInfra, events, 200},
		{api.RoleAdmin, writeFlavors, 201},
		{api.RoleAdmin, writeRegions, 201},
		{api.RoleAdmin, otherTenant, 200},
		// Resolving reads the tenant's resources; naming another tenant
		// is an admin's only.
		{api.RoleViewer, resolve, 200},
		{api.RoleInfra, resolve, 403},
		{api.RoleMember, resolveOther, 403},
		{api.RoleAdmin, resolveOther, 200},
	}
	for _, tt := range tests {
		t.Run(string(tt.role)+" "+tt.call.method+" "+tt.call.path, func(t *testing.T) {
			r := e.do(t, tt.call.method, tt.call.path, tt.call.body, withToken(tokens[tt.role]))
			if r.code != tt.want {
				t.Fatalf("got %s; want %d", r, tt.want)
			}
		})
	}
	// The status overview tells where regions are only to who may read
	// regions.
	for role, where := range map[api.Role]bool{api.RoleViewer: false, api.RoleMember: false, api.RoleOperator: true, api.RoleInfra: true, api.RoleAdmin: true} {
		st := decodeAs[Status](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/status", nil, withToken(tokens[role]))))
		if len(st.Regions) == 0 {
			t.Fatalf("%s: got no regions in the status; want eu at least", role)
		}
		for _, r := range st.Regions {
			if got := r.Endpoint != ""; got != where {
				t.Errorf("%s: got endpoint %q of %s in the status; want shown %v", role, r.Endpoint, r.Name, where)
			}
		}
	}
}

func TestTokens(t *testing.T) {
	e := newEnv(t, envConfig{})
	ctx := waitFor(t)

	t.Run("bootstrap token works and is idempotent", func(t *testing.T) {
		plain, err := GenerateToken()
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := e.svc.Tokens().EnsureBootstrap(ctx, plain); err != nil {
				t.Fatalf("got %v; want the bootstrap token ensured", err)
			}
		}
		id, err := e.svc.Tokens().Authenticate(ctx, plain)
		if err != nil || id.Role != api.RoleAdmin || id.Tenant != DefaultTenant {
			t.Fatalf("got %+v, %v; want an admin of tenant default", id, err)
		}
		tokenID, _, _ := parseToken(plain)
		other := tokenPrefix + tokenID + "_" + "0123456789abcdef0123456789abcdef"
		if err := e.svc.Tokens().EnsureBootstrap(ctx, other); !errors.Is(err, api.ErrConflict) {
			t.Fatalf("got %v; want a conflict for another secret under the same id", err)
		}
		if err := e.svc.Tokens().EnsureBootstrap(ctx, "not-a-token"); !errors.Is(err, api.ErrUnauthenticated) {
			t.Fatalf("got %v; want a malformed token refused", err)
		}
	})

	t.Run("expired token", func(t *testing.T) {
		plain, tok, err := e.svc.Tokens().New(ctx, "acme", api.RoleMember, "short-lived")
		if err != nil {
			t.Fatal(err)
		}
		tok.ExpiresAt = time.Now().Add(-time.Minute)
		rev, err := e.st.Tokens.Put(ctx, tok.ID, &tok)
		if err != nil {
			t.Fatal(err)
		}
		e.svc.tokens.wrote.note(rev)
		r := e.must(t, http.StatusUnauthorized, e.do(t, "GET", "/v1/resources", nil, withToken(plain)))
		if got := decodeAs[api.ErrorBody](t, r).Error.Message; got == "" || r.header.Get("WWW-Authenticate") == "" {
			t.Fatalf("got %s with WWW-Authenticate %q; want an expiry message and the header", r, r.header.Get("WWW-Authenticate"))
		}
	})

	t.Run("bad roles and tenants are refused", func(t *testing.T) {
		if _, _, err := e.svc.Tokens().New(ctx, "acme", "root", "x"); !errors.Is(err, api.ErrInvalid) {
			t.Fatalf("got %v; want an invalid role refused", err)
		}
		if _, _, err := e.svc.Tokens().New(ctx, "Not A Tenant", api.RoleViewer, "x"); !errors.Is(err, api.ErrInvalid) {
			t.Fatalf("got %v; want an invalid tenant refused", err)
		}
	})

	t.Run("the identity reaches the service", func(t *testing.T) {
		plain, tok, err := e.svc.Tokens().New(ctx, "acme", api.RoleOperator, "ops")
		if err != nil {
			t.Fatal(err)
		}
		id, err := e.svc.Tokens().Authenticate(ctx, plain)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := IdentityFrom(WithIdentity(ctx, id))
		if want := (Identity{Tenant: "acme", Role: api.RoleOperator, TokenID: tok.ID, TokenName: "ops"}); !ok || got != want {
			t.Fatalf("got %+v; want %+v", got, want)
		}
		if _, ok := IdentityFrom(ctx); ok {
			t.Fatal("got an identity from a bare context; want none")
		}
		if _, err := e.svc.Flavors().Get(ctx, "small"); !errors.Is(err, api.ErrUnauthenticated) {
			t.Fatalf("got %v; want a call without identity refused", err)
		}
	})
}

func TestFlavorsAndRegions(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.fixtures(t, map[string]string{"eu": "127.0.0.1:1", "us": "127.0.0.1:2"})
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", computeBody("app", func(m map[string]any) {
		m["overrides"] = map[string]any{"us": map[string]any{"flavor": "small"}}
	})))
	small := decodeAs[api.Flavor](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/flavors/small", nil)))

	tests := []struct {
		name     string
		method   string
		path     string
		body     any
		wantCode int
		check    func(t *testing.T, r *response)
	}{
		{"list flavors", "GET", "/v1/flavors", nil, 200, func(t *testing.T, r *response) {
			if l := decodeAs[rest.List[api.Flavor]](t, r); len(l.Items) != 3 || l.Items[0].Name != "lbf" {
				t.Fatalf("got %+v; want lbf, small, vmx", l.Items)
			}
		}},
		{"duplicate flavor", "POST", "/v1/flavors", `{"name":"small","kind":"container","spec":{"vcpus":1,"memoryMiB":1}}`, 409, nil},
		{"invalid flavor", "POST", "/v1/flavors", `{"name":"zero","kind":"container","spec":{"vcpus":0,"memoryMiB":1}}`, 400, nil},
		{"update flavor spec", "PUT", "/v1/flavors/small", `{"kind":"container","spec":{"vcpus":1,"memoryMiB":512}}`, 200, func(t *testing.T, r *response) {
			if f := decodeAs[api.Flavor](t, r); f.Spec.MemoryMiB != 512 || f.ResourceVersion == small.ResourceVersion {
				t.Fatalf("got %+v; want 512 MiB at a new version", f)
			}
		}},
		{"update flavor kind", "PUT", "/v1/flavors/small", `{"kind":"vm","spec":{"vcpus":1,"memoryMiB":512}}`, 400, nil},
		{"update flavor at a stale version", "PUT", "/v1/flavors/small", map[string]any{
			"kind": "container", "spec": map[string]any{"vcpus": 2, "memoryMiB": 512}, "resourceVersion": small.ResourceVersion,
		}, 409, nil},
		{"delete flavor in use by an override", "DELETE", "/v1/flavors/small", nil, 409, nil},
		{"delete unused flavor", "DELETE", "/v1/flavors/vmx", nil, 200, nil},
		{"delete unknown flavor", "DELETE", "/v1/flavors/vmx", nil, 404, nil},
		{"delete region in use", "DELETE", "/v1/regions/us", nil, 409, func(t *testing.T, r *response) {
			if msg := decodeAs[api.ErrorBody](t, r).Error.Message; msg != `region "us" is named by resource "app" of tenant "default": conflict` {
				t.Fatalf("got %q; want it to name the resource", msg)
			}
		}},
		{"re-register a region", "POST", "/v1/regions", `{"name":"eu","endpoint":"127.0.0.1:3"}`, 200, nil},
		{"invalid region", "POST", "/v1/regions", `{"name":"eu","endpoint":"nowhere"}`, 400, nil},
		{"delete unused region", "DELETE", "/v1/regions/eu", nil, 200, nil},
		{"get deleted region", "GET", "/v1/regions/eu", nil, 404, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(t, tt.method, tt.path, tt.body)
			if r.code != tt.wantCode {
				t.Fatalf("got %s; want %d", r, tt.wantCode)
			}
			if tt.check != nil {
				tt.check(t, r)
			}
		})
	}

	t.Run("regions show the monitor's status", func(t *testing.T) {
		if _, err := e.st.RegionStatus.Put(t.Context(), "us", &api.RegionStatus{Health: api.HealthUp, Nodes: 4}); err != nil {
			t.Fatal(err)
		}
		one := decodeAs[api.Region](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/regions/us", nil)))
		if one.Status == nil || one.Status.Health != api.HealthUp {
			t.Fatalf("got %+v; want us Up", one.Status)
		}
		poll(t, "status in the list", func() error {
			l := decodeAs[rest.List[api.Region]](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/regions", nil)))
			if len(l.Items) != 1 || l.Items[0].Status == nil || l.Items[0].Status.Nodes != 4 {
				return errors.New("got no status for us yet")
			}
			return nil
		})
	})
}
