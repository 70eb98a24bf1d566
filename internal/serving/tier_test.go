package serving

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
)

// newTier listens on loopback for a gRPC and an HTTP server.
func newTier(t *testing.T) (Tier, string) {
	t.Helper()
	gl, hl := listenLoopback(t)
	h, err := NewHTTP(hl, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }), HTTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return Tier{Name: "test", GRPC: grpc.NewServer(), GRPCListener: gl, HTTP: h, Log: slog.New(slog.DiscardHandler)}, "http://" + hl.Addr().String() + "/"
}

// listenLoopback listens on loopback for a gRPC and an HTTP server; the
// listeners close when the test ends.
func listenLoopback(t *testing.T) (grpcL, httpL net.Listener) {
	t.Helper()
	gl, err := Listen(nil, "127.0.0.1:0", "listen grpc")
	if err != nil {
		t.Fatal(err)
	}
	hl, err := Listen(nil, "127.0.0.1:0", "listen http")
	if err != nil {
		gl.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { gl.Close(); hl.Close() })
	return gl, hl
}

func TestTierServe(t *testing.T) {
	tier, url := newTier(t)
	ctx, cancel := context.WithCancel(t.Context())
	g, gctx := errgroup.WithContext(ctx)
	ready := make(chan struct{})
	release := make(chan struct{})
	tier.Serve(gctx, g, ready, func(ctx context.Context) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return nil
		}
	})
	select {
	case <-ready:
		t.Fatal("ready before start returned")
	default:
	}
	close(release)
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("not ready within 10s after start returned")
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("GET: %d; want 204", resp.StatusCode)
	}
	cancel()
	if err := g.Wait(); err != nil {
		t.Errorf("stopping: got %v; want nil", err)
	}
	if _, err := net.DialTimeout("tcp", tier.GRPCListener.Addr().String(), time.Second); err == nil {
		t.Error("the gRPC listener still accepts after the tier stopped")
	}
}

func TestTierStartFails(t *testing.T) {
	tier, _ := newTier(t)
	g, gctx := errgroup.WithContext(t.Context())
	ready := make(chan struct{})
	boom := errors.New("etcd refuses transactions that large")
	tier.Serve(gctx, g, ready, func(context.Context) error { return boom })
	if err := g.Wait(); !errors.Is(err, boom) || err.Error() != "test: "+boom.Error() {
		t.Errorf("got %v; want the start error, named for the tier", err)
	}
	select {
	case <-ready:
		t.Error("ready although start failed")
	default:
	}
}
