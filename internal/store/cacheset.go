package store

import (
	"context"
	"fmt"
)

// CacheSet runs, waits for and checks a tier's caches together. A tier's
// set of caches (global/state.Caches, region/state.Caches) embeds one.
type CacheSet struct {
	name   string
	caches []Runner
}

// NewCacheSet returns the set of caches; name says whose they are in
// errors ("region caches not loaded").
func NewCacheSet(name string, caches ...Runner) CacheSet {
	return CacheSet{name: name, caches: caches}
}

// Run keeps every cache current until ctx is done or one of them fails.
func (s CacheSet) Run(ctx context.Context) error { return RunAll(ctx, s.caches...) }

// WaitSynced blocks until every cache holds its first list.
func (s CacheSet) WaitSynced(ctx context.Context) error {
	if err := WaitSynced(ctx, s.caches...); err != nil {
		return fmt.Errorf("%s %w", s.name, err)
	}
	return nil
}

// IsSynced reports whether every cache holds its first list.
func (s CacheSet) IsSynced() bool { return AllSynced(s.caches...) }
