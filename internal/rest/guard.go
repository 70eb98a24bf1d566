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
		if !o.AnyHost && !hostAllowed(r.Host, allowed) {
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

// writeError answers a request refused before any API saw it; the
// refusals are all client errors, nothing to log.
func writeError(w http.ResponseWriter, err error) {
	code, body := api.HTTPError(err)
	WriteJSON(w, code, body)
}
