package election

import (
	"testing"
	"time"
)

func TestStartExpiry(t *testing.T) {
	const ttl = 3 * time.Second
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		clock  time.Time
		want   time.Time
		wantOK bool
	}{
		{name: "no answer yet", clock: time.Time{}},
		{name: "answered just now", clock: now.Add(ttl), want: now.Add(ttl), wantOK: true},
		{name: "answered a keepalive period ago", clock: now.Add(2 * time.Second), want: now.Add(2 * time.Second), wantOK: true},
		{name: "exactly half the TTL left", clock: now.Add(ttl / 2), want: now.Add(ttl / 2), wantOK: true},
		{name: "less than half the TTL left", clock: now.Add(ttl/2 - time.Millisecond)},
		{name: "already past", clock: now.Add(-time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := startExpiry(now, tt.clock, ttl)
			if ok != tt.wantOK || !got.Equal(tt.want) {
				t.Errorf("startExpiry(now, now%+v, %s) = %v, %v; want %v, %v", tt.clock.Sub(now), ttl, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
