package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/events"
	"github.com/stratahq/strata/internal/heartbeat"
	"github.com/stratahq/strata/internal/rest"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/internal/transport"
	"github.com/stratahq/strata/internal/transport/transporttest"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	"github.com/stratahq/strata/proto/apiproto"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
	"github.com/stratahq/strata/region/state"
	"github.com/stratahq/strata/testkit/etcdtest"
	"github.com/stratahq/strata/testkit/storetest"
)

const (
	testRegion = "r1"
	testToken  = "s3cret-region-token"
	// waitFor bounds every poll; generous for -race on a small machine.
	waitFor = 15 * time.Second
)

// testEnv is a region API on embedded etcd, served over real gRPC and
// HTTP.
type testEnv struct {
	t      *testing.T
	cli    *clientv3.Client
	st     *state.State
	caches *state.Caches
	srv    *Server
	beats  *countingBeats
	events *events.Memory
	region regionv1.RegionServiceClient
	agent  agentv1.AgentServiceClient
	http   *httptest.Server
	opts   Options
	tune   tuning
}

// countingBeats counts RecordBatch calls: each is one Redis round trip in
// production.
type countingBeats struct {
	*heartbeat.Memory
	batches atomic.Int64
}

func (c *countingBeats) RecordBatch(ctx context.Context, beats []heartbeat.Beat) error {
	c.batches.Add(1)
	return c.Memory.RecordBatch(ctx, beats)
}

func newEnv(t *testing.T, configure ...func(*Options, *tuning)) *testEnv {
	t.Helper()
	log := testLogger(t)
	cli := etcdtest.Client(t, etcdtest.Embedded(t))
	st := state.New(store.New(cli, "/strata/region/", store.WithLogger(log)))
	caches := state.NewCaches(st)
	storetest.Go(t, caches.Run)
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	if err := caches.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}

	beats := &countingBeats{Memory: heartbeat.NewMemory()}
	evStore := events.NewMemory(0)
	emitter := events.NewEmitter(evStore, testRegion, log, events.WithFlushInterval(5*time.Millisecond))
	storetest.Go(t, func(ctx context.Context) error {
		emitter.Run(ctx)
		return ctx.Err()
	})

	opts := Options{
		Region:     testRegion,
		State:      st,
		Caches:     caches,
		Heartbeats: beats,
		Events:     JoinEvents(emitter, evStore),
		Leader:     func() string { return "controller-1" },
		Logger:     log,
		Token:      testToken,
		// These tests are about the API's behaviour: one loopback
		// connection plays the global tier and every agent, which only
		// insecure mode allows. Who may call what over mutual TLS is
		// TestSecurityRegionPeers'.
		Security: transport.Insecure(),
	}
	tune := defaultTuning()
	for _, c := range configure {
		c(&opts, &tune)
	}
	srv, err := newServer(opts, tune)
	if err != nil {
		t.Fatal(err)
	}
	storetest.Go(t, srv.Run)

	addr := transporttest.Serve(t, opts.Security, srv.GRPCPolicy(), log, srv.RegisterGRPC)
	conn := transporttest.Dial(t, addr, opts.Security, transport.AnyServer())

	// As region.Server serves it: behind the checks of every HTTP API.
	hs := httptest.NewServer(rest.Guard(srv.Handler(), rest.GuardOptions{}))
	t.Cleanup(hs.Close)

	e := &testEnv{
		t: t, cli: cli, st: st, caches: caches, srv: srv, beats: beats, events: evStore,
		region: regionv1.NewRegionServiceClient(conn),
		agent:  agentv1.NewAgentServiceClient(conn),
		http:   hs,
		opts:   opts,
		tune:   tune,
	}
	// As a region records its network at start; tests with another put
	// theirs over it.
	e.putNetwork("10.88.0.0/16", 24)
	return e
}

// replica starts a second API server on the same etcd and (unless
// configure says otherwise) caches, as a second region replica would
// run, and returns its AgentService.
func (e *testEnv) replica(configure ...func(*Options)) agentv1.AgentServiceClient {
	e.t.Helper()
	opts := e.opts
	for _, c := range configure {
		c(&opts)
	}
	srv, err := newServer(opts, e.tune)
	if err != nil {
		e.t.Fatal(err)
	}
	storetest.Go(e.t, srv.Run)
	addr := transporttest.Serve(e.t, opts.Security, srv.GRPCPolicy(), opts.Logger, srv.RegisterGRPC)
	return agentv1.NewAgentServiceClient(transporttest.Dial(e.t, addr, opts.Security, transport.AnyServer()))
}

// putNetwork records the region's default network with blocks of
// /nodeMask and waits for the cache.
func (e *testEnv) putNetwork(subnet string, nodeMask int) *api.Network {
	e.t.Helper()
	pfx := netip.MustParsePrefix(subnet)
	nw := &api.Network{Name: "default", Subnet: subnet, Gateway: pfx.Addr().Next().String(), Bridge: "br0",
		NodeMask: nodeMask, Backend: api.BackendVXLAN, VNI: 1, Default: true}
	rev, err := e.st.Networks.Put(e.ctx(), nw.Name, nw)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.caches.Networks.WaitForRev(e.ctx(), rev); err != nil {
		e.t.Fatal(err)
	}
	return nw
}

// testLogger writes to the test's output until the test ends; anything
// logged later (a gRPC handler still unwinding) is dropped instead of
// failing the run.
func testLogger(t *testing.T) *slog.Logger {
	w := &testWriter{w: t.Output()}
	t.Cleanup(w.close) // registered first: runs after every other cleanup
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct {
	mu     sync.Mutex
	w      io.Writer
	closed bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return len(p), nil
	}
	return w.w.Write(p)
}

func (w *testWriter) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
}

func (e *testEnv) ctx() context.Context {
	ctx, cancel := context.WithTimeout(e.t.Context(), waitFor)
	e.t.Cleanup(cancel)
	return ctx
}

// rev returns etcd's current revision: each committed write transaction
// adds one.
func (e *testEnv) rev() int64 {
	e.t.Helper()
	resp, err := e.cli.Get(e.ctx(), "/revision-probe")
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.Header.Revision
}

// eventually polls cond until it returns nil, failing the test with its
// last error after waitFor.
func eventually(t *testing.T, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %v", waitFor, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitEvent waits for an event with reason about object.
func (e *testEnv) waitEvent(reason, object string) events.Event {
	e.t.Helper()
	var found events.Event
	eventually(e.t, func() error {
		evs, err := e.events.Range(e.ctx(), events.Query{Object: object, Reason: reason})
		if err != nil {
			return err
		}
		if len(evs) == 0 {
			return fmt.Errorf("no %s event for %s", reason, object)
		}
		found = evs[len(evs)-1]
		return nil
	})
	return found
}

func (e *testEnv) countEvents(reason, object string) int {
	e.t.Helper()
	evs, err := e.events.Range(e.ctx(), events.Query{Object: object, Reason: reason})
	if err != nil {
		e.t.Fatal(err)
	}
	return len(evs)
}

func testNode(name string) *resourcev1.Node {
	return apiproto.NodeToPB(&api.Node{
		Name:      name,
		Region:    testRegion,
		Labels:    map[string]string{"zone": "a"},
		Address:   "127.0.0.1:1",
		Providers: []api.NodeProvider{{Name: "containerd", Kinds: []api.ProviderKind{api.ProviderContainer}}},
		Capacity:  api.Capacity{MilliCPU: 4000, MemoryMiB: 8192},
	})
}

func (e *testEnv) register(n *resourcev1.Node) *resourcev1.Node {
	e.t.Helper()
	resp, err := e.agent.Register(e.ctx(), &agentv1.RegisterRequest{Node: n})
	if err != nil {
		e.t.Fatalf("register %s: %v", n.GetName(), err)
	}
	return resp.GetNode()
}

func testPlacement(tenant, name, uid string, replicas int, epoch int64) api.Placement {
	return api.Placement{
		Region: testRegion,
		Resource: api.Resource{
			Name: name, Tenant: tenant, UID: uid, Kind: api.KindCompute, Replicas: replicas,
			Spec: api.ResourceSpec{Flavor: "small", Compute: &api.ComputeSpec{Image: "busybox"}},
		},
		Flavor: &api.Flavor{Name: "small", Kind: api.ProviderContainer, Spec: api.FlavorSpec{VCPUs: 1, MemoryMiB: 256}},
		Epoch:  epoch,
	}
}

// putAssignments writes assignments in one transaction and waits for the
// cache.
func (e *testEnv) putAssignments(as ...api.Assignment) {
	e.t.Helper()
	txn := e.st.Store.Txn()
	for i := range as {
		e.st.Assignments.TxnPut(txn, as[i].ID, &as[i])
	}
	rev, err := txn.Commit(e.ctx())
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.caches.Assignments.WaitForRev(e.ctx(), rev); err != nil {
		e.t.Fatal(err)
	}
}

func testAssignment(id, tenant, resource, node string) api.Assignment {
	return api.Assignment{
		ID: id, Tenant: tenant, Resource: resource, ResourceUID: "uid-" + resource,
		Kind: api.KindCompute, Provider: api.ProviderContainer, Revision: 1,
		Node: node, Desired: api.DesiredRunning, Generation: 1,
		CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	}
}

// wantErr checks that err wraps sentinel (nil: no error) and mentions
// every part of contains.
func wantErr(t *testing.T, what string, err, sentinel error, contains ...string) {
	t.Helper()
	switch {
	case sentinel == nil && err != nil:
		t.Fatalf("%s: got error %v; want none", what, err)
	case sentinel != nil && !errors.Is(err, sentinel):
		t.Fatalf("%s: got error %v; want %v", what, err, sentinel)
	}
	for _, c := range contains {
		if !strings.Contains(fmt.Sprint(err), c) {
			t.Fatalf("%s: got error %q; want it to mention %q", what, err, c)
		}
	}
}
