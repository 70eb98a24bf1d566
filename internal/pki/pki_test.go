package pki

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestParseIdentity(t *testing.T) {
	tests := []struct {
		cn      string
		want    Identity
		wantErr bool
	}{
		{"global:g1", Global("g1"), false},
		{"region:eu-west-1", Region("eu-west-1"), false},
		{"node:eu-west-1/node-1", Node("eu-west-1", "node-1"), false},
		{"node:node-1", Identity{}, true}, // no region: the old form
		{"node:eu/", Identity{}, true},
		{"node:/n1", Identity{}, true},
		{"node:eu/a/b", Identity{}, true},
		{"region:a/b", Identity{}, true},
		{"admin:root", Identity{}, true},
		{"region:", Identity{}, true},
		{"strata CA", Identity{}, true},
	}
	for _, tt := range tests {
		got, err := ParseIdentity(tt.cn)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseIdentity(%q): got %v, %v; want %v (error %v)", tt.cn, got, err, tt.want, tt.wantErr)
		}
		if err == nil && got.String() != tt.cn {
			t.Errorf("%q: String() = %q; want the common name back", tt.cn, got.String())
		}
	}
}

// TestKeyPairKeepsOldOnBadFiles checks that a half-written renewal does
// not take the certificate away: the old one is served until both files
// agree again.
func TestKeyPairKeepsOldOnBadFiles(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ca.WriteIdentity(dir, "n", Node("r", "n").String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := LoadKeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	old := kp.Certificate()
	// A new key without its certificate.
	_, key, err := ca.Issue("node:r/n", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.Key, key, 0o600); err != nil {
		t.Fatal(err)
	}
	kp.mu.Lock()
	kp.checked = time.Time{}
	kp.mu.Unlock()
	if got := kp.Certificate(); got != old {
		t.Fatal("got a new pair from mismatched files; want the old one kept")
	}
	if kp.Err() == nil {
		t.Fatal("got no reload error for mismatched files; want one")
	}
	// Both files renewed: the new pair is served.
	if _, err := ca.WriteIdentity(dir, "n", Node("r", "n").String(), nil); err != nil {
		t.Fatal(err)
	}
	kp.mu.Lock()
	kp.checked = time.Time{}
	kp.mu.Unlock()
	if got := kp.Certificate(); got == old || kp.Err() != nil {
		t.Fatalf("got the old pair (err %v) after a complete renewal; want the new one", kp.Err())
	}
	if id, err := CertIdentity(filepath.Join(dir, "n.pem")); err != nil || id != Node("r", "n") {
		t.Fatalf("CertIdentity: got %v, %v; want node:r/n", id, err)
	}
}
