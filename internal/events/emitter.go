package events

import (
	"context"
	"log/slog"
	"maps"
	"sync/atomic"
	"time"
)

// Emitter defaults.
const (
	DefaultEmitBuffer    = 4096
	DefaultEmitBatch     = 256
	DefaultFlushInterval = 50 * time.Millisecond
)

const (
	// dropWarnEvery rate-limits the drop warning: when the store is down
	// every Emit drops, and a log line per event would be a second outage.
	dropWarnEvery = 10 * time.Second
	// flushTimeout bounds one Append, so a hung store costs dropped events
	// (the buffer fills) and not a stuck flush loop.
	flushTimeout = 5 * time.Second
	// shutdownFlushTimeout bounds the last flush after Run's ctx is done.
	shutdownFlushTimeout = 2 * time.Second
)

// Emitter records events from hot paths: Emit never blocks, a background
// loop (Run) batches them into the store, and when the buffer is full
// events are dropped and counted. Events are for operators; a scheduler
// must never wait on them.
type Emitter struct {
	store    Store
	region   string
	logger   *slog.Logger
	ch       chan Event
	batch    int
	interval time.Duration

	dropped  atomic.Uint64
	lastWarn atomic.Int64 // unix ns of the last drop warning
	running  atomic.Bool
}

// EmitterOption configures an Emitter.
type EmitterOption func(*Emitter)

// WithBuffer sets how many events may wait for a flush before Emit drops
// (default DefaultEmitBuffer).
func WithBuffer(n int) EmitterOption {
	return func(e *Emitter) {
		if n > 0 {
			e.ch = make(chan Event, n)
		}
	}
}

// WithBatchSize sets how many events make a flush happen at once, before
// the interval (default DefaultEmitBatch).
func WithBatchSize(n int) EmitterOption {
	return func(e *Emitter) {
		if n > 0 {
			e.batch = n
		}
	}
}

// WithFlushInterval sets the longest an event waits in the buffer while
// the loop runs (default DefaultFlushInterval).
func WithFlushInterval(d time.Duration) EmitterOption {
	return func(e *Emitter) {
		if d > 0 {
			e.interval = d
		}
	}
}

// NewEmitter returns an emitter writing to store and filling Region with
// region. A nil logger discards. Call Run to start flushing.
func NewEmitter(store Store, region string, logger *slog.Logger, opts ...EmitterOption) *Emitter {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	e := &Emitter{
		store:    store,
		region:   region,
		logger:   logger,
		batch:    DefaultEmitBatch,
		interval: DefaultFlushInterval,
	}
	for _, o := range opts {
		o(e)
	}
	if e.ch == nil {
		e.ch = make(chan Event, DefaultEmitBuffer)
	}
	return e
}

// Emit queues ev without blocking. It sets Region, Time and Type when
// empty (Time now, so the event keeps the moment it happened, not the
// moment it was flushed) and logs the event at Debug. An invalid event or
// a full buffer drops ev and counts it in Dropped.
func (e *Emitter) Emit(ev Event) {
	if ev.Region == "" {
		ev.Region = e.region
	}
	ev, err := prepare(ev, time.Now)
	if err != nil {
		e.drop(1, "invalid event", err)
		return
	}
	// The caller may reuse its map after Emit returns.
	ev.Fields = maps.Clone(ev.Fields)
	if e.logger.Enabled(context.Background(), slog.LevelDebug) {
		e.logDebug(ev)
	}
	select {
	case e.ch <- ev:
	default:
		e.drop(1, "buffer full", nil)
	}
}

// logDebug logs ev as one group, "event": its region (and, in its
// object, often a node) are also attributes of the logger the region
// passes in, and must not appear twice at the top of the record.
func (e *Emitter) logDebug(ev Event) {
	attrs := []any{
		slog.String("type", ev.Type),
		slog.String("reason", ev.Reason),
		slog.String("object", ev.Object),
		slog.String("region", ev.Region),
		slog.String("message", ev.Message),
	}
	if len(ev.Fields) > 0 {
		fields := make([]any, 0, len(ev.Fields))
		for k, v := range ev.Fields {
			fields = append(fields, slog.String(k, v))
		}
		attrs = append(attrs, slog.Group("fields", fields...))
	}
	e.logger.LogAttrs(context.Background(), slog.LevelDebug, "event", slog.Group("event", attrs...))
}

// Dropped returns how many events never reached the store: dropped on a
// full buffer, rejected as invalid, or lost in a failed Append.
func (e *Emitter) Dropped() uint64 { return e.dropped.Load() }

func (e *Emitter) drop(n int, why string, err error) {
	total := e.dropped.Add(uint64(n))
	now := time.Now().UnixNano()
	last := e.lastWarn.Load()
	if last != 0 && now-last < int64(dropWarnEvery) {
		return
	}
	if !e.lastWarn.CompareAndSwap(last, now) {
		return // another goroutine is warning right now
	}
	attrs := []any{"why", why, "lost", n, "dropped_total", total, "region", e.region}
	if err != nil {
		attrs = append(attrs, "err", err)
	}
	e.logger.Warn("events: dropping events", attrs...)
}

// Run flushes queued events until ctx is done, then flushes what is left
// (bounded by a short timeout) and returns. Only one Run may be active.
func (e *Emitter) Run(ctx context.Context) {
	if !e.running.CompareAndSwap(false, true) {
		e.logger.Error("events: emitter Run called while already running")
		return
	}
	defer e.running.Store(false)

	// Flushes outlive ctx: a batch in flight when ctx ends is still
	// written, within flushTimeout.
	base := context.WithoutCancel(ctx)
	ticker := time.NewTicker(e.interval)
	defer ticker.Stop()
	batch := make([]Event, 0, e.batch)
	for {
		select {
		case <-ctx.Done():
			// Events emitted just before shutdown (e.g. "RegionStopping")
			// are the ones operators most want to see.
			dctx, cancel := context.WithTimeout(base, shutdownFlushTimeout)
			defer cancel()
		drain:
			for {
				select {
				case ev := <-e.ch:
					batch = append(batch, ev)
					if len(batch) >= e.batch {
						batch = e.flush(dctx, batch)
					}
				default:
					break drain
				}
			}
			e.flush(dctx, batch)
			return
		case ev := <-e.ch:
			batch = append(batch, ev)
			if len(batch) >= e.batch {
				batch = e.flush(base, batch)
			}
		case <-ticker.C:
			batch = e.flush(base, batch)
		}
	}
}

// flush appends batch and returns it emptied for reuse.
func (e *Emitter) flush(ctx context.Context, batch []Event) []Event {
	if len(batch) == 0 {
		return batch
	}
	ctx, cancel := context.WithTimeout(ctx, flushTimeout)
	defer cancel()
	if _, err := e.store.Append(ctx, batch...); err != nil {
		e.drop(len(batch), "append failed", err)
	}
	clear(batch) // let the events' maps go
	return batch[:0]
}
