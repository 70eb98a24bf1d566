package region_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/stratahq/strata/agent"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/internal/transport"
	"github.com/stratahq/strata/internal/transport/transporttest"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	"github.com/stratahq/strata/providers/fake"
	"github.com/stratahq/strata/providers/provider"
	"github.com/stratahq/strata/region"
	"github.com/stratahq/strata/region/state"
	"github.com/stratahq/strata/testkit/etcdtest"
	"github.com/stratahq/strata/testkit/redistest"
)

// methodCounter counts the calls and streams a client opens, by method.
type methodCounter struct {
	mu    sync.Mutex
	calls map[string]int
}

func (c *methodCounter) add(method string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[method]++
}

func (c *methodCounter) count(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[method]
}

func (c *methodCounter) options() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			c.add(method)
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			c.add(method)
			return streamer(ctx, desc, cc, method, opts...)
		}),
	}
}

// TestAgentBeatsOnStreamStaysUp runs one region (etcd, Redis, mutual TLS,
// its monitor) and a real agent with its node certificate: the node's
// heartbeats go on one stream, through Redis, and the monitor holds the
// node Up across many Suspect windows.
func TestAgentBeatsOnStreamStaysUp(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, redis-server, a region and an agent")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ca := transporttest.NewPKI(t)
	endpoints := etcdtest.Embedded(t)
	st := state.New(store.New(etcdtest.Client(t, endpoints), "/strata/region/"))

	cfg := config.DefaultRegion()
	cfg.Name, cfg.ID = "r1", "r1-1"
	cfg.Listen.HTTP, cfg.Listen.GRPC = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Etcd.Endpoints = endpoints
	cfg.Redis.Addr = redistest.Start(t).Addr()
	cfg.Log.Level = "warn"
	cfg.API.Token = "heartbeat-test-region-token"
	cfg.TLS = ca.TLS(t, pki.Region("r1"))
	// Twenty beats a Suspect window: a node whose beats stopped would be
	// Suspect within two seconds, and a loaded machine does not delay
	// beats that long.
	cfg.Nodes = config.Liveness{HeartbeatInterval: 100 * time.Millisecond, SuspectAfter: 2 * time.Second, DownAfter: 4 * time.Second, ProbeTimeout: time.Second}
	log := cfg.Log.Logger(os.Stderr)
	srv, err := region.New(region.Options{Config: cfg, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() { stop(); wg.Wait() })
	wg.Go(func() {
		if err := srv.Run(rctx); err != nil && rctx.Err() == nil {
			t.Errorf("region: %v", err)
		}
	})
	select {
	case <-srv.Ready():
	case <-ctx.Done():
		t.Fatal("region not ready")
	}

	acfg := config.DefaultAgent()
	acfg.Node.Name = "n1"
	acfg.Node.MilliCPU, acfg.Node.MemoryMiB, acfg.Node.DiskMiB = 4000, 16000, 100000
	acfg.Region.Endpoint = srv.GRPCAddr()
	acfg.Listen.GRPC = "127.0.0.1:0"
	acfg.DataDir = t.TempDir()
	acfg.TLS = ca.TLS(t, pki.Node("r1", "n1"))
	calls := &methodCounter{calls: map[string]int{}}
	cc := transporttest.Dial(t, srv.GRPCAddr(), ca.Security(t, pki.Node("r1", "n1")), transport.ServerIs(pki.Region("r1")), calls.options()...)
	a, err := agent.New(agent.Options{
		Config:     acfg,
		Providers:  map[string]provider.Provider{"fake": fake.New(fake.Config{})},
		RegionConn: cc,
		Logger:     log,
	})
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() {
		if err := a.Run(rctx); err != nil && rctx.Err() == nil {
			t.Errorf("agent: %v", err)
		}
	})

	health := func() (api.Health, error) {
		it, err := st.NodeStatus.Get(ctx, "n1")
		if err != nil {
			return "", err
		}
		return it.Value.Health, nil
	}
	eventually(t, ctx, "node n1 Up", func() error {
		h, err := health()
		if err == nil && h != api.HealthUp {
			err = fmt.Errorf("health %s", h)
		}
		return err
	})
	// Five Suspect windows: the node must stay Up throughout.
	for end := time.Now().Add(5 * cfg.Nodes.SuspectAfter); time.Now().Before(end); {
		if h, err := health(); err != nil || h != api.HealthUp {
			t.Fatalf("node n1 while its agent beats: got %s, %v; want Up", h, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := calls.count(agentv1.AgentService_StreamHeartbeats_FullMethodName); n != 1 {
		t.Errorf("heartbeat streams opened: got %d; want 1", n)
	}
	if n := calls.count(agentv1.AgentService_Heartbeat_FullMethodName); n != 0 {
		t.Errorf("unary heartbeats: got %d; want 0 (every beat on the stream)", n)
	}
}
