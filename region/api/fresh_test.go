package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/stratahq/strata/internal/rest"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/region/state"
	"github.com/stratahq/strata/testkit/etcdtest"
	"github.com/stratahq/strata/testkit/storetest"
)

// watchGate holds back the watch responses an etcd client receives
// while it is shut: the client's caches stay behind etcd, as those of a
// process that was paused (SIGSTOP) and has just woken.
type watchGate struct {
	mu   sync.Mutex
	open chan struct{} // closed while the gate is open
}

func newWatchGate() *watchGate {
	g := &watchGate{open: make(chan struct{})}
	close(g.open)
	return g
}

func (g *watchGate) shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = make(chan struct{})
}

func (g *watchGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

func (g *watchGate) wait() {
	g.mu.Lock()
	ch := g.open
	g.mu.Unlock()
	<-ch
}

// interceptor delays every received message of etcd's Watch streams
// until the gate is open.
func (g *watchGate) interceptor() grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil || !strings.HasSuffix(method, "/Watch") {
			return cs, err
		}
		return gatedStream{ClientStream: cs, g: g}, nil
	}
}

type gatedStream struct {
	grpc.ClientStream
	g *watchGate
}

func (s gatedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	s.g.wait()
	return err
}

// TestListsDoNotGoBackInTime runs two replicas on one etcd, the second
// with its watch held back, and checks that what the second lists is
// never older than what the first showed before: a list waits for the
// caches to reach etcd's revision of when it arrived.
func TestListsDoNotGoBackInTime(t *testing.T) {
	e := newEnv(t)
	gate := newWatchGate()
	cli := etcdtest.Client(t, e.cli.Endpoints(), grpc.WithChainStreamInterceptor(gate.interceptor()))
	st := state.New(store.New(cli, "/strata/region/", store.WithLogger(e.opts.Logger)))
	caches := state.NewCaches(st)
	storetest.Go(t, caches.Run)
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	if err := caches.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	opts := e.opts
	opts.State, opts.Caches = st, caches
	b, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	storetest.Go(t, b.Run)
	hb := httptest.NewServer(rest.Guard(b.Handler(), rest.GuardOptions{}))
	t.Cleanup(hb.Close)

	list := func(base, path string) string {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
		}
		return string(body)
	}

	e.register(testNode("n1"))
	eventually(t, func() error {
		if !strings.Contains(list(hb.URL, "/v1/nodes"), `"name":"n1"`) {
			return errors.New("not listed yet")
		}
		return nil
	})

	// Each read is sent while the watch is held, and the watch stays
	// held for a while after: served from the caches as they are, the
	// read would lack the node the other replica already showed.
	for i, path := range []string{"/v1/nodes", "/v1/nodes/%s", "/v1/replicas?node=%s"} {
		name := fmt.Sprintf("n%d", i+2)
		if strings.Contains(path, "%s") {
			path = fmt.Sprintf(path, name)
		}
		gate.shut()
		e.register(testNode(name))
		if got := list(e.http.URL, "/v1/nodes"); !strings.Contains(got, `"name":"`+name+`"`) {
			t.Fatalf("the first replica does not list %s after registering it: %s", name, got)
		}
		time.AfterFunc(300*time.Millisecond, gate.release)
		got := list(hb.URL, path)
		want := `"name":"` + name + `"`
		if strings.HasPrefix(path, "/v1/replicas") {
			want = `"items":[]` // 404 had it not known the node
		}
		if !strings.Contains(got, want) {
			t.Errorf("GET %s from the replica whose watch was behind: %s; want %s, as the other replica showed before", path, got, want)
		}
		gate.release()
	}
}
