package flush

import (
	"context"
	"testing"
	"time"
)

func TestWindow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := Window{D: 10 * time.Millisecond}
	steps := []struct {
		name  string
		at    time.Duration // since t0
		flush bool          // record a flush at at
		want  time.Duration
	}{
		{"never flushed: at once", 0, true, 0},
		{"within the window: the rest of it", 4 * time.Millisecond, true, 6 * time.Millisecond},
		{"window counts from the last flush", 12 * time.Millisecond, false, 2 * time.Millisecond},
		{"idle past the window: at once", 30 * time.Millisecond, false, 0},
	}
	for _, s := range steps {
		now := t0.Add(s.at)
		if got := w.Wait(now); got != s.want {
			t.Errorf("%s: Wait = %v; want %v", s.name, got, s.want)
		}
		if s.flush {
			w.Flushed(now)
		}
	}
	var zero Window
	zero.Flushed(t0)
	if got := zero.Wait(t0); got != 0 {
		t.Errorf("zero window: Wait = %v; want 0", got)
	}
}

func TestHold(t *testing.T) {
	w := Window{D: time.Hour}
	// Never flushed: Hold returns at once.
	if err := w.Hold(t.Context(), nil); err != nil {
		t.Fatalf("first Hold: %v", err)
	}
	w.Flushed(time.Now())
	// Within the window: early cuts the wait short.
	early := make(chan struct{}, 1)
	early <- struct{}{}
	if err := w.Hold(t.Context(), early); err != nil {
		t.Fatalf("Hold with early: %v", err)
	}
	// Within the window, ctx ending first: its error.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := w.Hold(ctx, nil); err == nil {
		t.Fatal("Hold with a cancelled ctx: got nil; want its error")
	}
}
