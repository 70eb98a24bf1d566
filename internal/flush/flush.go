// Package flush holds the batching window Strata's tiers share: a batch
// whose first item finds the path idle (its last flush ended a window ago
// or more) goes at once, and only items that follow the end of a flush
// within the window wait for the rest of it. Under load, where flushes
// follow each other, every batch still gathers for a window after the
// previous flush, as with a fixed window; a lone change (one create on an
// idle cluster) pays no window at each of the tiers it crosses.
package flush

import (
	"context"
	"time"
)

// Window is a leading-edge batching window of length D. The zero Window
// flushes everything at once. It is not safe for concurrent use: one
// loop owns it.
type Window struct {
	D    time.Duration
	last time.Time
}

// Wait is how long a batch whose first item arrived at now waits before
// it is flushed: zero when the last flush ended at least D ago, the rest
// of the window since that end otherwise.
func (w *Window) Wait(now time.Time) time.Duration {
	if w.last.IsZero() {
		return 0
	}
	return max(0, w.D-now.Sub(w.last))
}

// Flushed records a flush that ended at now.
func (w *Window) Flushed(now time.Time) { w.last = now }

// Hold waits as Wait says, or less when early receives; the caller
// flushes, then calls Flushed. It returns ctx's error when ctx ends first.
// early may be nil.
func (w *Window) Hold(ctx context.Context, early <-chan struct{}) error {
	if wait := w.Wait(time.Now()); wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-early:
		case <-t.C:
		}
	}
	return nil
}
