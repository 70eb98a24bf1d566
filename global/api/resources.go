package api

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
)

// List limits.
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

// writeAttempts bounds the read-modify-write retries of one request. Each
// retry follows a write that won, so running out means sustained contention,
// reported as a conflict rather than spinning.
const writeAttempts = 8

// ociRefRE is a loose OCI reference: the region resolves and pulls it, so
// the API only rejects what cannot be one (spaces, control characters).
var ociRefRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._\-/:@]*$`)

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
	// Limit is the page size: 0 means DefaultListLimit; more than
	// MaxListLimit is cut to it.
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

// CreateResource creates a resource in tenant (empty: r.Tenant, else the
// caller's) with revision 1 and its initial status, in one transaction.
func (s *Service) CreateResource(ctx context.Context, tenant string, r api.Resource, o WriteOptions) (api.Resource, error) {
	if tenant == "" {
		tenant = r.Tenant
	}
	tenant, err := tenantScope(ctx, writeResources, tenant)
	if err != nil {
		return api.Resource{}, err
	}
	if r.Tenant != "" && r.Tenant != tenant {
		return api.Resource{}, api.Invalid("tenant", "%q does not match the tenant of the request, %q", r.Tenant, tenant)
	}
	r = r.Settable()
	r.Tenant = tenant
	r.Default()
	if o.ReplicasUnset {
		r.Replicas = api.DefaultReplicas(r.Kind)
	}
	if err := r.Validate(); err != nil {
		return api.Resource{}, err
	}
	hash := requestHash("create", tenant, &r)
	if done, err := s.replay(ctx, tenant, o.IdempotencyKey, "create", hash); done != nil || err != nil {
		return deref(done), err
	}
	flavor, err := s.checkReferences(ctx, &r)
	if err != nil {
		return api.Resource{}, err
	}

	if r.UID, err = randomHex(16); err != nil {
		return api.Resource{}, err
	}
	t := now()
	r.Generation, r.Revision, r.CreatedAt, r.UpdatedAt = 1, 1, t, t
	rev := api.Revision{
		Resource: r.Name, Tenant: tenant, UID: r.UID, Number: 1,
		Spec: r.Spec, FlavorSpec: flavorSpec(flavor), Cause: "create", CreatedAt: t,
	}
	st := api.ResourceStatus{UID: r.UID, Phase: api.PhaseCreated, Since: t, Replicas: r.Replicas, UpdatedAt: t}

	key := state.ResourceName(tenant, r.Name)
	txn := s.st.Store.Txn()
	_ = s.st.Resources.TxnCreate(txn, key, &r) // build errors resurface in Commit
	// Put, not Create: a revision or status left by a deleted namesake is
	// stale, and the resource's Create above already guards the name.
	_ = s.st.Revisions.TxnPut(txn, state.RevisionName(tenant, r.Name, 1), &rev)
	_ = s.st.Statuses.TxnPut(txn, key, &st)
	s.addRequest(txn, tenant, o.IdempotencyKey, hash, "create", &r)
	wrote, err := txn.Commit(ctx)
	if err != nil {
		// Two requests with one key race: the loser fails on the key (or on
		// the name the winner took) and must answer like a retry.
		if done, rerr := s.replay(ctx, tenant, o.IdempotencyKey, "create", hash); done != nil || rerr != nil {
			return deref(done), rerr
		}
		return api.Resource{}, storeErr(err, "resource", r.Name)
	}
	s.wroteResources.note(wrote)
	s.wroteStatuses.note(wrote)
	r.ResourceVersion, r.Status = wrote, &st
	return r, nil
}

// GetResource returns a resource joined with its status.
func (s *Service) GetResource(ctx context.Context, tenant, name string) (api.Resource, error) {
	tenant, err := resourceScope(ctx, readResources, tenant, name)
	if err != nil {
		return api.Resource{}, err
	}
	it, st, err := s.getResource(ctx, tenant, name)
	if err != nil {
		return api.Resource{}, err
	}
	return view(it, st), nil
}

// ListResources returns a page of a tenant's resources from the caches,
// once they hold this replica's latest write.
func (s *Service) ListResources(ctx context.Context, tenant string, q ListQuery) (ResourceList, error) {
	tenant, err := tenantScope(ctx, readResources, tenant)
	if err != nil {
		return ResourceList{}, err
	}
	sel, err := api.ParseSelector(q.Selector)
	if err != nil {
		return ResourceList{}, err
	}
	if q.Kind != "" && !slices.Contains(api.ResourceKinds, api.ResourceKind(q.Kind)) {
		return ResourceList{}, api.Invalid("kind", "%q is not a resource kind", q.Kind)
	}
	limit := q.Limit
	switch {
	case limit < 0:
		return ResourceList{}, api.Invalid("limit", "must not be negative")
	case limit == 0:
		limit = DefaultListLimit
	case limit > MaxListLimit:
		limit = MaxListLimit
	}
	after := ""
	if q.Continue != "" {
		b, err := base64.RawURLEncoding.DecodeString(q.Continue)
		if err != nil || api.ValidateName("continue", string(b)) != nil {
			return ResourceList{}, api.Invalid("continue", "is not a token this list issued")
		}
		after = string(b)
	}
	if err := caught(ctx, s.resources, &s.wroteResources); err != nil {
		return ResourceList{}, err
	}
	if err := caught(ctx, s.statuses, &s.wroteStatuses); err != nil {
		return ResourceList{}, err
	}

	prefix := tenant + "/"
	list := ResourceList{Items: []api.Resource{}}
	for _, it := range s.resources.ListPrefix(prefix) {
		r := it.Value
		if r.Name <= after || (q.Kind != "" && string(r.Kind) != q.Kind) || !sel.Matches(r.Labels) {
			continue
		}
		if len(list.Items) == limit {
			// One more match exists, so there is a next page.
			list.Continue = base64.RawURLEncoding.EncodeToString([]byte(list.Items[limit-1].Name))
			break
		}
		var st *api.ResourceStatus
		if sit, ok := s.statuses.Get(it.Name); ok && sit.Value.UID == r.UID {
			st = sit.Value
		}
		list.Items = append(list.Items, view(it, st))
	}
	return list, nil
}

// UpdateResource replaces the user-settable fields of a resource. A change
// of its spec makes a new revision; any change bumps its generation; no
// change writes nothing. A resourceVersion in r makes the write
// conditional on it.
func (s *Service) UpdateResource(ctx context.Context, tenant string, in api.Resource, o WriteOptions) (api.Resource, error) {
	if tenant == "" {
		tenant = in.Tenant
	}
	tenant, err := resourceScope(ctx, writeResources, tenant, in.Name)
	if err != nil {
		return api.Resource{}, err
	}
	if in.Tenant != "" && in.Tenant != tenant {
		return api.Resource{}, api.Invalid("tenant", "%q does not match the tenant of the request, %q", in.Tenant, tenant)
	}
	expect := in.ResourceVersion
	in = in.Settable()
	in.Tenant = tenant
	in.Default()
	hash := requestHash("update", tenant, struct {
		R             *api.Resource
		Version       int64
		ReplicasUnset bool
	}{&in, expect, o.ReplicasUnset})
	if done, err := s.replay(ctx, tenant, o.IdempotencyKey, "update", hash); done != nil || err != nil {
		return deref(done), err
	}

	res, err := s.writeResource(ctx, tenant, in.Name, expect, func(cur *api.Resource, txn *store.Txn) error {
		if cur.Deleting() {
			return fmt.Errorf("resource %q is being deleted: %w", cur.Name, api.ErrConflict)
		}
		if in.Kind == "" {
			return api.Invalid("kind", "is required (it is %s)", cur.Kind)
		}
		if in.Kind != cur.Kind {
			return api.Invalid("kind", "is immutable: %q is a %s, not a %s", cur.Name, cur.Kind, in.Kind)
		}
		next := in
		if o.ReplicasUnset {
			next.Replicas = cur.Replicas
		}
		if api.SameJSON(cur.Settable(), next) {
			return store.ErrNoChange
		}
		if err := next.Validate(); err != nil {
			return err
		}
		flavor, err := s.checkReferences(ctx, &next)
		if err != nil {
			return err
		}
		newSpec := !api.SameJSON(cur.Spec, next.Spec)
		cur.Labels, cur.Spec, cur.Replicas, cur.Schedule = next.Labels, next.Spec, next.Replicas, next.Schedule
		cur.Overrides, cur.Failover, cur.Rollout = next.Overrides, next.Failover, next.Rollout
		cur.MaxRevisionHistory = next.MaxRevisionHistory
		if newSpec {
			cur.Revision++
			if err := s.addRevision(ctx, txn, cur, flavor, "update"); err != nil {
				return err
			}
		}
		s.addRequest(txn, tenant, o.IdempotencyKey, hash, "update", cur)
		return s.pruneRevisions(ctx, txn, cur)
	})
	if err != nil {
		// As for create: the loser of a race between retries answers like
		// a retry.
		if done, rerr := s.replay(ctx, tenant, o.IdempotencyKey, "update", hash); done != nil || rerr != nil {
			return deref(done), rerr
		}
		return api.Resource{}, err
	}
	return res, nil
}

// ScaleResource sets the replica count. Scaling is not a new revision.
func (s *Service) ScaleResource(ctx context.Context, tenant, name string, replicas int) (api.Resource, error) {
	tenant, err := resourceScope(ctx, writeResources, tenant, name)
	if err != nil {
		return api.Resource{}, err
	}
	if err := api.ValidateReplicas("", replicas); err != nil {
		return api.Resource{}, err
	}
	return s.writeResource(ctx, tenant, name, 0, func(r *api.Resource, _ *store.Txn) error {
		if r.Deleting() {
			return fmt.Errorf("resource %q is being deleted: %w", r.Name, api.ErrConflict)
		}
		if err := api.ValidateReplicas(r.Kind, replicas); err != nil {
			return err
		}
		if r.Replicas == replicas {
			return store.ErrNoChange
		}
		r.Replicas = replicas
		return r.Validate()
	})
}

// RollbackResource makes a new revision with the spec of revision to.
func (s *Service) RollbackResource(ctx context.Context, tenant, name string, to int64) (api.Resource, error) {
	tenant, err := resourceScope(ctx, writeResources, tenant, name)
	if err != nil {
		return api.Resource{}, err
	}
	if to <= 0 {
		return api.Resource{}, api.Invalid("revision", "must be a revision number (1 or more)")
	}
	return s.writeResource(ctx, tenant, name, 0, func(r *api.Resource, txn *store.Txn) error {
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
		flavor, err := s.checkReferences(ctx, r)
		if err != nil {
			return fmt.Errorf("cannot roll back to revision %d: %w", to, err)
		}
		r.Revision++
		if err := s.addRevision(ctx, txn, r, flavor, fmt.Sprintf("rollback to %d", to)); err != nil {
			return err
		}
		return s.pruneRevisions(ctx, txn, r)
	})
}

// DeleteResource asks for the resource's deletion; the master removes it
// once every region has. Asking again returns it unchanged.
func (s *Service) DeleteResource(ctx context.Context, tenant, name string) (api.Resource, error) {
	tenant, err := resourceScope(ctx, writeResources, tenant, name)
	if err != nil {
		return api.Resource{}, err
	}
	return s.writeResource(ctx, tenant, name, 0, func(r *api.Resource, _ *store.Txn) error {
		if r.Deleting() {
			return store.ErrNoChange
		}
		t := now()
		r.DeletionRequestedAt = &t
		return nil
	})
}

// ListRevisions returns a resource's revisions, oldest first.
func (s *Service) ListRevisions(ctx context.Context, tenant, name string) ([]api.Revision, error) {
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

// change edits a stored resource in place and may add operations to the
// transaction that writes it. It returns store.ErrNoChange, before
// changing anything, to write nothing.
type change func(r *api.Resource, txn *store.Txn) error

// writeResource is the read-modify-write under update, scale, rollback and
// delete: read the resource with its status, let fn change it, and write it
// in one transaction conditional on the version read, bumping its
// generation. When another writer won in between it starts over, unless the
// client pinned the version it read (expect), which is then a conflict.
func (s *Service) writeResource(ctx context.Context, tenant, name string, expect int64, fn change, guards ...store.Guard) (api.Resource, error) {
	key := state.ResourceName(tenant, name)
	for attempt := 1; ; attempt++ {
		it, st, err := s.getResource(ctx, tenant, name)
		if err != nil {
			return api.Resource{}, err
		}
		if expect != 0 && it.ModRevision != expect {
			return api.Resource{}, fmt.Errorf("resource %q: resourceVersion %d is stale (it is now %d); read it again: %w",
				name, expect, it.ModRevision, api.ErrConflict)
		}
		txn := s.st.Store.Txn().Guard(guards...)
		r := it.Value
		if err := fn(r, txn); errors.Is(err, store.ErrNoChange) {
			return view(it, st), nil
		} else if err != nil {
			return api.Resource{}, err
		}
		r.Generation++
		r.UpdatedAt = now()
		_ = s.st.Resources.TxnUpdate(txn, key, r, it.ModRevision)
		wrote, err := txn.Commit(ctx)
		if err == nil {
			s.wroteResources.note(wrote)
			it.ModRevision = wrote
			return view(it, st), nil
		}
		// A conflict on the resource or on a revision being pruned: another
		// writer won. Start over from a fresh read, which also re-checks
		// expect.
		if errors.Is(err, store.ErrConflict) && attempt < writeAttempts {
			s.log.Debug("resource write conflict; retrying", "resource", key, "attempt", attempt, "err", err)
			continue
		}
		return api.Resource{}, storeErr(err, "resource", name)
	}
}

// getResource reads a resource and its status in one etcd round trip (a
// read-only transaction), so both are from one revision.
func (s *Service) getResource(ctx context.Context, tenant, name string) (store.Item[api.Resource], *api.ResourceStatus, error) {
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

// addRevision adds revision r.Revision, a snapshot of r's spec, to txn.
func (s *Service) addRevision(ctx context.Context, txn *store.Txn, r *api.Resource, flavor *api.Flavor, cause string) error {
	rev := api.Revision{
		Resource: r.Name, Tenant: r.Tenant, UID: r.UID, Number: r.Revision,
		Spec: r.Spec, FlavorSpec: flavorSpec(flavor), Cause: cause, CreatedAt: now(),
	}
	// Put: a revision with this number can only be a deleted namesake's,
	// since the resource's conditional update serialises writers.
	return s.st.Revisions.TxnPut(txn, state.RevisionName(r.Tenant, r.Name, r.Revision), &rev)
}

// pruneRevisions adds to txn the deletion of the oldest revisions beyond
// r.MaxRevisionHistory. Pinned revisions are neither counted nor deleted,
// and the current one (r.Revision, which txn may be adding) is always kept.
func (s *Service) pruneRevisions(ctx context.Context, txn *store.Txn, r *api.Resource) error {
	revs, _, err := s.st.Revisions.ListPrefix(ctx, state.RevisionPrefix(r.Tenant, r.Name))
	if err != nil {
		return storeErr(err, "revisions of resource", r.Name)
	}
	// The current revision always stays and takes one of the places,
	// unless it is pinned: pinned revisions are not counted.
	keep := r.MaxRevisionHistory - 1
	var unpinned []store.Item[api.Revision] // oldest first: names sort by number
	for _, rv := range revs {
		switch {
		case rv.Value.UID != r.UID:
		case rv.Value.Number == r.Revision:
			if rv.Value.Pinned {
				keep++
			}
		case !rv.Value.Pinned:
			unpinned = append(unpinned, rv)
		}
	}
	// Within what the transaction can still hold (the resource's own
	// update needs one more): a history cut by much more than that
	// shrinks over the next writes.
	for i := 0; i < len(unpinned)-max(keep, 0) && txn.Room() > 1; i++ {
		s.st.Revisions.TxnDelete(txn, unpinned[i].Name, unpinned[i].ModRevision)
	}
	return nil
}

// checkReferences checks what a resource names outside itself: its flavor
// (which must exist and fit its kind), the regions it names (which must be
// registered) and a compute image (an Image resource of the tenant, or an
// OCI reference). It returns the flavor, nil if none.
func (s *Service) checkReferences(ctx context.Context, r *api.Resource) (*api.Flavor, error) {
	flavor, err := s.fittingFlavor(ctx, r, "spec.flavor", r.Spec.Flavor)
	if err != nil {
		return nil, err
	}
	if err := caught(ctx, s.regionCache, &s.wroteRegions); err != nil {
		return nil, err
	}
	registered := func(field, name string) error {
		if _, ok := s.regionCache.Get(name); !ok {
			return api.Invalid(field, "region %q is not registered", name)
		}
		return nil
	}
	for i, t := range r.Schedule.Regions {
		if err := registered(fmt.Sprintf("schedule.regions[%d].name", i), t.Name); err != nil {
			return nil, err
		}
	}
	for _, region := range sortedKeys(r.Overrides) {
		field := "overrides." + region
		if err := registered(field, region); err != nil {
			return nil, err
		}
		o := r.Overrides[region]
		of, err := s.fittingFlavor(ctx, r, field+".flavor", o.Flavor)
		if err != nil {
			return nil, err
		}
		if of != nil && flavor != nil && of.Kind != flavor.Kind {
			return nil, api.Invalid(field+".flavor", "flavor %q is a %s flavor but spec.flavor %q is a %s flavor", of.Name, of.Kind, flavor.Name, flavor.Kind)
		}
		if o.Image != "" {
			if err := s.checkImage(ctx, r.Tenant, field+".image", o.Image, flavor); err != nil {
				return nil, err
			}
		}
	}
	if f := r.Failover; f != nil {
		for i, name := range f.ToRegions {
			if err := registered(fmt.Sprintf("failover.toRegions[%d]", i), name); err != nil {
				return nil, err
			}
		}
	}
	if c := r.Spec.Compute; c != nil {
		if err := s.checkImage(ctx, r.Tenant, "spec.compute.image", c.Image, flavor); err != nil {
			return nil, err
		}
	}
	return flavor, nil
}

// fittingFlavor reads flavor name (nil for "") and checks that it fits r's
// kind.
func (s *Service) fittingFlavor(ctx context.Context, r *api.Resource, field, name string) (*api.Flavor, error) {
	if name == "" {
		return nil, nil
	}
	// The cache answers the common case without an etcd round trip; a
	// miss may be a flavor another replica just wrote, so etcd decides.
	var f *api.Flavor
	if it, ok := s.flavors.Get(name); ok {
		f = it.Value
	} else {
		it, err := s.st.Flavors.Get(ctx, name)
		if errors.Is(err, store.ErrNotFound) {
			return nil, api.Invalid(field, "flavor %q does not exist", name)
		}
		if err != nil {
			return nil, storeErr(err, "flavor", name)
		}
		f = it.Value
	}
	var fits bool
	want := ""
	switch r.Kind {
	case api.KindCompute:
		fits, want = f.Kind == api.ProviderContainer || f.Kind == api.ProviderVM, "a container or vm flavor"
	case api.KindLoadbalancer:
		fits, want = f.Kind == api.ProviderLoadbalancer, "a loadbalancer flavor"
	case api.KindVolume:
		fits, want = r.Spec.Volume != nil && f.Kind == r.Spec.Volume.Provider, "a flavor of the volume's provider"
	case api.KindImage:
		return nil, api.Invalid(field, "an Image takes no flavor")
	}
	if !fits {
		return nil, api.Invalid(field, "flavor %q is a %s flavor; a %s resource needs %s", name, f.Kind, r.Kind, want)
	}
	return f, nil
}

// checkImage accepts an Image resource of the tenant, or, for containers,
// anything that can be an OCI reference; the region resolves it.
func (s *Service) checkImage(ctx context.Context, tenant, field, image string, flavor *api.Flavor) error {
	if api.ValidateName(field, image) == nil {
		if it, ok := s.resources.Get(state.ResourceName(tenant, image)); ok && it.Value.Kind == api.KindImage {
			return nil
		}
		// A container accepts an OCI reference anyway, so only a VM
		// needs etcd's word that no Image of that name exists (another
		// replica may have just created it).
		if flavor != nil && flavor.Kind == api.ProviderVM {
			it, err := s.st.Resources.Get(ctx, state.ResourceName(tenant, image))
			switch {
			case err == nil && it.Value.Kind == api.KindImage:
				return nil
			case err != nil && !errors.Is(err, store.ErrNotFound):
				return storeErr(err, "image", image)
			}
		}
	}
	if flavor != nil && flavor.Kind == api.ProviderVM {
		return api.Invalid(field, "a VM boots from an Image resource, and tenant %q has no Image %q", tenant, image)
	}
	if len(image) > 512 || !ociRefRE.MatchString(image) {
		return api.Invalid(field, "%q is neither an Image resource nor an OCI reference", image)
	}
	return nil
}

// view is a stored resource as clients see it.
func view(it store.Item[api.Resource], st *api.ResourceStatus) api.Resource {
	r := *it.Value
	r.ResourceVersion, r.Status = it.ModRevision, st
	return r
}

func flavorSpec(f *api.Flavor) *api.FlavorSpec {
	if f == nil {
		return nil
	}
	spec := f.Spec
	return &spec
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func deref(r *api.Resource) api.Resource {
	if r == nil {
		return api.Resource{}
	}
	return *r
}
