package serving

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// Timeouts of every HTTP server.
const (
	// DefaultReadTimeout bounds reading one request, headers and body.
	DefaultReadTimeout = 30 * time.Second
	// maxHeaderTimeout bounds reading a request's headers.
	maxHeaderTimeout = 10 * time.Second
	// idleTimeout closes keep-alive connections left unused.
	idleTimeout = 2 * time.Minute
)

// HTTPOptions shape an HTTP server.
type HTTPOptions struct {
	// TLS serves HTTPS (pki.ServingConfig); nil serves plain HTTP, which
	// NewHTTP allows on a loopback listener only, unless Insecure.
	TLS *tls.Config
	// Insecure allows plain HTTP on a listener other machines reach.
	Insecure bool
	// AllowedHosts are the host names requests may name (Host header)
	// besides loopback names and IP addresses.
	AllowedHosts []string
	// AnyHost skips the Host check: for a server of public, read-only
	// numbers (an agent's metrics), which a rebinding page gains
	// nothing from, scraped by whatever name the operator uses.
	AnyHost bool
	// ReadTimeout bounds reading one request, headers and body
	// (default DefaultReadTimeout). net/http lifts it once the body has
	// been read, so a long response (logs, events) is not cut by it.
	ReadTimeout time.Duration
}

// HTTP is an HTTP server bound to its listener.
type HTTP struct {
	Server *http.Server
	l      net.Listener
	// exposed is plain HTTP that other machines reach (insecure mode).
	exposed bool
}

// NewHTTP builds the server for h on l: timeouts on reading requests and
// on idle connections, HTTPS when o.TLS is set, and in front of h the
// checks every Strata HTTP API needs (Guard). It refuses plain HTTP on a
// non-loopback listener unless o.Insecure.
func NewHTTP(l net.Listener, h http.Handler, o HTTPOptions) (*HTTP, error) {
	if err := CheckListener(l, o); err != nil {
		return nil, err
	}
	rt := o.ReadTimeout
	if rt <= 0 {
		rt = DefaultReadTimeout
	}
	srv := &http.Server{
		Handler:           guard(h, o.AllowedHosts, o.AnyHost),
		ReadHeaderTimeout: min(rt, maxHeaderTimeout),
		ReadTimeout:       rt,
		IdleTimeout:       idleTimeout,
		TLSConfig:         o.TLS,
	}
	return &HTTP{Server: srv, l: l, exposed: o.TLS == nil && !isLoopback(l.Addr())}, nil
}

// CheckListener refuses plain HTTP on a listener other machines reach,
// unless o.Insecure: NewHTTP's check, for tiers to make before they start
// anything else.
func CheckListener(l net.Listener, o HTTPOptions) error {
	if o.TLS == nil && !o.Insecure && !isLoopback(l.Addr()) {
		return fmt.Errorf("plain HTTP on %s, which other machines reach: configure api.tls.cert and api.tls.key (or bind it to loopback; insecure: true only for a test cluster)", l.Addr())
	}
	return nil
}

// Serve serves until Shutdown; it returns nil on a clean stop.
func (h *HTTP) Serve() error {
	var err error
	if h.Server.TLSConfig != nil {
		// The certificate comes from TLSConfig.GetCertificate.
		err = h.Server.ServeTLS(h.l, "", "")
	} else {
		err = h.Server.Serve(h.l)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Scheme is "https" or "http".
func (h *HTTP) Scheme() string {
	if h.Server.TLSConfig != nil {
		return "https"
	}
	return "http"
}

// Warnings are the WarnInsecure lines this server calls for.
func (h *HTTP) Warnings() []string {
	if h.exposed {
		return []string{InsecureHTTP(h.l.Addr().String())}
	}
	return nil
}

// Guard puts in front of h what every Strata HTTP API checks before its
// handlers run:
//   - the Host header names this server: an IP address, a loopback
//     name, or one of allowedHosts (a page on another name that resolves
//     to the server, DNS rebinding, is refused);
//   - a request that changes something comes from the same origin (a
//     browser's Sec-Fetch-Site or Origin): a page elsewhere cannot make
//     a browser send it (cross-site request forgery);
//   - a request body is JSON (application/json): the one content type a
//     cross-site form cannot send without a preflight.
func Guard(h http.Handler, allowedHosts []string) http.Handler {
	return guard(h, allowedHosts, false)
}

func guard(h http.Handler, allowedHosts []string, anyHost bool) http.Handler {
	allowed := make([]string, len(allowedHosts))
	for i, a := range allowedHosts {
		allowed[i] = strings.ToLower(a)
	}
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, fmt.Errorf("a cross-origin %s is refused (Origin %q, Sec-Fetch-Site %q): %w", r.Method, r.Header.Get("Origin"), r.Header.Get("Sec-Fetch-Site"), api.ErrForbidden))
	}))
	inner := cop.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hasBody(r) {
			if err := jsonBody(r); err != nil {
				writeError(w, err)
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !anyHost && !hostAllowed(r.Host, allowed) {
			writeError(w, fmt.Errorf("host %q is not a name this server answers to (api.allowedHosts): %w", r.Host, api.ErrForbidden))
			return
		}
		inner.ServeHTTP(w, r)
	})
}

func hostAllowed(hostport string, allowed []string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if host == "" {
		return false
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return true // no name was resolved: nothing to rebind
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	return slices.Contains(allowed, host)
}

func hasBody(r *http.Request) bool {
	return r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
}

func jsonBody(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return fmt.Errorf("content type %q is not application/json: %w", ct, api.ErrUnsupportedMedia)
	}
	return nil
}

func writeError(w http.ResponseWriter, err error) {
	code, body := api.HTTPError(err)
	b, _ := json.Marshal(body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

// isLoopback reports whether a listener's address is loopback only.
func isLoopback(a net.Addr) bool {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.IsLoopback()
	}
	ap, err := netip.ParseAddrPort(a.String())
	return err == nil && ap.Addr().Unmap().IsLoopback()
}
