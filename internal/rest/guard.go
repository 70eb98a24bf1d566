package rest

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/stratahq/strata/internal/api"
)

// Bounds of a request's head, which Guard answers in JSON. The server
// must read more than MaxHeaderBytes (serving.NewHTTP sets
// http.Server.MaxHeaderBytes above it): a head net/http refuses itself
// is answered by net/http, in plain text, before any handler runs.
const (
	// MaxHeaderBytes bounds a request's head, its request line and
	// header fields (431 beyond). Strata's clients send a few hundred
	// bytes; no cookies, no forwarded chains of any length.
	MaxHeaderBytes = 64 << 10
	// MaxURIBytes bounds a request's target, path and query (414
	// beyond). The longest a client needs is a selector and a continue
	// token.
	MaxURIBytes = 8 << 10
)

// GuardOptions shape Guard.
type GuardOptions struct {
	// AllowedHosts are the host names requests may name (Host header)
	// besides loopback names and IP addresses.
	AllowedHosts []string
	// AnyHost skips the Host check: for a server of public, read-only
	// numbers (an agent's metrics), which a rebinding page gains
	// nothing from, scraped by whatever name the operator uses.
	AnyHost bool
}

// Guard puts in front of h what every Strata HTTP server checks before
// its handlers run (serving.NewHTTP applies it):
//   - the request's head is within MaxHeaderBytes and its target within
//     MaxURIBytes;
//   - the Host header names this server: an IP address, a loopback
//     name, or one of o.AllowedHosts (a page on another name that
//     resolves to the server, DNS rebinding, is refused);
//   - a request that changes something comes from the same origin (a
//     browser's Sec-Fetch-Site or Origin): a page elsewhere cannot make
//     a browser send it (cross-site request forgery).
//
// Both come before authentication, and so for every handler behind
// Guard (the consoles, the metrics), whether or not it takes a token:
// they judge which page made the browser send the request, not who the
// caller is, and a request they refuse must not reach the token check
// at all (a page on a rebound name is same-origin with itself and could
// otherwise try tokens through the victim's browser). What a body is,
// JSON or not, is the business of the API that reads it, once the
// caller is known (API, checkMediaType).
func Guard(h http.Handler, o GuardOptions) http.Handler {
	allowed := make([]string, len(o.AllowedHosts))
	for i, a := range o.AllowedHosts {
		allowed[i] = strings.ToLower(a)
	}
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, fmt.Errorf("a cross-origin %s is refused (Origin %q, Sec-Fetch-Site %q): %w", r.Method, r.Header.Get("Origin"), r.Header.Get("Sec-Fetch-Site"), api.ErrForbidden))
	}))
	inner := cop.Handler(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := checkHead(r); err != nil {
			writeError(w, err)
			return
		}
		if !o.AnyHost && !hostAllowed(r.Host, allowed) {
			writeError(w, fmt.Errorf("host %q is not a name this server answers to (api.allowedHosts): %w", r.Host, api.ErrForbidden))
			return
		}
		inner.ServeHTTP(w, r)
	})
}

// checkHead refuses a request whose target or head is over its bound.
func checkHead(r *http.Request) error {
	if n := len(r.RequestURI); n > MaxURIBytes {
		return fmt.Errorf("the request target is %d bytes; at most %d: %w", n, MaxURIBytes, api.ErrURITooLong)
	}
	if n := headSize(r); n > MaxHeaderBytes {
		return fmt.Errorf("the request's header fields are about %d bytes; at most %d: %w", n, MaxHeaderBytes, api.ErrHeaderTooLarge)
	}
	return nil
}

// headSize is about the size of r's head as sent: its request line and
// header fields, each with its separators (HTTP/2 sends them compressed,
// and is counted as if it had sent them as HTTP/1.1 does).
func headSize(r *http.Request) int {
	n := len(r.Method) + 1 + len(r.RequestURI) + 1 + len(r.Proto) + 2
	n += len("Host: ") + len(r.Host) + 2 // net/http moves it out of Header
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + 2 + len(v) + 2
		}
	}
	return n + 2
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

// writeError answers a request refused before any API saw it; the
// refusals are all client errors, nothing to log.
func writeError(w http.ResponseWriter, err error) {
	code, body := api.HTTPError(err)
	WriteJSON(w, code, body)
}
