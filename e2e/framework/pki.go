package framework

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/internal/transport"
)

// RegionToken is the REST token (api.token) of the regions the tests
// start: a region has no anonymous mode.
const RegionToken = "strata-e2e-region-token-0123456789abcdef"

// RegionAPIYAML is the api section of a region's configuration that
// sets RegionToken.
const RegionAPIYAML = "api: {token: " + RegionToken + "}\n"

// PKI is a test CA: the tiers' configurations name the certificates it
// issues, and tests speak to the tiers with identities of their own.
type PKI struct {
	t   testing.TB
	ca  *pki.CA
	dir string
}

// NewPKI makes a CA whose files live in the test's temporary directory.
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	ca, err := pki.NewCA("strata e2e CA")
	if err != nil {
		t.Fatal(err)
	}
	p := &PKI{t: t, ca: ca, dir: t.TempDir()}
	if _, _, err := ca.WriteCA(p.dir); err != nil {
		t.Fatal(err)
	}
	return p
}

// Files issues id a certificate for loopback and returns its files.
func (p *PKI) Files(id pki.Identity) pki.Files {
	p.t.Helper()
	file := strings.NewReplacer(":", "-", "/", "-").Replace(id.String())
	f, err := p.ca.WriteIdentity(p.dir, file, id.String(), []string{"127.0.0.1", "localhost"})
	if err != nil {
		p.t.Fatal(err)
	}
	return f
}

// YAML is the tls section of a tier's configuration for id.
func (p *PKI) YAML(id pki.Identity) string {
	p.t.Helper()
	f := p.Files(id)
	return fmt.Sprintf("tls:\n  ca: %s\n  cert: %s\n  key: %s\n", f.CA, f.Cert, f.Key)
}

// Security is the transport security of a test speaking as id.
func (p *PKI) Security(id pki.Identity) *transport.Security {
	p.t.Helper()
	f := p.Files(id)
	sec, err := transport.NewSecurity(configTLS(f), false)
	if err != nil {
		p.t.Fatal(err)
	}
	return sec
}

// CAFile is the CA certificate's path.
func (p *PKI) CAFile() string { return filepath.Join(p.dir, "ca.pem") }

func configTLS(f pki.Files) config.TLS { return config.TLS{CA: f.CA, Cert: f.Cert, Key: f.Key} }

// FilesFor issues a certificate whose common name is cn as it is, valid
// or not (a test of what a tier refuses), into file.pem and file-key.pem.
func (p *PKI) FilesFor(t testing.TB, file, cn string) pki.Files {
	t.Helper()
	f, err := p.ca.WriteIdentity(p.dir, file, cn, []string{"127.0.0.1", "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// FilesForHosts issues a certificate whose common name is cn, valid for
// hosts (addresses or names) besides loopback, into file.pem and
// file-key.pem: the certificate of a process on a test host (Lab).
func (p *PKI) FilesForHosts(t testing.TB, file, cn string, hosts ...string) pki.Files {
	t.Helper()
	f, err := p.ca.WriteIdentity(p.dir, file, cn, append([]string{"127.0.0.1", "localhost"}, hosts...))
	if err != nil {
		t.Fatal(err)
	}
	return f
}
