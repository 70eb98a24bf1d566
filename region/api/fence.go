package api

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/region/state"
)

// epochFence owns meta/epoch, the fence of every write the global tier's
// master causes (placements, policies): read and raise it, and remember
// it as this process last raised it or fenced a placement write with it,
// the placement cache being at least as new: what a read of meta/epoch
// would return unless another process wrote it since, which the next
// write's fence finds out.
type epochFence struct {
	st     *state.State
	caches *state.Caches

	mu sync.Mutex
	ep epochState // remembered while ok
	ok bool
}

func (f *epochFence) get() (epochState, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ep, f.ok
}

// remember keeps ep unless a newer write is remembered already (calls
// may finish out of order).
func (f *epochFence) remember(ep epochState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.ok || ep.modRev > f.ep.modRev {
		f.ep, f.ok = ep, true
	}
}

func (f *epochFence) forget() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ok = false
}

// planAttempts bounds how often a placement call starts over after losing
// a race (another call moved meta/epoch, or a placement changed under it).
const planAttempts = 5

// epochState is meta/epoch as read before a call's writes.
type epochState struct {
	state.Epoch
	modRev int64 // 0 while meta/epoch does not exist
}

// Per-placement refusals travel as strings in the result, not as RPC
// errors, so they carry no api sentinel.

func staleEpoch(got, newest int64) error {
	return fmt.Errorf("stale master epoch %d < %d", got, newest)
}

// read reads meta/epoch and makes sure the placement cache is at
// least as new as that read, so that a placement written just before (by
// an earlier call, maybe through another region API process) is compared
// with, not written again.
func (f *epochFence) read(ctx context.Context) (epochState, error) {
	items, rev, err := f.st.Meta.ListPrefix(ctx, state.EpochName)
	if err != nil {
		return epochState{}, fmt.Errorf("read master epoch: %w", err)
	}
	var ep epochState
	for _, it := range items {
		if it.Name == state.EpochName {
			ep = epochState{Epoch: *it.Value, modRev: it.ModRevision}
		}
	}
	if err := f.caches.Placements.WaitForRev(ctx, rev); err != nil {
		return epochState{}, fmt.Errorf("placement cache: %w", err)
	}
	return ep, nil
}

// raise writes meta/epoch at epoch, alone, over the one ep read: the
// transaction that makes every write fenced by an older master fail from
// then on. It returns meta/epoch as written, with the placement cache at
// least as new.
func (f *epochFence) raise(ctx context.Context, ep epochState, epoch int64) (*epochState, error) {
	ep.Epoch.Epoch = epoch
	txn := f.st.Store.Txn()
	if ep.modRev == 0 {
		_ = f.st.Meta.TxnCreate(txn, state.EpochName, &ep.Epoch)
	} else {
		_ = f.st.Meta.TxnUpdate(txn, state.EpochName, &ep.Epoch, ep.modRev)
	}
	rev, err := txn.Commit(ctx)
	if err == nil {
		// Plans made after the raise see what the older master wrote
		// before it.
		err = f.caches.Placements.WaitForRev(ctx, rev)
	}
	if err != nil {
		f.forget()
		return nil, fmt.Errorf("raise master epoch to %d: %w", epoch, err)
	}
	ep.modRev = rev
	f.remember(ep)
	return &ep, nil
}

// retryable reports whether a failed transaction lost a race and is worth
// planning again from a fresh read.
func retryable(err error) bool {
	return errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrExists) || errors.Is(err, store.ErrNotFound)
}
