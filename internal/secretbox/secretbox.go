// Package secretbox encrypts values at rest with an AES-GCM envelope:
// every value gets a fresh random data key (AES-256) that encrypts it,
// and the data key is itself sealed by a key-encryption key (KEK) read
// from a key file. The sealed data key, the KEK's id and both nonces are
// stored with the ciphertext, so a Keyring of several KEKs opens what any
// of them sealed while only its first (primary) one seals. Rotation is:
// put a new key file first, restart, re-seal every value (Keyring.Stale
// tells which still need it), then drop the old file.
//
// The additional data given to Seal (the object's name) is bound to the
// ciphertext: an envelope copied to another object does not open.
package secretbox

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// KeySize is the size of a key-encryption key and of a data key (AES-256).
const KeySize = 32

// ErrUnknownKey is an envelope sealed by a KEK the Keyring does not hold.
var ErrUnknownKey = errors.New("secretbox: sealed by a key that is not configured")

// ErrOpen is an envelope that fails authentication: a wrong key, a
// tampered value, or one moved to another object.
var ErrOpen = errors.New("secretbox: cannot open (wrong key, or the value was altered)")

// Envelope is a sealed value as stored.
type Envelope struct {
	// KeyID names the KEK that sealed DataKey.
	KeyID string `json:"keyID"`
	// DataKey is the value's data key, sealed by the KEK (nonce first).
	DataKey []byte `json:"dataKey"`
	// Ciphertext is the value sealed by the data key (nonce first).
	Ciphertext []byte `json:"ciphertext"`
}

// Key is one key-encryption key.
type Key struct {
	ID   string
	aead cipher.AEAD
}

// NewKey returns the KEK of 32 raw bytes. Its id is a fingerprint of the
// key, so that the same file gives the same id on every replica without
// any other configuration, and no two keys share one.
func NewKey(raw []byte) (Key, error) {
	if len(raw) != KeySize {
		return Key{}, fmt.Errorf("secretbox: a key is %d bytes, not %d", KeySize, len(raw))
	}
	aead, err := newAEAD(raw)
	if err != nil {
		return Key{}, err
	}
	sum := sha256.Sum256(append([]byte("strata-secretbox-key-id:"), raw...))
	return Key{ID: hex.EncodeToString(sum[:8]), aead: aead}, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("secretbox: %w", err)
	}
	return cipher.NewGCM(block)
}

// ReadKeyFile reads a key file: 32 random bytes in standard base64 on its
// first line (what GenerateKey writes, or `head -c 32 /dev/urandom |
// base64`). The error names the file, never its content.
func ReadKeyFile(path string) (Key, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Key{}, fmt.Errorf("secretbox: key file: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(line))
	if err != nil || len(raw) != KeySize {
		return Key{}, fmt.Errorf("secretbox: key file %s: want %d random bytes in base64 on the first line", path, KeySize)
	}
	return NewKey(raw)
}

// GenerateKey writes a new random key file at path (mode 0600); it
// refuses to overwrite one.
func GenerateKey(path string) (Key, error) {
	raw := make([]byte, KeySize)
	if _, err := rand.Read(raw); err != nil {
		return Key{}, fmt.Errorf("secretbox: random key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return Key{}, fmt.Errorf("secretbox: key file: %w", err)
	}
	_, err = f.WriteString(base64.StdEncoding.EncodeToString(raw) + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Key{}, fmt.Errorf("secretbox: key file: %w", err)
	}
	return NewKey(raw)
}

// Keyring is the configured KEKs: the first seals, all open.
type Keyring struct {
	keys []Key
	byID map[string]Key
}

// NewKeyring returns the keyring of keys, primary first.
func NewKeyring(keys ...Key) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, errors.New("secretbox: no key")
	}
	r := &Keyring{keys: keys, byID: make(map[string]Key, len(keys))}
	for _, k := range keys {
		if _, dup := r.byID[k.ID]; dup {
			return nil, fmt.Errorf("secretbox: key %s is configured twice", k.ID)
		}
		r.byID[k.ID] = k
	}
	return r, nil
}

// LoadKeyring reads the key files, primary first.
func LoadKeyring(paths []string) (*Keyring, error) {
	keys := make([]Key, 0, len(paths))
	for _, p := range paths {
		k, err := ReadKeyFile(p)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return NewKeyring(keys...)
}

// Primary is the id of the key that seals.
func (r *Keyring) Primary() string { return r.keys[0].ID }

// IDs are the ids of the keys, primary first.
func (r *Keyring) IDs() []string {
	out := make([]string, len(r.keys))
	for i, k := range r.keys {
		out[i] = k.ID
	}
	return out
}

// Seal encrypts plaintext for the object named by aad with a new data key
// sealed by the primary KEK.
func (r *Keyring) Seal(plaintext, aad []byte) (Envelope, error) {
	dek := make([]byte, KeySize)
	if _, err := rand.Read(dek); err != nil {
		return Envelope{}, fmt.Errorf("secretbox: data key: %w", err)
	}
	data, err := newAEAD(dek)
	if err != nil {
		return Envelope{}, err
	}
	kek := r.keys[0]
	ct, err := seal(data, plaintext, aad)
	if err != nil {
		return Envelope{}, err
	}
	// The KEK's additional data binds the data key to the object too.
	wrapped, err := seal(kek.aead, dek, aad)
	if err != nil {
		return Envelope{}, err
	}
	return Envelope{KeyID: kek.ID, DataKey: wrapped, Ciphertext: ct}, nil
}

func seal(aead cipher.AEAD, plaintext, aad []byte) ([]byte, error) {
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plaintext)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("secretbox: nonce: %w", err)
	}
	return aead.Seal(nonce, nonce, plaintext, aad), nil
}

func open(aead cipher.AEAD, sealed, aad []byte) ([]byte, error) {
	n := aead.NonceSize()
	if len(sealed) < n+aead.Overhead() {
		return nil, ErrOpen
	}
	out, err := aead.Open(nil, sealed[:n], sealed[n:], aad)
	if err != nil {
		return nil, ErrOpen
	}
	return out, nil
}

// Open decrypts an envelope sealed for the object named by aad, with
// whichever configured key sealed it.
func (r *Keyring) Open(e Envelope, aad []byte) ([]byte, error) {
	kek, ok := r.byID[e.KeyID]
	if !ok {
		return nil, fmt.Errorf("%w (key id %q; configured: %s)", ErrUnknownKey, e.KeyID, strings.Join(r.IDs(), ", "))
	}
	dek, err := open(kek.aead, e.DataKey, aad)
	if err != nil {
		return nil, err
	}
	data, err := newAEAD(dek)
	if err != nil {
		return nil, err
	}
	return open(data, e.Ciphertext, aad)
}

// Stale reports whether e was sealed by another key than the primary one
// and should be sealed again.
func (r *Keyring) Stale(e Envelope) bool { return e.KeyID != r.Primary() }
