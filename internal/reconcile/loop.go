package reconcile

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/stratahq/strata/internal/backoff"
	"github.com/stratahq/strata/internal/store"
)

// Loop is a leader's control loop: it waits for marked keys (now, or
// for a moment that has come: one timer, armed for the earliest), or a
// resync, runs a pass over them, and on a failed pass marks them again
// and backs off while the failures last. A pass whose writes are fenced
// ends the loop: leadership is gone.
type Loop struct {
	Dirty *Dirty
	// Resync marks every key this often: a safety net, when every
	// time-based decision marks its key for the moment it would change
	// (Dirty.MarkAt).
	Resync time.Duration
	// Every lists every key, for a full pass.
	Every func() []string
	// Before runs before each pass (optional).
	Before func()
	Pass   func(ctx context.Context, keys []string) error
	Log    *slog.Logger
}

// Run loops until ctx is done (nil) or a pass is fenced (that error).
func (l Loop) Run(ctx context.Context) error {
	l.Dirty.MarkAll()
	resync := time.NewTicker(l.Resync)
	defer resync.Stop()
	// A conflict or an etcd hiccup: look again after the caches catch
	// up, backing off while it persists.
	pause := backoff.Backoff{Min: 50 * time.Millisecond, Max: 2 * time.Second}
	due := time.NewTimer(time.Hour)
	defer due.Stop()
	for {
		// Armed for the earliest key marked for later; a MarkAt that
		// brings it closer wakes the loop, which re-arms it here.
		if at, ok := l.Dirty.Next(); ok {
			due.Reset(time.Until(at))
		} else {
			due.Stop()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-l.Dirty.Wake():
		case <-due.C:
		case <-resync.C:
			l.Dirty.MarkAll()
			continue
		}
		if l.Before != nil {
			l.Before()
		}
		keys := l.Dirty.Take(l.Every)
		if len(keys) == 0 {
			continue
		}
		err := l.Pass(ctx, keys)
		switch {
		case err == nil:
			pause.Reset()
		case errors.Is(err, store.ErrFenced):
			l.Log.Warn("write fenced: leadership lost", "err", err)
			return err
		case ctx.Err() != nil:
			return nil
		default:
			d := pause.Next()
			l.Log.Warn("pass failed; retrying", "err", err, "keys", len(keys), "retryIn", d)
			l.Dirty.Mark(keys...)
			if backoff.Sleep(ctx, d) != nil {
				return nil
			}
		}
	}
}
