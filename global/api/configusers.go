package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
)

// The resources that use a Config or Secret: a delete is refused while
// one names it (refusedInUse), and a change of its data rolls them
// (Resources.rollUsers).

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
func (s *Resources) restamp(ctx context.Context, ref api.ConfigRef) resourceChange {
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
