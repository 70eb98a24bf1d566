package probe

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// unit is a probe second in these tests: periodSeconds 1 is 10 ms.
const unit = 10 * time.Millisecond

// deadline bounds every wait of these tests.
const deadline = 10 * time.Second

func newManager(t *testing.T, opts ...Option) *Manager {
	t.Helper()
	m := NewManager(append([]Option{WithTimeUnit(unit)}, opts...)...)
	t.Cleanup(m.Close)
	return m
}

func ip(v int) *int { return &v }

// endpoint is an HTTP path whose status a test sets, and that counts its
// requests.
type endpoint struct {
	status atomic.Int64
	hits   atomic.Int64
	// hitsAt500 counts the requests answered with a failure status.
	failed atomic.Int64
}

func (e *endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.hits.Add(1)
	s := int(e.status.Load())
	if s == 0 {
		s = 200
	}
	if s >= 400 {
		e.failed.Add(1)
	}
	w.WriteHeader(s)
}

// server serves endpoints by path.
type server struct {
	mu   sync.Mutex
	eps  map[string]*endpoint
	host string
	port int
}

func newServer(t *testing.T) *server {
	t.Helper()
	s := &server{eps: map[string]*endpoint{}}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.ep(r.URL.Path).ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	s.host, s.port = hostPort(t, hs.URL)
	return s
}

func (s *server) ep(path string) *endpoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.eps[path]
	if !ok {
		e = &endpoint{}
		s.eps[path] = e
	}
	return e
}

func (s *server) probe(path string) *api.Probe {
	return &api.Probe{HTTPGet: &api.HTTPGetAction{Path: path, Port: s.port}, PeriodSeconds: ip(1), TimeoutSeconds: ip(100)}
}

func (s *server) target() Target { return Target{Host: s.host} }

// next is the next update, or a failure after the deadline.
func next(t *testing.T, m *Manager) Update {
	t.Helper()
	select {
	case u, ok := <-m.Updates():
		if !ok {
			t.Fatal("Updates closed")
		}
		return u
	case <-time.After(deadline):
		t.Fatalf("no update in %v", deadline)
	}
	panic("unreachable")
}

// expect takes the next update and checks it.
func expect(t *testing.T, m *Manager, replica, container string, kind api.ProbeKind, res Result) Update {
	t.Helper()
	u := next(t, m)
	if u.Replica != replica || u.Container != container || u.Kind != kind || u.Result != res {
		t.Fatalf("got update %s/%s %s %s (%q); want %s/%s %s %s", u.Replica, u.Container, u.Kind, u.Result, u.Message, replica, container, kind, res)
	}
	if u.Time.IsZero() {
		t.Errorf("update without a time")
	}
	return u
}

// kr is an update's replica, kind and result.
type kr struct {
	replica string
	kind    api.ProbeKind
	res     Result
}

// collect reads updates until it has seen each of want, in any order
// across workers; an update not in want fails.
func collect(t *testing.T, m *Manager, want ...kr) map[kr]Update {
	t.Helper()
	got := map[kr]Update{}
	for len(got) < len(want) {
		u := next(t, m)
		k := kr{u.Replica, u.Kind, u.Result}
		if _, dup := got[k]; dup || !slices.Contains(want, k) {
			t.Fatalf("unexpected update %s/%s %s %s (%q); want %v", u.Replica, u.Container, u.Kind, u.Result, u.Message, want)
		}
		got[k] = u
	}
	return got
}

// noUpdate checks that no update is waiting.
func noUpdate(t *testing.T, m *Manager) {
	t.Helper()
	select {
	case u := <-m.Updates():
		t.Fatalf("unexpected update %s/%s %s %s (%q)", u.Replica, u.Container, u.Kind, u.Result, u.Message)
	default:
	}
}

// eventually polls cond until it holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %v", what, deadline)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitHits waits for an endpoint to have been checked n more times.
func waitHits(t *testing.T, e *endpoint, n int64) {
	t.Helper()
	target := e.hits.Load() + n
	eventually(t, "checks", func() bool { return e.hits.Load() >= target })
}

func TestReadinessThresholds(t *testing.T) {
	s := newServer(t)
	m := newManager(t)
	ready := s.ep("/ready")
	ready.status.Store(500)
	p := s.probe("/ready")
	p.SuccessThreshold, p.FailureThreshold = ip(2), ip(3)
	if m.Ready("r1", "web") {
		t.Fatal("ready before Add")
	}
	if err := m.Add("r1", "web", api.Probes{ReadinessProbe: p}, s.target()); err != nil {
		t.Fatal(err)
	}
	if m.Ready("r1", "web") || !m.Started("r1", "web") {
		t.Fatal("ready before its readiness probe passed, or not started without a startup probe")
	}
	u := expect(t, m, "r1", "web", api.ProbeReadiness, Failure)
	if u.Message != "HTTP probe failed with statuscode: 500" {
		t.Errorf("message %q; want HTTP probe failed with statuscode: 500", u.Message)
	}
	if n := ready.failed.Load(); n < 3 {
		t.Errorf("failure reported after %d failed checks; want failureThreshold 3", n)
	}
	if m.Ready("r1", "web") {
		t.Error("ready after its readiness probe failed")
	}

	from := ready.hits.Load()
	ready.status.Store(200)
	expect(t, m, "r1", "web", api.ProbeReadiness, Success)
	if n := ready.hits.Load() - from; n < 2 {
		t.Errorf("success reported after %d checks; want successThreshold 2", n)
	}
	if !m.Ready("r1", "web") {
		t.Fatal("not ready after its readiness probe passed")
	}
	// Checks that change nothing report nothing.
	waitHits(t, ready, 10)
	noUpdate(t, m)

	// A readiness failure holds nothing: the probe goes on, fails and
	// passes again.
	from = ready.failed.Load()
	ready.status.Store(503)
	expect(t, m, "r1", "web", api.ProbeReadiness, Failure)
	if n := ready.failed.Load() - from; n < 3 {
		t.Errorf("failure reported after %d failed checks; want failureThreshold 3", n)
	}
	ready.status.Store(200)
	expect(t, m, "r1", "web", api.ProbeReadiness, Success)
	if !m.Ready("r1", "web") {
		t.Error("not ready after the probe passed again")
	}
}

// One success or failure short of a threshold changes nothing.
func TestThresholdRunsMustBeConsecutive(t *testing.T) {
	s := newServer(t)
	m := newManager(t)
	ep := s.ep("/flap")
	// Fail every other check: never 2 failures in a row.
	var n atomic.Int64
	mux := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%2 == 0 {
			w.WriteHeader(500)
			return
		}
		ep.ServeHTTP(w, r)
	})
	hs := httptest.NewServer(mux)
	defer hs.Close()
	host, port := hostPort(t, hs.URL)
	p := &api.Probe{HTTPGet: &api.HTTPGetAction{Path: "/", Port: port}, PeriodSeconds: ip(1), TimeoutSeconds: ip(100),
		SuccessThreshold: ip(2), FailureThreshold: ip(2)}
	if err := m.Add("r1", "web", api.Probes{ReadinessProbe: p}, Target{Host: host}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "checks", func() bool { return n.Load() >= 20 })
	noUpdate(t, m)
	if m.Ready("r1", "web") {
		t.Error("ready though it never passed twice in a row")
	}
}

func TestInitialDelay(t *testing.T) {
	s := newServer(t)
	m := newManager(t)
	ep := s.ep("/ready")
	var first atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		first.CompareAndSwap(0, time.Now().UnixNano())
		ep.ServeHTTP(w, r)
	}))
	defer hs.Close()
	host, port := hostPort(t, hs.URL)
	p := &api.Probe{HTTPGet: &api.HTTPGetAction{Path: "/", Port: port}, PeriodSeconds: ip(1), TimeoutSeconds: ip(100), InitialDelaySeconds: 40}
	added := time.Now()
	if err := m.Add("r1", "web", api.Probes{ReadinessProbe: p}, Target{Host: host}); err != nil {
		t.Fatal(err)
	}
	expect(t, m, "r1", "web", api.ProbeReadiness, Success)
	if d := time.Unix(0, first.Load()).Sub(added); d < 40*unit {
		t.Errorf("first check %v after Add; want at least the initial delay %v", d, 40*unit)
	}
}

func TestStartupGatesTheOthers(t *testing.T) {
	s := newServer(t)
	var started atomic.Bool
	ex := &fakeExecer{fn: func(context.Context, string, string, []string) (int, []byte, error) {
		if started.Load() {
			return 0, nil, nil
		}
		return 1, []byte("starting"), nil
	}}
	m := newManager(t, WithExecer(ex))
	ready, live := s.ep("/ready"), s.ep("/live")
	probes := api.Probes{
		StartupProbe:   &api.Probe{Exec: &api.ExecAction{Command: []string{"test", "-f", "/started"}}, PeriodSeconds: ip(1), TimeoutSeconds: ip(100), FailureThreshold: ip(1000)},
		ReadinessProbe: s.probe("/ready"),
		LivenessProbe:  s.probe("/live"),
	}
	if err := m.Add("r1", "web", probes, s.target()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "startup checks", func() bool { return ex.calls.Load() >= 10 })
	if n, l := ready.hits.Load(), live.hits.Load(); n != 0 || l != 0 {
		t.Fatalf("before startup passed: %d readiness and %d liveness checks; want none", n, l)
	}
	if m.Ready("r1", "web") || m.Started("r1", "web") {
		t.Fatal("ready or started before the startup probe passed")
	}
	noUpdate(t, m)

	started.Store(true)
	// The startup probe's success comes first: the others run after it.
	expect(t, m, "r1", "web", api.ProbeStartup, Success)
	collect(t, m, kr{"r1", api.ProbeReadiness, Success}, kr{"r1", api.ProbeLiveness, Success})
	if !m.Ready("r1", "web") {
		t.Fatal("not ready")
	}
	// The startup probe is done: it checks no more.
	calls := ex.calls.Load()
	waitHits(t, ready, 10)
	if n := ex.calls.Load(); n != calls {
		t.Errorf("startup probe checked %d more times after it passed", n-calls)
	}
}

func TestLivenessFailureIsReportedOncePerEpisode(t *testing.T) {
	s := newServer(t)
	m := newManager(t)
	ready, live := s.ep("/ready"), s.ep("/live")
	lp := s.probe("/live")
	lp.FailureThreshold = ip(2)
	if err := m.Add("r1", "web", api.Probes{ReadinessProbe: s.probe("/ready"), LivenessProbe: lp}, s.target()); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		next(t, m) // readiness and liveness pass
	}
	live.status.Store(503)
	u := expect(t, m, "r1", "web", api.ProbeLiveness, Failure)
	if u.Message != "HTTP probe failed with statuscode: 503" {
		t.Errorf("message %q", u.Message)
	}
	// The liveness worker holds until the container is restarted: while
	// the readiness probe checks 20 more times, liveness checks at most
	// once more (a check under way), and reports nothing.
	after := live.hits.Load()
	waitHits(t, ready, 20)
	if n := live.hits.Load() - after; n > 1 {
		t.Errorf("liveness checked %d more times after it failed; want it held", n)
	}
	noUpdate(t, m)

	// The caller restarts the container and resets: the failure is
	// forgotten (reported), and a new episode is reported again.
	m.Reset("r1", "web")
	got := collect(t, m,
		kr{"r1", api.ProbeReadiness, Unknown}, kr{"r1", api.ProbeLiveness, Unknown},
		// The container still fails its liveness probe: a second
		// episode, reported again.
		kr{"r1", api.ProbeReadiness, Success}, kr{"r1", api.ProbeLiveness, Failure})
	for _, k := range []api.ProbeKind{api.ProbeReadiness, api.ProbeLiveness} {
		if u := got[kr{"r1", k, Unknown}]; u.Message != "container restarted" {
			t.Errorf("after Reset, %s: %q; want container restarted", k, u.Message)
		}
	}
}

func TestStartupFailureHolds(t *testing.T) {
	s := newServer(t)
	m := newManager(t)
	start, ready := s.ep("/start"), s.ep("/ready")
	start.status.Store(500)
	sp := s.probe("/start")
	sp.FailureThreshold = ip(3)
	if err := m.Add("r1", "web", api.Probes{StartupProbe: sp, ReadinessProbe: s.probe("/ready")}, s.target()); err != nil {
		t.Fatal(err)
	}
	expect(t, m, "r1", "web", api.ProbeStartup, Failure)
	n := start.hits.Load()
	if n < 3 {
		t.Errorf("startup failure after %d checks; want 3", n)
	}
	// Held: a witness container checks 20 times meanwhile.
	if err := m.Add("r2", "web", api.Probes{ReadinessProbe: s.probe("/witness")}, s.target()); err != nil {
		t.Fatal(err)
	}
	expect(t, m, "r2", "web", api.ProbeReadiness, Success)
	waitHits(t, s.ep("/witness"), 20)
	if d := start.hits.Load() - n; d > 1 {
		t.Errorf("startup probe checked %d times after it failed; want it held", d)
	}
	if r := ready.hits.Load(); r != 0 {
		t.Errorf("readiness checked %d times though startup failed", r)
	}
	noUpdate(t, m)
	// Restarted, the container starts this time.
	start.status.Store(200)
	m.Reset("r1", "web")
	expect(t, m, "r1", "web", api.ProbeStartup, Unknown)
	expect(t, m, "r1", "web", api.ProbeStartup, Success)
	expect(t, m, "r1", "web", api.ProbeReadiness, Success)
}

func TestResetStartsOver(t *testing.T) {
	s := newServer(t)
	m := newManager(t)
	start, ready := s.ep("/start"), s.ep("/ready")
	probes := api.Probes{StartupProbe: s.probe("/start"), ReadinessProbe: s.probe("/ready")}
	probes.ReadinessProbe.InitialDelaySeconds = 30
	if err := m.Add("r1", "web", probes, s.target()); err != nil {
		t.Fatal(err)
	}
	expect(t, m, "r1", "web", api.ProbeStartup, Success)
	expect(t, m, "r1", "web", api.ProbeReadiness, Success)

	start.status.Store(500) // the restarted container does not start
	m.Reset("r1", "web")
	before := ready.hits.Load()
	// At once: not ready, not started.
	if m.Ready("r1", "web") || m.Started("r1", "web") {
		t.Fatal("ready or started right after Reset")
	}
	collect(t, m, kr{"r1", api.ProbeStartup, Unknown}, kr{"r1", api.ProbeReadiness, Unknown}, kr{"r1", api.ProbeStartup, Failure})
	if d := ready.hits.Load() - before; d > 1 {
		t.Errorf("readiness checked %d times after Reset, before startup passed", d)
	}
	// Reset again, and it starts: readiness waits its initial delay from
	// the Reset again.
	start.status.Store(200)
	reset := time.Now()
	m.Reset("r1", "web")
	expect(t, m, "r1", "web", api.ProbeStartup, Unknown)
	expect(t, m, "r1", "web", api.ProbeStartup, Success)
	expect(t, m, "r1", "web", api.ProbeReadiness, Success)
	if d := time.Since(reset); d < 30*unit {
		t.Errorf("ready %v after Reset; want at least the initial delay %v", d, 30*unit)
	}
	m.Reset("nope", "web") // unknown: nothing happens
}

func TestTimeoutFails(t *testing.T) {
	release := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hs.Close()
	defer close(release)
	host, port := hostPort(t, hs.URL)
	m := newManager(t)
	p := &api.Probe{HTTPGet: &api.HTTPGetAction{Path: "/", Port: port}, PeriodSeconds: ip(1), TimeoutSeconds: ip(5), FailureThreshold: ip(1)}
	start := time.Now()
	if err := m.Add("r1", "web", api.Probes{ReadinessProbe: p}, Target{Host: host}); err != nil {
		t.Fatal(err)
	}
	u := expect(t, m, "r1", "web", api.ProbeReadiness, Failure)
	if !strings.Contains(u.Message, "timeout") {
		t.Errorf("message %q; want a timeout", u.Message)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("a 50 ms timeout failed after %v", d)
	}
}

func TestRemoveStopsWorkers(t *testing.T) {
	s := newServer(t)
	witness := s.ep("/witness")
	m := newManager(t)
	// Settle the goroutines of the test server and HTTP before counting.
	if err := m.Add("w", "web", api.Probes{ReadinessProbe: s.probe("/witness")}, s.target()); err != nil {
		t.Fatal(err)
	}
	expect(t, m, "w", "web", api.ProbeReadiness, Success)
	base := runtime.NumGoroutine()

	gone := s.ep("/gone")
	for i := range 20 {
		probes := api.Probes{ReadinessProbe: s.probe("/gone"), LivenessProbe: s.probe("/gone")}
		if err := m.Add("r"+strconv.Itoa(i), "web", probes, s.target()); err != nil {
			t.Fatal(err)
		}
	}
	for range 40 {
		next(t, m)
	}
	if g := runtime.NumGoroutine(); g < 40 {
		t.Fatalf("%d goroutines with 40 more workers", g)
	}
	for i := range 10 {
		m.Remove("r"+strconv.Itoa(i), "web")
		m.RemoveReplica("r" + strconv.Itoa(i+10))
	}
	m.Remove("nope", "web")
	for i := range 20 {
		if m.Ready("r"+strconv.Itoa(i), "web") {
			t.Fatalf("r%d ready after Remove", i)
		}
	}
	eventually(t, "workers ended", func() bool { return runtime.NumGoroutine() <= base })
	// No check of the removed containers is made any more.
	after := gone.hits.Load()
	waitHits(t, witness, 20)
	if n := gone.hits.Load(); n != after {
		t.Errorf("%d checks of removed containers", n-after)
	}
	noUpdate(t, m)
}

func TestCloseEndsEverything(t *testing.T) {
	s := newServer(t)
	base := runtime.NumGoroutine()
	m := NewManager(WithTimeUnit(unit), WithUpdateBuffer(1))
	for i := range 5 {
		if err := m.Add("r"+strconv.Itoa(i), "web", api.Probes{ReadinessProbe: s.probe("/x")}, s.target()); err != nil {
			t.Fatal(err)
		}
	}
	// Nobody reads: workers wait to report, and Close still ends them.
	waitHits(t, s.ep("/x"), 20)
	m.Close()
	m.Close()
	n := 0
	for range m.Updates() {
		n++
	}
	if n > 1 {
		t.Errorf("%d updates in a buffer of 1", n)
	}
	if err := m.Add("late", "web", api.Probes{}, Target{}); !errors.Is(err, ErrClosed) {
		t.Errorf("Add after Close: %v; want ErrClosed", err)
	}
	eventually(t, "goroutines ended", func() bool { return runtime.NumGoroutine() <= base })
}

func TestAddIsIdempotent(t *testing.T) {
	s := newServer(t)
	m := newManager(t)
	probes := api.Probes{ReadinessProbe: s.probe("/ready")}
	if err := m.Add("r1", "web", probes, s.target()); err != nil {
		t.Fatal(err)
	}
	expect(t, m, "r1", "web", api.ProbeReadiness, Success)
	// The same again (a reconciler's next pass): nothing starts over.
	for range 5 {
		if err := m.Add("r1", "web", probes, s.target()); err != nil {
			t.Fatal(err)
		}
		if !m.Ready("r1", "web") {
			t.Fatal("the same Add made the container unready")
		}
	}
	waitHits(t, s.ep("/ready"), 5)
	noUpdate(t, m)
	// Other probes replace the old ones: the container is not ready
	// until they pass.
	other := s.ep("/other")
	other.status.Store(500)
	if err := m.Add("r1", "web", api.Probes{ReadinessProbe: s.probe("/other")}, s.target()); err != nil {
		t.Fatal(err)
	}
	if m.Ready("r1", "web") {
		t.Fatal("ready with new probes before they passed")
	}
	waitHits(t, other, 1)
	other.status.Store(200)
	eventually(t, "ready again", func() bool { return m.Ready("r1", "web") })
}

func TestAddWithoutProbes(t *testing.T) {
	m := newManager(t)
	if err := m.Add("r1", "web", api.Probes{}, Target{}); err != nil {
		t.Fatal(err)
	}
	if !m.Ready("r1", "web") || !m.Started("r1", "web") {
		t.Error("a container without probes is not ready")
	}
	m.Reset("r1", "web")
	if !m.Ready("r1", "web") {
		t.Error("a container without probes is not ready after Reset")
	}
	noUpdate(t, m)
}

func TestAddRefuses(t *testing.T) {
	m := newManager(t)
	for _, tc := range []struct {
		name   string
		probes api.Probes
		target Target
		want   string
		inval  bool
	}{
		{name: "invalid", probes: api.Probes{ReadinessProbe: &api.Probe{HTTPGet: &api.HTTPGetAction{Port: 70000}}},
			target: Target{Host: "127.0.0.1"}, want: "readinessProbe.httpGet.port: 70000 is out of range 1-65535", inval: true},
		{name: "zero threshold", probes: api.Probes{LivenessProbe: &api.Probe{TCPSocket: &api.TCPSocketAction{Port: 1}, FailureThreshold: ip(0)}},
			target: Target{Host: "127.0.0.1"}, want: "livenessProbe.failureThreshold: 0 is out of range 1-10000", inval: true},
		{name: "exec without an Execer", probes: api.Probes{LivenessProbe: &api.Probe{Exec: &api.ExecAction{Command: []string{"true"}}}},
			want: "livenessProbe: exec: this provider runs no commands in its replicas"},
		{name: "no host", probes: api.Probes{ReadinessProbe: &api.Probe{TCPSocket: &api.TCPSocketAction{Port: 1}}},
			want: "readinessProbe: the target has no host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := m.Add("r1", "web", tc.probes, tc.target)
			if err == nil || err.Error() != tc.want || errors.Is(err, api.ErrInvalid) != tc.inval {
				t.Fatalf("got %v; want %s (invalid: %v)", err, tc.want, tc.inval)
			}
			if m.Ready("r1", "web") {
				t.Error("a refused container is ready")
			}
		})
	}
}

// Every connection goes through the target's Dialer: the containerd
// provider dials inside a network namespace.
func TestDialerIsUsed(t *testing.T) {
	s := newServer(t)
	real := net.JoinHostPort(s.host, strconv.Itoa(s.port))
	var dials atomic.Int64
	var addrs sync.Map
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		addrs.Store(addr, true)
		return (&net.Dialer{}).DialContext(ctx, network, real)
	}
	m := newManager(t)
	probes := api.Probes{
		ReadinessProbe: &api.Probe{HTTPGet: &api.HTTPGetAction{Path: "/", Port: 8080}, PeriodSeconds: ip(1), TimeoutSeconds: ip(100)},
		LivenessProbe:  &api.Probe{TCPSocket: &api.TCPSocketAction{Port: 9000}, PeriodSeconds: ip(1), TimeoutSeconds: ip(100)},
	}
	// The host resolves nowhere: only the Dialer reaches the server.
	if err := m.Add("r1", "web", probes, Target{Host: "replica.invalid", Dial: dial}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if u := next(t, m); u.Result != Success {
			t.Fatalf("%s %s (%q); want success", u.Kind, u.Result, u.Message)
		}
	}
	for _, a := range []string{"replica.invalid:8080", "replica.invalid:9000"} {
		if _, ok := addrs.Load(a); !ok {
			t.Errorf("no dial of %s", a)
		}
	}
}

func TestExecThroughManager(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	ex := &fakeExecer{fn: func(_ context.Context, replica, container string, cmd []string) (int, []byte, error) {
		mu.Lock()
		seen = append(seen, replica+"/"+container+":"+strings.Join(cmd, " "))
		mu.Unlock()
		if replica == "bad" {
			return 3, []byte("no"), nil
		}
		if replica == "broken" {
			return -1, nil, errors.New("no such task")
		}
		return 0, nil, nil
	}}
	m := newManager(t, WithExecer(ex))
	p := &api.Probe{Exec: &api.ExecAction{Command: []string{"check"}}, PeriodSeconds: ip(1), TimeoutSeconds: ip(100), FailureThreshold: ip(1)}
	for _, r := range []string{"good", "bad", "broken"} {
		if err := m.Add(r, "c", api.Probes{ReadinessProbe: p}, Target{}); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]Update{}
	for range 2 {
		u := next(t, m)
		got[u.Replica] = u
	}
	if got["good"].Result != Success || got["bad"].Result != Failure || got["bad"].Message != `command ["check"] exited with 3: no` {
		t.Fatalf("got %+v", got)
	}
	// A command that cannot be run says nothing of the container.
	eventually(t, "broken checked", func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, s := range seen {
			if s == "broken/c:check" {
				n++
			}
		}
		return n >= 5
	})
	noUpdate(t, m)
	if m.Ready("broken", "c") {
		t.Error("ready without a verdict")
	}
}

// The first checks of containers Added as the Manager starts spread over
// a period; they do not fire together.
func TestFirstChecksAreSpread(t *testing.T) {
	m := NewManager(WithTimeUnit(100 * time.Millisecond))
	defer m.Close()
	var spread []time.Duration
	for range 100 {
		spread = append(spread, m.jitter(time.Now(), time.Second))
	}
	var lo, hi time.Duration = time.Hour, 0
	for _, d := range spread {
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo < 0 || hi >= time.Second || hi-lo < 500*time.Millisecond {
		t.Errorf("jitter of 100 first checks from %v to %v; want spread over [0, 1s)", lo, hi)
	}
	// Later Adds are checked at once.
	if d := m.jitter(m.created.Add(2*time.Second), time.Second); d != 0 {
		t.Errorf("jitter %v after the first period; want 0", d)
	}
}

// A check under way when the container is Reset was of the container's
// previous run: its result is dropped.
func TestResetDropsTheCheckUnderWay(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int64
	ex := &fakeExecer{fn: func(ctx context.Context, _, _ string, _ []string) (int, []byte, error) {
		if calls.Add(1) == 1 {
			close(entered)
			<-release
			return 0, nil, nil // the old container passed
		}
		return 1, []byte("restarted, not ready"), nil
	}}
	m := newManager(t, WithExecer(ex))
	p := &api.Probe{Exec: &api.ExecAction{Command: []string{"check"}}, PeriodSeconds: ip(1), TimeoutSeconds: ip(500), FailureThreshold: ip(1)}
	if err := m.Add("r1", "web", api.Probes{ReadinessProbe: p}, Target{}); err != nil {
		t.Fatal(err)
	}
	<-entered
	m.Reset("r1", "web")
	close(release)
	u := expect(t, m, "r1", "web", api.ProbeReadiness, Failure)
	if u.Message != `command ["check"] exited with 1: restarted, not ready` {
		t.Errorf("message %q", u.Message)
	}
	if m.Ready("r1", "web") {
		t.Error("ready from a check of the container before its restart")
	}
}

// connServer is an HTTP server that counts its connections.
type connServer struct {
	*httptest.Server
	hits, opened, closed atomic.Int64
}

func newConnServer(t *testing.T, idle time.Duration) *connServer {
	t.Helper()
	cs := &connServer{}
	cs.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { cs.hits.Add(1) }))
	cs.Config.IdleTimeout = idle
	cs.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			cs.opened.Add(1)
		case http.StateClosed, http.StateHijacked:
			cs.closed.Add(1)
		}
	}
	cs.Start()
	t.Cleanup(cs.Close)
	return cs
}

func TestHTTPConnections(t *testing.T) {
	for _, tc := range []struct {
		name      string
		keepAlive bool
		idle      time.Duration
		// least and most connections for 20 checks (most 0: no bound)
		least, most int64
	}{
		{name: "a new connection per check", least: 20},
		{name: "keep-alive", keepAlive: true, least: 1, most: 2},
		// The server closes the kept connection between checks: each
		// check notices and makes a new one, and none fails.
		{name: "keep-alive, server closes idle connections", keepAlive: true, idle: 2 * time.Millisecond, least: 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := newConnServer(t, tc.idle)
			host, port := hostPort(t, cs.URL)
			var opts []Option
			if tc.keepAlive {
				opts = append(opts, WithHTTPKeepAlive())
			}
			m := newManager(t, opts...)
			p := &api.Probe{HTTPGet: &api.HTTPGetAction{Path: "/", Port: port}, PeriodSeconds: ip(1), TimeoutSeconds: ip(100), FailureThreshold: ip(1)}
			if err := m.Add("r1", "web", api.Probes{ReadinessProbe: p}, Target{Host: host}); err != nil {
				t.Fatal(err)
			}
			expect(t, m, "r1", "web", api.ProbeReadiness, Success)
			eventually(t, "20 checks", func() bool { return cs.hits.Load() >= 20 })
			noUpdate(t, m)
			opened := cs.opened.Load()
			if opened < tc.least || tc.most > 0 && opened > tc.most {
				t.Errorf("%d connections for %d checks; want %d to %d", opened, cs.hits.Load(), tc.least, tc.most)
			}
			// Once the worker ends, no connection of it stays open.
			m.Remove("r1", "web")
			eventually(t, "connections closed", func() bool { return cs.closed.Load() == cs.opened.Load() })
		})
	}
}
