package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/events"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/region/state"
)

// cacheWait bounds how long a read waits for the caches to catch up
// with etcd (current): past it, etcd or the watch is in trouble and
// the client is better off with a 503 than a hung request.
const cacheWait = 10 * time.Second

// core is what every service of the API shares and none owns: the
// region's name, its etcd state and caches, its event stream and the log.
// It holds no state of its own; each service embeds a copy.
type core struct {
	region string
	st     *state.State
	caches *state.Caches
	events Events
	log    *slog.Logger
}

// emit records an event; Emit never blocks.
func (c core) emit(typ, reason, object, msg string, fields map[string]string) {
	c.events.Emit(events.Event{Type: typ, Reason: reason, Object: object, Region: c.region, Message: msg, Fields: fields})
}

// suffix ends an event's message with reason, if there is one.
func suffix(reason string) string {
	if reason == "" {
		return ""
	}
	return ": " + reason
}

// current waits until the caches are at least as new as etcd is now
// (store.SharedWatch.WaitCurrent: one revision read, then the watch's
// delivery of it), so that what a read serves from them is never older
// than what another replica, or etcd, answered before the read arrived:
// a replica that was paused (SIGSTOP, a stalled VM) and woke with its
// watch behind catches up before it answers, instead of showing
// replicas long gone. It fails with ErrUnavailable (503) after cacheWait.
func (c core) current(ctx context.Context) error {
	stuck := errors.New("caches are stuck")
	ctx, cancel := context.WithTimeoutCause(ctx, cacheWait, stuck)
	defer cancel()
	err := c.caches.Watch.WaitCurrent(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(context.Cause(ctx), stuck):
		return fmt.Errorf("timed out after %s waiting for the region caches to catch up with etcd: %w: %w", cacheWait, api.ErrUnavailable, err)
	case ctx.Err() != nil:
		return fmt.Errorf("waiting for the region caches to catch up with etcd: %w", err)
	default:
		return fmt.Errorf("read the region's etcd revision: %w: %w", api.ErrUnavailable, err)
	}
}

// waitSynced waits for one cache's first list: a watch's snapshot taken
// before it would be empty, and its receiver deletes what a snapshot lacks.
func waitSynced(ctx context.Context, synced <-chan struct{}) error {
	select {
	case <-synced:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the region caches: %w", ctx.Err())
	}
}

// apiErr is the one place where store sentinels become api sentinels, at
// the edge (gRPC and REST), keeping the store's message.
func apiErr(err error) error {
	if err == nil {
		return nil
	}
	for _, m := range []struct{ from, to error }{
		{store.ErrNotFound, api.ErrNotFound},
		{store.ErrExists, api.ErrAlreadyExists},
		{store.ErrConflict, api.ErrConflict},
		{store.ErrFenced, api.ErrConflict},
		{store.ErrInvalidContinue, api.ErrInvalid},
		{events.ErrInvalidCursor, api.ErrInvalid},
	} {
		if errors.Is(err, m.from) && !errors.Is(err, m.to) {
			return &mappedError{err: err, sentinel: m.to}
		}
	}
	return err
}

type mappedError struct {
	err      error
	sentinel error
}

func (e *mappedError) Error() string   { return e.err.Error() }
func (e *mappedError) Unwrap() []error { return []error{e.err, e.sentinel} }
