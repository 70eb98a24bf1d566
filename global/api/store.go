package api

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// What every service shares of the store: read-your-writes through the
// caches (written, caught), store errors as the API's (storeErr) and the
// clock of what is written (now).

// written holds the highest revision noted.
type written struct{ rev atomic.Int64 }

func (w *written) note(rev int64) {
	for {
		cur := w.rev.Load()
		if rev <= cur || w.rev.CompareAndSwap(cur, rev) {
			return
		}
	}
}

// caught waits until c holds its first list and is current at this
// replica's latest write to it (w; nil for a cache this replica never
// writes to).
func caught[T any](ctx context.Context, c *store.Cache[T], w *written) error {
	// The cause tells a stuck cache (ours: 503) from a client that gave up.
	stuck := errors.New("cache is stuck")
	ctx, cancel := context.WithTimeoutCause(ctx, cacheWait, stuck)
	defer cancel()
	waitErr := func(what string) error {
		if errors.Is(context.Cause(ctx), stuck) {
			return fmt.Errorf("timed out after %s waiting to %s: %w", cacheWait, what, api.ErrUnavailable)
		}
		return fmt.Errorf("waiting to %s: %w", what, ctx.Err())
	}
	select {
	case <-c.Synced():
	case <-ctx.Done():
		return waitErr("load the cache")
	}
	if w == nil {
		return nil
	}
	if err := c.WaitForRev(ctx, w.rev.Load()); err != nil {
		// Which cache, where it is and what it waits for tell a stuck
		// watch (at the same revision every time) from a slow one.
		return waitErr(fmt.Sprintf("catch up with the latest write (%s cache at revision %d, the write at %d)",
			strings.TrimSuffix(c.Prefix(), "/"), c.Rev(), w.rev.Load()))
	}
	return nil
}

// storeErr turns a store error about one object into the api sentinel a
// client understands. Errors it does not know pass through (500).
func storeErr(err error, what, name string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return api.NotFound(what, name)
	case errors.Is(err, store.ErrExists):
		return api.AlreadyExists(what, name)
	case errors.Is(err, store.ErrConflict):
		return fmt.Errorf("%s %q was modified concurrently; read it again and retry: %w", what, name, api.ErrConflict)
	case errors.Is(err, store.ErrInvalidContinue):
		return api.Invalid("continue", "is not a token this list issued")
	case errors.Is(err, store.ErrCompacted):
		return api.Invalid("continue", "has expired (the store no longer holds the revision of the first page): list again from the start")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	if st, ok := status.FromError(err); ok && (st.Code() == codes.Unavailable || st.Code() == codes.DeadlineExceeded) {
		return fmt.Errorf("etcd: %w: %w", api.ErrUnavailable, err)
	}
	return err
}

// now is the server's clock, in UTC so that stored times compare and print
// the same on every replica.
func now() time.Time { return time.Now().UTC() }

// cacheWait bounds how long a request waits for a cache to load or to catch
// up with a write: past it, etcd or the watch is in trouble and the client
// is better off with a 503 than a hung request.
const cacheWait = 10 * time.Second
