package api

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
)

// A failure is an ERROR for the operator only when the server failed: not
// when the client went away mid-request (a /readyz probe that timed out),
// whatever the handler failed with then.
func TestFailureLogLevel(t *testing.T) {
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		name      string
		ctx       context.Context
		err       error
		wantLevel string
	}{
		{"internal error", context.Background(), errors.New("etcdserver: leader changed"), "level=ERROR"},
		{"client went away", gone, errors.New("etcdserver: request canceled"), "level=DEBUG"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var logs bytes.Buffer
			s := &Server{log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
			s.writeError(httptest.NewRecorder(), httptest.NewRequest("GET", "/readyz", nil).WithContext(c.ctx), c.err)
			if !strings.Contains(logs.String(), c.wantLevel) {
				t.Errorf("got logs %q; want the failure at %s", logs.String(), c.wantLevel)
			}
		})
	}
}
