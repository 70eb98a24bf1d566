package api

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stratahq/strata/internal/api"
)

// resolveEnv is a global API with regions eu and us and a resource "db"
// of the default tenant scheduled in both: in eu a ready replica (db-1,
// its address in its status), one that is not ready (db-2) and a ready one
// known by its network address only (db-3); in us one ready replica. db
// serves the named port pg (5432/tcp) and an unnamed 9187. Tenant acme
// has a resource "secret" with a ready replica in eu.
func resolveEnv(t *testing.T) *testEnv {
	t.Helper()
	e := newEnv(t, envConfig{})
	eu, us := newFakeRegion("eu", "n1"), newFakeRegion("us", "n2")
	e.fixtures(t, map[string]string{"eu": eu.serve(t, e.pki), "us": us.serve(t, e.pki)})
	db := decodeAs[api.Resource](t, e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", computeBody("db", func(m map[string]any) {
		m["schedule"] = map[string]any{"regions": []any{map[string]any{"name": "eu"}, map[string]any{"name": "us"}}}
		m["spec"].(map[string]any)["compute"].(map[string]any)["ports"] = []any{
			map[string]any{"name": "pg", "containerPort": 5432},
			map[string]any{"containerPort": 9187},
		}
	}))))
	secret := decodeAs[api.Resource](t, e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources?tenant=acme", computeBody("secret", func(m map[string]any) {
		m["schedule"] = map[string]any{"regions": []any{map[string]any{"name": "eu"}}}
	}))))
	replica := func(r api.Resource, id, region string, phase api.Phase, status, network string) api.Replica {
		rep := api.Replica{
			Assignment: api.Assignment{ID: id, Tenant: r.Tenant, Resource: r.Name, ResourceUID: r.UID, Spec: r.Spec},
			Region:     region, Phase: phase,
		}
		if status != "" {
			rep.Status = &api.AssignmentStatus{Address: status}
		}
		if network != "" {
			rep.Network = &api.NetworkAttachment{Network: "default", Address: network}
		}
		return rep
	}
	eu.mu.Lock()
	eu.replicas = []api.Replica{
		replica(db, "db-1", "eu", api.PhaseReady, "10.88.1.5", "10.88.1.99"),
		replica(db, "db-2", "eu", api.PhaseProvision, "10.88.1.6", ""),
		replica(db, "db-3", "eu", api.PhaseReady, "", "10.88.1.7"),
		replica(secret, "secret-1", "eu", api.PhaseReady, "10.88.1.8", ""),
	}
	eu.mu.Unlock()
	us.mu.Lock()
	us.replicas = []api.Replica{replica(db, "db-9", "us", api.PhaseReady, "10.88.2.5", "")}
	us.mu.Unlock()
	return e
}

// resolve asks GET /v1/resolve with the given query (key, value pairs).
func (e *testEnv) resolve(t *testing.T, code int, kv ...string) *response {
	t.Helper()
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	return e.must(t, code, e.do(t, "GET", "/v1/resolve?"+q.Encode(), nil))
}

// data are the records' data, in order.
func data(recs []ResolvedRecord) string {
	var out []string
	for _, r := range recs {
		out = append(out, r.Data)
	}
	return strings.Join(out, ",")
}

func TestResolve(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: needs an embedded etcd")
	}
	e := resolveEnv(t)

	t.Run("ready replicas answered, an unready one not", func(t *testing.T) {
		got := decodeAs[Resolution](t, e.resolve(t, http.StatusOK, "name", "db.default.eu.strata.internal"))
		if got.Name != "db.default.eu.strata.internal." || got.Type != "A" || got.Rcode != "NOERROR" {
			t.Fatalf("got %+v; want NOERROR A for db.default.eu.strata.internal.", got)
		}
		// db-1 by its status address (not its network's), db-3 by its
		// network's; db-2 is not ready.
		if d := data(got.Answers); d != "10.88.1.5,10.88.1.7" {
			t.Fatalf("answers %s; want 10.88.1.5,10.88.1.7", d)
		}
		if a := got.Answers[0]; a.Name != got.Name || a.Type != "A" || a.TTL != 5 {
			t.Fatalf("answer %+v; want an A of the name asked with TTL 5", a)
		}
	})

	t.Run("an unready replica by name is NODATA", func(t *testing.T) {
		got := decodeAs[Resolution](t, e.resolve(t, http.StatusOK, "name", "db-2.db.default.eu.strata.internal."))
		if got.Rcode != "NOERROR" || len(got.Answers) != 0 {
			t.Fatalf("got %+v; want NOERROR without answers", got)
		}
		got = decodeAs[Resolution](t, e.resolve(t, http.StatusOK, "name", "db-1.db.default.eu.strata.internal."))
		if data(got.Answers) != "10.88.1.5" {
			t.Fatalf("got %+v; want db-1's address", got)
		}
	})

	t.Run("SRV with the named port", func(t *testing.T) {
		got := decodeAs[Resolution](t, e.resolve(t, http.StatusOK, "name", "_pg._tcp.db.default.eu.strata.internal", "type", "srv"))
		want := "0 10 5432 db-1.db.default.eu.strata.internal.,0 10 5432 db-3.db.default.eu.strata.internal."
		if got.Type != "SRV" || got.Rcode != "NOERROR" || data(got.Answers) != want {
			t.Fatalf("got %+v; want SRV answers %s", got, want)
		}
		if data(got.Additional) != "10.88.1.5,10.88.1.7" || got.Additional[0].Name != "db-1.db.default.eu.strata.internal." {
			t.Fatalf("additional %+v; want the targets' addresses", got.Additional)
		}
	})

	t.Run("bare name completed by the search path", func(t *testing.T) {
		got := decodeAs[Resolution](t, e.resolve(t, http.StatusOK, "name", "db", "region", "us"))
		if got.Name != "db.default.us.strata.internal." || data(got.Answers) != "10.88.2.5" {
			t.Fatalf("got %+v; want db.default.us.strata.internal. answering 10.88.2.5", got)
		}
		// Without a region: the region-less name, answered from the
		// resource's first scheduled region.
		got = decodeAs[Resolution](t, e.resolve(t, http.StatusOK, "name", "db"))
		if got.Name != "db.default.strata.internal." || data(got.Answers) != "10.88.1.5,10.88.1.7" {
			t.Fatalf("got %+v; want db.default.strata.internal. answering eu's", got)
		}
		// A region-less name asked as a node of us answers us first.
		got = decodeAs[Resolution](t, e.resolve(t, http.StatusOK, "name", "db.default.strata.internal", "region", "us"))
		if data(got.Answers) != "10.88.2.5" {
			t.Fatalf("got %+v; want us's replica", got)
		}
		got = decodeAs[Resolution](t, e.resolve(t, http.StatusOK, "name", "_pg._tcp.db", "type", "SRV", "region", "us"))
		if data(got.Answers) != "0 10 5432 db-9.db.default.us.strata.internal." {
			t.Fatalf("got %+v; want us's SRV", got)
		}
	})

	t.Run("missing and other tenants' names are NXDOMAIN", func(t *testing.T) {
		for _, name := range []string{"secret.acme.eu.strata.internal", "nothing", "secret", "a.b.c.d.e.f.strata.internal"} {
			got := decodeAs[Resolution](t, e.resolve(t, http.StatusOK, "name", name))
			if got.Rcode != "NXDOMAIN" || len(got.Answers) != 0 {
				t.Errorf("%s: got %+v; want NXDOMAIN", name, got)
			}
		}
		// An admin naming the tenant sees its names.
		got := decodeAs[Resolution](t, e.resolve(t, http.StatusOK, "name", "secret", "tenant", "acme"))
		if got.Name != "secret.acme.strata.internal." || data(got.Answers) != "10.88.1.8" {
			t.Fatalf("got %+v; want acme's secret", got)
		}
		// Another tenant's token: its own names only.
		tok := e.token(t, "acme", api.RoleViewer)
		got = decodeAs[Resolution](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resolve?name=db.default.eu.strata.internal", nil, withToken(tok))))
		if got.Rcode != "NXDOMAIN" {
			t.Fatalf("acme asking default's db: got %+v; want NXDOMAIN", got)
		}
	})

	t.Run("bad input is 400", func(t *testing.T) {
		for _, tt := range []struct {
			query []string
			field string
		}{
			{nil, "name"},
			{[]string{"name", "db", "type", "MX"}, "type"},
			{[]string{"name", "db..default"}, "name"},
			{[]string{"name", "db!"}, "name"},
			{[]string{"name", strings.Repeat("a", 64)}, "name"},
			{[]string{"name", "db", "region", "EU West"}, "region"},
		} {
			r := e.resolve(t, http.StatusBadRequest, tt.query...)
			if !strings.Contains(string(r.body), `"`+tt.field+`"`) {
				t.Errorf("%v: got %s; want an error naming %s", tt.query, r, tt.field)
			}
		}
	})
}
