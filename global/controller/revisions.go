package controller

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
)

// revisionCacheSize bounds the revisions kept in memory. Only regions
// that wait for a rollout need one, so the working set is the resources
// in the middle of a rollout.
const revisionCacheSize = 4096

// revisionReadTimeout bounds one read of a revision inside a pass.
const revisionReadTimeout = 2 * time.Second

// revisionCache reads stored revisions through to etcd and keeps them:
// a revision number of a resource UID never changes, and once pruned
// never comes back, so both answers are kept. A failed read is not kept:
// the next pass asks again.
type revisionCache struct {
	st *state.State

	mu   sync.Mutex
	byID map[revisionID]*api.Revision // nil value: no such revision
}

type revisionID struct {
	tenant, name, uid string
	number            int64
}

func newRevisionCache(st *state.State) *revisionCache {
	return &revisionCache{st: st, byID: map[revisionID]*api.Revision{}}
}

// get returns revision number of the resource tenant/name with uid.
func (c *revisionCache) get(ctx context.Context, tenant, name, uid string, number int64) (*api.Revision, bool) {
	id := revisionID{tenant, name, uid, number}
	c.mu.Lock()
	rev, ok := c.byID[id]
	c.mu.Unlock()
	if ok {
		return rev, rev != nil
	}
	rctx, cancel := context.WithTimeout(ctx, revisionReadTimeout)
	defer cancel()
	it, err := c.st.Revisions.Get(rctx, state.RevisionName(tenant, name, number))
	switch {
	case errors.Is(err, store.ErrNotFound):
		rev = nil
	case err != nil:
		return nil, false
	case it.Value.UID != uid:
		rev = nil // a deleted namesake's
	default:
		rev = it.Value
	}
	c.mu.Lock()
	if len(c.byID) >= revisionCacheSize {
		clear(c.byID)
	}
	c.byID[id] = rev
	c.mu.Unlock()
	return rev, rev != nil
}
