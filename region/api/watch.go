package api

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/flush"
	"github.com/stratahq/strata/internal/store"
)

// watch carries one stream's changes from a cache's goroutine, which must
// never block, to the stream's goroutine. A stream that falls a whole
// buffer behind is closed (the receiver reconnects and gets a fresh
// snapshot) rather than slowing the cache or growing without bound.
//
// The queue grows with what is pending, not with the buffer: a region
// holds a watch per agent and stream, nearly all of them empty, and a
// channel of buffer batches would reserve the whole buffer for each.
type watch[T any] struct {
	mu       sync.Mutex
	queue    [][]store.Change[T] // batches offered and not yet taken
	limit    int                 // the buffer: batches queue may hold
	ready    chan struct{}       // holds a token while queue may be non-empty
	overflow chan struct{}       // closed once the buffer was full
	once     sync.Once
}

func newWatch[T any](buffer int) *watch[T] {
	return &watch[T]{limit: buffer, ready: make(chan struct{}, 1), overflow: make(chan struct{})}
}

// offer queues changes without blocking.
func (w *watch[T]) offer(changes []store.Change[T]) {
	w.mu.Lock()
	full := len(w.queue) >= w.limit
	if !full {
		w.queue = append(w.queue, changes)
	}
	w.mu.Unlock()
	if full {
		w.once.Do(func() { close(w.overflow) })
		return
	}
	select {
	case w.ready <- struct{}{}:
	default: // a token is there already
	}
}

// take returns the oldest batch queued, if any.
func (w *watch[T]) take() ([]store.Change[T], bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queue) == 0 {
		return nil, false
	}
	changes := w.queue[0]
	w.queue[0] = nil
	w.queue = w.queue[1:]
	if len(w.queue) == 0 {
		w.queue = nil // give the backing array back
	} else {
		select {
		case w.ready <- struct{}{}: // more to take: wake the reader again
		default:
		}
	}
	return changes, true
}

// pending returns the number of batches queued.
func (w *watch[T]) pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.queue)
}

// pump coalesces a watch's changes by name (first Old, last New) and
// hands them to send: at once when the last send is a window ago or more
// (an idle stream adds no delay), else when the window since the last
// send has passed, or as soon as max are pending; until ctx is done or
// the watch overflowed. Changes that created and deleted an object
// before a send are not sent: the receiver never saw it.
func pump[T any](ctx context.Context, w *watch[T], window time.Duration, max int, send func([]store.Change[T]) error) error {
	p := pumper[T]{win: flush.Window{D: window}, max: max, send: send}
	defer p.stopTimer()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.overflow:
			return fmt.Errorf("watcher fell %d change batches behind; too slow, reconnect: %w", w.limit, api.ErrUnavailable)
		case <-w.ready:
			p.co.drain(w, max)
			if err := p.step(); err != nil {
				return err
			}
		case <-p.due:
			if err := p.flush(); err != nil {
				return err
			}
		}
	}
}

// pumper is pump's state: the pending changes and the window's timer.
type pumper[T any] struct {
	co    coalesced[T]
	win   flush.Window
	max   int
	send  func([]store.Change[T]) error
	timer *time.Timer
	due   <-chan time.Time // nil while no send is scheduled
}

// step sends the pending changes when they fill a message or the window
// lets them go at once, and otherwise schedules a send at the window's
// end.
func (p *pumper[T]) step() error {
	n := len(p.co.batch)
	switch {
	case n >= p.max:
		return p.flush()
	case n == 0 || p.due != nil:
		return nil
	}
	wait := p.win.Wait(time.Now())
	if wait <= 0 {
		return p.flush()
	}
	p.timer = time.NewTimer(wait)
	p.due = p.timer.C
	return nil
}

func (p *pumper[T]) stopTimer() {
	if p.timer != nil {
		p.timer.Stop()
	}
	p.due = nil
}

// flush sends the pending changes, max to a message.
func (p *pumper[T]) flush() error {
	p.stopTimer()
	defer func() { p.win.Flushed(time.Now()) }()
	for chunk := range slices.Chunk(p.co.take(), p.max) {
		if err := p.send(chunk); err != nil {
			return err
		}
	}
	return nil
}

// coalesced holds the changes of one window, one per name: the first
// Old, the last New.
type coalesced[T any] struct {
	batch   []store.Change[T]
	pending map[string]int // name -> index in batch
}

func (c *coalesced[T]) add(changes []store.Change[T]) {
	if c.pending == nil {
		c.pending = make(map[string]int)
	}
	for _, ch := range changes {
		if i, ok := c.pending[ch.Name]; ok {
			c.batch[i].New = ch.New
			continue
		}
		c.pending[ch.Name] = len(c.batch)
		c.batch = append(c.batch, ch)
	}
}

// drain adds the changes queued in w, up to max pending (at least one
// batch when there is one), so that what arrived together is sent
// together.
func (c *coalesced[T]) drain(w *watch[T], max int) {
	for first := true; first || len(c.batch) < max; first = false {
		changes, ok := w.take()
		if !ok {
			return
		}
		c.add(changes)
	}
}

// take returns the window's changes and starts a new window. An object
// created and deleted within the window is left out: the receiver never
// saw it.
//
// A map keeps the room it grew to when cleared: a region holds one per
// agent stream, so one that grew past a few names (a node's replicas
// created at once) is dropped rather than kept for the stream's life.
func (c *coalesced[T]) take() []store.Change[T] {
	out := slices.DeleteFunc(c.batch, func(ch store.Change[T]) bool { return ch.Old == nil && ch.New == nil })
	c.batch = nil
	if len(c.pending) > keptPending {
		c.pending = nil
	} else {
		clear(c.pending)
	}
	return out
}

// keptPending is the most names a window may have had for its map to be
// kept for the next (one group of a Go map).
const keptPending = 8
