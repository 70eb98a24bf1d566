package events

import (
	"context"
	"testing"
	"time"
)

// TestMemorySeqOverflow: past memSeqMax events in one millisecond the ID
// moves to the next millisecond instead of growing the sequence's width,
// so IDs keep sorting as strings.
func TestMemorySeqOverflow(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_005)
	m := NewMemory(10, WithClock(func() time.Time { return now }))
	m.last = streamID{ms: 1_700_000_000_005, seq: memSeqMax - 1}
	ids, err := m.Append(context.Background(), Event{Reason: "A"}, Event{Reason: "B"}, Event{Reason: "C"})
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	want := []string{"1700000000005-999999", "1700000000006-000000", "1700000000006-000001"}
	for i := range want {
		if ids[i] != want[i] {
			t.Errorf("ids[%d] = %s; want %s", i, ids[i], want[i])
		}
	}
}
