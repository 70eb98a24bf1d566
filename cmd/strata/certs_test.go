package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/internal/transport"
)

func runStrata(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestCertsIssue(t *testing.T) {
	dir := t.TempDir()
	caDir, out := filepath.Join(dir, "ca"), filepath.Join(dir, "node-1")
	if _, err := runStrata(t, "certs", "ca", "--dir", caDir); err != nil {
		t.Fatal(err)
	}
	if _, err := runStrata(t, "certs", "issue", "--ca-dir", caDir, "--out", out, "--identity", "node:eu-west-1/node-1", "--host", "10.0.1.21", "--days", "30"); err != nil {
		t.Fatal(err)
	}
	f := config.TLS{CA: filepath.Join(out, "ca.pem"), Cert: filepath.Join(out, "node-eu-west-1-node-1.pem"), Key: filepath.Join(out, "node-eu-west-1-node-1-key.pem")}
	sec, err := transport.NewSecurity(f, false)
	if err != nil {
		t.Fatalf("the issued files do not make a transport security: %v", err)
	}
	if got, want := sec.Self(), pki.Node("eu-west-1", "node-1"); got != want {
		t.Fatalf("identity: got %s; want %s", got, want)
	}
	for _, bad := range []string{"node:node-1", "admin:root", ""} {
		if _, err := runStrata(t, "certs", "issue", "--ca-dir", caDir, "--out", out, "--identity", bad); err == nil {
			t.Errorf("--identity %q: got no error; want one", bad)
		} else if bad != "" && !strings.Contains(err.Error(), "--identity") {
			t.Errorf("--identity %q: got %v; want an error naming --identity", bad, err)
		}
	}
}
