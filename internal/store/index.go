package store

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// IndexFunc returns the values under which an object is found in an
// index (none: it is not in the index). The values of one object are
// distinct.
type IndexFunc[T any] func(name string, v *T) []string

// WithIndex adds an index named index to a cache: Cache.ByIndex(index,
// value) then finds the objects fn gives value for without looking at
// the others. The cache keeps it current with every list and watch event
// it applies. T must be the cache's type; NewCache panics otherwise.
func WithIndex[T any](index string, fn IndexFunc[T]) CacheOption {
	return func(o *cacheOptions) {
		o.indexes = append(o.indexes, namedIndex{name: index, fn: fn})
	}
}

type namedIndex struct {
	name string
	fn   any // IndexFunc[T] for the cache's T
}

// index is one index of a cache: value -> names. Guarded by the cache's
// lock.
type index[T any] struct {
	fn     IndexFunc[T]
	names  map[string]map[string]struct{}
	sorted map[string][]string // a value's names, sorted; rebuilt lazily
}

func newIndexes[T any](defs []namedIndex) map[string]*index[T] {
	out := make(map[string]*index[T], len(defs))
	for _, d := range defs {
		fn, ok := d.fn.(IndexFunc[T])
		if !ok {
			panic(fmt.Sprintf("store: WithIndex %q used with a Cache[%T]", d.name, *new(T)))
		}
		out[d.name] = &index[T]{fn: fn, names: map[string]map[string]struct{}{}, sorted: map[string][]string{}}
	}
	return out
}

// update moves name from the values of old to those of nw (either nil).
func (ix *index[T]) update(name string, old, nw *Item[T]) {
	if old != nil {
		for _, v := range ix.fn(name, old.Value) {
			if set := ix.names[v]; set != nil {
				delete(set, name)
				if len(set) == 0 {
					delete(ix.names, v)
				}
				delete(ix.sorted, v)
			}
		}
	}
	if nw != nil {
		for _, v := range ix.fn(name, nw.Value) {
			set := ix.names[v]
			if set == nil {
				set = map[string]struct{}{}
				ix.names[v] = set
			}
			set[name] = struct{}{}
			delete(ix.sorted, v)
		}
	}
}

// reset rebuilds the index from items.
func (ix *index[T]) reset(items map[string]*Item[T]) {
	ix.names, ix.sorted = map[string]map[string]struct{}{}, map[string][]string{}
	for name, it := range items {
		ix.update(name, nil, it)
	}
}

// IndexLen is how many objects index has under value: for a caller
// choosing the most selective of several indexed terms.
func (c *Cache[T]) IndexLen(index, value string) int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if ix := c.indexes[index]; ix != nil {
		return len(ix.names[value])
	}
	return 0
}

// ByIndex returns the objects that index has under value, sorted by
// name, whose names start with namePrefix and come after after ("" for
// all), that keep accepts (nil: all); at most limit of them (0: all). It
// panics for an index the cache was not made with, a programming error.
func (c *Cache[T]) ByIndex(index, value, namePrefix, after string, limit int, keep func(Item[T]) bool) []Item[T] {
	c.mu.RLock()
	ix := c.indexes[index]
	if ix == nil {
		c.mu.RUnlock()
		panic(fmt.Sprintf("store: cache has no index %q", index))
	}
	names, ok := ix.sorted[value]
	c.mu.RUnlock()
	if !ok {
		// Sorted lazily, like the cache's names: a burst of changes costs
		// one sort, at the first read after it.
		c.mu.Lock()
		names, ok = ix.sorted[value]
		if !ok {
			names = slices.Sorted(maps.Keys(ix.names[value]))
			ix.sorted[value] = names
		}
		c.mu.Unlock()
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.rangeLocked(names, namePrefix, after, limit, keep)
}

// Range returns the objects whose names start with namePrefix and come
// after after ("" for all), sorted by name, that keep accepts (nil: all);
// at most limit of them (0: all). It reads only as far as it must: a page
// of a large prefix costs the page, not the prefix. keep runs under the
// cache's lock: it must not call the cache.
func (c *Cache[T]) Range(namePrefix, after string, limit int, keep func(Item[T]) bool) []Item[T] {
	c.mu.RLock()
	if c.names != nil {
		defer c.mu.RUnlock()
		return c.rangeLocked(c.names, namePrefix, after, limit, keep)
	}
	c.mu.RUnlock()
	// Under the write lock to the end: between an unlock and a read lock
	// a watch batch may reset the names again, and the range would read
	// none at all.
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.names == nil {
		c.names = slices.Sorted(maps.Keys(c.items))
	}
	return c.rangeLocked(c.names, namePrefix, after, limit, keep)
}

// rangeLocked walks sorted names from the first one after after and with
// namePrefix, collecting the items keep accepts. c.mu must be held.
func (c *Cache[T]) rangeLocked(names []string, namePrefix, after string, limit int, keep func(Item[T]) bool) []Item[T] {
	start := namePrefix
	if after > start {
		start = after
	}
	i := sort.SearchStrings(names, start)
	if i < len(names) && names[i] == after {
		i++
	}
	var out []Item[T]
	for ; i < len(names) && strings.HasPrefix(names[i], namePrefix); i++ {
		it, ok := c.items[names[i]]
		if !ok || (keep != nil && !keep(*it)) {
			continue
		}
		out = append(out, *it)
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out
}
