// Package transporttest gives tests real mutual TLS: a throw-away CA
// whose identities are written into the test's temporary directory, and
// servers and connections on loopback built by the transport package
// itself, interceptor and all.
package transporttest

import (
	"log/slog"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/internal/transport"
)

// PKI is a test CA.
type PKI struct {
	CA  *pki.CA
	Dir string
}

// NewPKI makes a CA whose files live until the test ends.
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	ca, err := pki.NewCA("strata test CA")
	if err != nil {
		t.Fatal(err)
	}
	return &PKI{CA: ca, Dir: t.TempDir()}
}

// TLS issues id a certificate for loopback (127.0.0.1, localhost) and
// returns the configuration naming its files.
func (p *PKI) TLS(t testing.TB, id pki.Identity) config.TLS {
	t.Helper()
	file := strings.NewReplacer(":", "-", "/", "-").Replace(id.String())
	f, err := p.CA.WriteIdentity(p.Dir, file, id.String(), []string{"127.0.0.1", "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	return config.TLS{CA: f.CA, Cert: f.Cert, Key: f.Key}
}

// Security issues id a certificate and returns its transport security.
func (p *PKI) Security(t testing.TB, id pki.Identity) *transport.Security {
	t.Helper()
	sec, err := transport.NewSecurity(p.TLS(t, id), false)
	if err != nil {
		t.Fatal(err)
	}
	return sec
}

// Serve serves on a loopback port until the test ends: register adds the
// services, policy says who may call them. It returns the address.
func Serve(t testing.TB, sec *transport.Security, policy transport.Policy, log *slog.Logger, register func(*grpc.Server)) string {
	t.Helper()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	srv, err := transport.NewServer(sec, policy, log)
	if err != nil {
		t.Fatal(err)
	}
	register(srv)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// Dial connects to addr, expecting server there, until the test ends.
func Dial(t testing.TB, addr string, sec *transport.Security, server transport.Server, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	cc, err := transport.Dial(addr, sec, server, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}
