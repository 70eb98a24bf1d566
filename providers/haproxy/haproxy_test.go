package haproxy_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/haproxy"
	"github.com/stratahq/strata/providers/provider"
	"github.com/stratahq/strata/providers/provider/providertest"
	"github.com/stratahq/strata/testkit/testenv"
	"github.com/stratahq/strata/testkit/testenv/ports"
)

// waitLong bounds waits for haproxy to start, reload or stop.
const waitLong = 20 * time.Second

// slowRequest is how long a backend takes to answer /slow.
const slowRequest = 700 * time.Millisecond

// requireHAProxy skips (or fails in CI) without the haproxy binary.
func requireHAProxy(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(haproxy.DefaultBinary); err != nil {
		testenv.Missing(t, "haproxy", err)
	}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// testConfig is the tests' provider config on dir: their listeners bind
// free ports of the kernel's ephemeral range, which the default port
// range leaves out.
func testConfig(dir string) haproxy.Config {
	return haproxy.Config{StateDir: dir, Ports: "1024-65535"}
}

// newProvider makes a provider on dir that stops haproxy when the test
// ends.
func newProvider(t *testing.T, dir string) *haproxy.Provider {
	t.Helper()
	p, err := haproxy.New(t.Context(), testConfig(dir), haproxy.WithLogger(testLogger(t)), haproxy.WithNode("node-1"))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { shutdown(t, p) })
	return p
}

func shutdown(t *testing.T, p *haproxy.Provider) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), waitLong)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// backend is an HTTP server answering with its name; /slow answers
// after slowRequest.
type backend struct {
	name string
	srv  *httptest.Server
	// slow receives when a /slow request arrives.
	slow chan struct{}
}

func newBackend(t *testing.T, name string) *backend {
	t.Helper()
	slow := make(chan struct{}, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			select {
			case slow <- struct{}{}:
			default:
			}
			time.Sleep(slowRequest)
		}
		io.WriteString(w, name)
	}))
	t.Cleanup(srv.Close)
	return &backend{name: name, srv: srv, slow: slow}
}

func (b *backend) endpoint() api.Endpoint {
	addr := b.srv.Listener.Addr().(*net.TCPAddr)
	return api.Endpoint{Replica: b.name, Address: addr.IP.String(), Port: addr.Port}
}

func endpoints(bs ...*backend) []api.Endpoint {
	out := make([]api.Endpoint, len(bs))
	for i, b := range bs {
		out[i] = b.endpoint()
	}
	return out
}

// fastCheck notices a dead backend within 2 × 200ms.
func fastCheck() *api.HealthCheck {
	return &api.HealthCheck{Type: "http", Path: "/", Interval: api.D(200 * time.Millisecond), Timeout: api.D(500 * time.Millisecond), Rise: 1, Fall: 2}
}

func lbAssignment(id string, gen int64, listeners []api.Listener, eps []api.Endpoint) *api.Assignment {
	return &api.Assignment{
		ID:         id,
		Tenant:     "acme",
		Resource:   "web-lb",
		Kind:       api.KindLoadbalancer,
		Provider:   api.ProviderLoadbalancer,
		Desired:    api.DesiredRunning,
		Generation: gen,
		Spec: api.ResourceSpec{Loadbalancer: &api.LoadbalancerSpec{
			Listeners:   listeners,
			Selector:    map[string]string{"app": "web"},
			Algorithm:   "roundrobin",
			HealthCheck: fastCheck(),
		}},
		Endpoints: eps,
	}
}

func httpListener(port int) []api.Listener {
	return []api.Listener{{Name: "web", Port: port, Protocol: "http"}}
}

// next returns a copy of a at the next generation with eps.
func next(a *api.Assignment, eps []api.Endpoint) *api.Assignment {
	c := *a
	c.Generation++
	c.Endpoints = eps
	return &c
}

func apply(t *testing.T, p provider.Provider, a *api.Assignment) api.AssignmentStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitLong)
	defer cancel()
	st, err := p.Apply(ctx, a)
	if err != nil {
		t.Fatalf("Apply %s generation %d: %v", a.ID, a.Generation, err)
	}
	return st
}

func status(t *testing.T, p provider.Provider, id string) api.AssignmentStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitLong)
	defer cancel()
	st, err := p.Status(ctx, id)
	if err != nil {
		t.Fatalf("Status %s: %v", id, err)
	}
	return st
}

// eventually polls cond every 20ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not done after %v: %s", what, timeout, state)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("%s: test ended: %s", what, state)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitReady waits for phase ready with the given healthy backends.
func waitReady(t *testing.T, p provider.Provider, a *api.Assignment, up ...string) api.AssignmentStatus {
	t.Helper()
	var st api.AssignmentStatus
	eventually(t, waitLong, a.ID+" ready", func() (bool, string) {
		st = status(t, p, a.ID)
		got := healthy(st)
		return st.Phase == api.PhaseReady && st.ObservedGeneration >= a.Generation && slices.Equal(got, up),
			fmt.Sprintf("phase %q (%s), generation %d, up %v; want up %v", st.Phase, st.Reason, st.ObservedGeneration, got, up)
	})
	return st
}

// healthy lists the replicas of the backends that are up, sorted.
func healthy(st api.AssignmentStatus) []string {
	var up []string
	for _, b := range st.Backends {
		if b.Health == "up" {
			up = append(up, b.Replica)
		}
	}
	slices.Sort(up)
	return up
}

func healthOf(st api.AssignmentStatus, replica string) string {
	for _, b := range st.Backends {
		if b.Replica == replica {
			return b.Health
		}
	}
	return "absent"
}

// client does not keep connections, so that every request is balanced
// on its own and a closed frontend shows at once.
func client() *http.Client {
	return &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
}

func get(c *http.Client, port int) (string, error) { return getPath(c, port, "/") }

func getPath(c *http.Client, port int, path string) (string, error) {
	resp, err := c.Get("http://127.0.0.1:" + strconv.Itoa(port) + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %s: %s", resp.Status, b)
	}
	return string(b), nil
}

// refused reports whether nothing listens on port.
func refused(port int) bool {
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
	if err == nil {
		c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// ---- conformance ----

func TestConformance(t *testing.T) {
	requireHAProxy(t)
	p := newProvider(t, t.TempDir())
	bs := []*backend{newBackend(t, "r1"), newBackend(t, "r2")}
	var n atomic.Int64
	providertest.Run(t, providertest.Harness{
		New:   func(*testing.T) provider.Provider { return p },
		Kinds: []api.ProviderKind{api.ProviderLoadbalancer},
		Assignment: func(t *testing.T, _ api.ProviderKind, id string) *api.Assignment {
			ls := httpListener(ports.Get(t))
			// Every other load balancer has a second, TCP, listener.
			if n.Add(1)%2 == 0 {
				ls = append(ls, api.Listener{Name: "raw", Port: ports.Get(t), Protocol: "tcp"})
			}
			return lbAssignment(id, 1, ls, endpoints(bs...))
		},
		ReadyTimeout: waitLong,
		// No Kill: a load balancer is a frontend of the one haproxy, and
		// what a dead haproxy does to it is TestCrashedHAProxyIsRestarted's business.
		Watches: true,
	})
}

// ---- traffic ----

func TestTraffic(t *testing.T) {
	requireHAProxy(t)
	p := newProvider(t, t.TempDir())
	a, b, c, d := newBackend(t, "a"), newBackend(t, "b"), newBackend(t, "c"), newBackend(t, "d")
	port := ports.Get(t)
	lb := lbAssignment("traffic", 1, httpListener(port), endpoints(a, b, c))
	apply(t, p, lb)
	waitReady(t, p, lb, "a", "b", "c")

	wctx, stopWatch := context.WithCancel(t.Context())
	defer stopWatch()
	watch, err := p.Watch(wctx)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	hc := client()

	// Spread: roundrobin gives each backend a fair share.
	counts := map[string]int{}
	for i := range 300 {
		body, err := get(hc, port)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		counts[body]++
	}
	for _, name := range []string{"a", "b", "c"} {
		if counts[name] < 50 {
			t.Errorf("backend %s: got %d of 300 requests; want at least 50 (counts %v)", name, counts[name], counts)
		}
	}
	pid, reloads := p.MasterPID(), p.Reloads()

	// A backend that dies is found down within fall × interval (2 ×
	// 200ms), plus the check's own time, plus slack.
	stopped := time.Now()
	c.srv.Close()
	const detectBound = 2 * time.Second
	eventually(t, detectBound, "status shows c down", func() (bool, string) {
		st := status(t, p, lb.ID)
		return healthOf(st, "c") == "down", fmt.Sprintf("backends %+v", st.Backends)
	})
	t.Logf("status saw c down after %v", time.Since(stopped).Round(time.Millisecond))
	// The watcher polls every second on top of that.
	watchDeadline := time.After(detectBound + 1500*time.Millisecond)
	for seen := false; !seen; {
		select {
		case st := <-watch:
			seen = st.ID == lb.ID && healthOf(st, "c") == "down"
		case <-watchDeadline:
			t.Fatalf("Watch: no status with c down within %v", detectBound+1500*time.Millisecond)
		}
	}
	t.Logf("watcher saw c down after %v", time.Since(stopped).Round(time.Millisecond))
	for i := range 100 {
		body, err := get(hc, port)
		if err != nil {
			t.Fatalf("request %d after c was found down: %v", i, err)
		}
		if body == "c" {
			t.Fatalf("request %d after c was found down: answered by c", i)
		}
	}

	// A new endpoint: added through the runtime API, no reload.
	gen2 := next(lb, endpoints(a, b, d))
	gen2.Endpoints = append(gen2.Endpoints, api.Endpoint{Replica: "c", Address: "127.0.0.1", Port: c.endpoint().Port})
	apply(t, p, gen2)
	waitReady(t, p, gen2, "a", "b", "d")
	eventually(t, 5*time.Second, "d receives traffic", func() (bool, string) {
		body, err := get(hc, port)
		return err == nil && body == "d", fmt.Sprintf("got %q, %v", body, err)
	})
	checkNoReload(t, p, pid, reloads)

	// An endpoint removed: deleted through the runtime API, no reload,
	// and no request goes to it any more.
	gen3 := next(gen2, endpoints(a, d))
	st := apply(t, p, gen3)
	if got := healthOf(st, "b"); got != "absent" {
		t.Errorf("after removing b: got it %s in %+v; want it absent", got, st.Backends)
	}
	for i := range 60 {
		body, err := get(hc, port)
		if err != nil {
			t.Fatalf("request %d after removing b: %v", i, err)
		}
		if body != "a" && body != "d" {
			t.Fatalf("request %d after removing b: answered by %q; want a or d", i, body)
		}
	}
	checkNoReload(t, p, pid, reloads)
	waitReady(t, p, gen3, "a", "d")
}

// TestRemovedEndpointDrains: a request in flight on an endpoint that is
// removed completes.
func TestRemovedEndpointDrains(t *testing.T) {
	requireHAProxy(t)
	p := newProvider(t, t.TempDir())
	old, repl := newBackend(t, "old"), newBackend(t, "new")
	port := ports.Get(t)
	lb := lbAssignment("drain", 1, httpListener(port), endpoints(old))
	apply(t, p, lb)
	waitReady(t, p, lb, "old")

	type result struct {
		body string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		body, err := getPath(client(), port, "/slow")
		done <- result{body, err}
	}()
	// The endpoint goes once the request reached it.
	select {
	case <-old.slow:
	case <-time.After(5 * time.Second):
		t.Fatalf("the /slow request did not reach the backend within 5s")
	}
	start := time.Now()
	apply(t, p, next(lb, endpoints(repl)))
	took := time.Since(start)
	r := <-done
	if r.err != nil || r.body != "old" {
		t.Errorf("request in flight during the removal: got %q, %v; want old's answer", r.body, r.err)
	}
	// The drain waits for the request, never longer than its bound.
	if bound := slowRequest + 3*time.Second; took > bound {
		t.Errorf("Apply removing a busy endpoint took %v; want at most %v", took, bound)
	}
	if body, err := get(client(), port); err != nil || body != "new" {
		t.Errorf("after the removal: got %q, %v; want new", body, err)
	}
}

func checkNoReload(t *testing.T, p *haproxy.Provider, pid, reloads int) {
	t.Helper()
	if got := p.MasterPID(); got != pid {
		t.Errorf("master pid: got %d; want %d (unchanged)", got, pid)
	}
	if got := p.Reloads(); got != reloads {
		t.Errorf("reloads: got %d; want %d (endpoint changes never reload)", got, reloads)
	}
}

// ---- two load balancers ----

func TestDeleteLoadBalancers(t *testing.T) {
	requireHAProxy(t)
	dir := t.TempDir()
	p := newProvider(t, dir)
	be := newBackend(t, "a")
	port1, port2 := ports.Get(t), ports.Get(t)
	lb1 := lbAssignment("first", 1, httpListener(port1), endpoints(be))
	lb2 := lbAssignment("second", 1, httpListener(port2), endpoints(be))
	for _, lb := range []*api.Assignment{lb1, lb2} {
		apply(t, p, lb)
		waitReady(t, p, lb, "a")
	}
	hc := client()
	for _, port := range []int{port1, port2} {
		if _, err := get(hc, port); err != nil {
			t.Fatalf("port %d before any delete: %v", port, err)
		}
	}
	pid := p.MasterPID()

	ctx, cancel := context.WithTimeout(t.Context(), waitLong)
	defer cancel()
	if err := p.Delete(ctx, &api.Assignment{ID: lb1.ID}, time.Second); err != nil {
		t.Fatalf("Delete %s: %v", lb1.ID, err)
	}
	if !refused(port1) {
		t.Errorf("port %d of the deleted load balancer: got a connection; want it refused", port1)
	}
	if _, err := get(hc, port2); err != nil {
		t.Errorf("port %d of the remaining load balancer: %v", port2, err)
	}
	if got := p.MasterPID(); got != pid {
		t.Errorf("master pid after deleting one of two: got %d; want %d", got, pid)
	}

	if err := p.Delete(ctx, &api.Assignment{ID: lb2.ID}, time.Second); err != nil {
		t.Fatalf("Delete %s: %v", lb2.ID, err)
	}
	if got := p.MasterPID(); got != 0 {
		t.Errorf("master pid after deleting the last load balancer: got %d; want 0", got)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("kill -0 %d after the last delete: got %v; want ESRCH (no such process)", pid, err)
	}
	if out, err := exec.Command("pgrep", "-af", dir).CombinedOutput(); err == nil {
		t.Errorf("pgrep -f %s: got\n%s\nwant no process", dir, out)
	}
	if !refused(port2) {
		t.Errorf("port %d after the last delete: got a connection; want it refused", port2)
	}
	ls, err := p.List(ctx)
	if err != nil || len(ls) != 0 {
		t.Errorf("List after deleting everything: got %v, %v; want nothing", ls, err)
	}
}

// ---- agent restart ----

func TestRestartAdoptsRunningHAProxy(t *testing.T) {
	requireHAProxy(t)
	dir := t.TempDir()
	a := newBackend(t, "a")
	port := ports.Get(t)

	pA, err := haproxy.New(t.Context(), testConfig(dir), haproxy.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatalf("New A: %v", err)
	}
	// If the test fails before B takes over, A's haproxy still goes.
	stopA := true
	t.Cleanup(func() {
		if stopA {
			shutdown(t, pA)
		}
	})
	lb := lbAssignment("survivor", 3, httpListener(port), endpoints(a))
	apply(t, pA, lb)
	waitReady(t, pA, lb, "a")
	pid := pA.MasterPID()

	// The agent goes away: Close leaves haproxy serving.
	if err := pA.Close(); err != nil {
		t.Fatalf("Close A: %v", err)
	}
	hc := client()
	if body, err := get(hc, port); err != nil || body != "a" {
		t.Fatalf("traffic with no provider: got %q, %v; want a", body, err)
	}

	stopA = false
	pB := newProvider(t, dir)
	ctx, cancel := context.WithTimeout(t.Context(), waitLong)
	defer cancel()
	ls, err := pB.List(ctx)
	if err != nil {
		t.Fatalf("List B: %v", err)
	}
	if len(ls) != 1 || ls[0].ID != lb.ID || ls[0].Generation != lb.Generation || ls[0].Kind != api.KindLoadbalancer {
		t.Fatalf("List B: got %+v; want %s at generation %d", ls, lb.ID, lb.Generation)
	}
	waitReady(t, pB, lb, "a")
	if got := pB.MasterPID(); got != pid {
		t.Errorf("master pid after the restart: got %d; want %d (adopted, not restarted)", got, pid)
	}
	if body, err := get(hc, port); err != nil || body != "a" {
		t.Errorf("traffic after the restart: got %q, %v; want a", body, err)
	}

	// The adopted haproxy takes endpoint changes without a reload.
	b := newBackend(t, "b")
	gen4 := next(lb, endpoints(a, b))
	apply(t, pB, gen4)
	waitReady(t, pB, gen4, "a", "b")
	eventually(t, 5*time.Second, "b receives traffic", func() (bool, string) {
		body, err := get(hc, port)
		return err == nil && body == "b", fmt.Sprintf("got %q, %v", body, err)
	})
	checkNoReload(t, pB, pid, 0)
}

// TestRestartStartsHAProxyWhenNoneRuns is a node reboot: the state
// files remain, haproxy does not; the new provider starts it.
func TestRestartStartsHAProxyWhenNoneRuns(t *testing.T) {
	requireHAProxy(t)
	dir := t.TempDir()
	a := newBackend(t, "a")
	port := ports.Get(t)
	pA := newProvider(t, dir)
	lb := lbAssignment("rebooted", 2, httpListener(port), endpoints(a))
	apply(t, pA, lb)
	waitReady(t, pA, lb, "a")
	pid := pA.MasterPID()
	shutdown(t, pA)
	if !refused(port) {
		t.Fatalf("port %d after Shutdown: got a connection; want it refused", port)
	}

	pB := newProvider(t, dir)
	waitReady(t, pB, lb, "a")
	if got := pB.MasterPID(); got == 0 || got == pid {
		t.Errorf("master pid: got %d; want a new master (not %d)", got, pid)
	}
	if body, err := get(client(), port); err != nil || body != "a" {
		t.Errorf("traffic after the reboot: got %q, %v; want a", body, err)
	}
}

// ---- listener change ----

func TestListenerChangeReloadsSeamlessly(t *testing.T) {
	requireHAProxy(t)
	p := newProvider(t, t.TempDir())
	a := newBackend(t, "a")
	oldPort, newPort := ports.Get(t), ports.Get(t)
	lb := lbAssignment("moving", 1, httpListener(oldPort), endpoints(a))
	apply(t, p, lb)
	waitReady(t, p, lb, "a")
	pid, reloads := p.MasterPID(), p.Reloads()

	moved := next(lb, lb.Endpoints)
	moved.Spec.Loadbalancer = &api.LoadbalancerSpec{
		Listeners:   httpListener(newPort),
		Selector:    lb.Spec.Loadbalancer.Selector,
		Algorithm:   "leastconn",
		HealthCheck: fastCheck(),
	}
	apply(t, p, moved)
	waitReady(t, p, moved, "a")
	if got := p.Reloads(); got != reloads+1 {
		t.Errorf("reloads: got %d; want %d (one reload for the new listener)", got, reloads+1)
	}
	if got := p.MasterPID(); got != pid {
		t.Errorf("master pid: got %d; want %d (a reload keeps the master)", got, pid)
	}
	if !refused(oldPort) {
		t.Errorf("old port %d: got a connection; want it refused", oldPort)
	}
	if body, err := get(client(), newPort); err != nil || body != "a" {
		t.Errorf("new port %d: got %q, %v; want a", newPort, body, err)
	}
}

// ---- usage ----

// TestUsage sends requests through a load balancer's http listener and
// connections through its tcp one: Usage counts every one of them, and
// the connection held open as a session.
func TestUsage(t *testing.T) {
	requireHAProxy(t)
	p := newProvider(t, t.TempDir())
	web, raw := ports.Get(t), ports.Get(t)
	lb := lbAssignment("metered", 1, append(httpListener(web), api.Listener{Name: "raw", Port: raw, Protocol: "tcp"}), endpoints(newBackend(t, "a")))
	apply(t, p, lb)
	waitReady(t, p, lb, "a")
	usage := func() api.Usage {
		ctx, cancel := context.WithTimeout(t.Context(), waitLong)
		defer cancel()
		all, err := p.Usage(ctx)
		if err != nil {
			t.Fatalf("Usage: %v", err)
		}
		if _, ok := all[lb.ID]; !ok || len(all) != 1 {
			t.Fatalf("Usage: got %+v; want %s alone", all, lb.ID)
		}
		return all[lb.ID]
	}
	before := usage()

	const requests, conns = 5, 3
	hc := client()
	for i := range requests {
		if _, err := get(hc, web); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	for i := range conns {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(raw), time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		c.Close()
	}
	eventually(t, waitLong, "requests counted", func() (bool, string) {
		u := usage()
		return u.Requests >= before.Requests+requests+conns, fmt.Sprintf("got %+v; want requests from %v up by %d", u, before.Requests, requests+conns)
	})

	held, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(raw), time.Second)
	if err != nil {
		t.Fatalf("held connection: %v", err)
	}
	defer held.Close()
	eventually(t, waitLong, "the held connection is a session", func() (bool, string) {
		u := usage()
		return u.Sessions >= 1, fmt.Sprintf("got %+v", u)
	})
}

// ---- failures ----

func TestPortInUseIsAnErrorOfThatLoadBalancerOnly(t *testing.T) {
	requireHAProxy(t)
	p := newProvider(t, t.TempDir())
	a := newBackend(t, "a")
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	defer taken.Close()
	takenPort := taken.Addr().(*net.TCPAddr).Port

	goodPort := ports.Get(t)
	good := lbAssignment("good", 1, httpListener(goodPort), endpoints(a))
	bad := lbAssignment("bad", 1, httpListener(takenPort), endpoints(a))
	apply(t, p, good)
	waitReady(t, p, good, "a")
	pid := p.MasterPID()

	st := apply(t, p, bad)
	if st.Phase != api.PhaseError || !strings.Contains(st.Reason, "cannot bind") {
		t.Errorf("load balancer on a taken port: got phase %q (%s); want error with haproxy's \"cannot bind\"", st.Phase, st.Reason)
	}
	if st := status(t, p, good.ID); st.Phase != api.PhaseReady {
		t.Errorf("the other load balancer: got phase %q (%s); want ready", st.Phase, st.Reason)
	}
	if body, err := get(client(), goodPort); err != nil || body != "a" {
		t.Errorf("the other load balancer's traffic: got %q, %v; want a", body, err)
	}
	if got := p.MasterPID(); got != pid {
		t.Errorf("master pid: got %d; want %d", got, pid)
	}

	// Applying the same generation again retries: the port is free now.
	taken.Close()
	apply(t, p, bad)
	waitReady(t, p, bad, "a")
}

func TestSamePortTwiceIsAnError(t *testing.T) {
	requireHAProxy(t)
	p := newProvider(t, t.TempDir())
	a := newBackend(t, "a")
	port := ports.Get(t)
	first := lbAssignment("first", 1, httpListener(port), endpoints(a))
	second := lbAssignment("second", 1, httpListener(port), endpoints(a))
	apply(t, p, first)
	waitReady(t, p, first, "a")
	st := apply(t, p, second)
	if want := "used by load balancer first"; st.Phase != api.PhaseError || !strings.Contains(st.Reason, want) {
		t.Errorf("second load balancer on the same port: got phase %q (%s); want error with %q", st.Phase, st.Reason, want)
	}
	if st := status(t, p, first.ID); st.Phase != api.PhaseReady {
		t.Errorf("first load balancer: got phase %q (%s); want ready", st.Phase, st.Reason)
	}
}

func TestCrashedHAProxyIsRestarted(t *testing.T) {
	requireHAProxy(t)
	p := newProvider(t, t.TempDir())
	a := newBackend(t, "a")
	port := ports.Get(t)
	lb := lbAssignment("phoenix", 1, httpListener(port), endpoints(a))
	apply(t, p, lb)
	waitReady(t, p, lb, "a")
	pid := p.MasterPID()

	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the master: %v", err)
	}
	eventually(t, waitLong, "a new master", func() (bool, string) {
		got := p.MasterPID()
		return got != 0 && got != pid, fmt.Sprintf("master pid %d", got)
	})
	waitReady(t, p, lb, "a")
	eventually(t, 5*time.Second, "traffic after the restart", func() (bool, string) {
		body, err := get(client(), port)
		return err == nil && body == "a", fmt.Sprintf("got %q, %v", body, err)
	})
	if got := p.Restarts(); got != 1 {
		t.Errorf("restarts: got %d; want 1", got)
	}
	cs, err := p.Health(t.Context())
	if err != nil || len(cs) != 1 {
		t.Fatalf("Health: got %+v, %v; want one condition", cs, err)
	}
	if cs[0].Status != api.ConditionWarning || cs[0].Reason != "Restarted" {
		t.Errorf("Health after a crash: got %s %s (%s); want Warning Restarted", cs[0].Status, cs[0].Reason, cs[0].Message)
	}
}

// TestMissingBinary needs no haproxy: it checks what a node without one
// reports.
func TestMissingBinary(t *testing.T) {
	p, err := haproxy.New(t.Context(), haproxy.Config{StateDir: t.TempDir(), Binary: "/nonexistent/haproxy", Ports: "1024-65535"})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { shutdown(t, p) })
	cs, err := p.Health(t.Context())
	if err != nil || len(cs) != 1 {
		t.Fatalf("Health: got %+v, %v; want one condition", cs, err)
	}
	if cs[0].Type != "provider/haproxy" || cs[0].Status != api.ConditionError || cs[0].Reason != "BinaryMissing" {
		t.Errorf("Health: got %+v; want provider/haproxy Error BinaryMissing", cs[0])
	}
	st := apply(t, p, lbAssignment("nobin", 1, httpListener(ports.Get(t)), nil))
	if st.Phase != api.PhaseError || !strings.Contains(st.Reason, "/nonexistent/haproxy") {
		t.Errorf("Apply without a binary: got phase %q (%s); want error naming the binary", st.Phase, st.Reason)
	}
}
