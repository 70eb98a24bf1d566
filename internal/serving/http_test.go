package serving

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/internal/rest"
)

// serve runs NewHTTP(h, o) on a loopback port until the test ends.
func serve(t *testing.T, h http.Handler, o HTTPOptions) (addr string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewHTTP(lis, h, o)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	t.Cleanup(func() {
		_ = srv.Server.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return lis.Addr().String()
}

// TestSecuritySlowBodyCut sends a request whose body trickles in, a byte
// at a time, and checks that the server cuts the connection once its read
// timeout has passed.
func TestSecuritySlowBodyCut(t *testing.T) {
	const timeout = 500 * time.Millisecond
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}), HTTPOptions{ReadTimeout: timeout})
	// Before the connection: the server's clock cannot start earlier.
	start := time.Now()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/nodes/n1/cordon HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
	// Trickle until a write fails or the server answers or closes;
	// a reader notices the close.
	closed := make(chan time.Time, 1)
	go func() {
		_, _ = io.Copy(io.Discard, conn)
		closed <- time.Now()
	}()
	deadline := time.After(20 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case at := <-closed:
			if took := at.Sub(start); took < timeout {
				t.Fatalf("connection closed after %s; want no earlier than the read timeout %s", took, timeout)
			}
			return
		case <-deadline:
			t.Fatalf("a body trickling for 20s is still being read; want it cut after %s", timeout)
		case <-tick.C:
			if _, err := conn.Write([]byte("x")); err != nil {
				select {
				case <-closed:
				case <-time.After(5 * time.Second):
				}
				return
			}
		}
	}
}

// TestStreamOutlivesReadTimeout checks that a response streaming to a
// request without a body (logs, events) is not cut by the read timeout.
func TestStreamOutlivesReadTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range 10 {
			if r.Context().Err() != nil {
				return
			}
			fmt.Fprintf(w, "line %d\n", i)
			_ = http.NewResponseController(w).Flush()
			time.Sleep(timeout / 3)
		}
	}), HTTPOptions{ReadTimeout: timeout})
	resp, err := http.Get("http://" + addr + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	n := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		n++
	}
	if n != 10 {
		t.Fatalf("got %d lines over %s; want all 10 (the read timeout is %s)", n, 10*timeout/3, timeout)
	}
}

// TestSecurityGuard checks the requests every HTTP API refuses before its
// handlers run.
func TestSecurityGuard(t *testing.T) {
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}), HTTPOptions{AllowedHosts: []string{"Strata.Example.net"}})
	tests := []struct {
		name   string
		method string
		host   string
		body   string
		header map[string]string
		want   int
	}{
		{"IP address", "GET", "127.0.0.1", "", nil, 204},
		{"IP address and port", "GET", "127.0.0.1:8080", "", nil, 204},
		{"IPv6 address", "GET", "[::1]:8080", "", nil, 204},
		{"localhost", "GET", "localhost:8080", "", nil, 204},
		{"a .localhost name", "GET", "app.localhost", "", nil, 204},
		{"an allowed name", "GET", "strata.example.net:443", "", nil, 204},
		{"an allowed name, trailing dot", "GET", "strata.example.net.", "", nil, 204},
		{"another name", "GET", "evil.example", "", nil, 403},
		{"a suffix of an allowed name", "GET", "example.net", "", nil, 403},
		{"cross-site POST", "POST", "127.0.0.1", "", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		{"same-site POST", "POST", "127.0.0.1", "", map[string]string{"Sec-Fetch-Site": "same-site"}, 403},
		{"foreign Origin DELETE", "DELETE", "127.0.0.1", "", map[string]string{"Origin": "https://evil.example"}, 403},
		{"same-origin POST", "POST", "127.0.0.1", "", map[string]string{"Sec-Fetch-Site": "same-origin"}, 204},
		{"POST by a tool (no Origin)", "POST", "127.0.0.1", "", nil, 204},
		{"cross-site GET", "GET", "127.0.0.1", "", map[string]string{"Sec-Fetch-Site": "cross-site"}, 204},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			}
			req, err := http.NewRequest(tt.method, "http://"+addr+"/v1/x", body)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = tt.host
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("got %d %s; want %d", resp.StatusCode, raw, tt.want)
			}
		})
	}
}

// TestSecurityEdgeOrder checks in which order a served API refuses a
// request: Host and cross-origin checks first (they judge the page that
// sent it, token or not), then the token, then routing, then the body's
// media type.
func TestSecurityEdgeOrder(t *testing.T) {
	const token = "s3cret"
	a := rest.New(func(ctx context.Context, bearer string) (context.Context, error) {
		if bearer != token {
			return nil, fmt.Errorf("a valid bearer token is required: %w", api.ErrUnauthenticated)
		}
		return ctx, nil
	})
	a.Handle("POST /v1/things", func(r *http.Request) (any, error) {
		var v map[string]any
		return rest.Created(v), rest.Decode(r, &v)
	})
	addr := serve(t, a.Handler(), HTTPOptions{})
	auth := "Bearer " + token
	tests := []struct {
		name     string
		host     string
		path     string
		header   map[string]string
		want     int
		wantCode string // the api.ErrorBody code
	}{
		{"anonymous text/plain", "", "/v1/things", map[string]string{"Content-Type": "text/plain"}, 401, "Unauthenticated"},
		{"anonymous, no route", "", "/v1/nope", map[string]string{"Content-Type": "text/plain"}, 401, "Unauthenticated"},
		{"anonymous on a rebound name", "evil.example", "/v1/things", map[string]string{"Content-Type": "text/plain"}, 403, "Forbidden"},
		{"anonymous cross-site", "", "/v1/things", map[string]string{"Content-Type": "text/plain", "Sec-Fetch-Site": "cross-site"}, 403, "Forbidden"},
		{"cross-site with the token, no Content-Type", "", "/v1/things", map[string]string{"Authorization": auth, "Sec-Fetch-Site": "cross-site"}, 403, "Forbidden"},
		{"foreign Origin with the token", "", "/v1/things", map[string]string{"Authorization": auth, "Origin": "https://evil.example"}, 403, "Forbidden"},
		{"text/plain to no route", "", "/v1/nope", map[string]string{"Authorization": auth, "Content-Type": "text/plain"}, 404, "NotFound"},
		{"text/plain", "", "/v1/things", map[string]string{"Authorization": auth, "Content-Type": "text/plain"}, 415, "UnsupportedMediaType"},
		{"a form", "", "/v1/things", map[string]string{"Authorization": auth, "Content-Type": "multipart/form-data; boundary=x"}, 415, "UnsupportedMediaType"},
		{"latin1", "", "/v1/things", map[string]string{"Authorization": auth, "Content-Type": "application/json; charset=ISO-8859-1"}, 415, "UnsupportedMediaType"},
		{"no Content-Type", "", "/v1/things", map[string]string{"Authorization": auth}, 201, ""},
		{"application/json", "", "/v1/things", map[string]string{"Authorization": auth, "Content-Type": "application/json; charset=UTF-8"}, 201, ""},
		{"same-origin", "", "/v1/things", map[string]string{"Authorization": auth, "Content-Type": "application/json", "Sec-Fetch-Site": "same-origin"}, 201, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest("POST", "http://"+addr+tt.path, strings.NewReader(`{"a":1}`))
			if err != nil {
				t.Fatal(err)
			}
			if tt.host != "" {
				req.Host = tt.host
			}
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("got %d %s; want %d", resp.StatusCode, raw, tt.want)
			}
			var eb api.ErrorBody
			if tt.wantCode != "" && (json.Unmarshal(raw, &eb) != nil || eb.Error.Code != tt.wantCode) {
				t.Errorf("got body %s; want an error body with code %s", raw, tt.wantCode)
			}
		})
	}
}

// rawExchange sends req, as it is, on a new connection to addr and reads
// the answer.
func rawExchange(t *testing.T, addr, req string) (*http.Response, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	// The server may answer and hang up before it has read all of a
	// large request: write beside the read.
	go func() { _, _ = io.WriteString(conn, req) }()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

// TestServerRefusalsAreJSON sends, over raw TCP, requests that the server
// refuses before any handler of the API runs, and checks that every one
// the server can leave to a handler is answered in JSON, and that those
// net/http answers itself (docs/api.md says which) are what the docs say.
func TestServerRefusalsAreJSON(t *testing.T) {
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}), HTTPOptions{})
	get := func(target string, header ...string) string {
		return "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + strings.Join(header, "") + "\r\n"
	}
	pad := func(n int) string { return "X-Pad: " + strings.Repeat("a", n) + "\r\n" }
	var fields []string
	for i := range 2000 {
		fields = append(fields, fmt.Sprintf("X-Field-%04d: %s\r\n", i, strings.Repeat("b", 24)))
	}
	tests := []struct {
		name     string
		req      string
		want     int
		wantCode string // the api.ErrorBody code; "" for a plain-text answer of net/http
	}{
		{"a head within the bound", get("/v1/x", pad(rest.MaxHeaderBytes-200)), 204, ""},
		{"one large header field", get("/v1/x", pad(100<<10)), 431, "HeaderTooLarge"},
		{"many header fields", get("/v1/x", fields...), 431, "HeaderTooLarge"},
		{"a target within the bound", get("/v1/x?q=" + strings.Repeat("c", rest.MaxURIBytes-20)), 204, ""},
		{"a long target", get("/v1/x?q=" + strings.Repeat("c", 10<<10)), 414, "URITooLong"},
		// net/http's own answers, before any handler: plain text.
		{"a head over the server's bound", get("/v1/x", pad(maxHeaderBytes+8<<10)), 431, ""},
		{"a request line that does not parse", "GARBAGE\r\n\r\n", 400, ""},
		{"no Host", "GET /v1/x HTTP/1.1\r\n\r\n", 400, ""},
		{"a header field name that is not one", get("/v1/x", "Bad Name: x\r\n"), 400, ""},
		{"HTTP/2.0 on the HTTP/1 wire", "GET /v1/x HTTP/2.0\r\nHost: 127.0.0.1\r\n\r\n", 505, ""},
		{"an unknown transfer coding", "POST /v1/x HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := rawExchange(t, addr, tt.req)
			if resp.StatusCode != tt.want {
				t.Fatalf("got %d %q; want %d", resp.StatusCode, api.Clip(string(body)), tt.want)
			}
			ct := resp.Header.Get("Content-Type")
			if tt.wantCode == "" {
				if tt.want >= 400 && ct != "text/plain; charset=utf-8" {
					t.Errorf("got Content-Type %q; want net/http's text/plain (docs/api.md lists it as such)", ct)
				}
				return
			}
			var eb api.ErrorBody
			if ct != "application/json" || json.Unmarshal(body, &eb) != nil || eb.Error.Code != tt.wantCode {
				t.Errorf("got %q %s; want a JSON error body with code %s", ct, api.Clip(string(body)), tt.wantCode)
			}
		})
	}
}

// TestHTTP2HeadTooLargeIsJSON checks the header bound over HTTP/2, where
// the header fields arrive compressed and net/http's own 431 is HTML.
func TestHTTP2HeadTooLargeIsJSON(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ca.WriteIdentity(dir, "api", "region:r1", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pki.ServingConfig(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}), HTTPOptions{TLS: cfg})
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	for _, tt := range []struct {
		pad  int
		want int
	}{{1 << 10, 204}, {100 << 10, 431}} {
		req, err := http.NewRequest("GET", "https://"+addr+"/v1/x", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Pad", strings.Repeat("a", tt.pad))
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Fatalf("got %s; want HTTP/2", resp.Proto)
		}
		if resp.StatusCode != tt.want {
			t.Fatalf("header of %d bytes: got %d %q; want %d", tt.pad, resp.StatusCode, api.Clip(string(body)), tt.want)
		}
		var eb api.ErrorBody
		if tt.want == 431 && (resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &eb) != nil || eb.Error.Code != "HeaderTooLarge") {
			t.Errorf("got %q %s; want a JSON error body with code HeaderTooLarge", resp.Header.Get("Content-Type"), body)
		}
	}
}

// otherMachine is a listener on an address other machines reach.
type otherMachine struct{ net.Listener }

func (otherMachine) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 8080} }

func TestSecurityPlainHTTPOffLoopbackRefused(t *testing.T) {
	if err := CheckListener(otherMachine{}, HTTPOptions{}); err == nil || !strings.Contains(err.Error(), "api.tls") {
		t.Errorf("plain HTTP on 10.1.2.3: got %v; want it refused, naming api.tls", err)
	}
	if err := CheckListener(otherMachine{}, HTTPOptions{Insecure: true}); err != nil {
		t.Errorf("plain HTTP on 10.1.2.3 in insecure mode: got %v; want it allowed", err)
	}
	if err := CheckListener(otherMachine{}, HTTPOptions{TLS: &tls.Config{}}); err != nil {
		t.Errorf("HTTPS on 10.1.2.3: got %v; want it allowed", err)
	}
}

// TestHTTPSReloadsCertificate serves HTTPS and renews the certificate in
// place: new connections get the new one without a restart.
func TestHTTPSReloadsCertificate(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ca.WriteIdentity(dir, "api", "region:r1", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pki.ServingConfig(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), HTTPOptions{TLS: cfg})
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	serial := func() string {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Get("https://" + addr + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.TLS.PeerCertificates[0].SerialNumber.String()
	}
	first := serial()
	if _, err := ca.WriteIdentity(dir, "api", "region:r1", []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for serial() == first {
		if time.Now().After(deadline) {
			t.Fatal("still the old certificate 10s after renewal; want the new one")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(dir, "api.pem")); err != nil {
		t.Fatal(err)
	}
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// net/http's own lines (here a client that hung up in the TLS handshake,
// as a load balancer's probe of a paused replica does) are structured
// records of the tier's log, not plain lines that break a JSON log.
func TestHTTPErrorLogIsStructured(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ca.WriteIdentity(dir, "api", "region:r1", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pki.ServingConfig(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	log := slog.New(slog.NewJSONHandler(&out, nil))
	addr := serve(t, http.NotFoundHandler(), HTTPOptions{TLS: cfg, Log: log})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	// Not a TLS client hello: the handshake fails.
	if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(c)
	c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), "TLS handshake error") {
		if time.Now().After(deadline) {
			t.Fatalf("no TLS handshake error in the log within 5s; log: %q", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	line := strings.SplitN(strings.TrimSpace(out.String()), "\n", 2)[0]
	var rec map[string]any
	if err := json.Unmarshal([]byte(line), &rec); err != nil {
		t.Fatalf("log line %q is not JSON: %v", line, err)
	}
	if rec["level"] != "WARN" || rec["component"] != "http" {
		t.Errorf("record %v; want level WARN, component http", rec)
	}
}
