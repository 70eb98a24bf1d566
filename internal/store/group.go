package store

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"
)

// Runner is a cache as a set of caches sees it (any *Cache[T]).
type Runner interface {
	Run(ctx context.Context) error
	Synced() <-chan struct{}
}

// RunAll keeps every cache current until ctx is done or one of them
// fails.
func RunAll(ctx context.Context, caches ...Runner) error {
	g, ctx := errgroup.WithContext(ctx)
	for _, c := range caches {
		g.Go(func() error { return c.Run(ctx) })
	}
	return g.Wait()
}

// WaitSynced blocks until every cache holds its first list.
func WaitSynced(ctx context.Context, caches ...Runner) error {
	for _, c := range caches {
		select {
		case <-c.Synced():
		case <-ctx.Done():
			return fmt.Errorf("caches not loaded: %w", ctx.Err())
		}
	}
	return nil
}

// AllSynced reports whether every cache holds its first list.
func AllSynced(caches ...Runner) bool {
	for _, c := range caches {
		select {
		case <-c.Synced():
		default:
			return false
		}
	}
	return true
}

// RevWaiter is a cache as WaitForRev sees it (any *Cache[T]).
type RevWaiter interface {
	WaitForRev(ctx context.Context, rev int64) error
}

// WaitForRev blocks until every cache is current at rev or later. The
// caches catch up concurrently, so that the progress requests of quiet
// ones overlap instead of adding up.
func WaitForRev(ctx context.Context, rev int64, caches ...RevWaiter) error {
	g, ctx := errgroup.WithContext(ctx)
	for _, c := range caches {
		g.Go(func() error { return c.WaitForRev(ctx, rev) })
	}
	return g.Wait()
}
