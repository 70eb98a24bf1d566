package secretbox

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func newTestKey(t *testing.T, dir, name string) (Key, string) {
	t.Helper()
	p := filepath.Join(dir, name)
	k, err := GenerateKey(p)
	if err != nil {
		t.Fatal(err)
	}
	return k, p
}

func TestSealOpen(t *testing.T) {
	dir := t.TempDir()
	k, _ := newTestKey(t, dir, "k1")
	r, err := NewKeyring(k)
	if err != nil {
		t.Fatal(err)
	}
	plain := []byte("hunter2-the-password")
	e, err := r.Seal(plain, []byte("t/a"))
	if err != nil {
		t.Fatal(err)
	}
	if e.KeyID != k.ID || bytes.Contains(e.Ciphertext, plain) || bytes.Contains(e.DataKey, plain) {
		t.Fatalf("envelope %+v: wrong key id or plaintext inside", e)
	}
	got, err := r.Open(e, []byte("t/a"))
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("Open = %q, %v; want %q", got, err, plain)
	}
	// Another object's name does not open it (an envelope copied).
	if _, err := r.Open(e, []byte("t/b")); !errors.Is(err, ErrOpen) {
		t.Fatalf("Open with another name: %v; want ErrOpen", err)
	}
	// A flipped bit does not open.
	bad := e
	bad.Ciphertext = bytes.Clone(e.Ciphertext)
	bad.Ciphertext[len(bad.Ciphertext)-1] ^= 1
	if _, err := r.Open(bad, []byte("t/a")); !errors.Is(err, ErrOpen) {
		t.Fatalf("Open of a tampered value: %v; want ErrOpen", err)
	}
	// Two seals of one value differ (fresh data key and nonces).
	e2, _ := r.Seal(plain, []byte("t/a"))
	if bytes.Equal(e.Ciphertext, e2.Ciphertext) || bytes.Equal(e.DataKey, e2.DataKey) {
		t.Fatal("two seals of one value are equal")
	}
}

func TestRotation(t *testing.T) {
	dir := t.TempDir()
	_, p1 := newTestKey(t, dir, "old")
	_, p2 := newTestKey(t, dir, "new")
	old, err := LoadKeyring([]string{p1})
	if err != nil {
		t.Fatal(err)
	}
	e, err := old.Seal([]byte("v"), []byte("n"))
	if err != nil {
		t.Fatal(err)
	}
	// The new key first: old values still open, and are stale.
	both, err := LoadKeyring([]string{p2, p1})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := both.Open(e, []byte("n")); err != nil || string(got) != "v" {
		t.Fatalf("Open of an old value = %q, %v", got, err)
	}
	if !both.Stale(e) {
		t.Fatal("a value sealed by the old key is not stale")
	}
	e2, _ := both.Seal([]byte("v"), []byte("n"))
	if both.Stale(e2) || e2.KeyID == e.KeyID {
		t.Fatalf("resealed with key %s; want the primary %s", e2.KeyID, both.Primary())
	}
	// The old key dropped: the old value is refused with a clear error.
	onlyNew, _ := LoadKeyring([]string{p2})
	if _, err := onlyNew.Open(e, []byte("n")); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("Open without the old key: %v; want ErrUnknownKey", err)
	}
	if _, err := LoadKeyring([]string{p1, p1}); err == nil {
		t.Fatal("one key configured twice was accepted")
	}
}

func TestKeyFileErrors(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "short")
	if err := os.WriteFile(p, []byte("c2VjcmV0LWtleS1tYXRlcmlhbA==\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := ReadKeyFile(p)
	if err == nil || strings.Contains(err.Error(), "c2VjcmV0") {
		t.Fatalf("short key: %v; want an error that does not repeat the file", err)
	}
	if _, err := GenerateKey(p); err == nil {
		t.Fatal("GenerateKey overwrote a file")
	}
	if _, err := NewKeyring(); err == nil {
		t.Fatal("an empty keyring was accepted")
	}
}
