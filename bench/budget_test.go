package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// A step that would wait forever ends at its budget with an error that
// says so, and a step's own error passes through unchanged.
func TestWithBudget(t *testing.T) {
	budgets["test-hang"] = 20 * time.Millisecond
	defer delete(budgets, "test-hang")
	err := withBudget(context.Background(), "test-hang", "hang", func(ctx context.Context) error {
		return waitFor(ctx, time.Millisecond, "never", func() error { return errors.New("not yet") })
	})
	if err == nil || !strings.Contains(err.Error(), "over its 20ms budget") || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v; want over its 20ms budget, wrapping the deadline", err)
	}
	boom := errors.New("boom")
	if err := withBudget(context.Background(), "test-hang", "fails", func(context.Context) error { return boom }); !errors.Is(err, boom) || strings.Contains(err.Error(), "budget") {
		t.Fatalf("err = %v; want boom alone", err)
	}
	parent, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("interrupted"))
	if err := withBudget(parent, "test-hang", "stopped", func(ctx context.Context) error { return ctx.Err() }); err == nil || !strings.Contains(err.Error(), "the run stopped: interrupted") {
		t.Fatalf("err = %v; want the run's own cause", err)
	}
}
