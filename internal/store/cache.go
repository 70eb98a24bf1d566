package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unique"
)

// progressRetry is how often WaitForRev asks again for a progress
// notification: etcd skips the request while the watch is catching up.
const progressRetry = 200 * time.Millisecond

// Change is one object's change as seen by a Cache. Old is nil for an
// addition, New is nil for a deletion.
type Change[T any] struct {
	Name     string
	Old, New *Item[T]
}

// CacheOption configures a Cache.
type CacheOption func(*cacheOptions)

type cacheOptions struct {
	onChange []any // func([]Change[T]) for the cache's T
	indexes  []namedIndex
	compact  []any // func(string, *T) for the cache's T
	shared   *SharedWatch
}

// WithOnChange subscribes fn to a cache's changes. fn is called from the
// goroutine running Cache.Run, outside the cache lock, after each watch
// batch and after each relist (with the difference from the previous
// contents); several changes of one object in one batch are merged into one.
// fn must not block for long: the cache stops applying events meanwhile.
//
// T must be the cache's type; NewCache panics otherwise.
func WithOnChange[T any](fn func(changes []Change[T])) CacheOption {
	return func(o *cacheOptions) { o.onChange = append(o.onChange, fn) }
}

// WithCompact has fn rework each value the cache decodes, before the
// cache stores it or anyone sees it, into an equal value that takes less
// memory: typically fn replaces strings that thousands of objects repeat
// (a node's, a tenant's, a resource's name) with one shared copy
// (unique.Make), and a field that repeats the object's name with name
// itself, which the cache holds anyway. fn must not change what the
// value means.
//
// T must be the cache's type; NewCache panics otherwise.
func WithCompact[T any](fn func(name string, v *T)) CacheOption {
	return func(o *cacheOptions) { o.compact = append(o.compact, fn) }
}

// Intern replaces *s with the one shared copy of its contents (see
// WithCompact). Copies are shared process-wide and dropped once nothing
// refers to them.
func Intern[S ~string](s *S) {
	if *s != "" {
		*s = S(unique.Make(string(*s)).Value())
	}
}

// Cache is an in-memory copy of a collection fed by Reflect: it lists, then
// watches, resumes after disconnects and relists after compaction.
//
// Items and their values are shared between the cache and every caller that
// reads them, without copying. Callers must treat them as read-only and copy
// a value before modifying it.
type Cache[T any] struct {
	coll     *Collection[T]
	log      *slog.Logger
	onChange []func([]Change[T])
	compact  []func(string, *T)
	synced   chan struct{}
	progress chan struct{}
	running  atomic.Bool
	// shared feeds the cache when it joined one (WithSharedWatch); nil
	// when the cache runs a watch of its own.
	shared *SharedWatch

	mu sync.RWMutex
	// items and rev change only in the Run goroutine (under mu), which may
	// therefore read them without the lock.
	items map[string]*Item[T]
	rev   int64
	// told is the revision up to which every onChange subscriber has
	// been called: it follows rev once the batch's changes are delivered.
	// WaitForRev waits for it, so that a subscription made after
	// WaitForRev returns is never handed a change at or below rev.
	told int64
	// names are the sorted names of items, nil when they must be rebuilt;
	// readers rebuild them under the write lock.
	names []string
	// waiters are WaitForRev's callers, let go as told reaches theirs.
	waiters revWaiters
	// indexes are kept with items (WithIndex).
	indexes map[string]*index[T]
}

// NewCache returns a cache of c; call Run to fill it.
func NewCache[T any](c *Collection[T], opts ...CacheOption) *Cache[T] {
	var o cacheOptions
	for _, opt := range opts {
		opt(&o)
	}
	cache := &Cache[T]{
		coll:     c,
		log:      c.s.log.With("collection", c.s.prefix+c.prefix),
		synced:   make(chan struct{}),
		progress: make(chan struct{}, 1),
		items:    map[string]*Item[T]{},
		indexes:  newIndexes[T](o.indexes),
	}
	for _, fn := range o.onChange {
		f, ok := fn.(func([]Change[T]))
		if !ok {
			panic(fmt.Sprintf("store: WithOnChange callback %T used with a Cache[%T]", fn, *new(T)))
		}
		cache.onChange = append(cache.onChange, f)
	}
	for _, fn := range o.compact {
		f, ok := fn.(func(string, *T))
		if !ok {
			panic(fmt.Sprintf("store: WithCompact function %T used with a Cache[%T]", fn, *new(T)))
		}
		cache.compact = append(cache.compact, f)
	}
	if o.shared != nil {
		cache.shared = o.shared
		o.shared.join(c.s, cache)
	}
	return cache
}

// Run fills the cache and keeps it current until ctx is done, then returns
// ctx.Err(). Only one Run may be active at a time; the cache keeps its
// contents after Run returns and a later Run picks up from a fresh list.
// A cache fed by a shared watch (WithSharedWatch) does not run on its
// own: run the shared watch.
func (c *Cache[T]) Run(ctx context.Context) error {
	if c.shared != nil {
		return fmt.Errorf("store: the cache of %s is fed by a shared watch: run that", c.coll.prefix)
	}
	if !c.running.CompareAndSwap(false, true) {
		return errors.New("store: cache is already running")
	}
	defer c.running.Store(false)
	return c.coll.s.reflect(ctx, c.coll.prefix, cacheHandler[T]{c}, c.progress)
}

// Synced is closed once the cache holds its first full list.
func (c *Cache[T]) Synced() <-chan struct{} { return c.synced }

// Get returns an object; see Cache for sharing rules.
func (c *Cache[T]) Get(name string) (Item[T], bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	it, ok := c.items[name]
	if !ok {
		return Item[T]{}, false
	}
	return *it, true
}

// List returns a snapshot of every object, sorted by name.
func (c *Cache[T]) List() []Item[T] { return c.ListPrefix("") }

// ListPrefix returns a snapshot of the objects whose names start with
// namePrefix, sorted by name.
func (c *Cache[T]) ListPrefix(namePrefix string) []Item[T] {
	c.mu.RLock()
	if c.names != nil {
		defer c.mu.RUnlock()
		return c.collectLocked(namePrefix)
	}
	c.mu.RUnlock()
	// The sorted names are rebuilt lazily, so that a burst of additions
	// costs one sort, at the first read after it.
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.names == nil {
		c.names = slices.Sorted(maps.Keys(c.items))
	}
	return c.collectLocked(namePrefix)
}

// collectLocked copies the items whose names start with namePrefix, in name
// order. c.mu must be held and c.names current.
func (c *Cache[T]) collectLocked(namePrefix string) []Item[T] {
	names := c.names
	if namePrefix != "" {
		i := sort.SearchStrings(names, namePrefix)
		j := i
		for j < len(names) && strings.HasPrefix(names[j], namePrefix) {
			j++
		}
		names = names[i:j]
	}
	out := make([]Item[T], len(names))
	for i, n := range names {
		out[i] = *c.items[n]
	}
	return out
}

// Len returns the number of objects.
func (c *Cache[T]) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.items)
}

// Prefix is the prefix of the cached collection in its store, which
// names the cache in errors and logs.
func (c *Cache[T]) Prefix() string { return c.coll.prefix }

// Rev returns the revision the cache is current at; 0 before the first list.
func (c *Cache[T]) Rev() int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.rev
}

// WaitForRev blocks until the cache is current at rev or later, for
// read-your-writes: pass the revision a write returned. rev may come from a
// write outside the collection; the cache then asks etcd to confirm its
// progress rather than wait for a change of its own. A cache fed by a
// shared watch (WithSharedWatch) asks only once progressRetry passed
// without the watch receiving rev: what its readers wait for is normally
// written under the watch's prefix, so the watch's next batches bring it.
// Once it returns, the WithOnChange subscribers have been handed every
// change up to rev: a watch that subscribes to them next and then lists
// the cache gets each of those changes once, in its list, never again as
// a change.
func (c *Cache[T]) WaitForRev(ctx context.Context, rev int64) error {
	var tick *time.Ticker
	ask := c.shared == nil
	for {
		reached, cur := c.reached(rev)
		if reached == nil {
			return nil
		}
		if ask {
			c.askProgress(rev)
		}
		if tick == nil {
			tick = time.NewTicker(progressRetry)
			defer tick.Stop()
		}
		select {
		case <-reached:
		case <-tick.C:
			ask = true
		case <-ctx.Done():
			return fmt.Errorf("store: wait for revision %d (cache at %d): %w", rev, cur, ctx.Err())
		}
	}
}

// reached returns nil when the subscribers have been told rev, else a
// channel closed once they have, and where the cache is.
func (c *Cache[T]) reached(rev int64) (<-chan struct{}, int64) {
	c.mu.RLock()
	cur := c.told
	c.mu.RUnlock()
	if cur >= rev {
		return nil, cur
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.told >= rev {
		return nil, c.told
	}
	return c.waiters.wait(rev), c.told
}

// askProgress asks the watch feeding the cache for an etcd progress
// notification, unless rev is on its way to the cache already: a shared
// watch that has received it hands it to every member.
func (c *Cache[T]) askProgress(rev int64) {
	progress := c.progress
	if c.shared != nil {
		if c.shared.has(rev) {
			return
		}
		progress = c.shared.progress
	}
	c.coll.s.progressAsked.Add(1)
	select {
	case progress <- struct{}{}:
	default: // a request is pending already
	}
}

// cacheHandler keeps Replace and Apply off the Cache's exported API.
type cacheHandler[T any] struct{ c *Cache[T] }

func (h cacheHandler[T]) Replace(items []KV, rev int64)   { h.c.replace(items, rev) }
func (h cacheHandler[T]) Apply(events []Event, rev int64) { h.c.apply(events, rev) }

func (c *Cache[T]) replace(kvs []KV, rev int64) {
	next := make(map[string]*Item[T], len(kvs))
	for _, kv := range kvs {
		name := c.coll.Name(kv.Key)
		if old, ok := c.items[name]; ok && old.ModRevision == kv.ModRevision {
			// Unchanged: keep the decoded item, which also keeps it out of
			// the diff.
			next[name] = old
			continue
		}
		if it, ok := c.decode(kv); ok {
			next[name] = it
		}
	}

	var changes []Change[T]
	if len(c.onChange) > 0 {
		for name, old := range c.items {
			if nw, ok := next[name]; !ok {
				changes = append(changes, Change[T]{Name: name, Old: old})
			} else if nw != old {
				changes = append(changes, Change[T]{Name: name, Old: old, New: nw})
			}
		}
		for name, nw := range next {
			if _, ok := c.items[name]; !ok {
				changes = append(changes, Change[T]{Name: name, New: nw})
			}
		}
		slices.SortFunc(changes, func(a, b Change[T]) int { return cmp.Compare(a.Name, b.Name) })
	}

	c.mu.Lock()
	c.items = next
	c.names = nil
	for _, ix := range c.indexes {
		ix.reset(next)
	}
	c.advanceLocked(rev)
	c.mu.Unlock()

	c.notify(changes, rev)
	// Synced after the subscribers have the first list's difference, as
	// WaitForRev: a watch that waits for it and then subscribes does not
	// get the first list again as changes.
	select {
	case <-c.synced:
	default:
		close(c.synced)
	}
}

func (c *Cache[T]) apply(events []Event, rev int64) {
	type update struct {
		name string
		item *Item[T] // nil deletes
	}
	// Decode before taking the lock, so readers never wait on the codec.
	updates := make([]update, 0, len(events))
	for _, ev := range events {
		u := update{name: c.coll.Name(ev.KV.Key)}
		if ev.Type == EventPut {
			// An object that no longer decodes leaves the cache, as it
			// would on a relist: keeping the old value would claim a
			// revision that is no longer current.
			u.item, _ = c.decode(ev.KV)
		}
		updates = append(updates, u)
	}

	track := len(c.onChange) > 0
	var (
		changes []Change[T]
		index   map[string]int // name -> position in changes
	)
	if track {
		index = make(map[string]int, len(updates))
	}
	c.mu.Lock()
	for _, u := range updates {
		old, had := c.items[u.name]
		for _, ix := range c.indexes {
			ix.update(u.name, old, u.item)
		}
		switch {
		case u.item != nil:
			if !had {
				c.names = nil
			}
			c.items[u.name] = u.item
		case had:
			delete(c.items, u.name)
			c.names = nil
		default:
			continue // deleting what is not there
		}
		if !track {
			continue
		}
		if i, ok := index[u.name]; ok {
			changes[i].New = u.item // merge into the batch's first change
		} else {
			index[u.name] = len(changes)
			changes = append(changes, Change[T]{Name: u.name, Old: old, New: u.item})
		}
	}
	c.advanceLocked(rev)
	c.mu.Unlock()

	// Created and deleted within the batch: nothing to report.
	changes = slices.DeleteFunc(changes, func(ch Change[T]) bool { return ch.Old == nil && ch.New == nil })
	c.notify(changes, rev)
}

func (c *Cache[T]) decode(kv KV) (*Item[T], bool) {
	it, err := c.coll.Decode(kv)
	if err != nil {
		c.log.Error("store: skipping undecodable object", "key", c.coll.s.prefix+kv.Key,
			"mod_revision", kv.ModRevision, "err", err)
		return nil, false
	}
	for _, fn := range c.compact {
		fn(it.Name, it.Value)
	}
	return &it, true
}

func (c *Cache[T]) advanceLocked(rev int64) {
	c.rev = max(c.rev, rev)
}

// notify hands changes, the batch that brought the cache to rev, to the
// subscribers, then lets WaitForRev callers of rev go.
func (c *Cache[T]) notify(changes []Change[T], rev int64) {
	if len(changes) > 0 {
		for _, fn := range c.onChange {
			fn(changes)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if rev <= c.told {
		return
	}
	c.told = rev
	c.waiters.release(rev)
}
