package alerts

import (
	"errors"
	"fmt"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/secretbox"
)

// StoredRule is an AlertRule as etcd holds it: the receiver's secret is
// sealed with the Secrets' keyring (SealedSecret) and Receiver.Secret is
// empty, so that etcd never holds it in plain text. A rule written
// before secrets were sealed may still carry Receiver.Secret; it is used
// as it is until `strata secrets reencrypt` (or the rule's next write)
// seals it.
type StoredRule struct {
	api.AlertRule
	SealedSecret *secretbox.Envelope `json:"sealedSecret,omitempty"`
}

// ErrNoKeyring is a receiver secret to seal or open on a global tier
// started without key files.
var ErrNoKeyring = errors.New("receiver secrets are sealed with the Secrets' keys, and this server's configuration names no key file (secrets.keyFiles)")

// secretAAD binds a sealed receiver secret to its rule.
func secretAAD(rule string) []byte { return []byte("alertrules/" + rule) }

// SealSecret puts secret, sealed by ring's primary key for the rule, in
// r, and clears the plain one.
func SealSecret(ring *secretbox.Keyring, r *StoredRule, secret string) error {
	if ring == nil {
		return ErrNoKeyring
	}
	plain := []byte(secret)
	env, err := ring.Seal(plain, secretAAD(r.Name))
	clear(plain)
	if err != nil {
		// The rule's name and the key id, never the secret.
		return fmt.Errorf("alert rule %q: sealing the receiver's secret: %w", r.Name, err)
	}
	r.SealedSecret, r.Receiver.Secret = &env, ""
	return nil
}

// HasSecret reports whether the rule's receiver has a secret.
func (r *StoredRule) HasSecret() bool { return r.SealedSecret != nil || r.Receiver.Secret != "" }

// Secret returns the receiver's secret ("" without one).
func (r *StoredRule) Secret(ring *secretbox.Keyring) (string, error) {
	if r.SealedSecret == nil {
		return r.Receiver.Secret, nil
	}
	if ring == nil {
		return "", ErrNoKeyring
	}
	plain, err := ring.Open(*r.SealedSecret, secretAAD(r.Name))
	if err != nil {
		return "", fmt.Errorf("alert rule %q: the receiver's secret: %w", r.Name, err)
	}
	s := string(plain)
	clear(plain)
	return s, nil
}

// Stale reports whether the rule's secret is in plain text or sealed by
// another key than ring's primary one, and should be sealed again.
func (r *StoredRule) Stale(ring *secretbox.Keyring) bool {
	if r.SealedSecret == nil {
		return r.Receiver.Secret != ""
	}
	return ring.Stale(*r.SealedSecret)
}
