package transport_test

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/internal/transport"
	"github.com/stratahq/strata/internal/transport/transporttest"
)

// The health service stands in for Strata's services: it is small, and a
// request's size is whatever its service name is.
var healthSvc = healthpb.Health_ServiceDesc.ServiceName

func serveHealth(t *testing.T, sec *transport.Security, policy transport.Policy) string {
	t.Helper()
	return transporttest.Serve(t, sec, policy, nil, func(s *grpc.Server) {
		healthpb.RegisterHealthServer(s, health.NewServer())
	})
}

func check(ctx context.Context, cc *grpc.ClientConn, service string) error {
	_, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	return err
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestSecurityNoTLSRefused(t *testing.T) {
	if _, err := transport.NewSecurity(config.TLS{}, false); !errors.Is(err, transport.ErrNoTLS) {
		t.Fatalf("NewSecurity without TLS or insecure: got %v; want ErrNoTLS", err)
	}
	if _, err := transport.NewServer(nil, nil, nil); !errors.Is(err, transport.ErrNoTLS) {
		t.Fatalf("NewServer without security: got %v; want ErrNoTLS", err)
	}
	if _, err := transport.Dial("127.0.0.1:1", nil, transport.AnyServer()); !errors.Is(err, transport.ErrNoTLS) {
		t.Fatalf("Dial without security: got %v; want ErrNoTLS", err)
	}
	if sec, err := transport.NewSecurity(config.TLS{}, true); err != nil || !sec.IsInsecure() {
		t.Fatalf("NewSecurity with insecure: got %v, %v; want insecure mode", sec, err)
	}
}

// TestSecurityPolicy serves one service over mutual TLS and calls it as
// each kind of identity and as nobody.
func TestSecurityPolicy(t *testing.T) {
	ca := transporttest.NewPKI(t)
	srv := pki.Region("r1")
	addr := serveHealth(t, ca.Security(t, srv), transport.Policy{
		healthSvc: {Kinds: []pki.Kind{pki.KindNode}, Region: "r1"},
	})
	anon, err := transport.TokenClient(ca.TLS(t, srv).CA)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		sec     *transport.Security
		want    error
		wantMsg string
	}{
		{"a node of the region", ca.Security(t, pki.Node("r1", "n1")), nil, ""},
		{"a node of another region", ca.Security(t, pki.Node("r2", "n1")), api.ErrForbidden, "node:r2/n1 may not call /grpc.health.v1.Health/Check (it accepts node:r1/<name>)"},
		{"a region", ca.Security(t, pki.Region("r1")), api.ErrForbidden, "region:r1 may not call"},
		{"the global tier", ca.Security(t, pki.Global("g1")), api.ErrForbidden, "global:g1 may not call"},
		{"no certificate", anon, api.ErrUnauthenticated, "no verified client certificate: /grpc.health.v1.Health/Check accepts node:r1/<name>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cc := transporttest.Dial(t, addr, tt.sec, transport.ServerIs(srv))
			err := check(ctx(t), cc, "")
			if tt.want == nil {
				if err != nil {
					t.Fatalf("got %v; want success", err)
				}
				return
			}
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("got %v; want %v saying %q", err, tt.want, tt.wantMsg)
			}
		})
	}

	t.Run("a certificate of another CA", func(t *testing.T) {
		other := transporttest.NewPKI(t)
		// It trusts our CA for the server, but its own certificate is
		// signed by another: the handshake fails.
		f := other.TLS(t, pki.Node("r1", "n1"))
		f.CA = ca.TLS(t, srv).CA
		sec, err := transport.NewSecurity(f, false)
		if err != nil {
			t.Fatal(err)
		}
		cc := transporttest.Dial(t, addr, sec, transport.ServerIs(srv))
		if err := check(ctx(t), cc, ""); !errors.Is(err, api.ErrUnavailable) {
			t.Fatalf("got %v; want the handshake refused (unavailable)", err)
		}
	})
	t.Run("plaintext", func(t *testing.T) {
		cc := transporttest.Dial(t, addr, transport.Insecure(), transport.AnyServer())
		if err := check(ctx(t), cc, ""); !errors.Is(err, api.ErrUnavailable) {
			t.Fatalf("got %v; want no connection (unavailable)", err)
		}
	})
	t.Run("a TLS client that expects nobody in particular", func(t *testing.T) {
		if _, err := transport.Dial(addr, ca.Security(t, pki.Node("r1", "n1")), transport.AnyServer()); err == nil {
			t.Fatal("got a connection; want Dial to refuse a TLS client without an expected server identity")
		}
	})
	t.Run("the server is not who the client expects", func(t *testing.T) {
		cc := transporttest.Dial(t, addr, ca.Security(t, pki.Node("r1", "n1")), transport.ServerIs(pki.Region("r2")))
		err := check(ctx(t), cc, "")
		if err == nil || !strings.Contains(err.Error(), "the server is region:r1; want region:r2") {
			t.Fatalf("got %v; want the client to refuse region:r1", err)
		}
	})
}

func TestSecurityMethodWithoutRuleRefused(t *testing.T) {
	ca := transporttest.NewPKI(t)
	addr := serveHealth(t, ca.Security(t, pki.Region("r1")), transport.Policy{
		"/grpc.health.v1.Health/Watch": {Kinds: []pki.Kind{pki.KindGlobal}},
	})
	cc := transporttest.Dial(t, addr, ca.Security(t, pki.Global("g1")), transport.ServerIs(pki.Region("r1")))
	if err := check(ctx(t), cc, ""); !errors.Is(err, api.ErrForbidden) {
		t.Fatalf("Check, which no rule names: got %v; want forbidden", err)
	}
}

// TestSecurityMessageLimits checks that a request over its method's limit
// is refused, and that a rule may admit larger ones.
func TestSecurityMessageLimits(t *testing.T) {
	ca := transporttest.NewPKI(t)
	srv := pki.Region("r1")
	small := serveHealth(t, ca.Security(t, srv), transport.Policy{healthSvc: {Kinds: []pki.Kind{pki.KindGlobal}}})
	large := serveHealth(t, ca.Security(t, srv), transport.Policy{healthSvc: {Kinds: []pki.Kind{pki.KindGlobal}, MaxRecvBytes: transport.LargeMessageBytes}})
	big := strings.Repeat("x", transport.DefaultMaxMessageBytes+1024)
	sec := ca.Security(t, pki.Global("g1"))

	cc := transporttest.Dial(t, small, sec, transport.ServerIs(srv), transport.WithLargeMessages())
	if err := check(ctx(t), cc, big); !errors.Is(err, api.ErrTooLarge) && !strings.Contains(err.Error(), "larger than max") {
		t.Errorf("4 MiB + 1 KiB to a default rule: got %v; want it refused as too large", err)
	}
	cc = transporttest.Dial(t, large, sec, transport.ServerIs(srv), transport.WithLargeMessages())
	// The health server does not know the service: NotFound means the
	// request got through.
	if err := check(ctx(t), cc, big); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("4 MiB + 1 KiB to a large rule: got %v; want it served (not found)", err)
	}
	// A client holds itself to the default unless told otherwise.
	cc = transporttest.Dial(t, large, sec, transport.ServerIs(srv))
	if err := check(ctx(t), cc, big); err == nil || errors.Is(err, api.ErrNotFound) {
		t.Errorf("4 MiB + 1 KiB from a default client: got %v; want it refused before sending", err)
	}
}

// fakeListener is a listener on an address other machines reach.
type fakeListener struct{ net.Listener }

func (fakeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 9091} }

// TestSecurityInsecureIsLoopbackOnly checks what insecure mode refuses: a
// listener off loopback, and dialling an address off loopback.
func TestSecurityInsecureIsLoopbackOnly(t *testing.T) {
	sec := transport.Insecure()
	if err := sec.CheckListener(fakeListener{}); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("insecure listener on 10.1.2.3: got %v; want it refused", err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	if err := sec.CheckListener(lis); err != nil {
		t.Errorf("insecure listener on loopback: got %v; want it allowed", err)
	}
	// TEST-NET-1: never routed; the dialer refuses before any packet.
	cc := transporttest.Dial(t, "192.0.2.1:9091", sec, transport.AnyServer())
	err = check(ctx(t), cc, "")
	if err == nil || !strings.Contains(err.Error(), "insecure mode dials loopback addresses only") {
		t.Errorf("insecure dial to 192.0.2.1: got %v; want it refused", err)
	}
	// And a loopback peer is served, as any identity.
	addr := serveHealth(t, sec, transport.Policy{healthSvc: {Kinds: []pki.Kind{pki.KindGlobal}}})
	if err := check(ctx(t), transporttest.Dial(t, addr, sec, transport.AnyServer()), ""); err != nil {
		t.Errorf("insecure loopback call: got %v; want success", err)
	}
}

// TestSecurityLocalSocket checks that a unix-socket server of Local
// security serves a peer of the same user.
func TestSecurityLocalSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "p.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := transport.NewServer(transport.Local(), transport.Policy{healthSvc: {Local: true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	cc := transporttest.Dial(t, "unix://"+sock, transport.Local(), transport.AnyServer())
	if err := check(ctx(t), cc, ""); err != nil {
		t.Fatalf("same-user call: got %v; want success", err)
	}
	// A TCP peer is not a local one.
	tcp := serveHealth(t, transport.Local(), transport.Policy{healthSvc: {Local: true}})
	if err := check(ctx(t), transporttest.Dial(t, tcp, transport.Insecure(), transport.AnyServer()), ""); err == nil {
		t.Fatal("TCP call to a local-security server: got success; want it refused")
	}
}

// TestSecurityCertificateReload checks that a server presents a renewed
// certificate without a restart.
func TestSecurityCertificateReload(t *testing.T) {
	ca := transporttest.NewPKI(t)
	srvID := pki.Region("r1")
	files := ca.TLS(t, srvID)
	addr := serveHealth(t, ca.Security(t, srvID), transport.Policy{healthSvc: {Kinds: []pki.Kind{pki.KindGlobal}}})
	first := servedSerial(t, addr, ca)

	// Renew: a new certificate for the same identity, written in place.
	if _, err := ca.CA.WriteIdentity(filepath.Dir(files.Cert), strings.TrimSuffix(filepath.Base(files.Cert), ".pem"), srvID.String(), []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for servedSerial(t, addr, ca) == first {
		if time.Now().After(deadline) {
			t.Fatal("the server still presents the old certificate 10s after renewal; want the new one")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// servedSerial makes a new connection and returns the serial of the
// server's certificate.
func servedSerial(t *testing.T, addr string, ca *transporttest.PKI) string {
	t.Helper()
	cc, err := transport.Dial(addr, ca.Security(t, pki.Global("g1")), transport.ServerIs(pki.Region("r1")))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	var p peer.Peer
	if _, err := healthpb.NewHealthClient(cc).Check(ctx(t), &healthpb.HealthCheckRequest{}, grpc.Peer(&p)); err != nil {
		t.Fatal(err)
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.PeerCertificates) == 0 {
		t.Fatalf("got auth info %v; want TLS with a certificate", p.AuthInfo)
	}
	return ti.State.PeerCertificates[0].SerialNumber.String()
}

// TestSecurityAudit: a rule's Audit hears of every unary call, refused
// ones included, with the admitted caller in its context (none for a
// refused one) and the status the client got; a panicking Audit costs
// nothing but its own record.
func TestSecurityAudit(t *testing.T) {
	ca := transporttest.NewPKI(t)
	srv := pki.Region("r1")
	type heard struct {
		method string
		caller string
		code   codes.Code
	}
	got := make(chan heard, 10)
	addr := serveHealth(t, ca.Security(t, srv), transport.Policy{
		healthSvc: {Kinds: []pki.Kind{pki.KindNode}, Region: "r1", Audit: func(ctx context.Context, method string, _ any, err error, _ time.Duration) {
			h := heard{method: method, code: status.Code(err)}
			if c, ok := transport.CallerFrom(ctx); ok {
				h.caller = c.String()
			}
			got <- h
			if h.code == codes.PermissionDenied {
				panic("an audit that fails")
			}
		}},
	})
	anon, err := transport.TokenClient(ca.TLS(t, srv).CA)
	if err != nil {
		t.Fatal(err)
	}
	method := "/grpc.health.v1.Health/Check"
	for _, tt := range []struct {
		name string
		sec  *transport.Security
		want heard
	}{
		{"admitted", ca.Security(t, pki.Node("r1", "n1")), heard{method, "node:r1/n1", codes.OK}},
		{"refused, anonymous", anon, heard{method, "", codes.Unauthenticated}},
		{"refused, another region's node", ca.Security(t, pki.Node("r2", "n1")), heard{method, "", codes.PermissionDenied}},
		{"admitted after a panicking audit", ca.Security(t, pki.Node("r1", "n2")), heard{method, "node:r1/n2", codes.OK}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cc := transporttest.Dial(t, addr, tt.sec, transport.ServerIs(srv))
			_ = check(ctx(t), cc, "")
			select {
			case h := <-got:
				if h != tt.want {
					t.Errorf("audit heard %+v; want %+v", h, tt.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the audit heard nothing")
			}
		})
	}
}
