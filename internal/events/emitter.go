package events

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratahq/strata/internal/flush"
)

// Emitter defaults.
const (
	DefaultEmitBuffer    = 4096
	DefaultEmitBatch     = 256
	DefaultFlushInterval = 50 * time.Millisecond
	// DefaultCoalesceAfter and DefaultCoalesceWindow: a resource's part
	// events of one reason (5,000 replicas Scheduled) are written one by
	// one up to DefaultCoalesceAfter, then counted into one summary
	// event, written at most once per DefaultCoalesceWindow while they
	// keep coming (Kubernetes' event aggregator does the same: 10
	// similar events, then one that counts them).
	DefaultCoalesceAfter  = 10
	DefaultCoalesceWindow = 5 * time.Second
)

// Why an event was dropped: the reason label of the drop counters
// (DroppedBy, strata_events_dropped_total).
const (
	// DropInvalid: the event cannot be stored (no reason, unknown type).
	DropInvalid = "invalid"
	// DropBufferFull: the buffer was full (the store falls behind) and
	// the event is not one that a summary can count.
	DropBufferFull = "buffer_full"
	// DropAppendFailed: the store failed (or timed out) the write.
	DropAppendFailed = "append_failed"
)

var dropReasons = [...]string{DropInvalid, DropBufferFull, DropAppendFailed}

const (
	// dropWarnEvery rate-limits the drop warning: when the store is down
	// every Emit drops, and a log line per event would be a second outage.
	// The warning counts what was dropped since the last one.
	dropWarnEvery = 10 * time.Second
	// flushTimeout bounds one flush, so a hung store costs dropped events
	// (the buffer fills) and not a stuck flush loop.
	flushTimeout = 5 * time.Second
	// shutdownFlushTimeout bounds the last flush after Run's ctx is done.
	shutdownFlushTimeout = 2 * time.Second
)

// Emitter records events from hot paths: Emit never blocks, a background
// loop (Run) batches them into the store. Events are for operators; a
// scheduler must never wait on them.
//
// What a burst cannot lose, it coalesces: events about the parts of one
// resource (an event whose Fields["resource"] names a resource it is not
// itself about: a replica's) are grouped by region, tenant, type, reason
// and resource. A group's first events are written as they are; past
// the group's share (WithCoalesce), or when the buffer is full, they are
// counted instead, and the loop writes one summary event about the
// resource that stands for them (Fields["count"]). A group ends when
// its events stop for a window. What can neither be buffered nor
// coalesced is dropped and counted (DroppedBy), never silently.
type Emitter struct {
	store    Store
	region   string
	logger   *slog.Logger
	buffer   int
	batch    int
	interval time.Duration
	after    int
	window   time.Duration

	mu      sync.Mutex
	pending []Event
	groups  map[groupKey]*group
	// kick wakes Run when a batch is ready before the interval.
	kick chan struct{}

	dropped   [len(dropReasons)]atomic.Uint64
	coalesced atomic.Uint64
	warnMu    sync.Mutex
	lastWarn  time.Time
	warned    [len(dropReasons)]uint64 // drops the last warning covered
	running   atomic.Bool
}

// groupKey is what makes two events about a resource's parts similar.
type groupKey struct {
	region, tenant, typ, reason, resource string
}

// group is the state of one groupKey's events.
type group struct {
	passed int       // events written one by one
	seen   time.Time // the last event's arrival
	win    flush.Window
	// The events counted since the last summary.
	count             int
	first, last       time.Time
	lastObject, lastM string
}

// EmitterOption configures an Emitter.
type EmitterOption func(*Emitter)

// WithBuffer sets how many events may wait for a flush before Emit
// coalesces or drops (default DefaultEmitBuffer).
func WithBuffer(n int) EmitterOption {
	return func(e *Emitter) {
		if n > 0 {
			e.buffer = n
		}
	}
}

// WithBatchSize sets how many events make a flush happen at once, before
// the interval, and how many one Append carries (default
// DefaultEmitBatch).
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

// WithCoalesce sets how many similar events about a resource's parts are
// written one by one before they are counted into summaries, and the
// window: the shortest time between two summaries of a group, and how
// long a group's events must stop for it to end (defaults
// DefaultCoalesceAfter, DefaultCoalesceWindow). after 0 keeps the
// default; a negative after summarises from the first event.
func WithCoalesce(after int, window time.Duration) EmitterOption {
	return func(e *Emitter) {
		if after != 0 {
			e.after = max(after, 0)
		}
		if window > 0 {
			e.window = window
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
		buffer:   DefaultEmitBuffer,
		batch:    DefaultEmitBatch,
		interval: DefaultFlushInterval,
		after:    DefaultCoalesceAfter,
		window:   DefaultCoalesceWindow,
		groups:   map[groupKey]*group{},
		kick:     make(chan struct{}, 1),
	}
	for _, o := range opts {
		o(e)
	}
	return e
}

// Emit queues ev without blocking. It sets Region, Time and Type when
// empty (Time now, so the event keeps the moment it happened, not the
// moment it was flushed) and logs the event at Debug. An event about a
// resource's part may be counted into a summary instead (see Emitter);
// an invalid event, or one that finds the buffer full and cannot be
// counted, is dropped and counted in DroppedBy.
func (e *Emitter) Emit(ev Event) {
	if ev.Region == "" {
		ev.Region = e.region
	}
	now := time.Now()
	ev, err := prepare(ev, func() time.Time { return now })
	if err != nil {
		e.drop(DropInvalid, 1, err)
		return
	}
	// The caller may reuse its map after Emit returns.
	ev.Fields = maps.Clone(ev.Fields)
	if e.logger.Enabled(context.Background(), slog.LevelDebug) {
		e.logDebug(ev)
	}
	e.mu.Lock()
	queued := e.enqueue(ev, now)
	ready := len(e.pending) >= e.batch
	e.mu.Unlock()
	if !queued {
		e.drop(DropBufferFull, 1, nil)
	}
	if ready {
		select {
		case e.kick <- struct{}{}:
		default:
		}
	}
}

// enqueue buffers ev or counts it into its group; false means neither
// was possible. e.mu is held.
func (e *Emitter) enqueue(ev Event, now time.Time) bool {
	room := len(e.pending) < e.buffer
	key, ok := groupOf(&ev)
	if !ok {
		if room {
			e.pending = append(e.pending, ev)
		}
		return room
	}
	g := e.groups[key]
	if g == nil {
		if len(e.groups) >= e.buffer {
			// As many groups as events fit: count no more of them.
			if room {
				e.pending = append(e.pending, ev)
			}
			return room
		}
		g = &group{win: flush.Window{D: e.window}}
		e.groups[key] = g
	}
	g.seen = now
	if room && g.passed < e.after {
		g.passed++
		e.pending = append(e.pending, ev)
		return true
	}
	if g.count == 0 {
		g.first = ev.Time
	}
	g.count++
	g.last, g.lastObject, g.lastM = ev.Time, ev.Object, ev.Message
	e.coalesced.Add(1)
	return true
}

// groupOf returns the group of an event about a resource's part.
func groupOf(ev *Event) (groupKey, bool) {
	res := ev.Fields["resource"]
	if res == "" || ev.Object == "resource/"+res {
		return groupKey{}, false
	}
	return groupKey{region: ev.Region, tenant: ev.Tenant, typ: ev.Type, reason: ev.Reason, resource: res}, true
}

// summaries returns the summary events due at now (all that have counts
// when final) and ends the groups whose events stopped. e.mu is held.
func (e *Emitter) summaries(now time.Time, final bool) []Event {
	var out []Event
	for key, g := range e.groups {
		if g.count > 0 && (final || g.win.Wait(now) == 0) {
			out = append(out, g.summary(key))
			g.count = 0
			g.win.Flushed(now)
		}
		if g.count == 0 && now.Sub(g.seen) >= e.window && g.win.Wait(now) == 0 {
			delete(e.groups, key)
		}
	}
	return out
}

// summary is the event standing for the events g counted.
func (g *group) summary(key groupKey) Event {
	return Event{
		Time: g.last, Type: key.typ, Reason: key.reason,
		Object: "resource/" + key.resource, Tenant: key.tenant, Region: key.region,
		Message: fmt.Sprintf("%d more %s events of its parts, the last %s: %s", g.count, key.reason, g.lastObject, g.lastM),
		Fields: map[string]string{
			"resource": key.resource,
			"count":    strconv.Itoa(g.count),
			"first":    g.first.Format(time.RFC3339Nano),
			"object":   g.lastObject,
		},
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

// Dropped returns how many events never reached the store, for every
// reason of DroppedBy.
func (e *Emitter) Dropped() uint64 {
	var n uint64
	for i := range e.dropped {
		n += e.dropped[i].Load()
	}
	return n
}

// DroppedBy returns the events that never reached the store by why
// (DropInvalid, DropBufferFull, DropAppendFailed), every reason present.
func (e *Emitter) DroppedBy() map[string]uint64 {
	out := make(map[string]uint64, len(dropReasons))
	for i, r := range dropReasons {
		out[r] = e.dropped[i].Load()
	}
	return out
}

// Coalesced returns how many events were counted into summary events
// instead of being written one by one.
func (e *Emitter) Coalesced() uint64 { return e.coalesced.Load() }

func (e *Emitter) drop(why string, n int, err error) {
	for i, r := range dropReasons {
		if r == why {
			e.dropped[i].Add(uint64(n))
		}
	}
	e.warnDrops(time.Now(), err)
}

// warnDrops logs what was dropped since the last warning, at most once
// per dropWarnEvery; Run calls it on its ticks too, so the drops that
// followed a warning are reported once the interval has passed.
func (e *Emitter) warnDrops(now time.Time, err error) {
	if !e.warnMu.TryLock() {
		return // another goroutine is warning right now
	}
	defer e.warnMu.Unlock()
	if !e.lastWarn.IsZero() && now.Sub(e.lastWarn) < dropWarnEvery {
		return
	}
	attrs := []any{"region", e.region}
	var lost, total uint64
	for i, r := range dropReasons {
		n := e.dropped[i].Load()
		total += n
		if d := n - e.warned[i]; d > 0 {
			attrs = append(attrs, r, d)
			lost += d
		}
		e.warned[i] = n
	}
	if lost == 0 {
		return
	}
	e.lastWarn = now
	attrs = append(attrs, "lost", lost, "dropped_total", total)
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
	for {
		select {
		case <-ctx.Done():
			// Events emitted just before shutdown (e.g. "RegionStopping")
			// are the ones operators most want to see; so are the counts
			// of the summaries not yet due.
			dctx, cancel := context.WithTimeout(base, shutdownFlushTimeout)
			defer cancel()
			e.flush(dctx, true)
			e.warnDrops(time.Now(), nil)
			return
		case <-e.kick:
			e.flush(base, false)
		case <-ticker.C:
			e.flush(base, false)
			e.warnDrops(time.Now(), nil)
		}
	}
}

// flush writes what is pending and the summaries due, in Appends of at
// most batch events, all within one flushTimeout: a hung store holds the
// loop that long, then fails the rest at once.
func (e *Emitter) flush(ctx context.Context, final bool) {
	e.mu.Lock()
	out := append(e.pending, e.summaries(time.Now(), final)...)
	e.pending = nil
	e.mu.Unlock()
	if len(out) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, flushTimeout)
	defer cancel()
	for i := 0; i < len(out); i += e.batch {
		chunk := out[i:min(i+e.batch, len(out))]
		if _, err := e.store.Append(ctx, chunk...); err != nil {
			e.drop(DropAppendFailed, len(chunk), err)
		}
	}
}
