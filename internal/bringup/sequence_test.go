package bringup

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/election"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/internal/transport"
	"github.com/stratahq/strata/testkit/etcdtest"
)

// steps records what a tier's parts were asked to do, in order.
type steps struct {
	mu   sync.Mutex
	list []string
}

func (s *steps) add(step string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list = append(s.list, step)
}

func (s *steps) get() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.list)
}

// fakeCaches sync when synced is closed.
type fakeCaches struct{ synced chan struct{} }

func (c fakeCaches) Run(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }

func (c fakeCaches) WaitSynced(ctx context.Context) error {
	select {
	case <-c.synced:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// fakeAPI serves 204 on every path and no gRPC service.
type fakeAPI struct{}

func (fakeAPI) GRPCPolicy() transport.Policy { return transport.Policy{} }
func (fakeAPI) RegisterGRPC(*grpc.Server)    {}
func (fakeAPI) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
}
func (fakeAPI) Run(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }

// listenLoopback listens on loopback for a gRPC and an HTTP server; the
// listeners close when the test ends.
func listenLoopback(t *testing.T) (grpcL, httpL net.Listener) {
	t.Helper()
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		gl.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { gl.Close(); hl.Close() })
	return gl, hl
}

// newSequence is a tier named test on loopback listeners and an embedded
// etcd, whose Build is build.
func newSequence(t *testing.T, build func(context.Context, *Base) (*Parts, error)) *Sequence {
	t.Helper()
	gl, hl := listenLoopback(t)
	b := &Sequence{
		Name:   "test",
		Config: &config.Server{ID: "t1", Etcd: config.Etcd{Prefix: "/test/"}, LeaseTTL: time.Second, Insecure: true},
		Log:    slog.New(slog.DiscardHandler),
		Etcd:   etcdtest.Client(t, etcdtest.Embedded(t)), ElectionPrefix: "election/",
		Ready: make(chan struct{}), Build: build,
	}
	if err := b.Listen(gl, hl, pki.Identity{}, config.HTTPAPI{}); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSequenceOrder: the tier is ready only once its caches are synced and
// its own ready step is done; it stands for election only then; when it
// stops, its servers stop first and what it opened closes last first.
func TestSequenceOrder(t *testing.T) {
	var s steps
	synced := make(chan struct{})
	var b *Sequence
	b = newSequence(t, func(_ context.Context, base *Base) (*Parts, error) {
		if base.Store == nil || base.Elector == nil || base.Metrics == nil {
			t.Error("Build before the store, the elector and the metrics are open")
		}
		base.Defer(func() { s.add("close first opened") })
		base.Defer(func() {
			if _, err := net.DialTimeout("tcp", b.GRPCListener.Addr().String(), time.Second); err == nil {
				t.Error("closing what the tier opened while its gRPC listener still accepts")
			}
			s.add("close last opened")
		})
		return &Parts{
			Caches: fakeCaches{synced: synced},
			API:    fakeAPI{},
			Ready:  func(context.Context) error { s.add("ready step"); return nil },
			BeforeLead: func(context.Context) error {
				select {
				case <-b.Ready:
				default:
					t.Error("BeforeLead before the tier is ready")
				}
				s.add("before lead")
				return nil
			},
			Lead: func(leaderCtx context.Context, _ *election.Leadership) {
				s.add("lead")
				<-leaderCtx.Done()
			},
		}, nil
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	select {
	case <-b.Ready:
		t.Fatal("ready before the caches synced")
	case <-time.After(200 * time.Millisecond):
	}
	close(synced)
	select {
	case <-b.Ready:
	case err := <-done:
		t.Fatalf("Run: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("not ready within 10s of the caches' sync")
	}
	resp, err := http.Get("http://" + b.HTTPListener.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("GET: %d; want 204", resp.StatusCode)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Contains(s.get(), "lead") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run after stop: got %v; want nil", err)
	}
	want := []string{"ready step", "before lead", "lead", "close last opened", "close first opened"}
	if got := s.get(); !slices.Equal(got, want) {
		t.Errorf("steps: got %q; want %q", got, want)
	}
}

// TestSequenceBuildFails: an error from Build stops the tier before it
// serves, named for the tier, and what Build opened before closes.
func TestSequenceBuildFails(t *testing.T) {
	boom := errors.New("redis: no address")
	closed := false
	b := newSequence(t, func(_ context.Context, base *Base) (*Parts, error) {
		base.Defer(func() { closed = true })
		return nil, boom
	})
	err := b.Run(t.Context())
	if !errors.Is(err, boom) || err.Error() != "test: "+boom.Error() {
		t.Errorf("Run: got %v; want the Build error, named for the tier", err)
	}
	if !closed {
		t.Error("what Build opened before it failed is not closed")
	}
	select {
	case <-b.Ready:
		t.Error("ready although Build failed")
	default:
	}
}

// TestSequenceListenRefuses: a tier without TLS outside insecure mode
// does not start, says so named for the tier, and closes its listeners.
func TestSequenceListenRefuses(t *testing.T) {
	gl, hl := listenLoopback(t)
	b := &Sequence{Name: "test", Config: &config.Server{ID: "t1"}, Log: slog.New(slog.DiscardHandler)}
	err := b.Listen(gl, hl, pki.Identity{}, config.HTTPAPI{})
	if !errors.Is(err, transport.ErrNoTLS) || err.Error() != "test: "+transport.ErrNoTLS.Error() {
		t.Fatalf("Listen: got %v; want %v, named for the tier", err, transport.ErrNoTLS)
	}
	for _, l := range []net.Listener{gl, hl} {
		if c, err := net.DialTimeout("tcp", l.Addr().String(), time.Second); err == nil {
			c.Close()
			t.Errorf("%s still accepts after Listen refused", l.Addr())
		}
	}
}
