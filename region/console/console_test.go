package console

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// testToken is the region token of newServer's consoles, which openStream
// presents.
const testToken = "test-region-token"

func newServer(t *testing.T, o Options) *httptest.Server {
	t.Helper()
	if o.Token == "" {
		o.Token = testToken
	}
	mux := http.NewServeMux()
	mux.Handle("/console/", Handler(o))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestPages(t *testing.T) {
	srv := newServer(t, Options{Region: "eu-west"})
	for path, page := range map[string]string{"/console/": "nodes", "/console/resources": "resources", "/console/events": "events"} {
		resp, body := get(t, srv.URL+path)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		for _, want := range []string{`data-page="` + page + `"`, `data-region="eu-west"`, `static/region.js`, `id="login"`, `id="dialog"`} {
			if !strings.Contains(body, want) {
				t.Errorf("GET %s: no %q in the page", path, want)
			}
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("GET %s: CSP %q", path, csp)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no nosniff", path)
		}
	}
	// The resources page carries the DNS name forms, as package dns
	// spells them, for its script to fill in.
	if _, body := get(t, srv.URL+"/console/resources"); !strings.Contains(body, `id="names-forms"`) ||
		!strings.Contains(body, `data-regional="{resource}.{tenant}.{region}.strata.internal"`) ||
		!strings.Contains(body, `data-replica="{replica}.{resource}.{tenant}.{region}.strata.internal"`) ||
		!strings.Contains(body, `data-regional-srv="_{port}._{proto}.{resource}.{tenant}.{region}.strata.internal"`) {
		t.Errorf("the resources page has no name forms:\n%s", body)
	}
	// The region name is text, never markup.
	srv = newServer(t, Options{Region: `<script>x</script>`})
	if _, body := get(t, srv.URL+"/console/"); strings.Contains(body, "<script>x") {
		t.Errorf("the region name is not escaped")
	}
	for _, path := range []string{"/console/nope", "/console/static/nope.js", "/console/a/b"} {
		if resp, _ := get(t, srv.URL+path); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d; want 404", path, resp.StatusCode)
		}
	}
}

func TestStatic(t *testing.T) {
	srv := newServer(t, Options{Region: "r"})
	for path, ctype := range map[string]string{
		"console.css": "text/css", "common.js": "javascript", "region.js": "javascript", "logo.svg": "image/svg+xml",
	} {
		resp, body := get(t, srv.URL+"/console/static/"+path)
		if resp.StatusCode != http.StatusOK || body == "" {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		if ct := resp.Header.Get("Content-Type"); !strings.Contains(ct, ctype) {
			t.Errorf("GET %s: Content-Type %q; want %s", path, ct, ctype)
		}
		etag := resp.Header.Get("ETag")
		if etag == "" {
			t.Fatalf("GET %s: no ETag", path)
		}
		if resp, _ := get(t, srv.URL+"/console/static/"+path, "If-None-Match", etag); resp.StatusCode != http.StatusNotModified {
			t.Errorf("GET %s with its ETag: %d; want 304", path, resp.StatusCode)
		}
	}
}

// TestStreamMounted checks that the region console serves the shared
// event stream (webconsole tests the stream itself).
func TestStreamMounted(t *testing.T) {
	srv := newServer(t, Options{Region: "r"})
	if resp, body := get(t, srv.URL+"/console/events/stream", "Authorization", "Bearer "+testToken); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, `"code":"Unavailable"`) {
		t.Errorf("stream without an event log: %d %s; want 503", resp.StatusCode, body)
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/console/events/ticket", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"ticket"`) {
		t.Errorf("ticket: %d %s; want 200 and a ticket", resp.StatusCode, b)
	}
}
