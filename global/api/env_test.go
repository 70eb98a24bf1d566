package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/stratahq/strata/global/regions"
	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/audit"
	"github.com/stratahq/strata/internal/election"
	"github.com/stratahq/strata/internal/heartbeat"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/internal/rest"
	"github.com/stratahq/strata/internal/secretbox"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/internal/transport"
	"github.com/stratahq/strata/internal/transport/transporttest"
	"github.com/stratahq/strata/proto/apiproto"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
	"github.com/stratahq/strata/testkit/etcdtest"
	"github.com/stratahq/strata/testkit/testenv/logcheck"
)

// testEnv is a global API on an embedded etcd, served over httptest, with
// an admin token and a few fixtures.
type testEnv struct {
	st    *state.State
	svc   *Server
	srv   *httptest.Server
	admin string
	beats *recordedBeats
	// pki is the CA of the tiers' certificates.
	pki *transporttest.PKI
	// observe, when set, sees every request send makes, its body and the
	// answer (the OpenAPI round trip records them).
	observe func(req *http.Request, body []byte, r *response)
}

type envConfig struct {
	// sharedCaches wires the Service as global.Server does: caches shared
	// with the region pool and run by their owner.
	sharedCaches bool
	leader       LeaderSource
	logger       *slog.Logger
	audit        *audit.Log
	// secrets seals Secrets; nil: a keyring of one new key.
	secrets *secretbox.Keyring
	// etcdCalls, when set, counts the API's etcd calls by method.
	etcdCalls *etcdCalls
	// bootstrap is Options.BootstrapToken; the test stores it
	// (Tokens.Bootstrap).
	bootstrap string
}

func newEnv(t testing.TB, cfg envConfig) *testEnv {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	eps := etcdtest.Embedded(t)
	st := state.New(store.New(etcdtest.Client(t, eps, cfg.etcdCalls.dialOptions()...), "/strata/global/"))

	var (
		caches      *state.Caches
		regionCache = store.NewCache(st.Regions)
		runCaches   = regionCache.Run
	)
	if cfg.sharedCaches {
		caches = state.NewCaches(st)
		regionCache, runCaches = caches.Regions, caches.Run
	}
	ca := transporttest.NewPKI(t)
	pool, err := regions.New(regions.Options{Lookup: regions.CacheLookup(regionCache), Security: ca.Security(t, pki.Global("global-1"))})
	if err != nil {
		t.Fatal(err)
	}
	log := cfg.logger
	if log == nil {
		// Every record is checked for a repeated key; errors are shown.
		log = logcheck.New(t, slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError}))
	}
	beats := &recordedBeats{latest: heartbeat.NewMemory()}
	if cfg.secrets == nil {
		cfg.secrets = testKeyring(t)
	}
	svc, err := New(Options{
		State: st, Caches: caches, Regions: pool, Heartbeats: beats, Leader: cfg.leader,
		ID: "global-1", Version: "test",
		RegionTimeout: time.Second, Logger: log, Audit: cfg.audit, Secrets: cfg.secrets,
		BootstrapToken: cfg.bootstrap,
	})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { _ = svc.Run(ctx) })
	wg.Go(func() { _ = runCaches(ctx) })
	// As global.Server serves it: behind the checks of every HTTP API.
	srv := httptest.NewServer(rest.Guard(svc.Handler(), rest.GuardOptions{}))
	t.Cleanup(func() {
		srv.Close()
		cancel()
		wg.Wait()
		_ = pool.Close()
	})

	e := &testEnv{st: st, svc: svc, srv: srv, beats: beats, pki: ca}
	poll(t, "service ready", func() error {
		err := svc.Ready(ctx)
		if cfg.bootstrap != "" && errors.Is(err, errBootstrapPending) {
			return nil // ready but for the bootstrap token, the test's to store
		}
		return err
	})
	e.admin = e.token(t, DefaultTenant, api.RoleAdmin)
	return e
}

// token creates a token and returns its plaintext.
func (e *testEnv) token(t testing.TB, tenant string, role api.Role) string {
	t.Helper()
	plain, _, err := e.svc.Tokens().New(t.Context(), tenant, role, "test")
	if err != nil {
		t.Fatal(err)
	}
	return plain
}

// fixtures adds flavors small (container), vmx (vm), lbf (loadbalancer)
// and registers the given regions.
func (e *testEnv) fixtures(t testing.TB, regionEndpoints map[string]string) {
	t.Helper()
	for _, f := range []string{
		`{"name":"small","kind":"container","spec":{"vcpus":0.5,"memoryMiB":256}}`,
		`{"name":"vmx","kind":"vm","spec":{"vcpus":2,"memoryMiB":2048}}`,
		`{"name":"lbf","kind":"loadbalancer","spec":{"vcpus":1,"memoryMiB":128}}`,
	} {
		e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/flavors", f))
	}
	for _, name := range slices.Sorted(maps.Keys(regionEndpoints)) {
		body := fmt.Sprintf(`{"name":%q,"endpoint":%q}`, name, regionEndpoints[name])
		e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/regions", body))
	}
}

type response struct {
	code   int
	header http.Header
	body   []byte
}

func (r *response) String() string { return fmt.Sprintf("%d %s", r.code, bytes.TrimSpace(r.body)) }

type reqOption func(*http.Request)

func withToken(tok string) reqOption {
	return func(r *http.Request) {
		if tok == "" {
			r.Header.Del("Authorization")
			return
		}
		r.Header.Set("Authorization", "Bearer "+tok)
	}
}

func withHeader(k, v string) reqOption { return func(r *http.Request) { r.Header.Set(k, v) } }

// do sends a request as the admin, failing t if it cannot; body is sent
// as is if it is a string or []byte, else as its JSON.
func (e *testEnv) do(t testing.TB, method, path string, body any, opts ...reqOption) *response {
	t.Helper()
	r, err := e.send(t.Context(), method, path, body, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// send is do for goroutines other than the test's, which must not fail it.
func (e *testEnv) send(ctx context.Context, method, path string, body any, opts ...reqOption) (*response, error) {
	var (
		rd  io.Reader
		raw []byte
	)
	switch b := body.(type) {
	case nil:
	case string:
		raw = []byte(b)
	case []byte:
		raw = b
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		raw = j
	}
	if body != nil {
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.srv.URL+path, rd)
	if err != nil {
		return nil, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+e.admin)
	for _, o := range opts {
		o(req)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: read body: %w", method, path, err)
	}
	out := &response{code: resp.StatusCode, header: resp.Header, body: data}
	if e.observe != nil {
		e.observe(req, raw, out)
	}
	return out, nil
}

// must fails the test unless r has status code, and returns r.
func (e *testEnv) must(t testing.TB, code int, r *response) *response {
	t.Helper()
	if r.code != code {
		t.Fatalf("got %s; want status %d", r, code)
	}
	return r
}

func decodeAs[T any](t testing.TB, r *response) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("decode %s: %v", r, err)
	}
	return v
}

// computeBody is a valid Compute resource as JSON, changed by mods.
func computeBody(name string, mods ...func(map[string]any)) map[string]any {
	m := map[string]any{
		"name": name,
		"kind": "Compute",
		"spec": map[string]any{
			"flavor":  "small",
			"compute": map[string]any{"image": "docker.io/library/busybox:latest"},
		},
	}
	for _, mod := range mods {
		mod(m)
	}
	return m
}

// poll retries cond until it holds or its deadline passes.
func poll(t testing.TB, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after 15s: %v", what, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// recordedBeats is a heartbeat store that remembers every beat, and
// lists the latest of each region as the real stores do.
type recordedBeats struct {
	mu     sync.Mutex
	beats  []heartbeat.Beat
	latest *heartbeat.Memory
}

func (r *recordedBeats) Record(ctx context.Context, b heartbeat.Beat) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.beats = append(r.beats, b)
	return r.latest.Record(ctx, b)
}

func (r *recordedBeats) List(ctx context.Context) ([]heartbeat.Beat, error) {
	return r.latest.List(ctx)
}

func (r *recordedBeats) all() []heartbeat.Beat {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.beats)
}

// fixedLeader is a LeaderSource with a set answer.
type fixedLeader struct {
	info election.LeaderInfo
	err  error
}

func (f fixedLeader) Leader(context.Context) (election.LeaderInfo, error) { return f.info, f.err }

// fakeRegion is a RegionService with nodes in memory; it records the
// requests it was sent.
type fakeRegion struct {
	regionv1.UnimplementedRegionServiceServer
	name string

	// hang makes ListNodes wait for its caller to give up.
	hang bool

	mu       sync.Mutex
	nodes    map[string]*api.Node
	replicas []api.Replica
	calls    []string
	// events is how many events ListEvents has (paging_test.go).
	events int
	// logsReqs are the Logs requests received (paging_test.go).
	logsReqs []*resourcev1.LogsRequest
}

func newFakeRegion(name string, nodes ...string) *fakeRegion {
	f := &fakeRegion{name: name, nodes: map[string]*api.Node{}}
	for _, n := range nodes {
		f.nodes[n] = &api.Node{Name: n, Region: name, Schedulable: true, Labels: map[string]string{"pool": "a"}}
	}
	return f
}

// serve runs f on a loopback port, over mutual TLS with a certificate
// of region:<name> from ca, and returns its address.
func (f *fakeRegion) serve(t *testing.T, ca *transporttest.PKI) string {
	t.Helper()
	policy := transport.Policy{regionv1.RegionService_ServiceDesc.ServiceName: {Kinds: []pki.Kind{pki.KindGlobal}}}
	return transporttest.Serve(t, ca.Security(t, pki.Region(f.name)), policy, nil, func(s *grpc.Server) {
		regionv1.RegisterRegionServiceServer(s, f)
	})
}

func (f *fakeRegion) record(call string) {
	f.calls = append(f.calls, call)
}

func (f *fakeRegion) recorded() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *fakeRegion) node(name string) (*api.Node, error) {
	n, ok := f.nodes[name]
	if !ok {
		return nil, api.NotFound("node", name)
	}
	return n, nil
}

func (f *fakeRegion) ListNodes(ctx context.Context, req *regionv1.ListNodesRequest) (*regionv1.ListNodesResponse, error) {
	if f.hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("ListNodes " + req.GetSelector())
	sel, err := api.ParseSelector(req.GetSelector())
	if err != nil {
		return nil, err
	}
	resp := &regionv1.ListNodesResponse{}
	for _, name := range slices.Sorted(maps.Keys(f.nodes)) {
		if n := f.nodes[name]; sel.Matches(n.Labels) {
			resp.Items = append(resp.Items, apiproto.NodeToPB(n))
		}
	}
	return resp, nil
}

func (f *fakeRegion) GetNode(_ context.Context, req *regionv1.NodeRef) (*resourcev1.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("GetNode " + req.GetName())
	n, err := f.node(req.GetName())
	if err != nil {
		return nil, err
	}
	return apiproto.NodeToPB(n), nil
}

func (f *fakeRegion) DeleteNode(_ context.Context, req *regionv1.NodeRef) (*regionv1.DeleteNodeResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("DeleteNode " + req.GetName())
	if _, err := f.node(req.GetName()); err != nil {
		return nil, err
	}
	delete(f.nodes, req.GetName())
	return &regionv1.DeleteNodeResponse{}, nil
}

func (f *fakeRegion) CordonNode(_ context.Context, req *regionv1.CordonNodeRequest) (*resourcev1.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("CordonNode " + req.GetName() + " " + req.GetReason())
	n, err := f.node(req.GetName())
	if err != nil {
		return nil, err
	}
	n.Schedulable, n.CordonReason = false, req.GetReason()
	return apiproto.NodeToPB(n), nil
}

func (f *fakeRegion) UncordonNode(_ context.Context, req *regionv1.NodeRef) (*resourcev1.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("UncordonNode " + req.GetName())
	n, err := f.node(req.GetName())
	if err != nil {
		return nil, err
	}
	n.Schedulable, n.CordonReason = true, ""
	return apiproto.NodeToPB(n), nil
}

func (f *fakeRegion) DrainNode(_ context.Context, req *regionv1.DrainNodeRequest) (*resourcev1.DrainStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := apiproto.DrainRequestFromPB(req.GetDrain())
	f.record(fmt.Sprintf("DrainNode %s %s %d %s", req.GetName(), d.Deadline, d.MaxParallel, d.Reason))
	if _, err := f.node(req.GetName()); err != nil {
		return nil, err
	}
	return apiproto.DrainStatusToPB(&api.DrainStatus{Node: req.GetName(), State: api.DrainRunning, MaxParallel: d.MaxParallel, Reason: d.Reason}), nil
}

func (f *fakeRegion) GetDrain(_ context.Context, req *regionv1.NodeRef) (*resourcev1.DrainStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("GetDrain " + req.GetName())
	if _, err := f.node(req.GetName()); err != nil {
		return nil, err
	}
	return apiproto.DrainStatusToPB(&api.DrainStatus{Node: req.GetName(), State: api.DrainSucceeded}), nil
}

func (f *fakeRegion) ListReplicas(_ context.Context, req *regionv1.ListReplicasRequest) (*regionv1.ListReplicasResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("ListReplicas " + req.GetTenant() + "/" + req.GetResource())
	resp := &regionv1.ListReplicasResponse{}
	for i := range f.replicas {
		if r := &f.replicas[i]; r.Tenant == req.GetTenant() && r.Resource == req.GetResource() {
			resp.Items = append(resp.Items, apiproto.ReplicaToPB(r))
		}
	}
	return resp, nil
}

// PolicyStatus answers that the region holds generation 1 of the
// policy "web-only", selecting one replica on one node.
func (f *fakeRegion) PolicyStatus(_ context.Context, req *regionv1.PolicyStatusRequest) (*regionv1.PolicyStatusResponse, error) {
	return &regionv1.PolicyStatusResponse{Items: []*regionv1.PolicyRegionStatus{{Name: "web-only", ObservedGeneration: 1, Replicas: 1, Nodes: 1}}}, nil
}
