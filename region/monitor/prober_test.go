package monitor

import (
	"context"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/internal/transport"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	"github.com/stratahq/strata/testkit/testenv/ports"
)

type statusServer struct {
	agentv1.UnimplementedNodeServiceServer
}

func (statusServer) Status(context.Context, *agentv1.NodeStatusRequest) (*agentv1.NodeStatusResponse, error) {
	return &agentv1.NodeStatusResponse{}, nil
}

// serveAgent serves NodeService.Status on addr until the returned stop
// is called. An agent that restarts serves on its old address again: the
// test reserves it (ports.Addr), or the kernel could hand it to any
// connection on the machine while the agent is down.
func serveAgent(t *testing.T, addr string) (string, func()) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	srv, err := transport.NewServer(transport.Insecure(), transport.Policy{
		agentv1.NodeService_ServiceDesc.ServiceName: {Kinds: []pki.Kind{pki.KindRegion}, Region: "r1"},
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	agentv1.RegisterNodeServiceServer(srv, statusServer{})
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(l) }()
	stop := func() { srv.Stop(); <-done }
	t.Cleanup(stop)
	return l.Addr().String(), stop
}

// TestProbeAfterAgentRestart: an agent that was down long enough for
// gRPC's reconnect backoff to grow comes back on the same address; the
// first probe after that succeeds.
func TestProbeAfterAgentRestart(t *testing.T) {
	addr, stop := serveAgent(t, ports.Addr(t))
	p := NewGRPCProber("r1", transport.Insecure())
	t.Cleanup(p.Close)
	node := &api.Node{Name: "n1", Address: addr}
	probe := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return p.Probe(ctx, node)
	}
	if err := probe(); err != nil {
		t.Fatalf("probe of a live agent: %v", err)
	}

	stop()
	// Down for three seconds, probed as a monitor would: every probe
	// fails, and a connection kept across them would by now wait seconds
	// before it tried again.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if err := probe(); err == nil {
			t.Fatal("probe of a stopped agent succeeded")
		}
		time.Sleep(200 * time.Millisecond)
	}

	serveAgent(t, addr)
	if err := probe(); err != nil {
		t.Fatalf("first probe after the agent restarted on %s: %v; want an answer", addr, err)
	}
}

// TestProbeKeepsAHealthyConnection: probes of a live agent reuse one
// connection.
func TestProbeKeepsAHealthyConnection(t *testing.T) {
	addr, _ := serveAgent(t, "127.0.0.1:0")
	var dials atomic.Int32
	p := NewGRPCProber("r1", transport.Insecure(), grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
		dials.Add(1)
		return (&net.Dialer{}).DialContext(ctx, "tcp", a)
	}))
	t.Cleanup(p.Close)
	for range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := p.Probe(ctx, &api.Node{Name: "n1", Address: addr})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("dials for five probes of a live agent: got %d; want 1", n)
	}
}
