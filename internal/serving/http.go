package serving

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/stratahq/strata/internal/rest"
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

// maxHeaderBytes is what net/http reads of a request's head before it
// answers 431 itself, in plain text. It is well above rest.MaxHeaderBytes,
// so that a head between the two reaches rest.Guard, which answers 431 in
// JSON; only one larger still gets net/http's answer.
const maxHeaderBytes = 1 << 20

// HTTPOptions shape an HTTP server.
type HTTPOptions struct {
	// TLS serves HTTPS (pki.ServingConfig); nil serves plain HTTP, which
	// NewHTTP allows on a loopback listener only, unless Insecure.
	TLS *tls.Config
	// Insecure allows plain HTTP on a listener other machines reach.
	Insecure bool
	// AllowedHosts and AnyHost shape the Host check (rest.GuardOptions).
	AllowedHosts []string
	AnyHost      bool
	// ReadTimeout bounds reading one request, headers and body
	// (default DefaultReadTimeout). net/http lifts it once the body has
	// been read, so a long response (logs, events) is not cut by it.
	ReadTimeout time.Duration
	// Log receives net/http's own lines (a TLS handshake that failed, a
	// connection refused by Accept) as structured WARN records
	// (component=http); without it net/http prints plain lines on
	// stderr, which break a JSON log.
	Log *slog.Logger
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
// checks every Strata HTTP server needs (rest.Guard). It refuses plain
// HTTP on a non-loopback listener unless o.Insecure.
//
// net/http answers some requests itself, in plain text, before any
// handler runs, and has no hook to change that: a head over
// maxHeaderBytes (431), a request line or header field that does not
// parse, no or a malformed Host (400), another protocol version (505),
// a transfer coding it does not know (501), an Expect other than
// 100-continue (417, no body), plain HTTP sent to HTTPS (400). Every
// refusal it leaves to handlers is JSON (docs/api.md, Errors).
func NewHTTP(l net.Listener, h http.Handler, o HTTPOptions) (*HTTP, error) {
	if err := CheckListener(l, o); err != nil {
		return nil, err
	}
	rt := o.ReadTimeout
	if rt <= 0 {
		rt = DefaultReadTimeout
	}
	srv := &http.Server{
		Handler:           rest.Guard(h, rest.GuardOptions{AllowedHosts: o.AllowedHosts, AnyHost: o.AnyHost}),
		MaxHeaderBytes:    maxHeaderBytes,
		ReadHeaderTimeout: min(rt, maxHeaderTimeout),
		ReadTimeout:       rt,
		IdleTimeout:       idleTimeout,
		TLSConfig:         o.TLS,
	}
	if o.Log != nil {
		srv.ErrorLog = slog.NewLogLogger(o.Log.With("component", "http").Handler(), slog.LevelWarn)
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
func (h *HTTP) Scheme() string { return HTTPOptions{TLS: h.Server.TLSConfig}.Scheme() }

// Scheme is what a server built with o serves: "https" or "http".
func (o HTTPOptions) Scheme() string {
	if o.TLS != nil {
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

// isLoopback reports whether a listener's address is loopback only.
func isLoopback(a net.Addr) bool {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.IsLoopback()
	}
	ap, err := netip.ParseAddrPort(a.String())
	return err == nil && ap.Addr().Unmap().IsLoopback()
}
