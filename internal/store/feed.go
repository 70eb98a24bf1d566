package store

import "sync"

// Feed fans one cache's changes out to subscribers that come and go (a
// Cache takes its own callbacks only at construction). Pass Publish to
// WithOnChange. Subscribers run in the cache's goroutine and must not
// block: they mark work and return.
type Feed[T any] struct {
	mu   sync.RWMutex
	subs map[int]func([]Change[T])
	next int
}

// Subscribe adds fn; the returned function removes it.
func (f *Feed[T]) Subscribe(fn func([]Change[T])) (unsubscribe func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.subs == nil {
		f.subs = map[int]func([]Change[T]){}
	}
	id := f.next
	f.next++
	f.subs[id] = fn
	return func() {
		f.mu.Lock()
		delete(f.subs, id)
		f.mu.Unlock()
	}
}

// Publish delivers changes to every subscriber.
func (f *Feed[T]) Publish(changes []Change[T]) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, fn := range f.subs {
		fn(changes)
	}
}
