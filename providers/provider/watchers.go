package provider

import (
	"context"
	"fmt"
	"sync"

	"github.com/stratahq/strata/internal/api"
)

// DefaultWatchBuffer is how many statuses a watcher may fall behind
// before its channel is closed.
const DefaultWatchBuffer = 256

// Watchers is the fan-out behind a provider's Watch: each watcher gets a
// channel of its own with a bounded buffer, and Send never blocks the
// provider. A watcher that falls more than its buffer behind is closed
// rather than skipped: an agent stops polling a provider that watches, so
// a skipped change would be lost for good, whereas a closed channel tells
// it to watch again and relist (see Watcher).
type Watchers struct {
	buffer int

	mu     sync.Mutex
	chans  map[chan api.AssignmentStatus]func() bool // the stop of its AfterFunc
	closed bool
}

// NewWatchers returns a fan-out whose watchers may fall buffer statuses
// behind (DefaultWatchBuffer when buffer is not positive).
func NewWatchers(buffer int) *Watchers {
	if buffer <= 0 {
		buffer = DefaultWatchBuffer
	}
	return &Watchers{buffer: buffer, chans: map[chan api.AssignmentStatus]func() bool{}}
}

// Watch adds a watcher. Its channel closes when ctx is done, when it
// falls behind, or on Close; after Close, Watch fails with an error
// wrapping api.ErrUnavailable.
func (w *Watchers) Watch(ctx context.Context) (<-chan api.AssignmentStatus, error) {
	ch := make(chan api.AssignmentStatus, w.buffer)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil, fmt.Errorf("watch: provider closed: %w", api.ErrUnavailable)
	}
	// No goroutine per watcher: the channel is closed under the lock Send
	// sends under.
	w.chans[ch] = context.AfterFunc(ctx, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.dropLocked(ch)
	})
	return ch, nil
}

// Send sends a copy of st to every watcher, closing those whose buffer is
// full.
func (w *Watchers) Send(st api.AssignmentStatus) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.chans {
		select {
		case ch <- st.Clone():
		default:
			w.dropLocked(ch)
		}
	}
}

// Len counts the watchers, so that a provider can skip work nobody
// watches.
func (w *Watchers) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.chans)
}

// Reset closes every watcher, which then watches again and relists, and
// goes on accepting new ones: for a provider that may have missed
// changes (the event stream behind its watch broke).
func (w *Watchers) Reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.chans {
		w.dropLocked(ch)
	}
}

// Close closes every watcher and refuses new ones.
func (w *Watchers) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	for ch := range w.chans {
		w.dropLocked(ch)
	}
}

func (w *Watchers) dropLocked(ch chan api.AssignmentStatus) {
	stop, ok := w.chans[ch]
	if !ok {
		return
	}
	delete(w.chans, ch)
	stop() // a no-op when it is the AfterFunc itself that drops ch
	close(ch)
}
