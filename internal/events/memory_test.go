package events_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/events"
	"github.com/stratahq/strata/testkit/eventstest"
)

func TestMemoryConformance(t *testing.T) {
	eventstest.Run(t, func(_ *testing.T, capacity int) events.Store { return events.NewMemory(capacity) })
}

// TestMemoryExactCap: the ring keeps exactly its capacity.
func TestMemoryExactCap(t *testing.T) {
	m := events.NewMemory(5)
	ctx := context.Background()
	for i := range 12 {
		if _, err := m.Append(ctx, events.Event{Reason: "Tick", Message: fmt.Sprint(i)}); err != nil {
			t.Fatalf("Append: %v", err)
		}
	}
	got, err := m.Range(ctx, events.Query{})
	if err != nil {
		t.Fatalf("Range: %v", err)
	}
	var msgs []string
	for _, e := range got {
		msgs = append(msgs, e.Message)
	}
	if fmt.Sprint(msgs) != "[7 8 9 10 11]" {
		t.Errorf("Range = %v; want [7 8 9 10 11]", msgs)
	}
}

// TestMemoryIDs: IDs mimic Redis ("ms-seq"), never go backwards with the
// clock, and sort as strings. (Sequence overflow: memory_internal_test.go.)
func TestMemoryIDs(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	clock := func() time.Time { return now }
	m := events.NewMemory(100, events.WithClock(clock))
	ctx := context.Background()

	tests := []struct {
		name  string
		setup func()
		n     int
		first string
		last  string
	}{
		{"first in a millisecond", func() {}, 2, "1700000000000-000000", "1700000000000-000001"},
		{"clock going back keeps the last ms", func() { now = now.Add(-time.Second) }, 1, "1700000000000-000002", "1700000000000-000002"},
		{"new millisecond restarts seq", func() { now = time.UnixMilli(1_700_000_000_005) }, 1, "1700000000005-000000", "1700000000005-000000"},
		{"same millisecond continues seq", func() {}, 3, "1700000000005-000001", "1700000000005-000003"},
	}
	var all []string
	for _, tc := range tests {
		tc.setup()
		evs := make([]events.Event, tc.n)
		for i := range evs {
			evs[i] = events.Event{Reason: "Tick"}
		}
		ids, err := m.Append(ctx, evs...)
		if err != nil {
			t.Fatalf("%s: Append: %v", tc.name, err)
		}
		if ids[0] != tc.first || ids[len(ids)-1] != tc.last {
			t.Errorf("%s: ids %s..%s; want %s..%s", tc.name, ids[0], ids[len(ids)-1], tc.first, tc.last)
		}
		all = append(all, ids...)
	}
	if !sort.StringsAreSorted(all) {
		t.Errorf("memory IDs do not sort as strings")
	}
	for i := 1; i < len(all); i++ {
		if c, err := events.CompareID(all[i-1], all[i]); err != nil || c >= 0 {
			t.Fatalf("CompareID(%s, %s) = %d, %v; want -1", all[i-1], all[i], c, err)
		}
	}
}

func TestCompareID(t *testing.T) {
	tests := []struct {
		a, b string
		want int
		err  bool
	}{
		{"1-9", "1-10", -1, false}, // numeric, not string order
		{"2-0", "1-99", 1, false},
		{"1700000000000-000003", "1700000000000-3", 0, false},
		{"x", "1-0", 0, true},
		{"1-0", "1", 0, true},
	}
	for _, tc := range tests {
		got, err := events.CompareID(tc.a, tc.b)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("CompareID(%q, %q) = %d, %v; want %d, err %v", tc.a, tc.b, got, err, tc.want, tc.err)
		}
	}
}
