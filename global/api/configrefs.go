package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

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

// errNotReferenced is what a region asking for data a resource does not
// name gets: the same answer as for a resource that does not exist.
var errNotReferenced = fmt.Errorf("not referenced: %w", api.ErrNotFound)

// ConfigData is the data of one Config or Secret, for a replica.
type ConfigData struct {
	Ref  api.ConfigRef
	Type api.SecretType // a Secret's
	Data map[string]string
}

// ConfigData returns the data (secrets decrypted) of refs for the
// resource tenant/name, asked by region, which must be one the resource
// is placed in (its status names it) or scheduled to (its schedule names
// it). Every ref must be named by the resource's spec or one of its kept
// revisions (a rollout runs old ones): anything else is not found, so
// that a region gets only what a resource it runs uses. Nothing here is
// logged.
func (s *Server) ConfigData(ctx context.Context, region, tenant, name string, refs []api.ConfigRef) ([]ConfigData, error) {
	if err := api.ValidateName("tenant", tenant); err != nil {
		return nil, err
	}
	if err := api.ValidateName("resource", name); err != nil {
		return nil, err
	}
	named, err := s.namedRefs(ctx, region, tenant, name)
	if err != nil {
		return nil, err
	}
	out := make([]ConfigData, 0, len(refs))
	for _, ref := range refs {
		if !named[ref] {
			return nil, fmt.Errorf("%s %q of resource %q: %w", ref.Kind(), ref.Name(), name, errNotReferenced)
		}
		d, err := s.readRef(ctx, tenant, ref)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// namedRefs is every Config and Secret the resource's spec and kept
// revisions name.
func (s *Server) namedRefs(ctx context.Context, region, tenant, name string) (map[api.ConfigRef]bool, error) {
	it, err := s.st.Resources.Get(ctx, state.ResourceName(tenant, name))
	if err != nil {
		return nil, storeErr(err, "resource", name)
	}
	if err := s.placedIn(ctx, it, region); err != nil {
		return nil, err
	}
	named := map[api.ConfigRef]bool{}
	add := func(spec api.ResourceSpec) {
		if spec.Compute != nil {
			for _, r := range spec.Compute.Refs() {
				named[r] = true
			}
		}
	}
	add(it.Value.Spec)
	revs, _, err := s.st.Revisions.ListPrefix(ctx, state.RevisionPrefix(tenant, name))
	if err != nil {
		return nil, storeErr(err, "revisions", name)
	}
	for _, rv := range revs {
		if rv.Value.UID == it.Value.UID {
			add(rv.Value.Spec)
		}
	}
	return named, nil
}

// placedIn checks that the resource it may run in region: its schedule
// names the region, or its status (the master's placement) does. A
// region not placed yet is told so, and its agent asks again later.
func (s *Server) placedIn(ctx context.Context, it store.Item[api.Resource], region string) error {
	for _, t := range it.Value.Schedule.Regions {
		if t.Name == region {
			return nil
		}
	}
	st, err := s.st.Statuses.Get(ctx, it.Name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return storeErr(err, "resource", it.Value.Name)
	}
	if err == nil && st.Value.UID == it.Value.UID {
		if _, ok := st.Value.Regions[region]; ok {
			return nil
		}
	}
	return fmt.Errorf("resource %q is not placed in region %q: %w", it.Value.Name, region, errNotReferenced)
}

// readRef reads one Config or Secret (decrypted).
func (s *Server) readRef(ctx context.Context, tenant string, ref api.ConfigRef) (ConfigData, error) {
	key := state.ResourceName(tenant, ref.Name())
	if ref.Kind() == "config" {
		it, err := s.st.Configs.Get(ctx, key)
		if err != nil {
			return ConfigData{}, storeErr(err, "config", ref.Name())
		}
		return ConfigData{Ref: ref, Data: it.Value.Data}, nil
	}
	it, err := s.st.Secrets.Get(ctx, key)
	if err != nil {
		return ConfigData{}, storeErr(err, "secret", ref.Name())
	}
	data, err := s.secrets.open(it)
	if err != nil {
		return ConfigData{}, err
	}
	return ConfigData{Ref: ref, Type: it.Value.Type, Data: data}, nil
}

// refusedInUse is ErrConflict naming a resource of tenant that names
// ref, or nil when none does. It reads etcd, not a cache, as the check of
// a flavor in use does, and adds to txn, the delete's transaction, the
// condition that keeps the answer true: no resource of the tenant
// created or updated since the list. A resource written in between to
// name ref fails the delete (a conflict: it starts over and sees the
// resource); one written after the delete fails its own transaction,
// which compares ref unchanged (checkConfigRefs). Deletes are rare and
// already read every resource of the tenant; the writes of resources,
// frequent, pay one comparison per reference and write nothing more.
func refusedInUse(ctx context.Context, resources *store.Collection[api.Resource], tenant string, ref api.ConfigRef, txn *store.Txn) error {
	items, rev, err := resources.ListPrefix(ctx, tenant+"/")
	if err != nil {
		return storeErr(err, "resources", "")
	}
	resources.TxnUnchangedSince(txn, tenant+"/", rev)
	for _, it := range items {
		if c := it.Value.Spec.Compute; c != nil {
			for _, r := range c.Refs() {
				if r == ref {
					return fmt.Errorf("%s %q is used by resource %q: %w", ref.Kind(), ref.Name(), it.Value.Name, api.ErrConflict)
				}
			}
		}
	}
	return nil
}

// rollUsers makes a new revision of every resource of tenant whose spec
// names ref, with ref's new generation, so that its replicas are
// replaced through the normal rollout (maxSurge, maxUnavailable, pause,
// automatic revert). It follows a Config's or Secret's change: a
// resource that fails to roll is logged and rolls at its next write.
func (s *Resources) rollUsers(ctx context.Context, tenant string, ref api.ConfigRef) {
	items, _, err := s.st.Resources.ListPrefix(ctx, tenant+"/")
	if err != nil {
		s.log.Warn("listing the resources that use a changed "+ref.Kind(), "tenant", tenant, "name", ref.Name(), "err", err)
		return
	}
	for _, it := range items {
		c := it.Value.Spec.Compute
		if c == nil || it.Value.Deleting() || !slices.Contains(c.Refs(), ref) {
			continue
		}
		if _, err := s.write(ctx, tenant, it.Value.Name, 0, s.restamp(ctx, ref)); err != nil && !errors.Is(err, store.ErrNoChange) {
			s.log.Warn("rolling a resource after a "+ref.Kind()+" changed", "resource", it.Name, "name", ref.Name(), "err", err)
		}
	}
}

// restamp is the change that reads the generations of the resource's
// Configs and Secrets again; a different one is a new revision.
func (s *Resources) restamp(ctx context.Context, ref api.ConfigRef) change {
	return func(cur *api.Resource, txn *store.Txn) error {
		if cur.Deleting() || cur.Spec.Compute == nil {
			return store.ErrNoChange
		}
		next := deepCopySpec(cur.Spec)
		r := *cur
		r.Spec = next
		flavor, err := s.fittingFlavor(ctx, &r, "spec.flavor", next.Flavor)
		if err != nil {
			return err
		}
		if err := s.checkConfigRefs(ctx, &r, flavor, txn); err != nil {
			return err
		}
		if api.SameJSON(cur.Spec, r.Spec) {
			return store.ErrNoChange
		}
		cur.Spec = r.Spec
		cur.Revision++
		return s.addRevision(txn, cur, flavor, ref.Kind()+" "+ref.Name()+" changed")
	}
}

// deepCopySpec copies a spec through JSON (what is stored is what
// matters), so that a change never writes through to the cached one.
func deepCopySpec(spec api.ResourceSpec) api.ResourceSpec {
	var out api.ResourceSpec
	b, err := json.Marshal(spec)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil {
		panic(fmt.Sprintf("copying a resource spec: %v", err)) // api.ResourceSpec always round-trips
	}
	return out
}
