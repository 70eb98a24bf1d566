package api

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
)

func TestFailureLevel(t *testing.T) {
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		name string
		ctx  context.Context
		code int
		want slog.Level
	}{
		{"internal error", context.Background(), http.StatusInternalServerError, slog.LevelError},
		{"gateway timeout", context.Background(), http.StatusGatewayTimeout, slog.LevelError},
		{"client went away during an internal error", gone, http.StatusInternalServerError, slog.LevelDebug},
		{"client went away during an unavailable", gone, http.StatusServiceUnavailable, slog.LevelDebug},
		{"unavailable", context.Background(), http.StatusServiceUnavailable, slog.LevelDebug},
		{"refused", context.Background(), http.StatusForbidden, slog.LevelDebug},
		{"canceled", context.Background(), 499, slog.LevelDebug},
	}
	for _, c := range cases {
		if got := FailureLevel(c.ctx, c.code); got != c.want {
			t.Errorf("%s: got %v; want %v", c.name, got, c.want)
		}
	}
}
