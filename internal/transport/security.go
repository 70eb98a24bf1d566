package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/pki"
)

// ErrNoTLS is returned by NewSecurity for a tier with neither TLS nor
// insecure mode configured.
var ErrNoTLS = errors.New("tls.ca, tls.cert and tls.key are required: every gRPC link is mutual TLS (set insecure: true only for a test cluster on one machine)")

// mode is how a Security secures links.
type mode int

const (
	modeTLS      mode = iota // mutual TLS, identities from certificates
	modeInsecure             // plaintext between loopback addresses
	modeLocal                // unix sockets, the peer's uid checked
)

// Security is how one process secures its gRPC links: mutual TLS with
// its certificate (the identity in its common name), or, only where a
// tier is configured `insecure: true`, plaintext limited to loopback
// addresses: such a server refuses every peer that is not on the same
// machine, and trusts the ones that are as any identity. There is no
// mode in which a remote peer is served without a certificate.
type Security struct {
	mode   mode
	server *tls.Config
	client *tls.Config
	self   pki.Identity
}

// NewSecurity builds a tier's security from its configuration: mutual TLS
// when tls is set, else insecure mode when insecure is set, else
// ErrNoTLS.
func NewSecurity(c config.TLS, insecure bool) (*Security, error) {
	if !c.Enabled() {
		if !insecure {
			return nil, ErrNoTLS
		}
		return &Security{mode: modeInsecure}, nil
	}
	files := pki.Files{CA: c.CA, Cert: c.Cert, Key: c.Key}
	self, err := pki.CertIdentity(c.Cert)
	if err != nil {
		return nil, fmt.Errorf("tls.cert: %w", err)
	}
	srv, err := pki.ServerConfig(files)
	if err != nil {
		return nil, err
	}
	cli, err := pki.ClientConfig(files)
	if err != nil {
		return nil, err
	}
	return &Security{mode: modeTLS, server: srv, client: cli, self: self}, nil
}

// TokenClient is the security of a client that holds no Strata
// certificate (a tenant's program calling ResourceService with a bearer
// token): it verifies the server against caFile and presents nothing.
func TokenClient(caFile string) (*Security, error) {
	pool, err := pki.LoadPool(caFile)
	if err != nil {
		return nil, err
	}
	return &Security{mode: modeTLS, client: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}}, nil
}

// Insecure is the security of a process whose links are plaintext on
// loopback (insecure: true). Tests that are about something else than
// transport security and tools that run beside a test cluster use it.
func Insecure() *Security { return &Security{mode: modeInsecure} }

// Local is the security of a unix socket between two processes of one
// user (provider plugins): no TLS, the server checks the peer's uid
// through the kernel (SO_PEERCRED).
func Local() *Security { return &Security{mode: modeLocal} }

// IsInsecure reports whether links are plaintext on loopback.
func (s *Security) IsInsecure() bool { return s.mode == modeInsecure }

// Self is the identity in this process's certificate (zero without TLS).
func (s *Security) Self() pki.Identity { return s.self }

// Expect checks that this process's certificate carries want, so that a
// tier started with another identity's files fails at start rather than
// at its peers' first refusal. Without TLS there is nothing to check.
func (s *Security) Expect(want pki.Identity) error {
	if s.mode != modeTLS || s.self == want {
		return nil
	}
	return fmt.Errorf("tls.cert names %s; this process is %s", s.self, want)
}

// CheckListener refuses, in insecure mode, a listener that is not on a
// loopback address: a plaintext server must not be reachable from other
// machines.
func (s *Security) CheckListener(l net.Listener) error {
	if s.mode != modeInsecure || isLoopback(l.Addr()) {
		return nil
	}
	return fmt.Errorf("insecure mode serves plaintext gRPC on loopback addresses only; %s is not one (configure tls.ca/cert/key)", l.Addr())
}

// isLoopback reports whether a is a loopback TCP address.
func isLoopback(a net.Addr) bool {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	default:
		ap, err := netip.ParseAddrPort(a.String())
		return err == nil && ap.Addr().Unmap().IsLoopback()
	}
}

// loopbackOnly is the dialer of insecure mode: it refuses to connect to
// anything but a loopback address, after name resolution.
func loopbackOnly(ctx context.Context, addr string) (net.Conn, error) {
	d := net.Dialer{Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil || !ap.Addr().Unmap().IsLoopback() {
			return fmt.Errorf("insecure mode dials loopback addresses only; %s is not one (configure tls.ca/cert/key)", address)
		}
		return nil
	}}
	return d.DialContext(ctx, "tcp", addr)
}
