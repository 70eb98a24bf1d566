package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
)

// PinRevision pins or unpins a revision: a pinned revision is never pruned
// by maxRevisionHistory.
func (s *Service) PinRevision(ctx context.Context, tenant, name string, number int64, pinned bool) (api.Revision, error) {
	tenant, err := resourceScope(ctx, writeResources, tenant, name)
	if err != nil {
		return api.Revision{}, err
	}
	it, _, err := s.getResource(ctx, tenant, name)
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

// PauseRollout stops a rollout where it is: no region gets the new
// revision, and regions stop replacing replicas, until it is resumed.
func (s *Service) PauseRollout(ctx context.Context, tenant, name string, paused bool) (api.Resource, error) {
	tenant, err := resourceScope(ctx, writeResources, tenant, name)
	if err != nil {
		return api.Resource{}, err
	}
	return s.writeResource(ctx, tenant, name, 0, func(r *api.Resource, _ *store.Txn) error {
		if r.Deleting() {
			return fmt.Errorf("resource %q is being deleted: %w", r.Name, api.ErrConflict)
		}
		if r.Rollout.Paused == paused {
			return store.ErrNoChange
		}
		r.Rollout.Paused = paused
		return nil
	})
}

// CancelRollout goes back to the revision the running rollout started
// from (the seed's deployment Cancel): a new revision with that spec.
func (s *Service) CancelRollout(ctx context.Context, tenant, name string) (api.Resource, error) {
	tenant, err := resourceScope(ctx, writeResources, tenant, name)
	if err != nil {
		return api.Resource{}, err
	}
	cur, err := s.GetResource(ctx, tenant, name)
	if err != nil {
		return api.Resource{}, err
	}
	ro := rolloutOf(&cur)
	if ro == nil || ro.State != api.RolloutProgressing && ro.State != api.RolloutPaused && ro.State != api.RolloutFailed {
		return api.Resource{}, fmt.Errorf("resource %q has no rollout to cancel: %w", name, api.ErrConflict)
	}
	return s.revertTo(ctx, tenant, name, cur.UID, ro.Revision, ro.FromRevision, fmt.Sprintf("rollout of revision %d cancelled", ro.Revision))
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
func (s *Service) AutoRevert(ctx context.Context, tenant, name, uid string, failed, to int64, why string, guard store.Guard) error {
	_, err := s.revertTo(ctx, tenant, name, uid, failed, to, why, guard)
	return err
}

func (s *Service) revertTo(ctx context.Context, tenant, name, uid string, from, to int64, cause string, guards ...store.Guard) (api.Resource, error) {
	return s.writeResource(ctx, tenant, name, 0, func(r *api.Resource, txn *store.Txn) error {
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
		flavor, err := s.checkReferences(ctx, r)
		if err != nil {
			return fmt.Errorf("cannot go back to revision %d: %w", to, err)
		}
		r.Revision++
		if err := s.addRevision(ctx, txn, r, flavor, cause); err != nil {
			return err
		}
		return s.pruneRevisions(ctx, txn, r)
	}, guards...)
}

// ---- REST ----

func (h *rest) pinRevision(pinned bool) handlerFunc {
	return func(r *http.Request) (int, any, error) {
		name, err := pathName(r, "name", "name")
		if err != nil {
			return 0, nil, err
		}
		n, err := strconv.ParseInt(r.PathValue("number"), 10, 64)
		if err != nil || n <= 0 {
			return 0, nil, api.Invalid("revision", "%q is not a revision number", r.PathValue("number"))
		}
		out, err := h.svc.PinRevision(r.Context(), r.URL.Query().Get("tenant"), name, n, pinned)
		return http.StatusOK, out, err
	}
}

func (h *rest) pauseRollout(paused bool) handlerFunc {
	return func(r *http.Request) (int, any, error) {
		name, err := pathName(r, "name", "name")
		if err != nil {
			return 0, nil, err
		}
		out, err := h.svc.PauseRollout(r.Context(), r.URL.Query().Get("tenant"), name, paused)
		return http.StatusOK, out, err
	}
}

func (h *rest) cancelRollout(r *http.Request) (int, any, error) {
	name, err := pathName(r, "name", "name")
	if err != nil {
		return 0, nil, err
	}
	out, err := h.svc.CancelRollout(r.Context(), r.URL.Query().Get("tenant"), name)
	return http.StatusOK, out, err
}
