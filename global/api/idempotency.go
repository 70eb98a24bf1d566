package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
)

// RequestTTL is how long an idempotency key is honoured: an older record
// is as good as none (a request with its key is new), and PruneRequests,
// which the master runs, removes it.
const RequestTTL = 24 * time.Hour

// prunePage bounds how many records PruneRequests reads and deletes at a
// time, so that its memory and each batch stay small however many keys
// piled up.
const prunePage = 500

// idempotencyKeyRE allows UUIDs, ULIDs and the like; the key becomes part
// of an etcd key, so '/' is out.
// It compiles on first use (see tokenIDRE).
var idempotencyKeyRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`) })

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
	if err := checkIdempotencyKey(key); err != nil {
		return nil, err
	}
	it, err := s.st.Requests.Get(ctx, requestName(tenant, key))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, storeErr(err, "idempotency key", key)
	}
	req := it.Value
	if now().Sub(req.CreatedAt) > RequestTTL {
		// Expired but not pruned yet: forget it here, so that the write
		// can record the key anew (its record is created, not replaced).
		if _, err := s.st.Requests.Delete(ctx, it.Name, it.ModRevision); err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrConflict) {
			return nil, storeErr(err, "idempotency key", key)
		}
		return nil, nil
	}
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
	r := resourceView(res, st)
	return &r, nil
}

// checkIdempotencyKey checks a request's key ("" for none).
func checkIdempotencyKey(key string) error {
	if key != "" && !idempotencyKeyRE().MatchString(key) {
		return api.Invalid("idempotencyKey", "%q must be 1 to 128 letters, digits, '.', '_', ':' or '-'", key)
	}
	return nil
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
// calls it periodically. It reads the records a page at a time (prunePage)
// and deletes each page's old ones in one store.Batch, which splits them
// into transactions of the store's size. A record that changed meanwhile
// (another replica pruning at the same time, a key reused) is left for
// the next run.
func (s *Resources) PruneRequests(ctx context.Context, olderThan time.Duration) (int, error) {
	cutoff := now().Add(-olderThan)
	pruned, cont := 0, ""
	for {
		page, err := s.st.Requests.List(ctx, store.ListOptions{Limit: prunePage, Continue: cont})
		if err != nil {
			return pruned, storeErr(err, "idempotency keys", "")
		}
		n, err := s.pruneOld(ctx, page.Items, cutoff)
		pruned += n
		if err != nil || page.Continue == "" {
			return pruned, err
		}
		cont = page.Continue
	}
}

// pruneOld deletes the records of reqs created before cutoff.
func (s *Resources) pruneOld(ctx context.Context, reqs []store.Item[state.Request], cutoff time.Time) (int, error) {
	b := s.st.Store.Batch()
	old := 0
	for _, it := range reqs {
		if it.Value.CreatedAt.Before(cutoff) {
			// At the revision listed: a key reused since is not this record.
			s.st.Requests.TxnDelete(b.Step(it.Name), it.Name, it.ModRevision)
			old++
		}
	}
	if old == 0 {
		return 0, nil
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
		s.log.Warn("pruning idempotency keys", "keys", old, "pruned", pruned, "err", err)
	}
	return pruned, nil
}

func requestName(tenant, key string) string { return tenant + "/" + key }
