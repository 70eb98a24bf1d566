package reconcile

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestLoopWakesForTimedMarks runs a loop whose resync never comes: a key
// marked for a moment is passed once that moment has come, not before,
// and a mark for an earlier moment made while the loop waits for a later
// one re-arms its timer.
func TestLoopWakesForTimedMarks(t *testing.T) {
	d := NewDirty()
	type seen struct {
		at   time.Time
		keys []string
	}
	var mu sync.Mutex
	var passes []seen
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Loop{
			Dirty:  d,
			Resync: time.Hour,
			Every:  func() []string { return nil },
			Pass: func(_ context.Context, keys []string) error {
				mu.Lock()
				passes = append(passes, seen{time.Now(), slices.Clone(keys)})
				mu.Unlock()
				return nil
			},
			Log: slog.New(slog.DiscardHandler),
		}.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	passed := func(key string) (time.Time, bool) {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range passes {
			if slices.Contains(p.keys, key) {
				return p.at, true
			}
		}
		return time.Time{}, false
	}
	waitFor := func(key string, notBefore time.Time) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			if at, ok := passed(key); ok {
				if at.Before(notBefore) {
					t.Fatalf("%s passed at %s, before its moment %s", key, at.Format(time.StampMicro), notBefore.Format(time.StampMicro))
				}
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never passed (marked for %s)", key, notBefore.Format(time.StampMicro))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	far := time.Now().Add(time.Hour)
	d.MarkAt(far, "far")
	soon := time.Now().Add(100 * time.Millisecond)
	d.MarkAt(soon, "soon") // earlier than the armed timer: re-armed
	waitFor("soon", soon)
	next := time.Now().Add(50 * time.Millisecond)
	d.MarkAt(next, "next")
	waitFor("next", next)
	if _, ok := passed("far"); ok {
		t.Fatal("a key marked an hour from now was passed")
	}
}
