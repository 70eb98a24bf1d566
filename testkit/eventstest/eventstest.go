// Package eventstest is the conformance suite every events.Store
// implementation must pass, including the Emitter on top of it.
package eventstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/events"
)

// NewStore returns an empty store, isolated from the stores of other
// calls, that keeps at least capacity events, using the real clock.
type NewStore func(t *testing.T, capacity int) events.Store

// Run runs the suite.
func Run(t *testing.T, newStore NewStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, newStore NewStore)
	}{
		{"AppendRange", testAppendRange},
		{"Invalid", testInvalid},
		{"CursorPaging", testCursorPaging},
		{"Filters", testFilters},
		{"FiltersAcrossChunks", testFiltersAcrossChunks},
		{"Cap", testCap},
		{"ConcurrentAppend", testConcurrentAppend},
		{"ContextCanceled", testContextCanceled},
		{"TailFromCursor", testTailFromCursor},
		{"TailFromStart", testTailFromStart},
		{"TailNewOnly", testTailNewOnly},
		{"TailCallbackError", testTailCallbackError},
		{"TailCancel", testTailCancel},
		{"EmitterFlushes", testEmitterFlushes},
		{"EmitterDrops", testEmitterDrops},
		{"EmitterBurstOfOneResource", testEmitterBurstOfOneResource},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore) })
	}
}

const waitFor = 10 * time.Second

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it reports done or waitFor passes.
func eventually(t *testing.T, what string, cond func() (done bool, state string)) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		done, state := cond()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not done after %v: %s", what, waitFor, state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func ev(reason, object, msg string) events.Event {
	return events.Event{Reason: reason, Object: object, Message: msg, Region: "dev-1"}
}

func numbered(n int) []events.Event {
	out := make([]events.Event, n)
	for i := range out {
		out[i] = ev("Tick", "node/n1", strconv.Itoa(i))
	}
	return out
}

func mustAppend(t *testing.T, s events.Store, evs ...events.Event) []string {
	t.Helper()
	ids, err := s.Append(ctxT(t), evs...)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	if len(ids) != len(evs) {
		t.Fatalf("Append returned %d ids; want %d", len(ids), len(evs))
	}
	return ids
}

func mustRange(t *testing.T, s events.Store, q events.Query) []events.Event {
	t.Helper()
	got, err := s.Range(ctxT(t), q)
	if err != nil {
		t.Fatalf("Range(%+v): %v", q, err)
	}
	return got
}

func idsOf(evs []events.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

func msgsOf(evs []events.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Message
	}
	return out
}

// checkIncreasing fails unless every ID is strictly newer than the one
// before it.
func checkIncreasing(t *testing.T, ids []string) {
	t.Helper()
	for i := 1; i < len(ids); i++ {
		c, err := events.CompareID(ids[i-1], ids[i])
		if err != nil {
			t.Fatalf("CompareID(%q, %q): %v", ids[i-1], ids[i], err)
		}
		if c >= 0 {
			t.Fatalf("ids[%d]=%q is not after ids[%d]=%q", i, ids[i], i-1, ids[i-1])
		}
	}
}

func testAppendRange(t *testing.T, newStore NewStore) {
	s := newStore(t, 100)
	explicit := time.Date(2026, 5, 6, 7, 8, 9, 123456789, time.UTC)
	first := []events.Event{
		{Reason: "Scheduled", Object: "resource/t/web", Region: "dev-1", Message: "placed on n1",
			Fields: map[string]string{"node": "n1", "score": "0.93"}},
		{Type: events.TypeWarning, Time: explicit, Reason: "NodeDown", Object: "node/n2", Message: "no heartbeat for 30s"},
		{Reason: "Cordoned", Object: "node/n3"},
	}
	before := time.Now()
	ids := mustAppend(t, s, first...)
	ids = append(ids, mustAppend(t, s, ev("DrainProgress", "node/n3", "2/5"), ev("Drained", "node/n3", ""))...)
	after := time.Now()
	checkIncreasing(t, ids)

	got := mustRange(t, s, events.Query{})
	if fmt.Sprint(idsOf(got)) != fmt.Sprint(ids) {
		t.Fatalf("Range ids = %v; want %v", idsOf(got), ids)
	}
	g := got[0]
	if g.Type != events.TypeNormal || g.Reason != "Scheduled" || g.Object != "resource/t/web" ||
		g.Region != "dev-1" || g.Message != "placed on n1" || !maps.Equal(g.Fields, first[0].Fields) {
		t.Errorf("got[0] = %+v; want %+v with Type Normal", g, first[0])
	}
	if g.Time.Before(before.Truncate(time.Microsecond)) || g.Time.After(after) {
		t.Errorf("got[0].Time = %v; want defaulted within [%v, %v]", g.Time, before, after)
	}
	if g := got[1]; g.Type != events.TypeWarning || !g.Time.Equal(explicit) || g.Fields != nil {
		t.Errorf("got[1] = %+v; want Type Warning, Time %v, no Fields", g, explicit)
	}
	if g := got[3]; g.Message != "2/5" || g.Reason != "DrainProgress" {
		t.Errorf("got[3] = %+v; want DrainProgress 2/5", g)
	}
	// Results are copies: changing them does not change the store.
	got[0].Fields["node"] = "changed"
	if again := mustRange(t, s, events.Query{Limit: 1}); again[0].Fields["node"] != "n1" {
		t.Errorf("Fields after mutating a result = %v; want node=n1", again[0].Fields)
	}
}

func testInvalid(t *testing.T, newStore NewStore) {
	s := newStore(t, 100)
	ctx := ctxT(t)
	tests := []struct {
		name string
		evs  []events.Event
	}{
		{"empty reason", []events.Event{ev("Ok", "node/n1", ""), {Object: "node/n1"}}},
		{"unknown type", []events.Event{{Reason: "X", Type: "Info"}}},
	}
	for _, tc := range tests {
		if _, err := s.Append(ctx, tc.evs...); !errors.Is(err, events.ErrInvalidEvent) {
			t.Errorf("%s: Append err = %v; want ErrInvalidEvent", tc.name, err)
		}
	}
	if got := mustRange(t, s, events.Query{}); len(got) != 0 {
		t.Errorf("Range after rejected appends = %v; want none", msgsOf(got))
	}
	if ids, err := s.Append(ctx); err != nil || len(ids) != 0 {
		t.Errorf("Append() = %v, %v; want no ids, nil", ids, err)
	}
	for _, cursor := range []string{"bogus", "12", "1-x", "$"} {
		if _, err := s.Range(ctx, events.Query{After: cursor}); !errors.Is(err, events.ErrInvalidCursor) {
			t.Errorf("Range(After %q) err = %v; want ErrInvalidCursor", cursor, err)
		}
	}
	err := s.Tail(ctx, "bogus", func([]events.Event) error { return nil })
	if !errors.Is(err, events.ErrInvalidCursor) {
		t.Errorf("Tail(bogus) err = %v; want ErrInvalidCursor", err)
	}
}

func testCursorPaging(t *testing.T, newStore NewStore) {
	s := newStore(t, 100)
	ids := mustAppend(t, s, numbered(25)...)
	var paged []string
	var sizes []int
	cursor := ""
	for range 10 {
		page := mustRange(t, s, events.Query{After: cursor, Limit: 10})
		sizes = append(sizes, len(page))
		if len(page) == 0 {
			break
		}
		paged = append(paged, idsOf(page)...)
		cursor = page[len(page)-1].ID
	}
	if fmt.Sprint(sizes) != "[10 10 5 0]" {
		t.Errorf("page sizes = %v; want [10 10 5 0]", sizes)
	}
	if fmt.Sprint(paged) != fmt.Sprint(ids) {
		t.Errorf("paged ids = %v; want %v", paged, ids)
	}
	tests := []struct {
		after string
		want  int
	}{
		{"0-0", 25},
		{ids[0], 24},
		{ids[23], 1},
		{ids[24], 0},
	}
	for _, tc := range tests {
		if got := mustRange(t, s, events.Query{After: tc.after}); len(got) != tc.want {
			t.Errorf("Range(After %s) = %d events; want %d", tc.after, len(got), tc.want)
		}
	}
}

func testFilters(t *testing.T, newStore NewStore) {
	s := newStore(t, 100)
	in := []events.Event{
		ev("NodeDown", "node/n1", "0"),
		ev("NodeDown", "node/n10", "1"),
		ev("Cordoned", "node/n1", "2"),
		ev("Scheduled", "resource/t1/web", "3"),
		ev("Scheduled", "resource/t1/db", "4"),
		ev("Scheduled", "resource/t2/web", "5"),
		ev("RegionReady", "region/dev-1", "6"),
		ev("DrainProgress", "node/n1", "7"),
		ev("Failed", "resource/t1/web", "8"),
		{Reason: "ReplicaReady", Object: "replica/r9", Tenant: "t2", Message: "9"},
	}
	ids := mustAppend(t, s, in...)
	tests := []struct {
		name string
		q    events.Query
		want string
	}{
		{"all", events.Query{}, "[0 1 2 3 4 5 6 7 8 9]"},
		{"tenant from a resource object or set", events.Query{Tenant: "t2"}, "[5 9]"},
		{"tenant and reason", events.Query{Tenant: "t1", Reason: "Failed"}, "[8]"},
		{"tenant of none", events.Query{Tenant: "t3"}, "[]"},
		{"object exact is a path, not a string prefix", events.Query{Object: "node/n1"}, "[0 2 7]"},
		{"object kind", events.Query{Object: "node"}, "[0 1 2 7]"},
		{"object kind with slash", events.Query{Object: "node/"}, "[0 1 2 7]"},
		{"object tenant", events.Query{Object: "resource/t1"}, "[3 4 8]"},
		{"object resource", events.Query{Object: "resource/t1/web"}, "[3 8]"},
		{"object unknown", events.Query{Object: "nope"}, "[]"},
		{"reason", events.Query{Reason: "Scheduled"}, "[3 4 5]"},
		{"object and reason", events.Query{Object: "resource/t1", Reason: "Scheduled"}, "[3 4]"},
		{"limit", events.Query{Limit: 2}, "[0 1]"},
		{"newest limit", events.Query{Newest: true, Limit: 2}, "[8 9]"},
		{"newest limit filtered", events.Query{Newest: true, Limit: 2, Object: "node"}, "[2 7]"},
		{"newest unlimited", events.Query{Newest: true}, "[0 1 2 3 4 5 6 7 8 9]"},
		{"after and object", events.Query{After: ids[2], Object: "node"}, "[7]"},
		{"after newest nothing left", events.Query{After: ids[2], Newest: true, Limit: 1, Reason: "NodeDown"}, "[]"},
		{"after newest", events.Query{After: ids[5], Newest: true, Limit: 5}, "[6 7 8 9]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := fmt.Sprint(msgsOf(mustRange(t, s, tc.q))); got != tc.want {
				t.Errorf("Range(%+v) = %s; want %s", tc.q, got, tc.want)
			}
		})
	}
}

// testFiltersAcrossChunks: a store that filters while reading in chunks
// must carry on past chunks without a match.
func testFiltersAcrossChunks(t *testing.T, newStore NewStore) {
	s := newStore(t, 5000)
	all := numbered(1500)
	var rare []string
	for i := range all {
		if i%100 == 99 {
			all[i].Reason = "Rare"
			rare = append(rare, all[i].Message)
		}
	}
	mustAppend(t, s, all...)
	tests := []struct {
		q    events.Query
		want []string
	}{
		{events.Query{Reason: "Rare"}, rare},
		{events.Query{Reason: "Rare", Limit: 3}, rare[:3]},
		{events.Query{Reason: "Rare", Limit: 3, Newest: true}, rare[len(rare)-3:]},
		{events.Query{Reason: "Rare", Newest: true}, rare},
	}
	for _, tc := range tests {
		if got := msgsOf(mustRange(t, s, tc.q)); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("Range(%+v) = %v; want %v", tc.q, got, tc.want)
		}
	}
}

func testCap(t *testing.T, newStore NewStore) {
	const capacity, total = 20, 300
	s := newStore(t, capacity)
	all := numbered(total)
	for i := 0; i < total; i += 10 {
		mustAppend(t, s, all[i:i+10]...)
	}
	got := mustRange(t, s, events.Query{})
	// Stores may trim approximately (Redis MAXLEN ~) but never below the
	// capacity, and must drop the oldest.
	if len(got) < capacity || len(got) >= total {
		t.Fatalf("retained %d events; want between %d and %d", len(got), capacity, total-1)
	}
	for i, e := range got {
		if want := strconv.Itoa(total - len(got) + i); e.Message != want {
			t.Fatalf("retained[%d] = %s; want %s (the newest, contiguous)", i, e.Message, want)
		}
	}
	// Tail from the start sees what is retained, nothing older.
	var first string
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	err := s.Tail(ctx, "", func(b []events.Event) error {
		first = b[0].Message
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Tail err = %v; want context.Canceled", err)
	}
	if first != got[0].Message {
		t.Errorf("Tail from start began at %s; want %s", first, got[0].Message)
	}
}

func testConcurrentAppend(t *testing.T, newStore NewStore) {
	s := newStore(t, 10_000)
	const writers, calls, per = 8, 20, 5
	var mu sync.Mutex
	returned := map[string]bool{}
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for c := range calls {
				batch := make([]events.Event, per)
				for i := range batch {
					batch[i] = ev("Tick", fmt.Sprintf("node/w%d", w), fmt.Sprintf("%d-%d-%d", w, c, i))
				}
				ids, err := s.Append(context.Background(), batch...)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for _, id := range ids {
					returned[id] = true
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Append: %v", err)
	}
	got := mustRange(t, s, events.Query{})
	if len(got) != writers*calls*per || len(returned) != len(got) {
		t.Fatalf("Range = %d events, %d distinct ids returned; want %d of each", len(got), len(returned), writers*calls*per)
	}
	checkIncreasing(t, idsOf(got))
	for _, e := range got {
		if !returned[e.ID] {
			t.Fatalf("Range has id %s that Append never returned", e.ID)
		}
	}
	// Each writer's events keep the writer's order.
	for w := range writers {
		got := msgsOf(mustRange(t, s, events.Query{Object: fmt.Sprintf("node/w%d", w)}))
		for i, m := range got {
			if want := fmt.Sprintf("%d-%d-%d", w, i/per, i%per); m != want {
				t.Fatalf("writer %d event %d = %s; want %s", w, i, m, want)
			}
		}
	}
}

func testContextCanceled(t *testing.T, newStore NewStore) {
	s := newStore(t, 100)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Append(ctx, ev("Tick", "node/n1", "x")); !errors.Is(err, context.Canceled) {
		t.Errorf("Append(canceled) err = %v; want context.Canceled", err)
	}
	if _, err := s.Range(ctx, events.Query{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Range(canceled) err = %v; want context.Canceled", err)
	}
	for _, after := range []string{"", events.TailNew} {
		err := s.Tail(ctx, after, func([]events.Event) error { return nil })
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Tail(canceled, %q) err = %v; want context.Canceled", after, err)
		}
	}
	if got := mustRange(t, s, events.Query{}); len(got) != 0 {
		t.Errorf("Range after canceled Append = %v; want none", msgsOf(got))
	}
}

// collector runs Tail in the background and records what it delivers.
type collector struct {
	mu     sync.Mutex
	got    []events.Event
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

func startTail(t *testing.T, s events.Store, after string) *collector {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	c := &collector{cancel: cancel, done: make(chan error, 1)}
	go func() {
		c.done <- s.Tail(ctx, after, func(b []events.Event) error {
			if len(b) == 0 {
				return errors.New("empty batch")
			}
			c.mu.Lock()
			c.got = append(c.got, b...)
			c.mu.Unlock()
			return nil
		})
	}()
	t.Cleanup(func() { c.stop(t) })
	return c
}

func (c *collector) events() []events.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]events.Event(nil), c.got...)
}

func (c *collector) waitFor(t *testing.T, n int) []events.Event {
	t.Helper()
	eventually(t, fmt.Sprintf("Tail delivering %d events", n), func() (bool, string) {
		got := c.events()
		return len(got) >= n, fmt.Sprintf("got %d: %v", len(got), msgsOf(got))
	})
	return c.events()
}

// stop cancels the Tail and checks it returns promptly with ctx's error.
// Later calls do nothing.
func (c *collector) stop(t *testing.T) {
	t.Helper()
	c.once.Do(func() {
		c.cancel()
		select {
		case err := <-c.done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Tail returned %v; want context.Canceled", err)
			}
		case <-time.After(waitFor):
			t.Errorf("Tail did not return within %v of cancel", waitFor)
		}
	})
}

func testTailFromCursor(t *testing.T, newStore NewStore) {
	s := newStore(t, 1000)
	ids := mustAppend(t, s, numbered(3)...)
	c := startTail(t, s, ids[0])
	got := c.waitFor(t, 2)
	if fmt.Sprint(idsOf(got)) != fmt.Sprint(ids[1:]) {
		t.Fatalf("Tail(after %s) = %v; want %v", ids[0], idsOf(got), ids[1:])
	}
	more := numbered(53)[3:]
	for i := 0; i < len(more); i += 10 {
		ids = append(ids, mustAppend(t, s, more[i:min(i+10, len(more))]...)...)
	}
	got = c.waitFor(t, 52)
	if fmt.Sprint(idsOf(got)) != fmt.Sprint(ids[1:]) {
		t.Fatalf("Tail ids = %v; want %v", idsOf(got), ids[1:])
	}
	if fmt.Sprint(msgsOf(got)) != fmt.Sprint(msgsOf(numbered(53)[1:])) {
		t.Fatalf("Tail messages = %v; want 1..52 in order", msgsOf(got))
	}
	c.stop(t)
}

func testTailFromStart(t *testing.T, newStore NewStore) {
	s := newStore(t, 100)
	mustAppend(t, s, numbered(2)...)
	c := startTail(t, s, "")
	c.waitFor(t, 2)
	mustAppend(t, s, ev("Tick", "node/n1", "2"))
	if got := msgsOf(c.waitFor(t, 3)); fmt.Sprint(got) != "[0 1 2]" {
		t.Fatalf("Tail(\"\") = %v; want [0 1 2]", got)
	}
}

func testTailNewOnly(t *testing.T, newStore NewStore) {
	s := newStore(t, 1000)
	mustAppend(t, s, ev("Tick", "node/n1", "old"))
	c := startTail(t, s, events.TailNew)
	// Tail may not have resolved "$" yet; keep appending until it shows
	// it is listening. Nothing appended before it started may appear.
	var sent []string
	eventually(t, "Tail($) delivering a new event", func() (bool, string) {
		if len(c.events()) > 0 {
			return true, ""
		}
		msg := fmt.Sprintf("new-%d", len(sent))
		mustAppend(t, s, ev("Tick", "node/n1", msg))
		sent = append(sent, msg)
		return false, fmt.Sprintf("sent %d", len(sent))
	})
	mustAppend(t, s, ev("Tick", "node/n1", "last"))
	sent = append(sent, "last")
	eventually(t, "Tail($) delivering the last event", func() (bool, string) {
		got := msgsOf(c.events())
		return len(got) > 0 && got[len(got)-1] == "last", fmt.Sprint(got)
	})
	got := msgsOf(c.events())
	// What arrived is a suffix of what was sent, in order.
	if strings.Contains(fmt.Sprint(got), "old") ||
		!strings.HasSuffix(" "+strings.Join(sent, " "), " "+strings.Join(got, " ")) {
		t.Fatalf("Tail($) = %v; want a suffix of %v and never \"old\"", got, sent)
	}
}

func testTailCallbackError(t *testing.T, newStore NewStore) {
	s := newStore(t, 100)
	mustAppend(t, s, numbered(3)...)
	errStop := errors.New("stop")
	calls := 0
	err := s.Tail(ctxT(t), "", func([]events.Event) error {
		calls++
		return errStop
	})
	if !errors.Is(err, errStop) || calls != 1 {
		t.Fatalf("Tail = %v after %d calls; want errStop after 1", err, calls)
	}
}

func testTailCancel(t *testing.T, newStore NewStore) {
	s := newStore(t, 100)
	c := startTail(t, s, events.TailNew)
	// Give Tail time to block: the point is cancelling a blocked Tail.
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	c.stop(t)
	// Redis blocks in rounds of about a second; anything close to that
	// is prompt, a stuck Tail would hit stop's own deadline.
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Tail returned %v after cancel; want < 3s", d)
	}
	t.Logf("Tail returned %v after cancel", time.Since(start))
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func debugLogger(buf *syncBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func runEmitter(t *testing.T, e *events.Emitter) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		e.Run(ctx)
		close(done)
	}()
	stop = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(waitFor):
			t.Fatalf("Emitter.Run did not return within %v of cancel", waitFor)
		}
	}
	t.Cleanup(func() { cancel(); <-done })
	return stop
}

func testEmitterFlushes(t *testing.T, newStore NewStore) {
	s := newStore(t, 1000)
	var logs syncBuffer
	e := events.NewEmitter(s, "dev-1", debugLogger(&logs))
	stop := runEmitter(t, e)

	const n = 300 // more than one batch
	for i := range n {
		e.Emit(events.Event{Reason: "Tick", Object: "node/n1", Message: strconv.Itoa(i),
			Fields: map[string]string{"i": strconv.Itoa(i)}})
	}
	eventually(t, "emitted events in the store", func() (bool, string) {
		got := mustRange(t, s, events.Query{})
		return len(got) == n, fmt.Sprintf("%d events", len(got))
	})
	got := mustRange(t, s, events.Query{})
	for i, g := range got {
		if g.Message != strconv.Itoa(i) || g.Region != "dev-1" || g.Type != events.TypeNormal ||
			g.Time.IsZero() || g.Fields["i"] != strconv.Itoa(i) {
			t.Fatalf("event %d = %+v; want message %d, region dev-1, type Normal, a time, field i", i, g, i)
		}
	}
	if d := e.Dropped(); d != 0 {
		t.Errorf("Dropped = %d; want 0", d)
	}
	if l := logs.String(); !strings.Contains(l, "level=DEBUG msg=event") ||
		!strings.Contains(l, "event.reason=Tick") || !strings.Contains(l, "event.fields.i=299") {
		t.Errorf("debug log lacks the events; log starts:\n%.500s", l)
	}

	// What is emitted right before shutdown is flushed by Run on its way out.
	e.Emit(events.Event{Reason: "RegionStopping", Object: "region/dev-1"})
	stop()
	if last := mustRange(t, s, events.Query{Newest: true, Limit: 1}); len(last) != 1 || last[0].Reason != "RegionStopping" {
		t.Errorf("newest after Run returned = %+v; want RegionStopping", last)
	}
}

func testEmitterDrops(t *testing.T, newStore NewStore) {
	s := newStore(t, 1000)
	var logs syncBuffer
	e := events.NewEmitter(s, "dev-1", debugLogger(&logs), events.WithBuffer(4))
	// Run is not started: the buffer fills and Emit must drop, not block.
	start := time.Now()
	for i := range 10 {
		e.Emit(ev("Tick", "node/n1", strconv.Itoa(i)))
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("10 Emits on a full buffer took %v; want no blocking", d)
	}
	if d := e.Dropped(); d != 6 {
		t.Errorf("Dropped = %d; want 6", d)
	}
	if !strings.Contains(logs.String(), "level=WARN msg=\"events: dropping events\"") {
		t.Errorf("no drop warning logged:\n%s", logs.String())
	}
	e.Emit(events.Event{Object: "node/n1"}) // invalid: no reason
	if d := e.Dropped(); d != 7 {
		t.Errorf("Dropped after an invalid event = %d; want 7", d)
	}

	runEmitter(t, e)
	eventually(t, "buffered events flushed", func() (bool, string) {
		got := msgsOf(mustRange(t, s, events.Query{}))
		return fmt.Sprint(got) == "[0 1 2 3]", fmt.Sprint(got)
	})
	if d := e.Dropped(); d != 7 {
		t.Errorf("Dropped after flushing = %d; want 7", d)
	}
}

// testEmitterBurstOfOneResource emits what one resource of 5,000 replicas
// gives a region, the way the region emits it: every replica's
// Scheduled event at once after the controller's commit, then their
// ReplicaReady events in the batches agents report. None is lost: each
// is in the store, alone or counted in a summary event of its resource,
// and nothing is dropped.
func testEmitterBurstOfOneResource(t *testing.T, newStore NewStore) {
	const replicas = 5000
	s := newStore(t, 4*replicas)
	e := events.NewEmitter(s, "dev-1", nil)
	stop := runEmitter(t, e)
	replica := func(reason string, i int) events.Event {
		return events.Event{Reason: reason, Object: fmt.Sprintf("replica/web-%05d", i), Tenant: "t1",
			Message: "on node n1", Fields: map[string]string{"resource": "t1/web", "node": "n1"}}
	}
	for i := range replicas {
		e.Emit(replica("Scheduled", i))
	}
	for i := range replicas {
		if i%100 == 0 {
			time.Sleep(time.Millisecond) // one agent's report, then the next
		}
		e.Emit(replica("ReplicaReady", i))
	}
	e.Emit(events.Event{Reason: "NodeUp", Object: "node/n1"})
	stop()

	got := mustRange(t, s, events.Query{})
	counts := map[string]int{}
	for _, g := range got {
		n := 1
		if c, ok := g.Fields["count"]; ok {
			var err error
			if n, err = strconv.Atoi(c); err != nil || n < 1 {
				t.Fatalf("event %+v: count %q; want a positive number", g, c)
			}
			if g.Object != "resource/t1/web" || g.Tenant != "t1" || g.Fields["resource"] != "t1/web" {
				t.Errorf("summary %+v; want it about resource/t1/web, of tenant t1", g)
			}
		}
		counts[g.Reason] += n
	}
	if counts["Scheduled"] != replicas || counts["ReplicaReady"] != replicas || counts["NodeUp"] != 1 {
		t.Errorf("events in the store, summaries counted: %v; want %d Scheduled, %d ReplicaReady, 1 NodeUp",
			counts, replicas, replicas)
	}
	if d := e.Dropped(); d != 0 {
		t.Errorf("Dropped = %d; want 0", d)
	}
	if len(got) > replicas/10 {
		t.Errorf("%d events in the store for %d replicas; want them coalesced", len(got), replicas)
	}
}
