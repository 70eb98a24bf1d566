package events_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/events"
)

// failingStore rejects every Append, as a store that is down would.
type failingStore struct {
	events.Store
	mu    sync.Mutex
	calls int
}

var errDown = errors.New("store down")

func (f *failingStore) Append(context.Context, ...events.Event) ([]string, error) {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	return nil, errDown
}

func (f *failingStore) appends() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestEmitterCountsFailedAppends: events lost to a failing store count as
// dropped, and the warning is rate-limited rather than one per batch.
func TestEmitterCountsFailedAppends(t *testing.T) {
	store := &failingStore{}
	var logs lockedBuffer
	e := events.NewEmitter(store, "dev-1", slog.New(slog.NewTextHandler(&logs, nil)),
		events.WithBatchSize(10), events.WithFlushInterval(time.Millisecond))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	for range 30 {
		e.Emit(events.Event{Reason: "Tick"})
	}
	deadline := time.Now().Add(10 * time.Second)
	for e.Dropped() != 30 {
		if time.Now().After(deadline) {
			t.Fatalf("Dropped = %d; want 30", e.Dropped())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := store.appends(); n < 3 {
		t.Errorf("Append calls = %d; want >= 3 (batches of 10)", n)
	}
	if n := strings.Count(logs.String(), "events: dropping events"); n != 1 {
		t.Errorf("drop warnings = %d; want 1 (rate-limited)\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "store down") {
		t.Errorf("warning does not carry the store error:\n%s", logs.String())
	}
}

// TestEmitterRunOnce: of two concurrent Runs one returns at once instead
// of racing the other for the buffer; the other keeps flushing.
func TestEmitterRunOnce(t *testing.T) {
	store := events.NewMemory(10)
	e := events.NewEmitter(store, "dev-1", nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	returned := make(chan int, 2)
	for i := range 2 {
		go func() { e.Run(ctx); returned <- i }()
	}
	var first int
	select {
	case first = <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("neither Run returned; want the second to refuse at once")
	}
	e.Emit(events.Event{Reason: "Tick"})
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, _ := store.Range(ctx, events.Query{})
		if len(got) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("event not flushed by the remaining Run: got %d; want 1", len(got))
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case other := <-returned:
		t.Fatalf("Run %d returned before cancel, after Run %d refused; want it running", other, first)
	default:
	}
	cancel()
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

// TestEmitterCoalescesPerResourceAndReason: a resource's replica events
// of one reason are written one by one up to the group's share, then as
// summaries counting the rest; another resource, another reason and an
// event that is not about a resource's part each keep their own.
func TestEmitterCoalescesPerResourceAndReason(t *testing.T) {
	store := events.NewMemory(100)
	e := events.NewEmitter(store, "dev-1", nil, events.WithCoalesce(3, time.Hour), events.WithFlushInterval(time.Millisecond))
	replica := func(reason, resource string, i int) events.Event {
		return events.Event{Reason: reason, Object: fmt.Sprintf("replica/%s-%d", resource, i), Tenant: "t1",
			Message: fmt.Sprintf("replica %d", i), Fields: map[string]string{"resource": "t1/" + resource}}
	}
	for i := range 10 {
		e.Emit(replica("Scheduled", "web", i))
	}
	e.Emit(replica("Scheduled", "db", 0))
	e.Emit(replica("ReplicaReady", "web", 0))
	e.Emit(events.Event{Reason: "PlacementApplied", Object: "resource/t1/web", Fields: map[string]string{"resource": "t1/web"}})
	// Run starts after: its first flush holds all of the above.
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	stop := sync.OnceFunc(func() { cancel(); <-done })
	defer stop()
	// The first summary goes at once, not at the end of the window.
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, _ := store.Range(t.Context(), events.Query{Object: "resource/t1/web", Reason: "Scheduled"})
		if len(got) == 1 {
			if s := got[0]; s.Fields["count"] != "7" || s.Fields["object"] != "replica/web-9" || !strings.Contains(s.Message, "replica 9") {
				t.Fatalf("summary %+v; want a count of 7, the last replica web-9", s)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no summary of web's Scheduled events: %d", len(got))
		}
		time.Sleep(5 * time.Millisecond)
	}
	// More within the window: counted, and written when Run ends.
	for i := 10; i < 15; i++ {
		e.Emit(replica("Scheduled", "web", i))
	}
	stop()
	var got []string
	all, _ := store.Range(t.Context(), events.Query{})
	for _, ev := range all {
		got = append(got, ev.Reason+" "+ev.Object+" "+ev.Fields["count"])
	}
	want := []string{
		"Scheduled replica/web-0 ", "Scheduled replica/web-1 ", "Scheduled replica/web-2 ",
		"Scheduled replica/db-0 ", "ReplicaReady replica/web-0 ", "PlacementApplied resource/t1/web ",
		"Scheduled resource/t1/web 7", "Scheduled resource/t1/web 5",
	}
	if !slices.Equal(got, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if c := e.Coalesced(); c != 12 {
		t.Errorf("Coalesced = %d; want 12", c)
	}
}
