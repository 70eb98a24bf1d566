package api

import (
	"context"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
)

// Admission: every create and update of every kind, through REST and
// gRPC alike, passes the ordered list of steps its kind declares here —
// default, validate, references, quota, idempotency — run by one loop,
// admit (Nomad's admission hooks of Job.Register are the model). The
// caller has authorized the request (auth.go) first; a new check goes
// into its kind's list, at the stage that has what it needs.

// stage is when a step runs: what it can see.
type stage int

const (
	// onRequest steps see the request alone, before anything is read, so
	// that a request that could never succeed says so whatever is stored.
	onRequest stage = iota
	// onStored steps see what is stored, inside the write's transaction
	// (and again on each retry of it), before the object is changed.
	onStored
	// atCommit steps run last, after the client's precondition
	// (resourceVersion) held, and add to the transaction that commits.
	atCommit
)

// step is one named default or check of an object W on its way in.
type step[W any] struct {
	name string
	at   stage
	run  func(ctx context.Context, w *W) error
}

// admit runs the steps of stage at, in their order; the first error
// stops it.
func admit[W any](ctx context.Context, steps []step[W], at stage, w *W) error {
	for _, s := range steps {
		if s.at != at {
			continue
		}
		if err := s.run(ctx, w); err != nil {
			return err
		}
	}
	return nil
}

// ---- resources ----

// resourceAdmission is the admission of a resource's create and update,
// and the part of it (quota) that every other change of a stored
// resource passes too (Resources.write).
var resourceAdmission = []step[resourceWrite]{
	{"default", onRequest, defaultResource},
	{"validate", onRequest, validateResource},
	{"idempotency", onRequest, lookUpRequest},
	{"validate", onStored, revalidateResource},
	{"references", onStored, checkResourceReferences},
	{"quota", atCommit, admitQuota},
	{"idempotency", atCommit, recordRequest},
}

// resourceWrite is one write of a resource on its way through
// resourceAdmission.
type resourceWrite struct {
	s *Resources
	// op is "create" or "update"; "" for any other change (scale,
	// rollback, delete…), which passes the atCommit steps alone.
	op     string
	tenant string
	// r is the resource as the client wrote it, then as it is written.
	r *api.Resource
	// stored is the resource before the change (an update or another
	// change, in its transaction); nil for a create.
	stored *api.Resource
	o      WriteOptions
	// expect is the resourceVersion an update's client read (If-Match).
	expect int64
	// guarded says the master writes (an automatic revert to a spec
	// admitted before): no quota stops it.
	guarded bool

	// Set by the steps.
	hash   string        // the request's hash, for its idempotency record
	txn    *store.Txn    // the write's transaction, from onStored on
	flavor *api.Flavor   // the flavor r names (references), nil if none
	answer *api.Resource // an earlier request's answer to this retry of it
}

// defaultResource keeps the settable fields of r, in the request's
// tenant, and fills in what the client left out.
func defaultResource(_ context.Context, w *resourceWrite) error {
	r := w.r.Settable()
	r.Tenant = w.tenant
	r.Default()
	if w.op == "create" && w.o.ReplicasUnset {
		r.Replicas = api.DefaultReplicas(r.Kind)
	}
	// An autoscaled resource starts within its bounds.
	r.Replicas = r.Autoscale.Clamp(r.Replicas)
	*w.r = r
	return nil
}

// validateResource checks r's syntax. An update's count left out is
// checked as 0 here, and as the stored count by revalidateResource.
func validateResource(_ context.Context, w *resourceWrite) error {
	return w.r.Validate()
}

// revalidateResource checks an update again as it will be stored, with
// the stored replica count where the client left it out.
func revalidateResource(_ context.Context, w *resourceWrite) error {
	if w.op != "update" {
		return nil
	}
	return w.r.Validate()
}

// lookUpRequest hashes the request for its idempotency record and checks
// its key. An update whose key an earlier request used is answered by it
// (w.answer) or refused now; a create's key is looked up only when its
// write fails (Resources.Create), so a new key costs no read.
func lookUpRequest(ctx context.Context, w *resourceWrite) error {
	if w.op == "create" {
		w.hash = requestHash("create", w.tenant, w.r)
		return checkIdempotencyKey(w.o.IdempotencyKey)
	}
	w.hash = requestHash("update", w.tenant, struct {
		R             *api.Resource
		Version       int64
		ReplicasUnset bool
	}{w.r, w.expect, w.o.ReplicasUnset})
	done, err := w.s.replay(ctx, w.tenant, w.o.IdempotencyKey, "update", w.hash)
	w.answer = done
	return err
}

// checkResourceReferences checks what r names outside itself
// (references.go, configrefs.go) and keeps its flavor.
func checkResourceReferences(ctx context.Context, w *resourceWrite) error {
	flavor, err := w.s.checkReferences(ctx, w.r, w.txn)
	w.flavor = flavor
	return err
}

// admitQuota checks the change against the tenant's quotas (tenants.go)
// in the transaction that writes it.
func admitQuota(ctx context.Context, w *resourceWrite) error {
	if w.guarded {
		return nil
	}
	return w.s.quotas.admit(ctx, w.txn, w.stored, w.r)
}

// recordRequest adds the request's idempotency record to its
// transaction (idempotency.go).
func recordRequest(_ context.Context, w *resourceWrite) error {
	if w.op != "" {
		w.s.addRequest(w.txn, w.tenant, w.o.IdempotencyKey, w.hash, w.op, w.r)
	}
	return nil
}

// ---- the other kinds ----

// The kinds that default and validate themselves (internal/api) and
// name nothing a write must check.
var (
	flavorAdmission = []step[api.Flavor]{{"validate", onRequest, validated[api.Flavor]}}
	configAdmission = []step[api.Config]{{"validate", onRequest, validated[api.Config]}}
	secretAdmission = []step[api.Secret]{
		{"default", onRequest, defaulted[api.Secret]},
		{"validate", onRequest, validated[api.Secret]},
	}
	policyAdmission = []step[api.NetworkPolicy]{{"validate", onRequest, validated[api.NetworkPolicy]}}
	regionAdmission = []step[api.Region]{{"validate", onRequest, validated[api.Region]}}
	tokenAdmission  = []step[api.Token]{{"validate", onRequest, validateTokenNow}}
)

// alertRuleAdmission checks a rule, its receiver's address included
// (AlertRules.validate).
var alertRuleAdmission = []step[alertRuleWrite]{
	{"validate", onRequest, func(_ context.Context, w *alertRuleWrite) error { return w.rules.validate(w.r) }},
}

// alertRuleWrite is an alert rule on its way in, with the rules that
// check its receiver.
type alertRuleWrite struct {
	rules *AlertRules
	r     *api.AlertRule
}

// tenantAdmission checks a tenant's record, then the regions its quotas
// name against the stored record (Tenants.checkRegionQuotas).
var tenantAdmission = []step[tenantWrite]{
	{"validate", onRequest, func(_ context.Context, w *tenantWrite) error { return w.in.Validate() }},
	{"references", onStored, func(ctx context.Context, w *tenantWrite) error {
		return w.tenants.checkRegionQuotas(ctx, *w.in, w.stored)
	}},
}

// tenantWrite is a tenant's record on its way in.
type tenantWrite struct {
	tenants *Tenants
	in      *api.Tenant
	stored  *api.Tenant // nil for a new tenant
}

// validated is the validate step of a kind that validates itself.
func validated[T any, P interface {
	*T
	Validate() error
}](_ context.Context, v *T) error {
	return P(v).Validate()
}

// defaulted is the default step of a kind that defaults itself.
func defaulted[T any, P interface {
	*T
	Default()
}](_ context.Context, v *T) error {
	P(v).Default()
	return nil
}

// validateTokenNow checks a token about to be issued, as of now.
func validateTokenNow(_ context.Context, t *api.Token) error {
	return validateToken(t, now())
}
