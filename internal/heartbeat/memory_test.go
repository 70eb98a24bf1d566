package heartbeat_test

import (
	"context"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/heartbeat"
	"github.com/stratahq/strata/testkit/heartbeattest"
)

func TestMemoryConformance(t *testing.T) {
	heartbeattest.Run(t, func(*testing.T) heartbeat.Store { return heartbeat.NewMemory() })
}

func TestMemoryWithClock(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 123456789, time.UTC)
	m := heartbeat.NewMemory(heartbeat.WithClock(func() time.Time { return now }))
	ctx := context.Background()
	if err := m.Record(ctx, heartbeat.Beat{ID: "n1"}); err != nil {
		t.Fatalf("Record: %v", err)
	}
	got, err := m.Get(ctx, "n1")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if want := now.Truncate(time.Microsecond); !got.At.Equal(want) {
		t.Errorf("At = %v; want %v", got.At, want)
	}
}
