package hostpolicy

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestParsePorts(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		in1, no []int
		bad     bool
	}{
		{in: "", want: "none", no: []int{1, 80, 65535}},
		{in: "30000-32767", want: "30000-32767", in1: []int{30000, 31000, 32767}, no: []int{29999, 32768}},
		{in: "9000, 8000-8010", want: "8000-8010,9000", in1: []int{8000, 8010, 9000}, no: []int{8011, 8999, 9001}},
		{in: "0", bad: true},
		{in: "70000", bad: true},
		{in: "10-5", bad: true},
		{in: "a-b", bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			r, err := ParsePorts(tt.in)
			if tt.bad {
				if err == nil {
					t.Fatalf("ParsePorts(%q): got %v; want an error", tt.in, r)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParsePorts(%q): %v", tt.in, err)
			}
			if got := r.String(); got != tt.want {
				t.Errorf("String: got %q; want %q", got, tt.want)
			}
			for _, p := range tt.in1 {
				if !r.Contains(p) {
					t.Errorf("Contains(%d): got false; want true", p)
				}
			}
			for _, p := range tt.no {
				if r.Contains(p) {
					t.Errorf("Contains(%d): got true; want false", p)
				}
			}
		})
	}
}

func TestPortPolicy(t *testing.T) {
	p := PortPolicy{Allowed: MustParsePorts("80,8000-9000"), Reserved: MustParsePorts("8080")}
	tests := []struct {
		port int
		want string // "" allowed, else a word of the error
	}{
		{8001, ""},
		{7999, "outside"},
		{8080, "reserved"},
		{80, "privileged"},
	}
	for _, tt := range tests {
		err := p.Check(tt.port)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("Check(%d): got %v; want nil", tt.port, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("Check(%d): got %v; want an error saying %q", tt.port, err, tt.want)
		}
	}
	p.Privileged = true
	if err := p.Check(80); err != nil {
		t.Errorf("Check(80) with privileged ports allowed: got %v; want nil", err)
	}
}

// TestPortPolicyPorts: the set of ports Check passes, written out, for
// the host firewall.
func TestPortPolicyPorts(t *testing.T) {
	tests := []struct {
		p    PortPolicy
		want string
	}{
		{PortPolicy{Allowed: MustParsePorts("80,8000-9000"), Reserved: MustParsePorts("8080")}, "8000-8079,8081-9000"},
		{PortPolicy{Allowed: MustParsePorts("80,8000-9000"), Reserved: MustParsePorts("7000-8000,9000"), Privileged: true}, "80,8001-8999"},
		{PortPolicy{Allowed: MustParsePorts("1-2000"), Reserved: MustParsePorts("1500")}, "1024-1499,1501-2000"},
		{PortPolicy{Allowed: MustParsePorts("30000-32767"), Reserved: MustParsePorts("1-65535")}, "none"},
		{PortPolicy{}, "none"},
	}
	for _, tt := range tests {
		got := tt.p.Ports()
		if got.String() != tt.want {
			t.Errorf("%+v: got %s; want %s", tt.p, got, tt.want)
		}
		for port := 1; port <= 65535; port++ {
			if got.Contains(port) != (tt.p.Check(port) == nil) {
				t.Fatalf("%+v: port %d in Ports %v, Check says %v", tt.p, port, got.Contains(port), tt.p.Check(port))
			}
		}
	}
}

// TestSecurityDirsResolve replays the archive/kernel/disk attacks on the
// path check: host files outside the operator's directories, .., links
// out of a directory, denied directories inside an allowed one.
func TestSecurityDirsResolve(t *testing.T) {
	root := t.TempDir()
	images := filepath.Join(root, "images")
	volumes := filepath.Join(images, "volumes")
	outside := filepath.Join(root, "secret")
	for _, d := range []string{images, volumes, outside, filepath.Join(images, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path string) {
		if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(images, "ok.tar"))
	write(filepath.Join(images, "sub", "nested.tar"))
	write(filepath.Join(outside, "shadow"))
	write(filepath.Join(volumes, "other-replica.qcow2"))
	if err := os.Symlink(filepath.Join(outside, "shadow"), filepath.Join(images, "escape.tar")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(images, "ok.tar"), filepath.Join(images, "inside.tar")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(images, "dirlink")); err != nil {
		t.Fatal(err)
	}
	// An allowed directory reached through a link still works.
	if err := os.Symlink(images, filepath.Join(root, "images-link")); err != nil {
		t.Fatal(err)
	}
	d, err := NewDirs([]string{filepath.Join(root, "images-link")}, []string{volumes})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path string
		want       string // the resolved path; "" refused
	}{
		{"a file in the directory", filepath.Join(images, "ok.tar"), filepath.Join(images, "ok.tar")},
		{"through the linked directory", filepath.Join(root, "images-link", "ok.tar"), filepath.Join(images, "ok.tar")},
		{"file URL", "file://" + filepath.Join(images, "sub", "nested.tar"), filepath.Join(images, "sub", "nested.tar")},
		{"a link that stays inside", filepath.Join(images, "inside.tar"), filepath.Join(images, "ok.tar")},
		{"/etc/shadow", "/etc/shadow", ""},
		{"/etc/passwd", "/etc/passwd", ""},
		{"dot dot", images + "/../secret/shadow", ""},
		{"dot dot that stays inside", images + "/sub/../ok.tar", ""},
		{"relative", "../../etc/shadow", ""},
		{"a link escaping the directory", filepath.Join(images, "escape.tar"), ""},
		{"a directory link escaping", filepath.Join(images, "dirlink", "shadow"), ""},
		{"another replica's volume", filepath.Join(volumes, "other-replica.qcow2"), ""},
		{"the directory itself", images, ""},
		{"a subdirectory", filepath.Join(images, "sub"), ""},
		{"missing", filepath.Join(images, "missing.tar"), ""},
		{"newline", filepath.Join(images, "ok.tar\n"), ""},
		{"device", "/dev/zero", ""},
		{"a name in the directory", "ok.tar", filepath.Join(images, "ok.tar")},
		{"a name in a subdirectory", "sub/nested.tar", filepath.Join(images, "sub", "nested.tar")},
		{"a name with a dot element", "./sub/./nested.tar", filepath.Join(images, "sub", "nested.tar")},
		{"a name that is a link inside", "inside.tar", filepath.Join(images, "ok.tar")},
		{"a name that is a link escaping", "escape.tar", ""},
		{"a name through a directory link escaping", "dirlink/shadow", ""},
		{"a name of another replica's volume", "volumes/other-replica.qcow2", ""},
		{"a name with dot dot", "sub/../ok.tar", ""},
		{"a missing name", "missing.tar", ""},
		{"a name that is a subdirectory", "sub", ""},
		{"the directory itself by name", ".", ""},
		{"a file URL of a name", "file://ok.tar", ""},
		{"a name with a newline", "ok.tar\n", ""},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := d.Resolve(tt.path)
			if tt.want == "" {
				if err == nil || !errors.Is(err, ErrNotAllowed) {
					t.Fatalf("Resolve(%q): got %q, %v; want ErrNotAllowed", tt.path, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Resolve(%q): got %q, %v; want %q", tt.path, got, err, tt.want)
			}
		})
	}
	var none Dirs
	if _, err := none.Resolve(filepath.Join(images, "ok.tar")); !errors.Is(err, ErrNotAllowed) {
		t.Errorf("Resolve without directories: got %v; want ErrNotAllowed", err)
	}
	if _, err := none.Resolve("ok.tar"); !errors.Is(err, ErrNotAllowed) {
		t.Errorf("Resolve of a name without directories: got %v; want ErrNotAllowed", err)
	}

	// A name is looked up in each directory in turn: the first that
	// holds it wins.
	first := filepath.Join(root, "first")
	if err := os.MkdirAll(first, 0o755); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(first, "nested.tar"))
	several, err := NewDirs([]string{filepath.Join(root, "empty"), images, first}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"ok.tar":         filepath.Join(images, "ok.tar"),
		"nested.tar":     filepath.Join(first, "nested.tar"),
		"sub/nested.tar": filepath.Join(images, "sub", "nested.tar"),
	} {
		if got, err := several.Resolve(name); err != nil || got != want {
			t.Errorf("Resolve(%q) over several directories: got %q, %v; want %q", name, got, err, want)
		}
	}
	if _, err := several.Resolve("missing.tar"); !errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), filepath.Join(first, "missing.tar")) {
		t.Errorf("Resolve of a missing name: got %v; want ErrNotAllowed naming each place looked at", err)
	}
}

func TestInternalAddresses(t *testing.T) {
	tests := []struct {
		addr     string
		internal bool
	}{
		{"127.0.0.1", true},
		{"127.1.2.3", true},
		{"::1", true},
		{"::ffff:127.0.0.1", true},
		{"169.254.169.254", true},
		{"fe80::1", true},
		{"10.1.2.3", true},
		{"172.16.0.1", true},
		{"192.168.1.1", true},
		{"fd00::1", true},
		{"100.100.100.200", true},
		{"0.0.0.0", true},
		{"::", true},
		{"224.0.0.1", true},
		{"ff02::1", true},
		{"255.255.255.255", true},
		{"64:ff9b::a00:1", true},
		{"192.0.2.1", false}, // documentation, but not ours to refuse
		{"8.8.8.8", false},
		{"2001:4860:4860::8888", false},
	}
	n, err := ParseNetworks([]string{"10.9.0.0/16"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		err := n.Check(netip.MustParseAddr(tt.addr))
		if got := err != nil; got != tt.internal {
			t.Errorf("Check(%s): got %v; want refused=%v", tt.addr, err, tt.internal)
		}
	}
	if err := n.Check(netip.MustParseAddr("10.9.1.1")); err != nil {
		t.Errorf("Check(10.9.1.1) in an allowed network: got %v; want nil", err)
	}
}

func TestURLPatterns(t *testing.T) {
	f, err := NewFetcher(FetcherConfig{Allow: []string{"https://images.example.com/strata", "http://*.mirror.example.net:8080/"}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		url string
		ok  bool
	}{
		{"https://images.example.com/strata/busybox.tar", true},
		{"https://images.example.com/strata", true},
		{"https://IMAGES.example.com/strata/a.tar", true},
		{"https://images.example.com:443/strata/a.tar", true},
		{"https://images.example.com/strata2/a.tar", false},
		{"https://images.example.com/other/a.tar", false},
		{"https://images.example.com/strata/../other/a.tar", false},
		{"https://images.example.com/strata/%2e%2e/other/a.tar", false},
		{"http://images.example.com/strata/a.tar", false},
		{"https://images.example.com:8443/strata/a.tar", false},
		{"https://user:pw@images.example.com/strata/a.tar", false},
		{"https://images.example.com.evil.net/strata/a.tar", false},
		{"http://a.mirror.example.net:8080/x.tar", true},
		{"http://mirror.example.net:8080/x.tar", false},
		{"http://a.mirror.example.net/x.tar", false},
		{"file:///etc/shadow", false},
		{"gopher://images.example.com/strata/a.tar", false},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Allowed(u); (err == nil) != tt.ok {
			t.Errorf("Allowed(%s): got %v; want allowed=%v", tt.url, err, tt.ok)
		}
	}
	for _, bad := range []string{"ftp://x/", "https:///x", "https://u@x/", "https://x/?q=1", "x"} {
		if _, err := NewFetcher(FetcherConfig{Allow: []string{bad}}); err == nil {
			t.Errorf("NewFetcher(allow %q): got nil; want an error", bad)
		}
	}
}

// server is a test HTTP server on loopback that counts the connections
// it accepted.
type server struct {
	*httptest.Server
	conns atomic.Int64
}

func newServer(t *testing.T, h http.Handler) *server {
	s := &server{}
	s.Server = httptest.NewUnstartedServer(h)
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// TestSecurityFetch replays the SSRF attacks on the fetcher: a URL to
// loopback (directly, by name, by redirect), a URL outside the
// allowlist, an oversized archive and a server too slow to finish.
func TestSecurityFetch(t *testing.T) {
	payload := bytes.Repeat([]byte("a"), 1000)
	mux := http.NewServeMux()
	mux.HandleFunc("/images/ok.tar", func(w http.ResponseWriter, r *http.Request) { w.Write(payload) })
	mux.HandleFunc("/images/big.tar", func(w http.ResponseWriter, r *http.Request) { w.Write(bytes.Repeat(payload, 10)) })
	mux.HandleFunc("/images/chunked.tar", func(w http.ResponseWriter, r *http.Request) {
		// No Content-Length: only the reader's cap stops it.
		for range 10 {
			w.Write(payload)
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/images/slow.tar", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	mux.HandleFunc("/v1/nodes", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("internal")) })
	srv := newServer(t, mux)
	// The redirector is allowed by the operator's lists; where it points
	// is not.
	redirector := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, srv.URL+"/v1/nodes", http.StatusFound)
	}))
	port := func(s *server) string { return strings.TrimPrefix(s.URL, "http://127.0.0.1:") }

	// The image server is on loopback: the operator must say so.
	allowed := FetcherConfig{
		Allow:         []string{srv.URL + "/images", redirector.URL + "/", "http://localhost:" + port(srv) + "/images"},
		AllowNetworks: []string{"127.0.0.1/32"},
		MaxBytes:      5000,
		Timeout:       time.Second,
	}
	tests := []struct {
		name  string
		cfg   FetcherConfig
		url   string
		ok    bool
		dials bool // whether the server may see a connection
	}{
		{"allowed", allowed, srv.URL + "/images/ok.tar", true, true},
		{"outside the allowlist", allowed, srv.URL + "/v1/nodes", false, false},
		{"loopback not allowed", FetcherConfig{Allow: allowed.Allow}, srv.URL + "/images/ok.tar", false, false},
		{"loopback by name", FetcherConfig{Allow: allowed.Allow}, "http://localhost:" + port(srv) + "/images/ok.tar", false, false},
		{"redirect outside the allowlist", allowed, redirector.URL + "/go", false, true},
		{"oversized", allowed, srv.URL + "/images/big.tar", false, true},
		{"oversized without length", allowed, srv.URL + "/images/chunked.tar", false, true},
		{"slow", allowed, srv.URL + "/images/slow.tar", false, true},
		{"file", allowed, "file:///etc/shadow", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := NewFetcher(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			before := srv.conns.Load() + redirector.conns.Load()
			var buf bytes.Buffer
			start := time.Now()
			n, err := f.Fetch(context.Background(), tt.url, &buf)
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("Fetch took %s; want it cut by the 1s timeout", took)
			}
			if tt.ok {
				if err != nil || n != int64(len(payload)) {
					t.Fatalf("Fetch: got %d bytes, %v; want %d bytes", n, err, len(payload))
				}
				return
			}
			if !errors.Is(err, ErrNotAllowed) {
				t.Fatalf("Fetch: got %d bytes, %v; want ErrNotAllowed", n, err)
			}
			if strings.Contains(buf.String(), "internal") {
				t.Errorf("Fetch wrote the internal service's answer")
			}
			if dialed := srv.conns.Load() + redirector.conns.Load() - before; !tt.dials && dialed != 0 {
				t.Errorf("the server saw %d connections; want none (refused before connecting)", dialed)
			}
		})
	}
}

// TestNetworksCheckHost: a URL's host that is plainly internal (an
// address literal, localhost) is refused before anything is dialled,
// unless the operator allows its network; another name is left to the
// dial.
func TestNetworksCheckHost(t *testing.T) {
	none, _ := ParseNetworks(nil)
	loop, err := ParseNetworks([]string{"127.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		host                string
		refused, refusedLoo bool
	}{
		{"127.0.0.1", true, false},
		{"::1", true, true},
		{"::ffff:127.0.0.1", true, false},
		{"localhost", true, false},
		{"LocalHost.", true, false},
		{"api.localhost", true, false},
		{"169.254.169.254", true, true},
		{"fe80::1%eth0", true, true},
		{"10.90.0.5", true, true},
		{"0.0.0.0", true, true},
		{"8.8.8.8", false, false},
		{"hooks.example.com", false, false},
		{"localhost.example.com", false, false},
	}
	for _, tt := range tests {
		if err := none.CheckHost(tt.host); (err != nil) != tt.refused || (err != nil && !errors.Is(err, ErrNotAllowed)) {
			t.Errorf("CheckHost(%q) without networks: got %v; want refused=%v", tt.host, err, tt.refused)
		}
		if err := loop.CheckHost(tt.host); (err != nil) != tt.refusedLoo {
			t.Errorf("CheckHost(%q) with 127.0.0.0/8 allowed: got %v; want refused=%v", tt.host, err, tt.refusedLoo)
		}
	}
	if _, err := ParseNetworks([]string{"10.0.0.0/33"}); err == nil {
		t.Error("ParseNetworks(10.0.0.0/33): got nil; want an error")
	}
}

// TestNetworksTransport: a connection through the transport is checked
// when it is dialled, with the address the name resolved to: localhost
// (a name, resolved at the dial) reaches a loopback server only when
// loopback is allowed, and is refused before any connection otherwise.
func TestNetworksTransport(t *testing.T) {
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	byName := "http://localhost:" + port + "/"
	none, _ := ParseNetworks(nil)
	loop, _ := ParseNetworks([]string{"127.0.0.0/8", "::1/128"})
	get := func(n Networks, u string) error {
		c := &http.Client{Transport: n.Transport(), Timeout: 10 * time.Second}
		resp, err := c.Get(u)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	for _, u := range []string{byName, srv.URL} {
		if err := get(none, u); !errors.Is(err, ErrNotAllowed) {
			t.Errorf("GET %s without networks: got %v; want ErrNotAllowed", u, err)
		}
	}
	if n := srv.conns.Load(); n != 0 {
		t.Fatalf("the server accepted %d connections; want none", n)
	}
	if err := get(loop, byName); err != nil {
		t.Fatalf("GET %s with loopback allowed: %v", byName, err)
	}
}
