package console

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestOverview(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("/console/", Handler(Options{}))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	get := func(path string) (*http.Response, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := get("/console/")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /console/: %d", resp.StatusCode)
	}
	for _, want := range []string{`data-page="overview"`, `static/global.js`, `id="regions"`, `id="login"`} {
		if !strings.Contains(body, want) {
			t.Errorf("no %q in the overview", want)
		}
	}
	if !strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Errorf("no CSP")
	}
	// Its own script and the region console's shared files.
	for _, f := range []string{"global.js", "common.js", "console.css", "logo.svg"} {
		if resp, body := get("/console/static/" + f); resp.StatusCode != http.StatusOK || body == "" {
			t.Errorf("GET /console/static/%s: %d", f, resp.StatusCode)
		}
	}
	// The resource and tokens pages, each with its shell and the dialog
	// its actions confirm in.
	for _, tc := range []struct{ path, page, want string }{
		{"/console/resource?tenant=acme&name=web", "resource", `id="revisions"`},
		{"/console/tokens", "tokens", `data-action="create-token"`},
		{"/console/alerts", "alerts", `id="alertrules"`},
		{"/console/policies", "policies", `id="policies"`},
		{"/console/configs", "configs", `id="secrets"`},
	} {
		resp, body := get(tc.path)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", tc.path, resp.StatusCode)
		}
		for _, want := range []string{`data-page="` + tc.page + `"`, tc.want, `id="dialog"`, `stratactl tokens create`} {
			if !strings.Contains(body, want) {
				t.Errorf("GET %s: no %q", tc.path, want)
			}
		}
	}
	// The resource page carries the DNS name forms, as package dns spells
	// them, for its script to fill in.
	if _, body := get("/console/resource?tenant=acme&name=web"); !strings.Contains(body, `id="names"`) ||
		!strings.Contains(body, `data-service="{resource}.{tenant}.strata.internal"`) ||
		!strings.Contains(body, `data-regional="{resource}.{tenant}.{region}.strata.internal"`) ||
		!strings.Contains(body, `data-replica="{replica}.{resource}.{tenant}.{region}.strata.internal"`) ||
		!strings.Contains(body, `data-srv="_{port}._{proto}.{resource}.{tenant}.strata.internal"`) ||
		!strings.Contains(body, `data-regional-srv="_{port}._{proto}.{resource}.{tenant}.{region}.strata.internal"`) {
		t.Errorf("the resource page has no names card with the name forms:\n%s", body)
	}
	// The configs page never asks for a secret's values.
	if _, js := get("/console/static/global.js"); !strings.Contains(js, "api('/v1/secrets')") || strings.Contains(js, "reveal") {
		t.Errorf("global.js: want /v1/secrets listed without reveal")
	}
	if resp, _ := get("/console/nodes"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /console/nodes: %d; want 404", resp.StatusCode)
	}
	if resp, _ := get("/console"); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /console (redirected): %d", resp.StatusCode)
	}
}
