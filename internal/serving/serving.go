// Package serving holds what the tiers' servers share about running and
// stopping their listeners.
package serving

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
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

// WarnInsecure logs, once per start, what a tier in insecure mode serves
// without the protection it would have in production (nothing when what
// is empty).
func WarnInsecure(log *slog.Logger, what ...string) {
	if len(what) == 0 {
		return
	}
	log.Warn("INSECURE MODE (insecure: true): " + strings.Join(what, "; ") + ". This is for a test cluster on one machine only, never for production: configure tls (and api.tls) instead.")
}

// WarnWeak logs, once per start and one line each, what a tier runs with
// that is allowed but weaker than it could be (config.Server.Weaknesses).
func WarnWeak(log *slog.Logger, what ...string) {
	for _, w := range what {
		log.Warn("weak setup: " + w)
	}
}

// InsecureGRPC is WarnInsecure's line for plaintext gRPC.
const InsecureGRPC = "gRPC is plaintext, answered for loopback peers only, and any process on this machine may call as any identity (node, region or global)"

// InsecureHTTP is WarnInsecure's line for plain HTTP off loopback.
func InsecureHTTP(addr string) string {
	return "the REST API is plain HTTP on " + addr + ", which other machines reach: tokens cross the network in clear"
}
