package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
)

// RequestTTL is how long an idempotency key is honoured; PruneRequests
// removes older ones.
const RequestTTL = 24 * time.Hour

// idempotencyKeyRE allows UUIDs, ULIDs and the like; the key becomes part
// of an etcd key, so '/' is out.
var idempotencyKeyRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// requestHash identifies a request by its canonical form: the operation,
// the tenant and the normalised object, as JSON (fixed field order, sorted
// map keys), so that a retry hashes the same whatever its formatting.
func requestHash(op, tenant string, body any) string {
	b, err := json.Marshal(struct {
		Op     string
		Tenant string
		Body   any
	}{op, tenant, body})
	if err != nil {
		// Unreachable for the API's types; an empty hash makes any key
		// reuse a mismatch rather than a false replay.
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// replay looks for an earlier request with this idempotency key. When there
// is one with the same operation and body, it returns the resource's
// current state, and the caller returns it and writes nothing. A key used
// for another request is a conflict. It returns (nil, nil) when the request
// is new (or has no key).
func (s *Resources) replay(ctx context.Context, tenant, key, op, hash string) (*api.Resource, error) {
	if key == "" {
		return nil, nil
	}
	if !idempotencyKeyRE.MatchString(key) {
		return nil, api.Invalid("idempotencyKey", "%q must be 1 to 128 letters, digits, '.', '_', ':' or '-'", key)
	}
	it, err := s.st.Requests.Get(ctx, requestName(tenant, key))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, storeErr(err, "idempotency key", key)
	}
	req := it.Value
	if req.Operation != op || req.BodyHash != hash {
		return nil, fmt.Errorf("idempotency key %q was used for a different request (%s of resource %q); use a new key for a new request: %w",
			key, req.Operation, req.Resource, api.ErrConflict)
	}
	res, st, err := s.read(ctx, tenant, req.Resource)
	if errors.Is(err, api.ErrNotFound) || (err == nil && res.Value.UID != req.ResourceUID) {
		return nil, fmt.Errorf("the resource %q written by the request with idempotency key %q no longer exists: %w",
			req.Resource, key, api.ErrConflict)
	}
	if err != nil {
		return nil, err
	}
	s.log.Debug("idempotent retry answered from the first request", "tenant", tenant, "key", key, "op", op)
	r := view(res, st)
	return &r, nil
}

// addRequest adds the idempotency record of a write to its transaction, so
// that the record exists exactly when the write does.
func (s *Resources) addRequest(txn *store.Txn, tenant, key, hash, op string, r *api.Resource) {
	if key == "" {
		return
	}
	req := state.Request{
		Key: key, BodyHash: hash, Operation: op,
		ResourceUID: r.UID, Resource: r.Name, CreatedAt: now(),
	}
	_ = s.st.Requests.TxnCreate(txn, requestName(tenant, key), &req) // build errors resurface in Commit
}

// PruneRequests removes idempotency records older than olderThan
// (RequestTTL in production) and returns how many it removed. The master
// calls it periodically, in one store.Batch whatever the number. A record
// that changed meanwhile (another replica pruning at the same time) is
// left for the next run.
func (s *Resources) PruneRequests(ctx context.Context, olderThan time.Duration) (int, error) {
	reqs, _, err := s.st.Requests.ListAll(ctx)
	if err != nil {
		return 0, storeErr(err, "idempotency keys", "")
	}
	cutoff := now().Add(-olderThan)
	var old []store.Item[state.Request]
	for _, it := range reqs {
		if it.Value.CreatedAt.Before(cutoff) {
			old = append(old, it)
		}
	}
	b := s.st.Store.Batch()
	for _, it := range old {
		// At the revision listed: a key reused since is not this record.
		s.st.Requests.TxnDelete(b.Step(it.Name), it.Name, it.ModRevision)
	}
	res, err := b.Commit(ctx)
	pruned := 0
	for _, ok := range res.Applied {
		if ok {
			pruned++
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return pruned, ctx.Err()
		}
		s.log.Warn("pruning idempotency keys", "keys", len(old), "pruned", pruned, "err", err)
	}
	return pruned, nil
}

func requestName(tenant, key string) string { return tenant + "/" + key }
