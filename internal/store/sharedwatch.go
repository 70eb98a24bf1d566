package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
)

// SharedWatch feeds several caches of one store from one watch over their
// common prefix, so that they move together: every batch of events (one
// watch response, in revision order) and every progress notification is
// handed to each member, those with no change in it included, before the
// next. Once one member is current at revision R, the watch has received
// R, and every other member is current at R as soon as the batch in hand
// is delivered: WaitForRev on a member asks etcd for no progress
// notification for a revision the watch has received. Caches that each
// follow a watch of their own give no such order: one may run ahead of
// another, and only a progress request (an etcd round trip, or more)
// tells a quiet one it has caught up.
//
// A cache joins with WithSharedWatch when it is made; Run runs the shared
// watch, not its members. Keys under the prefix that no member holds are
// skipped.
type SharedWatch struct {
	s        *Store
	prefix   string
	members  []watchMember // sorted by prefix; none is a prefix of another
	progress chan struct{}
	synced   chan struct{}
	running  atomic.Bool
	// rev is the revision of the newest batch handed to the members, set
	// before they get it.
	rev atomic.Int64
}

// watchMember is a cache as its shared watch sees it (any *Cache[T]).
type watchMember interface {
	Prefix() string
	WaitForRev(ctx context.Context, rev int64) error
	replace(kvs []KV, rev int64)
	apply(events []Event, rev int64)
}

// NewSharedWatch returns a shared watch over prefix (relative to the
// store prefix; "" is the whole store). Caches join it with
// WithSharedWatch; Run feeds them.
func NewSharedWatch(s *Store, prefix string) *SharedWatch {
	return &SharedWatch{
		s:        s,
		prefix:   prefix,
		progress: make(chan struct{}, 1),
		synced:   make(chan struct{}),
	}
}

// WithSharedWatch has the cache fed by st instead of a watch of its own
// (see SharedWatch). The cache's collection must be of st's store and
// under its prefix, and no other member's prefix may contain it or lie
// within it; NewCache panics otherwise, or if st is running.
func WithSharedWatch(st *SharedWatch) CacheOption {
	return func(o *cacheOptions) { o.shared = st }
}

func (st *SharedWatch) join(s *Store, m watchMember) {
	p := m.Prefix()
	switch {
	case st.running.Load():
		panic("store: a cache cannot join a running shared watch")
	case s != st.s:
		panic(fmt.Sprintf("store: cache of %q joins a shared watch of another store", p))
	case !strings.HasPrefix(p, st.prefix):
		panic(fmt.Sprintf("store: cache of %q is outside its shared watch's prefix %q", p, st.prefix))
	}
	for _, o := range st.members {
		if strings.HasPrefix(p, o.Prefix()) || strings.HasPrefix(o.Prefix(), p) {
			panic(fmt.Sprintf("store: caches of %q and %q overlap in one shared watch", p, o.Prefix()))
		}
	}
	i, _ := slices.BinarySearchFunc(st.members, p, byPrefix)
	st.members = slices.Insert(st.members, i, m)
}

// Run fills the members and keeps them current until ctx is done, then
// returns ctx.Err(). Only one Run may be active at a time.
func (st *SharedWatch) Run(ctx context.Context) error {
	if !st.running.CompareAndSwap(false, true) {
		return errors.New("store: shared watch is already running")
	}
	defer st.running.Store(false)
	return st.s.reflect(ctx, st.prefix, sharedHandler{st}, st.progress)
}

// Synced is closed once every member holds its first list.
func (st *SharedWatch) Synced() <-chan struct{} { return st.synced }

// has reports whether the shared watch has received rev: every member is
// current at it once the batch in hand is delivered.
func (st *SharedWatch) has(rev int64) bool { return st.rev.Load() >= rev }

// WaitForRev blocks until every member is current at rev or later (see
// Cache.WaitForRev). The members are handed each batch in turn, so once
// the first has rev the others follow without another wait.
func (st *SharedWatch) WaitForRev(ctx context.Context, rev int64) error {
	for _, m := range st.members {
		if err := m.WaitForRev(ctx, rev); err != nil {
			return err
		}
	}
	return nil
}

// WaitCurrent blocks until every member is at least as new as etcd was
// when it was called: it reads etcd's current revision (Store.Revision,
// one round trip) and waits for the watch to deliver it. A read served
// from the members afterwards never shows an older state than one that
// another process served, or etcd answered, before the call: a process
// whose watch fell behind (it was paused, or its etcd member lags)
// catches up first instead of answering from the past. In the usual case
// the watch has the revision already, or brings it within milliseconds;
// a revision written outside the watch's prefix is confirmed by a
// progress notification after progressRetry.
func (st *SharedWatch) WaitCurrent(ctx context.Context) error {
	rev, err := st.s.Revision(ctx)
	if err != nil {
		return err
	}
	return st.WaitForRev(ctx, rev)
}

// sharedHandler keeps Replace and Apply off the SharedWatch's exported API.
type sharedHandler struct{ st *SharedWatch }

func (h sharedHandler) Replace(kvs []KV, rev int64) {
	st := h.st
	st.advance(rev)
	parts := split(st, kvs, func(kv KV) string { return kv.Key })
	for i, m := range st.members {
		m.replace(parts[i], rev)
	}
	select {
	case <-st.synced:
	default:
		close(st.synced)
	}
}

func (h sharedHandler) Apply(events []Event, rev int64) {
	st := h.st
	st.advance(rev)
	parts := split(st, events, func(ev Event) string { return ev.KV.Key })
	for i, m := range st.members {
		// Members without a change get the revision too: they are
		// current at it.
		m.apply(parts[i], rev)
	}
}

func (st *SharedWatch) advance(rev int64) {
	if rev > st.rev.Load() {
		st.rev.Store(rev) // only the Run goroutine writes it
	}
}

// split sorts items by the member whose prefix holds their key, keeping
// their order; items no member holds are dropped.
func split[E any](st *SharedWatch, items []E, key func(E) string) [][]E {
	parts := make([][]E, len(st.members))
	for _, it := range items {
		if i := st.member(key(it)); i >= 0 {
			parts[i] = append(parts[i], it)
		}
	}
	return parts
}

// member returns the index of the member whose prefix holds key, or -1.
func (st *SharedWatch) member(key string) int {
	// The candidate is the last member whose prefix sorts at or before
	// key: members never contain one another.
	i, found := slices.BinarySearchFunc(st.members, key, byPrefix)
	if !found {
		i--
	}
	if i >= 0 && strings.HasPrefix(key, st.members[i].Prefix()) {
		return i
	}
	return -1
}

func byPrefix(m watchMember, key string) int { return strings.Compare(m.Prefix(), key) }
