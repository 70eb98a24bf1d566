package api

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/events"
	"github.com/stratahq/strata/region/state"
)

// placements owns the region's placements, which the global tier's master
// sends (RegionService): applying and removing them under the epoch
// fence, and the views of them: the operator's list (list, shares.go) and
// the global tier's stream of the region's shares (watchShares, shares.go).
type placements struct {
	core
	fence *epochFence
	tune  tuning
	// applied counts the placements apply has written.
	applied atomic.Uint64
}

// placementResult is the outcome of one placement of a call.
type placementResult struct {
	Key     string
	Applied bool
	Err     error // refused; the rest of the call goes on
}

// placementRef names a placement to remove; an empty UID matches any.
type placementRef struct {
	Tenant, Name, UID string
}

// placementWrite is one placement to store: over the one at modRev (> 0),
// or where none is (0).
type placementWrite struct {
	idx    int // in the request
	p      api.Placement
	modRev int64
}

// apply stores the placements that differ from what the region
// has. Every transaction of a call is fenced by meta/epoch: it applies
// only while meta/epoch is at the revision the call started from, and
// each placement is written at the revision it was planned against
// (created if it was absent). The fence does not move with the writes, so
// a call's transactions, and those of other calls of the same master, go
// several at once.
//
// Why that is safe when the master changes: a newer master's first call
// raises meta/epoch alone, in a transaction of its own, before it plans
// (raiseEpoch). From that revision on, every transaction of an older
// master fails its fence, whenever it was planned; and the newer master
// plans against a cache at least as new as the raise, so it sees every
// write the older one made before, and a placement it finds unchanged is
// really there. Per placement, the write at the planned revision makes a
// write that raced another (a retried call whose first attempt is still
// in flight, another region API process) fail and plan again rather than
// overwrite a newer placement with an older one. The master sends a
// resource's placements one call at a time, which orders them.
//
// The first attempt starts from the epoch this process last wrote, when it
// remembers one, instead of reading it: the fence checks it all the same,
// and a call that lost a race (another process moved the epoch) starts
// over from a read. A plan with nothing to write proves nothing about the
// remembered epoch, so it is made again from a read.
func (s *placements) apply(ctx context.Context, ps []api.Placement) ([]placementResult, error) {
	applied := make([]bool, len(ps)) // survives attempts: a retry sees earlier writes as unchanged
	var raised *epochState
	for attempt := 1; ; attempt++ {
		ep, remembered, err := s.startEpoch(ctx, attempt, raised)
		if err != nil {
			return nil, err
		}
		results, writes, newest := s.planApply(ps, ep.Epoch.Epoch)
		raised = nil
		switch {
		case newest > ep.Epoch.Epoch:
			raised, err = s.fence.raise(ctx, ep, newest)
		case remembered && len(writes) == 0:
			continue
		case len(writes) > 0:
			err = s.writePlacements(ctx, ep, writes, func(done []placementWrite) { s.appliedPlacements(done, applied) })
		}
		if err == nil && raised == nil {
			for i := range results {
				results[i].Applied = applied[i]
			}
			return results, nil
		}
		if err != nil && (!retryable(err) || attempt >= planAttempts) {
			return nil, fmt.Errorf("apply placements: %w", err)
		}
		// Raised: plan again under the new epoch. Or lost a race: plan
		// again from a read.
	}
}

// appliedPlacements counts and announces the placements that applied.
func (s *placements) appliedPlacements(done []placementWrite, applied []bool) {
	for _, w := range done {
		applied[w.idx] = true
		s.applied.Add(1)
		key := w.p.Key()
		s.log.Debug("placement applied", "key", key, "uid", w.p.Resource.UID, "epoch", w.p.Epoch, "replicas", w.p.Resource.Replicas)
		s.emit(events.TypeNormal, "PlacementApplied", "resource/"+key,
			fmt.Sprintf("placement applied: %d replicas, epoch %d", w.p.Resource.Replicas, w.p.Epoch),
			map[string]string{"uid": w.p.Resource.UID, "epoch": strconv.FormatInt(w.p.Epoch, 10)})
	}
}

// startEpoch is the epoch an attempt of apply starts from: the
// one the previous attempt raised meta/epoch to; the remembered one (true)
// on the first attempt; else a read.
func (s *placements) startEpoch(ctx context.Context, attempt int, raised *epochState) (epochState, bool, error) {
	if raised != nil {
		return *raised, false, nil
	}
	if ep, ok := s.fence.get(); ok && attempt == 1 {
		return ep, true, nil
	}
	ep, err := s.fence.read(ctx)
	return ep, false, err
}

// planApply decides, against the cache, what to do with each placement,
// and returns the results, the writes, and the newest epoch among the
// accepted placements.
func (s *placements) planApply(ps []api.Placement, epoch int64) ([]placementResult, []placementWrite, int64) {
	now := time.Now()
	results := make([]placementResult, len(ps))
	var (
		writes []placementWrite
		byKey  = make(map[string]int) // key -> index in writes
		newest int64
	)
	for i, p := range ps {
		key := p.Key()
		results[i].Key = key
		switch {
		case p.Region != s.region:
			results[i].Err = fmt.Errorf("placement for region %q sent to region %q", p.Region, s.region)
			continue
		case p.Resource.Name == "" || p.Resource.Tenant == "" || p.Resource.UID == "":
			results[i].Err = errors.New("resource tenant, name and uid are required")
			continue
		case p.Epoch < epoch:
			results[i].Err = staleEpoch(p.Epoch, epoch)
			continue
		}
		newest = max(newest, p.Epoch)
		// The global tier's aggregated status is not the region's to
		// keep; storing it would turn every status change into a write.
		p.Resource.Status = nil
		cur, ok := s.caches.Placements.Get(key)
		if ok && samePlacement(cur.Value, &p) {
			continue
		}
		var modRev int64 // absent: created
		if ok {
			modRev = cur.ModRevision
		}
		p.UpdatedAt = now
		if j, dup := byKey[key]; dup {
			// One transaction cannot hold a key twice; the later wins.
			prev := writes[j].idx
			results[prev].Err = fmt.Errorf("%s is superseded by a later placement in the same request", key)
			writes[j] = placementWrite{idx: i, p: p, modRev: modRev}
			continue
		}
		byKey[key] = len(writes)
		writes = append(writes, placementWrite{idx: i, p: p, modRev: modRev})
	}
	return results, writes, newest
}

// samePlacement compares placements as stored, ignoring when and by which
// master they were sent.
func samePlacement(a, b *api.Placement) bool {
	x, y := *a, *b
	x.UpdatedAt, y.UpdatedAt = time.Time{}, time.Time{}
	x.Epoch, y.Epoch = 0, 0
	return api.SameJSON(&x, &y)
}

// remove marks placements deleting; the controller destroys
// their replicas and removes them.
func (s *placements) remove(ctx context.Context, refs []placementRef, epoch int64) ([]placementResult, error) {
	applied := make([]bool, len(refs))
	for attempt := 1; ; attempt++ {
		ep, err := s.fence.read(ctx)
		if err != nil {
			return nil, err
		}
		results := make([]placementResult, len(refs))
		for i, r := range refs {
			results[i].Key = r.Tenant + "/" + r.Name
		}
		if epoch < ep.Epoch.Epoch {
			for i := range results {
				results[i].Err = staleEpoch(epoch, ep.Epoch.Epoch)
			}
			return results, nil
		}
		if epoch > ep.Epoch.Epoch {
			// Raised alone, then planned again: against a cache that
			// holds what the older master wrote before the raise.
			_, err = s.fence.raise(ctx, ep, epoch)
		} else {
			err = s.markDeleting(ctx, ep, epoch, s.planRemove(refs, results), applied)
			if err == nil {
				for i := range results {
					results[i].Applied = applied[i]
				}
				return results, nil
			}
		}
		if err != nil && (!retryable(err) || attempt >= planAttempts) {
			return nil, fmt.Errorf("remove placements: %w", err)
		}
	}
}

// markDeleting writes the removals planned, each at the revision it was
// read at, fenced by ep.
func (s *placements) markDeleting(ctx context.Context, ep epochState, epoch int64, writes []placementWrite, applied []bool) error {
	if len(writes) == 0 {
		return nil
	}
	return s.writePlacements(ctx, ep, writes, func(done []placementWrite) {
		for _, w := range done {
			applied[w.idx] = true
			key := w.p.Key()
			s.log.Debug("placement marked for deletion", "key", key, "uid", w.p.Resource.UID, "epoch", epoch)
			s.emit(events.TypeNormal, "PlacementRemoved", "resource/"+key, "placement removed by the global tier; replicas will be destroyed",
				map[string]string{"uid": w.p.Resource.UID, "epoch": strconv.FormatInt(epoch, 10)})
		}
	})
}

// planRemove returns the placements to mark deleting, each to be written
// at the revision it was read at. A placement that is gone, already
// deleting, or of another uid (a newer resource of the same name) needs
// nothing: the master's intent already holds.
func (s *placements) planRemove(refs []placementRef, results []placementResult) []placementWrite {
	now := time.Now()
	var writes []placementWrite
	seen := make(map[string]bool)
	for i, r := range refs {
		key := results[i].Key
		if r.Tenant == "" || r.Name == "" {
			results[i].Err = errors.New("tenant and name are required")
			continue
		}
		cur, ok := s.caches.Placements.Get(key)
		if !ok || seen[key] || (r.UID != "" && r.UID != cur.Value.Resource.UID) || cur.Value.Resource.Deleting() {
			continue
		}
		seen[key] = true
		p := *cur.Value // a copy: cache values are shared
		p.Resource.DeletionRequestedAt = &now
		p.UpdatedAt = now
		writes = append(writes, placementWrite{idx: i, p: p, modRev: cur.ModRevision})
	}
	return writes
}

// writePlacements writes ws in one batch, in transactions that each fit
// under etcd.maxTxnOps and each require meta/epoch at the revision of ep:
// a newer master raising the epoch in between stops the batch. done is
// called with the placements that applied, also when an error stopped
// the batch half-way.
func (s *placements) writePlacements(ctx context.Context, ep epochState, ws []placementWrite, done func([]placementWrite)) error {
	b := s.st.Store.Batch().Unchanged(s.st.Meta.Key(state.EpochName), ep.modRev)
	for i := range ws {
		w := &ws[i]
		txn := b.Step(w.p.Key())
		if w.modRev > 0 {
			_ = s.st.Placements.TxnUpdate(txn, w.p.Key(), &w.p, w.modRev)
		} else {
			_ = s.st.Placements.TxnCreate(txn, w.p.Key(), &w.p)
		}
	}
	res, err := b.Commit(ctx)
	var applied []placementWrite
	for i := range ws {
		if res.Applied[i] {
			applied = append(applied, ws[i])
		}
	}
	if len(applied) > 0 {
		done(applied)
	}
	if err != nil {
		s.fence.forget()
		return err
	}
	// Read-your-writes for the operator views and the next call.
	if err := s.caches.Placements.WaitForRev(ctx, res.Revision); err != nil {
		s.fence.forget()
		return err
	}
	s.fence.remember(ep)
	return nil
}
