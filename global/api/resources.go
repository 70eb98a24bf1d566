package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
)

// Resources are the tenants' resources: their specs, revisions, rollouts
// and the idempotency records of their writes. The master reads them
// from etcd; this is their only writer of specs.
type Resources struct {
	st        *state.State
	resources *store.Cache[api.Resource]
	statuses  *store.Cache[api.ResourceStatus]
	flavors   *store.Cache[api.Flavor]
	regions   regionCatalog
	quotas    *quotas
	// events records the operators' actions (scale, roll back, delete,
	// pause and resume) as the resource's events.
	events *Events
	log    *slog.Logger

	// Revisions of this replica's latest writes per cache, for
	// read-your-writes: a cached read waits for the cache to reach them.
	wroteResources written
	wroteStatuses  written
}

// regionCatalog says which regions are registered, as of this replica's
// latest registration (Regions).
type regionCatalog interface {
	known(ctx context.Context) (func(name string) bool, error)
}

// WriteOptions is what a create or update request says besides the object.
type WriteOptions struct {
	// IdempotencyKey makes the write safe to retry (the Idempotency-Key
	// header, gRPC request_id): a retry with the same key and body returns
	// the current object and writes nothing.
	IdempotencyKey string
	// ReplicasUnset says the client left replicas out: a create gets the
	// kind's default (api.DefaultReplicas), an update keeps the current
	// count (scaling has its own operation).
	ReplicasUnset bool
}

// ListQuery selects a page of resources.
type ListQuery struct {
	// Selector is a label selector (api.ParseSelector).
	Selector string
	// Kind keeps one kind.
	Kind string
	// Limit is the page size: 0 means api.DefaultPageSize; more than
	// api.MaxPageSize is cut to it.
	Limit int
	// Continue is the previous page's token.
	Continue string
}

// ResourceList is one page of resources, sorted by name.
type ResourceList struct {
	Items []api.Resource `json:"items"`
	// Continue fetches the next page; empty on the last one.
	Continue string `json:"continue,omitempty"`
}

// Create creates a resource in tenant (empty: r.Tenant, else the caller's)
// with revision 1 and its initial status, in one transaction. It passes
// resourceAdmission (admission.go).
func (s *Resources) Create(ctx context.Context, tenant string, r api.Resource, o WriteOptions) (api.Resource, error) {
	tenant, err := s.writeTenant(ctx, tenant, &r, "")
	if err != nil {
		return api.Resource{}, err
	}
	w := &resourceWrite{s: s, op: "create", tenant: tenant, r: &r, o: o}
	if err := admit(ctx, resourceAdmission, onRequest, w); err != nil {
		return api.Resource{}, err
	}
	// Written first, the key looked up only when the write fails: the
	// transaction creates the key's record, so it fails when the key was
	// used before, and a new key costs no read.
	out, err := s.tryCreate(ctx, w)
	if err != nil && o.IdempotencyKey != "" {
		return s.createAgain(ctx, w, err)
	}
	return out, err
}

// writeTenant authorizes a write of r (named name, "" for a create) in
// tenant (empty: r.Tenant, else the caller's) and returns the tenant.
func (s *Resources) writeTenant(ctx context.Context, tenant string, r *api.Resource, name string) (string, error) {
	if tenant == "" {
		tenant = r.Tenant
	}
	var err error
	if name == "" {
		tenant, err = tenantScope(ctx, writeResources, tenant)
	} else {
		tenant, err = resourceScope(ctx, writeResources, tenant, name)
	}
	if err != nil {
		return "", err
	}
	if r.Tenant != "" && r.Tenant != tenant {
		return "", api.Invalid("tenant", "%q does not match the tenant of the request, %q", r.Tenant, tenant)
	}
	return tenant, nil
}

// tryCreate checks what w.r refers to and creates it.
func (s *Resources) tryCreate(ctx context.Context, w *resourceWrite) (api.Resource, error) {
	out, err := s.create(ctx, *w.r, w)
	if err != nil {
		return api.Resource{}, storeErr(err, "resource", w.r.Name)
	}
	return out, nil
}

// createAgain answers a create with an idempotency key whose write
// failed (with failed). A retry of a request that succeeded (or the
// loser of a race between two sends of one request) answers as the first
// did, whatever would stop it now (a reference, a quota); a key used for
// another request is a conflict. A record past RequestTTL is as good as
// none: replay forgets it and the create is tried once more.
func (s *Resources) createAgain(ctx context.Context, w *resourceWrite, failed error) (api.Resource, error) {
	key := w.o.IdempotencyKey
	done, err := s.replay(ctx, w.tenant, key, "create", w.hash)
	if done != nil || err != nil {
		return deref(done), err
	}
	if !errors.Is(failed, api.ErrAlreadyExists) {
		return api.Resource{}, failed
	}
	out, err := s.tryCreate(ctx, w)
	if err != nil {
		if done, rerr := s.replay(ctx, w.tenant, key, "create", w.hash); done != nil || rerr != nil {
			return deref(done), rerr
		}
	}
	return out, err
}

// create writes r (a copy of w.r, admitted on request), its revision 1
// and its status, passing the rest of its admission in the transaction.
func (s *Resources) create(ctx context.Context, r api.Resource, w *resourceWrite) (api.Resource, error) {
	var err error
	if r.UID, err = randomHex(16); err != nil {
		return api.Resource{}, err
	}
	t := now()
	r.Generation, r.Revision, r.CreatedAt, r.UpdatedAt = 1, 1, t, t
	st := api.ResourceStatus{UID: r.UID, Phase: api.PhaseCreated, Since: t, Replicas: r.Replicas, UpdatedAt: t}

	name := state.ResourceName(r.Tenant, r.Name)
	// A retry is an admission that lost to another write of the tenant
	// (quotas.admit), or a Config or Secret r names that changed since it
	// was checked: the checks run again. The resource's own Create fails
	// as ErrExists.
	var wrote int64
	err = s.st.Store.RetryConflicts(ctx, "create resource "+name, func() error {
		tw := *w
		tw.r, tw.txn = &r, s.st.Store.Txn()
		if err := admit(ctx, resourceAdmission, onStored, &tw); err != nil {
			return err
		}
		rev := api.Revision{
			Resource: r.Name, Tenant: r.Tenant, UID: r.UID, Number: 1,
			Spec: r.Spec, FlavorSpec: flavorSpec(tw.flavor), Cause: "create", CreatedAt: t,
		}
		_ = s.st.Resources.TxnCreate(tw.txn, name, &r) // build errors resurface in Commit
		// Put, not Create: a revision or status left by a deleted namesake is
		// stale, and the resource's Create above already guards the name.
		_ = s.st.Revisions.TxnPut(tw.txn, state.RevisionName(r.Tenant, r.Name, 1), &rev)
		_ = s.st.Statuses.TxnPut(tw.txn, name, &st)
		if err := admit(ctx, resourceAdmission, atCommit, &tw); err != nil {
			return err
		}
		wrote, err = tw.txn.Commit(ctx)
		return err
	})
	if err != nil {
		return api.Resource{}, err
	}
	s.quotas.committed(wrote)
	s.wroteResources.note(wrote)
	s.wroteStatuses.note(wrote)
	r.ResourceVersion, r.Status = wrote, &st
	return r, nil
}

// Get returns a resource joined with its status.
func (s *Resources) Get(ctx context.Context, tenant, name string) (api.Resource, error) {
	tenant, err := resourceScope(ctx, readResources, tenant, name)
	if err != nil {
		return api.Resource{}, err
	}
	it, st, err := s.read(ctx, tenant, name)
	if err != nil {
		return api.Resource{}, err
	}
	return resourceView(it, st), nil
}

// resourcePage is a checked ListQuery.
type resourcePage struct {
	sel   api.Selector
	kind  string
	limit int
	after string // a resource name
}

func (q ListQuery) checked() (resourcePage, error) {
	if err := api.ValidateSelector("selector", q.Selector); err != nil {
		return resourcePage{}, err
	}
	sel, err := api.ParseSelector(q.Selector)
	if err != nil {
		return resourcePage{}, err
	}
	if q.Kind != "" && !slices.Contains(api.ResourceKinds, api.ResourceKind(q.Kind)) {
		return resourcePage{}, api.Invalid("kind", "%q is not a resource kind", q.Kind)
	}
	p := resourcePage{sel: sel, kind: q.Kind}
	if p.limit, err = api.PageSize(q.Limit); err != nil {
		return resourcePage{}, err
	}
	if p.after, err = api.AfterToken(q.Continue); err != nil {
		return resourcePage{}, err
	}
	if api.ValidateName("continue", p.after) != nil && p.after != "" {
		return resourcePage{}, api.Invalid("continue", "is not a token this list issued")
	}
	return p, nil
}

func (p resourcePage) matches(it store.Item[api.Resource]) bool {
	return (p.kind == "" || string(it.Value.Kind) == p.kind) && p.sel.Matches(it.Value.Labels)
}

// List returns a page of a tenant's resources from the caches, once they
// hold this replica's latest write.
func (s *Resources) List(ctx context.Context, tenant string, q ListQuery) (ResourceList, error) {
	tenant, err := tenantScope(ctx, readResources, tenant)
	if err != nil {
		return ResourceList{}, err
	}
	p, err := q.checked()
	if err != nil {
		return ResourceList{}, err
	}
	if err := caught(ctx, s.resources, &s.wroteResources); err != nil {
		return ResourceList{}, err
	}
	if err := caught(ctx, s.statuses, &s.wroteStatuses); err != nil {
		return ResourceList{}, err
	}
	items := s.match(tenant, p)
	list := ResourceList{Items: make([]api.Resource, 0, len(items))}
	if len(items) > p.limit {
		// One more match exists, so there is a next page.
		items = items[:p.limit]
		list.Continue = api.ContinueToken(items[p.limit-1].Value.Name)
	}
	for _, it := range items {
		var st *api.ResourceStatus
		if sit, ok := s.statuses.Get(it.Name); ok && sit.Value.UID == it.Value.UID {
			st = sit.Value
		}
		list.Items = append(list.Items, resourceView(it, st))
	}
	return list, nil
}

// match returns up to p.limit+1 of a tenant's resources that p selects,
// in name order. The tenant is a range of the cache's sorted names; a
// selector with a term the label index serves (k=v, k) reads only the
// objects under its most selective such term, so that a list costs its
// matches, not the tenant's size.
func (s *Resources) match(tenant string, p resourcePage) []store.Item[api.Resource] {
	prefix := tenant + "/"
	after := ""
	if p.after != "" {
		after = prefix + p.after
	}
	best, bestLen := "", -1
	for _, r := range p.sel {
		var term string
		switch {
		case r.Op == "=" && r.Values[0] != "":
			term = state.LabelTerm(tenant, r.Key, r.Values[0])
		case r.Op == "=", r.Op == "exists":
			term = state.LabelTerm(tenant, r.Key, "")
		default:
			continue
		}
		if n := s.resources.IndexLen(state.LabelIndex, term); bestLen < 0 || n < bestLen {
			best, bestLen = term, n
		}
	}
	if bestLen >= 0 {
		return s.resources.ByIndex(state.LabelIndex, best, prefix, after, p.limit+1, p.matches)
	}
	return s.resources.Range(prefix, after, p.limit+1, p.matches)
}

// Update replaces the user-settable fields of a resource. A change of its
// spec makes a new revision; any change bumps its generation; no change
// writes nothing. A resourceVersion in r makes the write conditional on
// it; without one a lost race is retried. It passes resourceAdmission
// (admission.go).
func (s *Resources) Update(ctx context.Context, tenant string, in api.Resource, o WriteOptions) (api.Resource, error) {
	tenant, err := s.writeTenant(ctx, tenant, &in, in.Name)
	if err != nil {
		return api.Resource{}, err
	}
	w := &resourceWrite{s: s, op: "update", tenant: tenant, r: &in, o: o, expect: in.ResourceVersion}
	if err := admit(ctx, resourceAdmission, onRequest, w); err != nil || w.answer != nil {
		return deref(w.answer), err
	}
	res, err := s.writeAdmitted(ctx, w, in.Name, s.replace(ctx, in, w))
	if err != nil {
		// As for create: the loser of a race between retries answers like
		// a retry.
		if done, rerr := s.replay(ctx, tenant, o.IdempotencyKey, "update", w.hash); done != nil || rerr != nil {
			return deref(done), rerr
		}
		return api.Resource{}, err
	}
	return res, nil
}

// replace is Update's change: in's settable fields over the stored ones,
// with a new revision when the spec differs. It passes the onStored steps
// of w's admission; the write passes the atCommit ones.
func (s *Resources) replace(ctx context.Context, in api.Resource, w *resourceWrite) resourceChange {
	return func(cur *api.Resource, txn *store.Txn) error {
		if err := replaceable(cur, &in); err != nil {
			return err
		}
		next := in
		if w.o.ReplicasUnset {
			next.Replicas = cur.Replicas
		}
		if next.Autoscale != nil && cur.Autoscale != nil {
			// The count is the autoscaler's: a manifest applied again
			// does not reset it, new bounds only bring it within them.
			next.Replicas = next.Autoscale.Clamp(cur.Replicas)
		}
		if api.SameJSON(cur.Settable(), next) {
			return store.ErrNoChange
		}
		w.r, w.txn = &next, txn
		if err := admit(ctx, resourceAdmission, onStored, w); err != nil {
			return err
		}
		newSpec := !api.SameJSON(cur.Spec, next.Spec)
		cur.Labels, cur.Spec, cur.Replicas, cur.Schedule = next.Labels, next.Spec, next.Replicas, next.Schedule
		cur.Overrides, cur.Failover, cur.Rollout, cur.Autoscale = next.Overrides, next.Failover, next.Rollout, next.Autoscale
		cur.MaxRevisionHistory = next.MaxRevisionHistory
		if newSpec {
			cur.Revision++
			if err := s.addRevision(txn, cur, w.flavor, "update"); err != nil {
				return err
			}
		}
		return nil
	}
}

// replaceable checks that cur may be replaced by in.
func replaceable(cur, in *api.Resource) error {
	switch {
	case cur.Deleting():
		return fmt.Errorf("resource %q is being deleted: %w", cur.Name, api.ErrConflict)
	case in.Kind == "":
		return api.Invalid("kind", "is required (it is %s)", cur.Kind)
	case in.Kind != cur.Kind:
		return api.Invalid("kind", "is immutable: %q is a %s, not a %s", cur.Name, cur.Kind, in.Kind)
	}
	return nil
}

// Scale sets the replica count. Scaling is not a new revision.
func (s *Resources) Scale(ctx context.Context, tenant, name string, replicas int) (api.Resource, error) {
	tenant, err := resourceScope(ctx, writeResources, tenant, name)
	if err != nil {
		return api.Resource{}, err
	}
	if err := api.ValidateReplicas("", replicas); err != nil {
		return api.Resource{}, err
	}
	from := -1 // set by the attempt that writes
	out, err := s.write(ctx, tenant, name, 0, func(r *api.Resource, _ *store.Txn) error {
		from = -1
		if r.Deleting() {
			return fmt.Errorf("resource %q is being deleted: %w", r.Name, api.ErrConflict)
		}
		if err := api.ValidateReplicas(r.Kind, replicas); err != nil {
			return err
		}
		if a := r.Autoscale; a != nil {
			return fmt.Errorf("resource %q scales itself (autoscale, %d to %d replicas): change autoscale.minReplicas or maxReplicas, or remove autoscale to scale by hand: %w", r.Name, a.MinReplicas, a.MaxReplicas, api.ErrConflict)
		}
		if r.Replicas == replicas {
			return store.ErrNoChange
		}
		from, r.Replicas = r.Replicas, replicas
		return r.Validate()
	})
	if err == nil && from >= 0 {
		s.events.record(ctx, tenant, name, "Scaled", fmt.Sprintf("scaled from %d to %d replicas", from, replicas))
	}
	return out, err
}

// AutoScale sets an autoscaled resource's replicas from from to to on the
// master's behalf, fenced by its leadership (guard), and records why
// (the autoscaler's inputs) as the Scaled event. A resource that changed
// meanwhile (another UID, another count, no autoscale) is left alone:
// the next decision reads it again.
func (s *Resources) AutoScale(ctx context.Context, tenant, name, uid string, from, to int, why string, guard store.Guard) error {
	wrote := false
	_, err := s.write(ctx, tenant, name, 0, func(r *api.Resource, _ *store.Txn) error {
		wrote = false
		if r.UID != uid || r.Replicas != from || r.Autoscale == nil || r.Deleting() {
			return store.ErrNoChange
		}
		r.Replicas, wrote = r.Autoscale.Clamp(to), true
		return r.Validate()
	}, guard)
	if err == nil && wrote {
		s.events.record(ctx, tenant, name, "Scaled", why)
	}
	return err
}

// Delete asks for the resource's deletion; the master removes it once
// every region has. Asking again returns it unchanged. expect, when not
// 0, is the resourceVersion the client read (If-Match): another one is a
// conflict.
func (s *Resources) Delete(ctx context.Context, tenant, name string, expect int64) (api.Resource, error) {
	tenant, err := resourceScope(ctx, writeResources, tenant, name)
	if err != nil {
		return api.Resource{}, err
	}
	requested := false
	out, err := s.write(ctx, tenant, name, expect, func(r *api.Resource, _ *store.Txn) error {
		requested = false
		if r.Deleting() {
			return store.ErrNoChange
		}
		t := now()
		r.DeletionRequestedAt, requested = &t, true
		return nil
	})
	if err == nil && requested {
		s.events.record(ctx, tenant, name, "DeletionRequested", "deletion requested: every region destroys its replicas, then the resource goes")
	}
	return out, err
}

// resourceChange edits a stored resource in place and may add operations to the
// transaction that writes it. It returns store.ErrNoChange, before
// changing anything, to write nothing.
type resourceChange func(r *api.Resource, txn *store.Txn) error

// write is the read-modify-write under update, scale, rollback, delete and
// the rollout operations: read the resource with its status, let fn
// change it, and write it in one transaction conditional on the version
// read, bumping its generation. When another writer won in between it
// starts over (store.RetryConflicts), unless the client pinned the version
// it read (expect), which is then a conflict. A write that made a revision
// or lowered the history prunes old revisions afterwards.
func (s *Resources) write(ctx context.Context, tenant, name string, expect int64, fn resourceChange, guards ...store.Guard) (api.Resource, error) {
	w := &resourceWrite{s: s, tenant: tenant, expect: expect, guarded: len(guards) > 0}
	return s.writeAdmitted(ctx, w, name, fn, guards...)
}

// writeAdmitted is write for w, whose atCommit steps (resourceAdmission)
// run in the transaction once the client's precondition held.
func (s *Resources) writeAdmitted(ctx context.Context, w *resourceWrite, name string, fn resourceChange, guards ...store.Guard) (api.Resource, error) {
	tenant, expect := w.tenant, w.expect
	key := state.ResourceName(tenant, name)
	var (
		out   api.Resource
		prune *api.Resource
	)
	err := s.st.Store.RetryConflicts(ctx, "write resource "+key, func() error {
		it, st, err := s.read(ctx, tenant, name)
		if err != nil {
			return err
		}
		before := *it.Value
		txn := s.st.Store.Txn().Guard(guards...)
		r := it.Value
		err = fn(r, txn)
		if err != nil && !errors.Is(err, store.ErrNoChange) {
			return err
		}
		// The client's precondition comes after fn's checks: a request
		// that could never succeed says why, not that it is stale.
		if expect != 0 && it.ModRevision != expect {
			return fmt.Errorf("resource %q: resourceVersion %d is stale (it is now %d); read it again: %w",
				name, expect, it.ModRevision, api.ErrConflict)
		}
		if err != nil { // store.ErrNoChange
			out = resourceView(it, st)
			return nil
		}
		r.Generation++
		r.UpdatedAt = now()
		_ = s.st.Resources.TxnUpdate(txn, key, r, it.ModRevision)
		w.stored, w.r, w.txn = &before, r, txn
		if err := admit(ctx, resourceAdmission, atCommit, w); err != nil {
			return err
		}
		wrote, err := txn.Commit(ctx)
		if err != nil {
			// A conflict on the resource or the tenant's admission:
			// another writer won; start over from a fresh read, which
			// also re-checks expect.
			return err
		}
		s.quotas.committed(wrote)
		s.wroteResources.note(wrote)
		it.ModRevision = wrote
		out = resourceView(it, st)
		if r.Revision != before.Revision || r.MaxRevisionHistory < before.MaxRevisionHistory {
			prune = r
		}
		return nil
	})
	if err != nil {
		return api.Resource{}, storeErr(err, "resource", name)
	}
	if prune != nil {
		s.pruneRevisions(ctx, prune)
	}
	return out, nil
}

// read reads a resource and its status in one etcd round trip (a
// read-only transaction), so both are from one revision.
func (s *Resources) read(ctx context.Context, tenant, name string) (store.Item[api.Resource], *api.ResourceStatus, error) {
	key := state.ResourceName(tenant, name)
	pfx := s.st.Store.Prefix()
	resp, err := s.st.Store.Client().Txn(ctx).Then(
		clientv3.OpGet(pfx+s.st.Resources.Key(key)),
		clientv3.OpGet(pfx+s.st.Statuses.Key(key)),
	).Commit()
	if err != nil {
		return store.Item[api.Resource]{}, nil, storeErr(fmt.Errorf("get resource %s: %w", key, err), "resource", name)
	}
	kvs := make([]*store.KV, 2)
	for i, op := range resp.Responses {
		if rr := op.GetResponseRange(); rr != nil && len(rr.Kvs) > 0 {
			kv := rr.Kvs[0]
			kvs[i] = &store.KV{
				Key: strings.TrimPrefix(string(kv.Key), pfx), Value: kv.Value,
				CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision, Version: kv.Version,
			}
		}
	}
	if kvs[0] == nil {
		return store.Item[api.Resource]{}, nil, api.NotFound("resource", name)
	}
	it, err := s.st.Resources.Decode(*kvs[0])
	if err != nil {
		return store.Item[api.Resource]{}, nil, err
	}
	var st *api.ResourceStatus
	if kvs[1] != nil {
		sit, err := s.st.Statuses.Decode(*kvs[1])
		// A status of a deleted namesake is not this resource's.
		if err == nil && sit.Value.UID == it.Value.UID {
			st = sit.Value
		}
	}
	return it, st, nil
}

// resourceView is a stored resource as clients see it.
func resourceView(it store.Item[api.Resource], st *api.ResourceStatus) api.Resource {
	r := *it.Value
	r.ResourceVersion, r.Status = it.ModRevision, st
	return r
}

func deref(r *api.Resource) api.Resource {
	if r == nil {
		return api.Resource{}
	}
	return *r
}
