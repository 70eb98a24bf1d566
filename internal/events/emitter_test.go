package events_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
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
