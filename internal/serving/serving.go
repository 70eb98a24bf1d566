// Package serving holds what the tiers' servers share about running and
// stopping their listeners.
package serving

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// GRPC is the part of a gRPC server Shutdown needs.
type GRPC interface {
	GracefulStop()
	Stop()
}

// Shutdown stops a gRPC and an HTTP server, each given grace to finish
// what is in flight (streams and long polls included) before being cut.
func Shutdown(g GRPC, h *http.Server, grace time.Duration) {
	done := make(chan struct{})
	go func() {
		g.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(grace):
		g.Stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	_ = h.Shutdown(ctx)
}

// IgnoreCanceled treats a cancellation as a clean stop.
func IgnoreCanceled(err error) error {
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
