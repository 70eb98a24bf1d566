// Package events is the event stream operators watch.
//
// Every scheduling decision, state transition, node transition and operator
// action becomes an Event. A region keeps a capped stream of them: a Redis
// stream in production, an in-memory ring in `strata dev`. Events are for
// people and dashboards; they are not a source of truth, so a capped,
// loss-tolerant store is the right trade.
//
// Hot paths do not call a Store directly: they Emit through an Emitter,
// which never blocks, batches writes, coalesces the events of one
// resource's many replicas into summaries, and counts what it drops.
package events

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// Event types.
const (
	TypeNormal  = "Normal"
	TypeWarning = "Warning"
)

// Event is one thing that happened in a region.
type Event struct {
	// ID is assigned by the store on Append, in Redis stream form
	// "<unix-ms>-<seq>". IDs increase monotonically within a store and
	// serve as cursors; compare them with CompareID, not as strings
	// (Redis does not pad the sequence number).
	ID   string
	Time time.Time // set by Append (or Emit) when zero; stores return UTC
	Type string    // TypeNormal or TypeWarning; empty means TypeNormal
	// Reason is a CamelCase machine word: Scheduled, NodeDown, Cordoned,
	// DrainProgress, ...
	Reason string
	// Object names what the event is about: "node/n1",
	// "resource/tenant/name", "replica/<id>", "region/dev-1".
	Object string
	// Tenant is the tenant whose object the event is about; empty for
	// infrastructure (nodes, regions). Append fills it in for
	// "resource/<tenant>/..." objects; emitters set it for replicas.
	Tenant  string
	Region  string
	Message string            // a sentence for humans
	Fields  map[string]string // extra key/values
}

// Query selects events for Range.
type Query struct {
	// After is an exclusive cursor (an Event ID); "" starts at the oldest
	// retained event.
	After string
	// Limit caps the number of events returned; 0 means no cap (the store
	// is capped anyway).
	Limit int
	// Object keeps events whose Object is this path or below it:
	// "node/n1" matches "node/n1" and "node/n1/x" but not "node/n10";
	// "node" or "node/" matches every node. Empty matches everything.
	Object string
	// Reason keeps events with exactly this Reason; empty matches all.
	Reason string
	// Tenant keeps one tenant's events; empty matches all, those of no
	// tenant included.
	Tenant string
	// Newest selects the newest Limit matching events after After instead
	// of the oldest (what `strata events` shows by default). The result is
	// still oldest first.
	Newest bool
}

// Store keeps a region's capped event stream.
type Store interface {
	// Append stores events in one round trip and returns their IDs in
	// order. It sets Time when zero and Type when empty. An invalid event
	// (ErrInvalidEvent) rejects the whole call before anything is written.
	Append(ctx context.Context, evs ...Event) ([]string, error)
	// Range returns the events selected by q, oldest first.
	Range(ctx context.Context, q Query) ([]Event, error)
	// Tail calls fn with batches of events after the cursor, in order,
	// until ctx is done (it then returns ctx.Err()) or fn or the store
	// fails (it returns that error; resume from the last ID seen).
	//
	// after is an Event ID (exclusive), "" for every retained event and
	// then new ones, or TailNew ("$") for only events appended after Tail
	// started.
	Tail(ctx context.Context, after string, fn func([]Event) error) error
}

// TailNew as Tail's cursor means "only events appended from now on".
const TailNew = "$"

// DefaultCapacity is the number of events a region keeps when a
// constructor is given zero.
const DefaultCapacity = 10_000

var (
	// ErrInvalidEvent means an event cannot be appended.
	ErrInvalidEvent = errors.New("events: invalid event")
	// ErrInvalidCursor means a cursor is not an event ID.
	ErrInvalidCursor = errors.New("events: invalid cursor")
)

// Option configures a store.
type Option func(*config)

type config struct {
	logger *slog.Logger
	now    func() time.Time
	block  time.Duration
}

func newConfig(opts []Option) config {
	c := config{logger: slog.New(slog.DiscardHandler), now: time.Now, block: time.Second}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithLogger sets the logger; the default discards.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// WithClock sets the clock for defaulting Event.Time (and, in Memory, for
// IDs).
func WithClock(now func() time.Time) Option {
	return func(c *config) {
		if now != nil {
			c.now = now
		}
	}
}

// WithBlock sets how long one Redis XREAD blocks in Tail. go-redis cannot
// interrupt a blocked read when ctx is canceled, so this bounds how late
// Tail notices cancellation; each round is one cheap command. Default 1 s.
func WithBlock(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.block = d
		}
	}
}

// prepare validates ev and fills the defaults Append promises.
func prepare(ev Event, now func() time.Time) (Event, error) {
	if ev.Reason == "" {
		return Event{}, fmt.Errorf("%w: empty reason (object %q)", ErrInvalidEvent, ev.Object)
	}
	switch ev.Type {
	case "":
		ev.Type = TypeNormal
	case TypeNormal, TypeWarning:
	default:
		return Event{}, fmt.Errorf("%w: type %q (reason %s)", ErrInvalidEvent, ev.Type, ev.Reason)
	}
	if ev.Time.IsZero() {
		ev.Time = now()
	}
	if rest, ok := strings.CutPrefix(ev.Object, "resource/"); ok && ev.Tenant == "" {
		ev.Tenant, _, _ = strings.Cut(rest, "/")
	}
	// Drop the monotonic reading; UTC because that is what Redis returns.
	ev.Time = ev.Time.Round(0).UTC()
	return ev, nil
}

// filters reports whether q keeps some events only (object, reason or
// tenant): a store reading in chunks must then read past non-matches.
func (q Query) filters() bool { return q.Object != "" || q.Reason != "" || q.Tenant != "" }

func matches(ev *Event, q *Query) bool {
	if q.Reason != "" && ev.Reason != q.Reason {
		return false
	}
	if q.Tenant != "" && ev.Tenant != q.Tenant {
		return false
	}
	return matchObject(ev.Object, q.Object)
}

func matchObject(obj, filter string) bool {
	if filter == "" || obj == filter {
		return true
	}
	if !strings.HasPrefix(obj, filter) {
		return false
	}
	// A plain string prefix would let "node/n1" match "node/n10".
	return strings.HasSuffix(filter, "/") || obj[len(filter)] == '/'
}

// ValidID checks an event id as a client sends it back (a cursor): what
// a store would refuse, or take for the beginning, is an error wrapping
// ErrInvalidCursor.
func ValidID(s string) error {
	_, err := parseID(s)
	return err
}

// streamID is a parsed Redis stream ID.
type streamID struct{ ms, seq uint64 }

func parseID(s string) (streamID, error) {
	msStr, seqStr, ok := strings.Cut(s, "-")
	if !ok {
		return streamID{}, fmt.Errorf("%w: %q", ErrInvalidCursor, s)
	}
	ms, err1 := strconv.ParseUint(msStr, 10, 64)
	seq, err2 := strconv.ParseUint(seqStr, 10, 64)
	if err1 != nil || err2 != nil {
		return streamID{}, fmt.Errorf("%w: %q", ErrInvalidCursor, s)
	}
	return streamID{ms, seq}, nil
}

func (a streamID) compare(b streamID) int {
	if c := cmp.Compare(a.ms, b.ms); c != 0 {
		return c
	}
	return cmp.Compare(a.seq, b.seq)
}

// CompareID compares two event IDs by position in the stream: -1 if a is
// older than b, 0 if equal, +1 if newer.
func CompareID(a, b string) (int, error) {
	ia, err := parseID(a)
	if err != nil {
		return 0, err
	}
	ib, err := parseID(b)
	if err != nil {
		return 0, err
	}
	return ia.compare(ib), nil
}
