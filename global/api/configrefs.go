package api

import (
	"context"
	"errors"

	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
)

// checkConfigRefs checks the Configs and Secrets a Compute spec names:
// each exists in the resource's tenant, a pullSecret is a registry
// Secret, and a VM names no pullSecret (a VM pulls no image: refused
// rather than ignored). A VM's files and envFrom reach its guest through
// the libvirt provider's config drive.
//
// txn, the transaction that writes r, gets the condition that keeps the
// check true: each Config and Secret unchanged since it was read. A
// delete that commits first fails the write (a conflict: it starts over
// and finds the Config gone), and a change of its data, whose
// generation r records, makes it read the new one; the delete's side is
// refusedInUse.
func (s *Resources) checkConfigRefs(ctx context.Context, r *api.Resource, flavor *api.Flavor, txn *store.Txn) error {
	c := r.Spec.Compute
	if c == nil {
		return nil
	}
	// The generations are the server's, read afresh on every write.
	c.ConfigVersions = nil
	refs := c.Refs()
	if len(refs) == 0 {
		return nil
	}
	c.ConfigVersions = make(map[string]int64, len(refs))
	if flavor != nil && flavor.Kind == api.ProviderVM && c.PullSecret != "" {
		return api.Invalid("spec.compute.pullSecret", "a VM pulls no image, so it takes no pull secret (flavor %q is a vm flavor)", flavor.Name)
	}
	for _, ref := range refs {
		key := state.ResourceName(r.Tenant, ref.Name())
		var (
			gen int64
			err error
		)
		if ref.Kind() == "config" {
			var it store.Item[api.Config]
			if it, err = s.st.Configs.Get(ctx, key); err == nil {
				gen = it.Value.Generation
				s.st.Configs.TxnUnchanged(txn, key, it.ModRevision)
			}
		} else {
			var modRev int64
			if gen, modRev, err = s.checkSecretRef(ctx, key, ref.Name(), ref.Name() == c.PullSecret); err == nil {
				s.st.Secrets.TxnUnchanged(txn, key, modRev)
			}
		}
		switch {
		case errors.Is(err, store.ErrNotFound):
			return api.Invalid("spec.compute", "%s %q does not exist in tenant %q", ref.Kind(), ref.Name(), r.Tenant)
		case err != nil:
			return storeErr(err, ref.Kind(), ref.Name())
		}
		c.ConfigVersions[ref.Kind()+"/"+ref.Name()] = gen
	}
	return nil
}

// checkSecretRef checks that the secret called key exists and, for a pull
// secret, that it holds registry credentials.
// It returns the secret's generation and mod revision.
func (s *Resources) checkSecretRef(ctx context.Context, key, name string, pull bool) (gen, modRev int64, err error) {
	it, err := s.st.Secrets.Get(ctx, key)
	if err != nil {
		return 0, 0, err
	}
	if pull && it.Value.Type != api.SecretRegistry {
		return 0, 0, api.Invalid("spec.compute.pullSecret", "secret %q is of type %s, not %s", name, it.Value.Type, api.SecretRegistry)
	}
	return it.Value.Generation, it.ModRevision, nil
}
