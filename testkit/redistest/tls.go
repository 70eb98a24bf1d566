package redistest

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"

	"github.com/stratahq/strata/internal/pki"
)

// TLS are the files of a test CA, a server certificate for 127.0.0.1 and
// localhost, and a client certificate, all signed by the CA.
type TLS struct {
	CA                    string
	ServerCert, ServerKey string
	ClientCert, ClientKey string
	// ServerName is a name the server certificate carries.
	ServerName string

	client *tls.Config
}

// NewTLS makes the CA and certificates in a directory of the test.
func NewTLS(t testing.TB) *TLS {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.NewCA("redistest CA")
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	hosts := []string{"127.0.0.1", "localhost"}
	srv, err := ca.WriteIdentity(filepath.Join(dir, "server"), "redis", "redis-server", hosts)
	if err != nil {
		t.Fatalf("redistest: server certificate: %v", err)
	}
	cli, err := ca.WriteIdentity(filepath.Join(dir, "client"), "client", "strata", nil)
	if err != nil {
		t.Fatalf("redistest: client certificate: %v", err)
	}
	x := &TLS{
		CA:         srv.CA,
		ServerCert: srv.Cert, ServerKey: srv.Key,
		ClientCert: cli.Cert, ClientKey: cli.Key,
		ServerName: "localhost",
	}
	pool := x509.NewCertPool()
	pem, err := os.ReadFile(x.CA)
	if err != nil || !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("redistest: read CA %s: %v", x.CA, err)
	}
	pair, err := tls.LoadX509KeyPair(x.ClientCert, x.ClientKey)
	if err != nil {
		t.Fatalf("redistest: client key pair: %v", err)
	}
	x.client = &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	return x
}

// ClientConfig is a TLS configuration presenting the client certificate
// and trusting the CA; a fresh copy each call.
func (x *TLS) ClientConfig() *tls.Config { return x.client.Clone() }
