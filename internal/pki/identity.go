package pki

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"strings"
)

// Kind is what a certificate's holder is.
type Kind string

// The kinds of identity Strata's certificates carry.
const (
	// KindGlobal is a replica of the global tier: global:<id>.
	KindGlobal Kind = "global"
	// KindRegion is any replica of one region: region:<name>.
	KindRegion Kind = "region"
	// KindNode is the agent of one node of one region:
	// node:<region>/<name>.
	KindNode Kind = "node"
)

// Identity is who holds a certificate, read from its common name. A node
// identity names its region, so that a node certificate of one region is
// worth nothing in another, even where the regions share a CA.
type Identity struct {
	Kind Kind
	// Region is the node's region (node identities only).
	Region string
	Name   string
}

// Global is the identity of global replica id.
func Global(id string) Identity { return Identity{Kind: KindGlobal, Name: id} }

// Region is the identity of every replica of region name.
func Region(name string) Identity { return Identity{Kind: KindRegion, Name: name} }

// Node is the identity of the agent of node name in region.
func Node(region, name string) Identity { return Identity{Kind: KindNode, Region: region, Name: name} }

// String is the common name that carries the identity.
func (i Identity) String() string {
	if i.Kind == KindNode {
		return string(i.Kind) + ":" + i.Region + "/" + i.Name
	}
	return string(i.Kind) + ":" + i.Name
}

// ParseIdentity reads an identity from a certificate's common name.
func ParseIdentity(cn string) (Identity, error) {
	kind, rest, ok := strings.Cut(cn, ":")
	if !ok || rest == "" {
		return Identity{}, fmt.Errorf("pki: common name %q is not <kind>:<name>", cn)
	}
	switch Kind(kind) {
	case KindGlobal, KindRegion:
		if strings.Contains(rest, "/") {
			return Identity{}, fmt.Errorf("pki: common name %q: a %s name has no /", cn, kind)
		}
		return Identity{Kind: Kind(kind), Name: rest}, nil
	case KindNode:
		region, name, ok := strings.Cut(rest, "/")
		if !ok || region == "" || name == "" || strings.Contains(name, "/") {
			return Identity{}, fmt.Errorf("pki: common name %q is not node:<region>/<name>", cn)
		}
		return Node(region, name), nil
	default:
		return Identity{}, fmt.Errorf("pki: common name %q: unknown kind %q (global, region or node)", cn, kind)
	}
}

// IdentityOf reads the identity of a certificate.
func IdentityOf(cert *x509.Certificate) (Identity, error) {
	return ParseIdentity(cert.Subject.CommonName)
}

// CertIdentity reads the identity of the first certificate in a PEM file.
func CertIdentity(certFile string) (Identity, error) {
	data, err := os.ReadFile(certFile)
	if err != nil {
		return Identity{}, fmt.Errorf("pki: %w", err)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return Identity{}, fmt.Errorf("pki: %s holds no certificate", certFile)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return Identity{}, fmt.Errorf("pki: %s: %w", certFile, err)
	}
	return IdentityOf(cert)
}
