package api

import (
	"context"
	"errors"
	"fmt"

	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
)

// Revisions returns a resource's revisions, oldest first.
func (s *Resources) Revisions(ctx context.Context, tenant, name string) ([]api.Revision, error) {
	tenant, err := resourceScope(ctx, readResources, tenant, name)
	if err != nil {
		return nil, err
	}
	it, err := s.st.Resources.Get(ctx, state.ResourceName(tenant, name))
	if err != nil {
		return nil, storeErr(err, "resource", name)
	}
	revs, _, err := s.st.Revisions.ListPrefix(ctx, state.RevisionPrefix(tenant, name))
	if err != nil {
		return nil, storeErr(err, "revisions of resource", name)
	}
	out := []api.Revision{}
	for _, rv := range revs {
		if rv.Value.UID == it.Value.UID {
			out = append(out, *rv.Value)
		}
	}
	return out, nil
}

// Rollback makes a new revision with the spec of revision to.
func (s *Resources) Rollback(ctx context.Context, tenant, name string, to int64) (api.Resource, error) {
	tenant, err := resourceScope(ctx, writeResources, tenant, name)
	if err != nil {
		return api.Resource{}, err
	}
	if to <= 0 {
		return api.Resource{}, api.Invalid("revision", "must be a revision number (1 or more)")
	}
	var from int64 // the revision replaced, set by the attempt that writes
	out, err := s.write(ctx, tenant, name, 0, func(r *api.Resource, txn *store.Txn) error {
		from = 0
		if r.Deleting() {
			return fmt.Errorf("resource %q is being deleted: %w", r.Name, api.ErrConflict)
		}
		target, err := s.st.Revisions.Get(ctx, state.RevisionName(tenant, name, to))
		if errors.Is(err, store.ErrNotFound) || (err == nil && target.Value.UID != r.UID) {
			return fmt.Errorf("resource %q has no revision %d: %w", name, to, api.ErrNotFound)
		}
		if err != nil {
			return storeErr(err, "revision", fmt.Sprint(to))
		}
		if api.SameJSON(r.Spec, target.Value.Spec) {
			return store.ErrNoChange
		}
		r.Spec = target.Value.Spec
		flavor, err := s.checkReferences(ctx, r, txn)
		if err != nil {
			return fmt.Errorf("cannot roll back to revision %d: %w", to, err)
		}
		from = r.Revision
		r.Revision++
		return s.addRevision(txn, r, flavor, fmt.Sprintf("rollback to %d", to))
	})
	if err == nil && from > 0 {
		s.events.record(ctx, tenant, name, "RolledBack", fmt.Sprintf("rolled back from revision %d to the spec of revision %d, as revision %d", from, to, out.Revision))
	}
	return out, err
}

// PinRevision pins or unpins a revision: a pinned revision is never pruned
// by maxRevisionHistory.
func (s *Resources) PinRevision(ctx context.Context, tenant, name string, number int64, pinned bool) (api.Revision, error) {
	tenant, err := resourceScope(ctx, writeResources, tenant, name)
	if err != nil {
		return api.Revision{}, err
	}
	it, _, err := s.read(ctx, tenant, name)
	if err != nil {
		return api.Revision{}, err
	}
	rv, err := s.st.Revisions.Modify(ctx, state.RevisionName(tenant, name, number), func(r *api.Revision) error {
		if r.UID != it.Value.UID {
			return fmt.Errorf("resource %q has no revision %d: %w", name, number, api.ErrNotFound)
		}
		if r.Pinned == pinned {
			return store.ErrNoChange
		}
		r.Pinned = pinned
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return api.Revision{}, fmt.Errorf("resource %q has no revision %d: %w", name, number, api.ErrNotFound)
	}
	if err != nil {
		return api.Revision{}, storeErr(err, "revision", fmt.Sprint(number))
	}
	return *rv.Value, nil
}

// PauseRollout stops a rollout where it is (paused), or lets it go on: no
// region gets the new revision, and regions stop replacing replicas,
// until it is resumed.
func (s *Resources) PauseRollout(ctx context.Context, tenant, name string, paused bool) (api.Resource, error) {
	tenant, err := resourceScope(ctx, writeResources, tenant, name)
	if err != nil {
		return api.Resource{}, err
	}
	changed := false
	out, err := s.write(ctx, tenant, name, 0, func(r *api.Resource, _ *store.Txn) error {
		changed = false
		if r.Deleting() {
			return fmt.Errorf("resource %q is being deleted: %w", r.Name, api.ErrConflict)
		}
		if r.Rollout.Paused == paused {
			return store.ErrNoChange
		}
		r.Rollout.Paused, changed = paused, true
		return nil
	})
	if err == nil && changed {
		if paused {
			s.events.record(ctx, tenant, name, "RolloutPaused", "rollout paused: no region gets a new revision until it is resumed")
		} else {
			s.events.record(ctx, tenant, name, "RolloutResumed", "rollout resumed")
		}
	}
	return out, err
}

// CancelRollout goes back to the revision the running rollout started
// from (the seed's deployment Cancel): a new revision with that spec.
func (s *Resources) CancelRollout(ctx context.Context, tenant, name string) (api.Resource, error) {
	tenant, err := resourceScope(ctx, writeResources, tenant, name)
	if err != nil {
		return api.Resource{}, err
	}
	cur, err := s.Get(ctx, tenant, name)
	if err != nil {
		return api.Resource{}, err
	}
	ro := rolloutOf(&cur)
	if ro == nil || ro.State != api.RolloutProgressing && ro.State != api.RolloutPaused && ro.State != api.RolloutFailed {
		return api.Resource{}, fmt.Errorf("resource %q has no rollout to cancel: %w", name, api.ErrConflict)
	}
	cause := fmt.Sprintf("rollout of revision %d cancelled", ro.Revision)
	out, err := s.revertTo(ctx, tenant, name, cur.UID, ro.Revision, ro.FromRevision, cause)
	if err == nil {
		s.events.record(ctx, tenant, name, "RolloutCancelled", fmt.Sprintf("%s: back to the spec of revision %d, as revision %d", cause, ro.FromRevision, out.Revision))
	}
	return out, err
}

func rolloutOf(r *api.Resource) *api.RolloutStatus {
	if r.Status == nil {
		return nil
	}
	return r.Status.Rollout
}

// AutoRevert is the master's rollback of a failed rollout: when the
// resource is still at revision failed, it makes a new revision with the
// spec of revision to. The write carries the master's leadership guard.
func (s *Resources) AutoRevert(ctx context.Context, tenant, name, uid string, failed, to int64, why string, guard store.Guard) error {
	_, err := s.revertTo(ctx, tenant, name, uid, failed, to, why, guard)
	return err
}

func (s *Resources) revertTo(ctx context.Context, tenant, name, uid string, from, to int64, cause string, guards ...store.Guard) (api.Resource, error) {
	return s.write(ctx, tenant, name, 0, func(r *api.Resource, txn *store.Txn) error {
		if r.UID != uid || r.Revision != from || r.Deleting() {
			// Someone moved on already: nothing to revert.
			return store.ErrNoChange
		}
		target, err := s.st.Revisions.Get(ctx, state.RevisionName(tenant, name, to))
		if err != nil || target.Value.UID != r.UID {
			return fmt.Errorf("resource %q has no revision %d to go back to: %w", name, to, api.ErrNotFound)
		}
		r.Spec = target.Value.Spec
		r.Rollout.Paused = false
		flavor, err := s.checkReferences(ctx, r, txn)
		if err != nil {
			return fmt.Errorf("cannot go back to revision %d: %w", to, err)
		}
		r.Revision++
		return s.addRevision(txn, r, flavor, cause)
	}, guards...)
}

// addRevision adds revision r.Revision, a snapshot of r's spec, to txn.
func (s *Resources) addRevision(txn *store.Txn, r *api.Resource, flavor *api.Flavor, cause string) error {
	rev := api.Revision{
		Resource: r.Name, Tenant: r.Tenant, UID: r.UID, Number: r.Revision,
		Spec: r.Spec, FlavorSpec: flavorSpec(flavor), Cause: cause, CreatedAt: now(),
	}
	// Put: a revision with this number can only be a deleted namesake's,
	// since the resource's conditional update serialises writers.
	return s.st.Revisions.TxnPut(txn, state.RevisionName(r.Tenant, r.Name, r.Revision), &rev)
}

// pruneRevisions deletes r's revisions beyond the newest
// r.MaxRevisionHistory, after the write that made r. Pinned revisions
// are neither counted nor deleted; the current revision is the newest, so
// it always stays.
//
// It runs apart from the write so that it never fails one: pruning is
// housekeeping, and losing a race at it means someone else pruned (a
// concurrent writer) or kept (a pin) the revision. Each revision is a
// step of its own, deleted at the version listed; a step whose revision
// changed or went meanwhile is dropped, the rest goes on, and what is left
// over goes at the next write.
func (s *Resources) pruneRevisions(ctx context.Context, r *api.Resource) {
	revs, _, err := s.st.Revisions.ListPrefix(ctx, state.RevisionPrefix(r.Tenant, r.Name))
	if err != nil {
		s.log.Warn("listing revisions to prune", "resource", r.Tenant+"/"+r.Name, "err", err)
		return
	}
	var unpinned []store.Item[api.Revision] // oldest first: names sort by number
	for _, rv := range revs {
		if rv.Value.UID == r.UID && !rv.Value.Pinned {
			unpinned = append(unpinned, rv)
		}
	}
	extra := len(unpinned) - max(r.MaxRevisionHistory, 1)
	if extra <= 0 {
		return
	}
	b := s.st.Store.Batch()
	for _, rv := range unpinned[:extra] {
		s.st.Revisions.TxnDelete(b.Step(rv.Name), rv.Name, rv.ModRevision)
	}
	if _, err := b.Commit(ctx); err != nil {
		s.log.Debug("pruning revisions: some were changed or pruned meanwhile", "resource", r.Tenant+"/"+r.Name, "err", err)
	}
}
