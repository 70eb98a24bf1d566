package rest

import (
	"fmt"
	"mime"
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
//     a browser send it (cross-site request forgery);
//   - a request body is JSON (application/json): the one content type a
//     cross-site form cannot send without a preflight.
func Guard(h http.Handler, o GuardOptions) http.Handler {
	allowed := make([]string, len(o.AllowedHosts))
	for i, a := range o.AllowedHosts {
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

// writeError answers a request refused before any API saw it; the
// refusals are all client errors, nothing to log.
func writeError(w http.ResponseWriter, err error) {
	code, body := api.HTTPError(err)
	WriteJSON(w, code, body)
}
