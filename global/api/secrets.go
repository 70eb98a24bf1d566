package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/stratahq/strata/global/alerts"
	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/audit"
	"github.com/stratahq/strata/internal/secretbox"
	"github.com/stratahq/strata/internal/store"
)

// Secrets are the tenants' Secrets: key/value data sealed with the
// keyring before it is written (state.SealedSecret), so that etcd never
// holds a value in plain text. Reads return the keys; the values only to
// a role that may read secrets (readSecrets) and asks (reveal). No value
// ever reaches a log line, an event or an error: messages name keys.
type Secrets struct {
	secrets *store.Collection[state.SealedSecret]
	// ring seals and opens; nil refuses every operation that needs it.
	ring *secretbox.Keyring
	// resources are read to refuse deleting a secret in use.
	resources *store.Collection[api.Resource]
	// roll rolls out the resources that use a Secret whose data changed.
	roll func(ctx context.Context, tenant string, ref api.ConfigRef)
}

// errNoKeyring is what a secret write or reveal gets on a global tier
// started without key files.
var errNoKeyring = fmt.Errorf("secrets are not enabled on this server: its configuration names no key file (secrets.keyFiles): %w", api.ErrUnavailable)

// Create adds a Secret to a tenant; the answer holds its keys, not its
// values.
func (s *Secrets) Create(ctx context.Context, tenant string, in api.Secret) (api.Secret, error) {
	tenant, err := writeScope(ctx, tenant, in.Tenant, "secret", "")
	if err != nil {
		return api.Secret{}, err
	}
	if err := admit(ctx, secretAdmission, onRequest, &in); err != nil {
		return api.Secret{}, err
	}
	t := now()
	key := state.ResourceName(tenant, in.Name)
	stored := state.SealedSecret{Name: in.Name, Tenant: tenant, Type: in.Type, Labels: in.Labels, Generation: 1, CreatedAt: t, UpdatedAt: t}
	if err := s.seal(&stored, key, in.Data); err != nil {
		return api.Secret{}, err
	}
	rev, err := s.secrets.Create(ctx, key, &stored)
	if err != nil {
		return api.Secret{}, storeErr(err, "secret", in.Name)
	}
	return secretView(store.Item[state.SealedSecret]{Value: &stored, ModRevision: rev}, nil), nil
}

// Get returns a tenant's Secret; with reveal, its values too, if the
// caller's role may read secrets.
func (s *Secrets) Get(ctx context.Context, tenant, name string, reveal bool) (api.Secret, error) {
	tenant, err := objectScope(ctx, readResources, tenant, "secret", name)
	if err != nil {
		return api.Secret{}, err
	}
	if err := s.mayReveal(ctx, reveal); err != nil {
		return api.Secret{}, err
	}
	it, err := s.secrets.Get(ctx, state.ResourceName(tenant, name))
	if err != nil {
		return api.Secret{}, storeErr(err, "secret", name)
	}
	return s.view(it, reveal)
}

// Page returns one page of a tenant's Secrets, by name; with reveal,
// their values too, if the caller's role may read secrets.
func (s *Secrets) Page(ctx context.Context, tenant string, q PageQuery, reveal bool) ([]api.Secret, string, error) {
	tenant, err := tenantScope(ctx, readResources, tenant)
	if err != nil {
		return nil, "", err
	}
	if err := s.mayReveal(ctx, reveal); err != nil {
		return nil, "", err
	}
	limit, err := api.PageSize(q.Limit)
	if err != nil {
		return nil, "", err
	}
	page, err := s.secrets.ListPrefixPage(ctx, tenant+"/", store.ListOptions{Limit: int64(limit), Continue: q.Continue})
	if err != nil {
		return nil, "", storeErr(err, "secrets", "")
	}
	out := make([]api.Secret, len(page.Items))
	for i, it := range page.Items {
		if out[i], err = s.view(it, reveal); err != nil {
			return nil, "", err
		}
	}
	return out, page.Continue, nil
}

// Update replaces a Secret's labels and data (its type is immutable). A
// resourceVersion in it makes the write conditional; without one a lost
// race is retried. The same data writes nothing.
func (s *Secrets) Update(ctx context.Context, tenant string, in api.Secret) (api.Secret, error) {
	tenant, err := writeScope(ctx, tenant, in.Tenant, "secret", in.Name)
	if err != nil {
		return api.Secret{}, err
	}
	if err := admit(ctx, secretAdmission, onRequest, &in); err != nil {
		return api.Secret{}, err
	}
	key := state.ResourceName(tenant, in.Name)
	var out api.Secret
	changed := false
	err = s.secrets.Store().RetryConflicts(ctx, "update secret "+key, func() error {
		changed = false
		it, err := s.secrets.Get(ctx, key)
		if err != nil {
			return err
		}
		cur := it.Value
		if cur.Type != in.Type {
			return api.Invalid("type", "is immutable: secret %q is of type %s, not %s", in.Name, cur.Type, in.Type)
		}
		if err := fresh("secret", in.Name, in.ResourceVersion, it.ModRevision); err != nil {
			return err
		}
		sameLabels, sameData, err := s.holds(it, in)
		if err != nil || sameLabels && sameData {
			out = secretView(it, nil)
			return err
		}
		if !sameData {
			cur.Generation++
			changed = true
		}
		cur.Labels, cur.UpdatedAt = in.Labels, now()
		if err := s.seal(cur, key, in.Data); err != nil {
			return err
		}
		rev, err := s.secrets.Update(ctx, key, cur, it.ModRevision)
		if err != nil {
			return err
		}
		it.ModRevision = rev
		out = secretView(it, nil)
		return nil
	})
	if err != nil {
		return api.Secret{}, storeErr(err, "secret", in.Name)
	}
	if changed && s.roll != nil {
		s.roll(ctx, tenant, api.ConfigRef{Secret: in.Name})
	}
	return out, nil
}

// holds reports whether the stored secret already has in's labels and
// its data. Data sealed by an older key counts as other data to write
// (sealed anew), not as a change.
func (s *Secrets) holds(it store.Item[state.SealedSecret], in api.Secret) (sameLabels, sameData bool, err error) {
	if s.ring == nil {
		return false, false, errNoKeyring
	}
	data, err := s.open(it)
	if err != nil {
		return false, false, err
	}
	sameLabels = maps.Equal(it.Value.Labels, in.Labels) && !s.ring.Stale(it.Value.Sealed)
	return sameLabels, maps.Equal(data, in.Data), nil
}

// Delete removes a tenant's Secret and returns it (keys only). expect,
// when not 0, is the resourceVersion the client read (If-Match).
func (s *Secrets) Delete(ctx context.Context, tenant, name string, expect int64) (api.Secret, error) {
	tenant, err := objectScope(ctx, writeResources, tenant, "secret", name)
	if err != nil {
		return api.Secret{}, err
	}
	key := state.ResourceName(tenant, name)
	var out api.Secret
	// A retry is a resource of the tenant written since the check, or
	// the secret changed (unless expect pins it: then a conflict).
	err = s.secrets.Store().RetryConflicts(ctx, "delete secret "+key, func() error {
		it, err := s.secrets.Get(ctx, key)
		if err != nil {
			return err
		}
		if err := fresh("secret", name, expect, it.ModRevision); err != nil {
			return err
		}
		txn := s.secrets.Store().Txn()
		if err := refusedInUse(ctx, s.resources, tenant, api.ConfigRef{Secret: name}, txn); err != nil {
			return err
		}
		s.secrets.TxnDelete(txn, key, it.ModRevision)
		if _, err := txn.Commit(ctx); err != nil {
			return err
		}
		out = secretView(it, nil)
		return nil
	})
	if err != nil {
		return api.Secret{}, storeErr(err, "secret", name)
	}
	return out, nil
}

// mayReveal checks that a caller who asks for values may read secrets.
func (s *Secrets) mayReveal(ctx context.Context, reveal bool) error {
	if !reveal {
		return nil
	}
	noteRead(ctx, audit.ReadSecretValues)
	if _, err := authorize(ctx, readSecrets); err != nil {
		return fmt.Errorf("reading secret values: %w", err)
	}
	if s.ring == nil {
		return errNoKeyring
	}
	return nil
}

// seal puts data, sealed for the secret's key, into stored.
func (s *Secrets) seal(stored *state.SealedSecret, key string, data map[string]string) error {
	if s.ring == nil {
		return errNoKeyring
	}
	plain, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("secret %q: encoding its data: %w", stored.Name, err)
	}
	env, err := s.ring.Seal(plain, secretAAD(key))
	clear(plain)
	if err != nil {
		return fmt.Errorf("secret %q: %w", stored.Name, err)
	}
	stored.Sealed, stored.Keys = env, slices.Sorted(maps.Keys(data))
	return nil
}

// secretAAD binds a sealed value to the secret's name (tenant/name).
func secretAAD(key string) []byte { return []byte("secrets/" + key) }

// open returns a stored secret's data.
func (s *Secrets) open(it store.Item[state.SealedSecret]) (map[string]string, error) {
	return openSecret(s.ring, it)
}

func openSecret(ring *secretbox.Keyring, it store.Item[state.SealedSecret]) (map[string]string, error) {
	if ring == nil {
		return nil, errNoKeyring
	}
	plain, err := ring.Open(it.Value.Sealed, secretAAD(it.Name))
	if err != nil {
		// The key id and the secret's name, never a byte of the value.
		return nil, fmt.Errorf("secret %q of tenant %q: %w", it.Value.Name, it.Value.Tenant, err)
	}
	var data map[string]string
	err = json.Unmarshal(plain, &data)
	clear(plain)
	if err != nil {
		return nil, fmt.Errorf("secret %q of tenant %q: its data does not decode", it.Value.Name, it.Value.Tenant)
	}
	return data, nil
}

// view is the API form of a stored secret, with its values if reveal.
func (s *Secrets) view(it store.Item[state.SealedSecret], reveal bool) (api.Secret, error) {
	if !reveal {
		return secretView(it, nil), nil
	}
	data, err := s.open(it)
	if err != nil {
		return api.Secret{}, err
	}
	return secretView(it, data), nil
}

func secretView(it store.Item[state.SealedSecret], data map[string]string) api.Secret {
	v := it.Value
	return api.Secret{
		Name: v.Name, Tenant: v.Tenant, Type: v.Type, Labels: v.Labels, Data: data, Keys: v.Keys, Generation: v.Generation,
		CreatedAt: v.CreatedAt, UpdatedAt: v.UpdatedAt, ResourceVersion: it.ModRevision,
	}
}

// Reencryption is what ReencryptSecrets did.
type Reencryption struct {
	// Secrets is how many secrets there are.
	Secrets int `json:"secrets"`
	// Resealed is how many were sealed by an older key and are now
	// sealed by the primary one.
	Resealed int `json:"resealed"`
	// AlertRules is how many alert rules there are; AlertRulesResealed
	// how many had a receiver secret sealed by an older key (or, written
	// before receiver secrets were sealed, in plain text) and now have
	// it sealed by the primary one.
	AlertRules         int `json:"alertRules"`
	AlertRulesResealed int `json:"alertRulesResealed"`
	// PrimaryKey is the id of the key that now seals every secret.
	PrimaryKey string `json:"primaryKey"`
}

// ReencryptSecrets seals again, with ring's primary key, every secret
// that an older key of ring sealed: the step of a key rotation after
// the new key was put first in every replica's secrets.keyFiles. Each
// write is conditional on the secret being unchanged since it was read
// (a conflict reads it again), so it runs safely beside the API. It is
// for the process itself (`strata secrets reencrypt`), not callers of
// the API.
func ReencryptSecrets(ctx context.Context, st *state.State, ring *secretbox.Keyring) (Reencryption, error) {
	out := Reencryption{PrimaryKey: ring.Primary()}
	items, _, err := st.Secrets.ListAll(ctx)
	if err != nil {
		return out, storeErr(err, "secrets", "")
	}
	out.Secrets = len(items)
	for _, it := range items {
		resealed, err := reseal(ctx, st, ring, it.Name)
		if err != nil {
			return out, err
		}
		if resealed {
			out.Resealed++
		}
	}
	out.AlertRules, out.AlertRulesResealed, err = resealAlertRules(ctx, st, ring)
	return out, err
}

// resealAlertRules seals again, with ring's primary key, the receiver
// secret of every alert rule that an older key sealed or that is in
// plain text; it returns how many rules there are and how many it
// sealed.
func resealAlertRules(ctx context.Context, st *state.State, ring *secretbox.Keyring) (total, resealed int, err error) {
	rules := alerts.NewCollections(st.Store).Rules
	items, _, err := rules.ListAll(ctx)
	if err != nil {
		return 0, 0, storeErr(err, "alert rules", "")
	}
	for _, item := range items {
		name := item.Name
		err := st.Store.RetryConflicts(ctx, "reencrypt alert rule "+name, func() error {
			it, err := rules.Get(ctx, name)
			if errors.Is(err, store.ErrNotFound) {
				return nil // deleted meanwhile
			}
			if err != nil || !it.Value.Stale(ring) {
				return err
			}
			secret, err := it.Value.Secret(ring)
			if err != nil {
				return err
			}
			if err := alerts.SealSecret(ring, it.Value, secret); err != nil {
				return err
			}
			if _, err := rules.Update(ctx, name, it.Value, it.ModRevision); err != nil {
				return err
			}
			resealed++
			return nil
		})
		if err != nil {
			return len(items), resealed, storeErr(err, "alert rule", name)
		}
	}
	return len(items), resealed, nil
}

// reseal seals the secret called key again if its key is not ring's
// primary one, and reports whether it did.
func reseal(ctx context.Context, st *state.State, ring *secretbox.Keyring, key string) (bool, error) {
	resealed := false
	err := st.Store.RetryConflicts(ctx, "reencrypt secret "+key, func() error {
		it, err := st.Secrets.Get(ctx, key)
		if errors.Is(err, store.ErrNotFound) {
			return nil // deleted meanwhile
		}
		if err != nil || !ring.Stale(it.Value.Sealed) {
			return err
		}
		data, err := openSecret(ring, it)
		if err != nil {
			return err
		}
		s := &Secrets{ring: ring}
		if err := s.seal(it.Value, key, data); err != nil {
			return err
		}
		if _, err := st.Secrets.Update(ctx, key, it.Value, it.ModRevision); err != nil {
			return err
		}
		resealed = true
		return nil
	})
	if err != nil {
		return false, storeErr(err, "secret", key)
	}
	return resealed, nil
}
