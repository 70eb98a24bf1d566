package probe

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/stratahq/strata/internal/api"
)

func defaultDial() Dialer { return (&net.Dialer{}).DialContext }

// hostPort splits a test server's address.
func hostPort(t *testing.T, addr string) (string, int) {
	t.Helper()
	h, p, err := net.SplitHostPort(strings.TrimPrefix(strings.TrimPrefix(addr, "http://"), "https://"))
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return h, port
}

func probeOnce(t *testing.T, p prober, timeout time.Duration) (Result, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return p.probe(ctx)
}

func TestHTTPProber(t *testing.T) {
	var otherHits atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { otherHits.Add(1) }))
	defer other.Close()
	_, otherPort := hostPort(t, other.URL)

	var seen atomic.Pointer[http.Request]
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { seen.Store(r) })
	mux.HandleFunc("/status/399", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(399) })
	mux.HandleFunc("/status/400", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(400) })
	mux.HandleFunc("/status/500", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", 500) })
	mux.HandleFunc("/status/304", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(304) })
	mux.HandleFunc("/redirect/ok", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok", http.StatusFound) })
	mux.HandleFunc("/redirect/bad", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/status/500", http.StatusFound) })
	mux.HandleFunc("/redirect/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/redirect/loop", http.StatusFound) })
	mux.HandleFunc("/redirect/other", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://localhost:"+strconv.Itoa(otherPort)+"/", http.StatusFound)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(make([]byte, 1<<20))
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	tlsSrv := httptest.NewTLSServer(mux)
	defer tlsSrv.Close()
	host, port := hostPort(t, srv.URL)
	_, tlsPort := hostPort(t, tlsSrv.URL)

	for _, tc := range []struct {
		name    string
		action  api.HTTPGetAction
		timeout time.Duration
		want    Result
		msg     string // a substring of the message
	}{
		{name: "200", action: api.HTTPGetAction{Path: "/ok"}, want: Success},
		{name: "399", action: api.HTTPGetAction{Path: "/status/399"}, want: Success},
		{name: "304", action: api.HTTPGetAction{Path: "/status/304"}, want: Success},
		{name: "400", action: api.HTTPGetAction{Path: "/status/400"}, want: Failure, msg: "HTTP probe failed with statuscode: 400"},
		{name: "500", action: api.HTTPGetAction{Path: "/status/500"}, want: Failure, msg: "HTTP probe failed with statuscode: 500"},
		{name: "404", action: api.HTTPGetAction{Path: "/nothing"}, want: Failure, msg: "HTTP probe failed with statuscode: 404"},
		{name: "redirect to the same host is followed", action: api.HTTPGetAction{Path: "/redirect/ok"}, want: Success},
		{name: "redirect to a failure fails", action: api.HTTPGetAction{Path: "/redirect/bad"}, want: Failure, msg: "statuscode: 500"},
		{name: "redirect loop", action: api.HTTPGetAction{Path: "/redirect/loop"}, want: Failure, msg: "stopped after 10 redirects"},
		{name: "redirect to another host is not followed", action: api.HTTPGetAction{Path: "/redirect/other"}, want: Success, msg: "Probe terminated redirects"},
		{name: "large body", action: api.HTTPGetAction{Path: "/big"}, want: Success},
		{name: "https without verification", action: api.HTTPGetAction{Path: "/ok", Port: tlsPort, Scheme: api.SchemeHTTPS}, want: Success},
		{name: "https to a plain server", action: api.HTTPGetAction{Path: "/ok", Scheme: api.SchemeHTTPS}, want: Failure},
		{name: "timeout", action: api.HTTPGetAction{Path: "/slow"}, timeout: 200 * time.Millisecond, want: Failure, msg: "timeout"},
		{name: "refused", action: api.HTTPGetAction{Path: "/", Port: closedPort(t)}, want: Failure, msg: "refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.action
			if a.Port == 0 {
				a.Port = port
			}
			if a.Scheme == "" {
				a.Scheme = api.SchemeHTTP
			}
			p, err := newHTTPProber(&a, host, "strata-probe/test", defaultDial(), false)
			if err != nil {
				t.Fatal(err)
			}
			timeout := tc.timeout
			if timeout == 0 {
				timeout = 5 * time.Second
			}
			start := time.Now()
			got, msg := probeOnce(t, p, timeout)
			if got != tc.want || !strings.Contains(msg, tc.msg) {
				t.Fatalf("got %s %q; want %s with %q", got, msg, tc.want, tc.msg)
			}
			if tc.timeout != 0 && time.Since(start) > tc.timeout+time.Second {
				t.Errorf("a check with a %v timeout took %v", tc.timeout, time.Since(start))
			}
		})
	}
	if n := otherHits.Load(); n != 0 {
		t.Errorf("the redirect to another host was followed: it got %d requests", n)
	}

	t.Run("request", func(t *testing.T) {
		a := api.HTTPGetAction{Path: "/ok?x=1", Port: port, Scheme: api.SchemeHTTP, HTTPHeaders: []api.HTTPHeader{
			{Name: "Host", Value: "app.example"}, {Name: "x-probe", Value: "yes"},
		}}
		p, err := newHTTPProber(&a, host, "strata-probe/v9", defaultDial(), false)
		if err != nil {
			t.Fatal(err)
		}
		if got, msg := probeOnce(t, p, 5*time.Second); got != Success {
			t.Fatalf("got %s %q; want success", got, msg)
		}
		r := seen.Load()
		if r == nil {
			t.Fatal("the server saw no request")
		}
		if r.Host != "app.example" || r.Header.Get("X-Probe") != "yes" || r.UserAgent() != "strata-probe/v9" ||
			r.Header.Get("Accept") != "*/*" || !r.Close || r.URL.RawQuery != "x=1" || r.Method != "GET" {
			t.Errorf("request: host %q, X-Probe %q, UA %q, Accept %q, close %v, query %q, method %s; want app.example, yes, strata-probe/v9, */*, true, x=1, GET",
				r.Host, r.Header.Get("X-Probe"), r.UserAgent(), r.Header.Get("Accept"), r.Close, r.URL.RawQuery, r.Method)
		}
	})
}

// closedPort is a port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	return port
}

func TestTCPProber(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
			select {
			case accepted <- struct{}{}:
			default:
			}
		}
	}()
	p := &tcpProber{dial: defaultDial(), addr: l.Addr().String()}
	if got, msg := probeOnce(t, p, 5*time.Second); got != Success {
		t.Fatalf("listening: got %s %q; want success", got, msg)
	}
	select {
	case <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("the listener accepted no connection")
	}
	p = &tcpProber{dial: defaultDial(), addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(closedPort(t)))}
	if got, msg := probeOnce(t, p, 5*time.Second); got != Failure || !strings.Contains(msg, "refused") {
		t.Fatalf("closed: got %s %q; want failure, refused", got, msg)
	}
}

func TestGRPCProber(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()

	bare, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	bareSrv := grpc.NewServer()
	go func() { _ = bareSrv.Serve(bare) }()
	defer bareSrv.Stop()

	hs.SetServingStatus("app", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("sick", healthpb.HealthCheckResponse_NOT_SERVING)
	for _, tc := range []struct {
		name, addr, service string
		want                Result
		msg                 string
	}{
		{name: "server", addr: l.Addr().String(), want: Success},
		{name: "serving", addr: l.Addr().String(), service: "app", want: Success},
		{name: "not serving", addr: l.Addr().String(), service: "sick", want: Failure, msg: `service unhealthy (responded with "NOT_SERVING")`},
		{name: "unknown service", addr: l.Addr().String(), service: "nope", want: Failure, msg: "health rpc probe failed"},
		{name: "no health service", addr: bare.Addr().String(), want: Failure, msg: "does not implement the grpc health protocol"},
		{name: "closed", addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(closedPort(t))), want: Failure, msg: "health rpc probe failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var dials atomic.Int64
			dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
				dials.Add(1)
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			}
			p := newGRPCProber(tc.addr, tc.service, "strata-probe/test", dial)
			got, msg := probeOnce(t, p, 5*time.Second)
			if got != tc.want || !strings.Contains(msg, tc.msg) {
				t.Fatalf("got %s %q; want %s with %q", got, msg, tc.want, tc.msg)
			}
			if dials.Load() == 0 {
				t.Error("the check did not dial through the target's Dialer")
			}
		})
	}
	hs.SetServingStatus("app", healthpb.HealthCheckResponse_NOT_SERVING)
	if got, _ := probeOnce(t, newGRPCProber(l.Addr().String(), "app", "ua", defaultDial()), 5*time.Second); got != Failure {
		t.Errorf("after NOT_SERVING: got %s; want failure", got)
	}
}

// fakeExecer answers exec checks with what its function says.
type fakeExecer struct {
	calls atomic.Int64
	fn    func(ctx context.Context, replica, container string, cmd []string) (int, []byte, error)
}

func (f *fakeExecer) Exec(ctx context.Context, replica, container string, cmd []string) (int, []byte, error) {
	f.calls.Add(1)
	return f.fn(ctx, replica, container, cmd)
}

func TestExecProber(t *testing.T) {
	var gotArgs atomic.Pointer[[]string]
	for _, tc := range []struct {
		name string
		fn   func(ctx context.Context, replica, container string, cmd []string) (int, []byte, error)
		want Result
		msg  string
	}{
		{name: "exit 0", fn: func(ctx context.Context, r, c string, cmd []string) (int, []byte, error) {
			args := append([]string{r, c}, cmd...)
			gotArgs.Store(&args)
			return 0, []byte("fine"), nil
		}, want: Success},
		{name: "exit 1", fn: func(context.Context, string, string, []string) (int, []byte, error) {
			return 1, []byte("not yet"), nil
		}, want: Failure, msg: `command ["cat" "/tmp/ready"] exited with 1: not yet`},
		{name: "could not run", fn: func(context.Context, string, string, []string) (int, []byte, error) {
			return -1, nil, errors.New("task not found")
		}, want: Unknown, msg: "task not found"},
		{name: "timeout", fn: func(ctx context.Context, _, _ string, _ []string) (int, []byte, error) {
			<-ctx.Done()
			return -1, nil, ctx.Err()
		}, want: Failure, msg: "timed out"},
		{name: "long output is clipped", fn: func(context.Context, string, string, []string) (int, []byte, error) {
			return 2, []byte(strings.Repeat("x", 100000)), nil
		}, want: Failure, msg: strings.Repeat("x", maxMessage) + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &execProber{exec: &fakeExecer{fn: tc.fn}, key: key{"r1", "web"}, cmd: []string{"cat", "/tmp/ready"}}
			got, msg := probeOnce(t, p, 200*time.Millisecond)
			if got != tc.want || !strings.Contains(msg, tc.msg) {
				t.Fatalf("got %s %.200q; want %s with %.200q", got, msg, tc.want, tc.msg)
			}
			if len(msg) > maxMessage+200 {
				t.Errorf("message of %d bytes", len(msg))
			}
		})
	}
	if a := gotArgs.Load(); a == nil || strings.Join(*a, " ") != "r1 web cat /tmp/ready" {
		t.Errorf("Exec got %v; want r1 web cat /tmp/ready", a)
	}
}

// pingFunc is a GuestAgent.
type pingFunc func(ctx context.Context, replica string) error

func (f pingFunc) PingGuestAgent(ctx context.Context, replica string) error { return f(ctx, replica) }

func TestGuestAgentProber(t *testing.T) {
	var pinged atomic.Pointer[string]
	answers := pingFunc(func(_ context.Context, replica string) error { pinged.Store(&replica); return nil })
	m := NewManager()
	t.Cleanup(m.Close)
	p, err := m.newProber(key{"vm1", "main"}, &api.Probe{GuestAgent: &api.GuestAgentAction{}}, Target{})
	if err == nil {
		t.Fatalf("a guestAgent probe without a GuestAgent: prober %T; want an error", p)
	}
	m = NewManager(WithGuestAgent(answers))
	t.Cleanup(m.Close)
	if p, err = m.newProber(key{"vm1", "main"}, &api.Probe{GuestAgent: &api.GuestAgentAction{}}, Target{}); err != nil {
		t.Fatal(err)
	}
	if got, msg := probeOnce(t, p, 200*time.Millisecond); got != Success || msg != "" {
		t.Errorf("an agent that answers: got %s %q; want success", got, msg)
	}
	if r := pinged.Load(); r == nil || *r != "vm1" {
		t.Errorf("pinged %v; want vm1", r)
	}
	silent := &agentProber{agent: pingFunc(func(ctx context.Context, _ string) error {
		<-ctx.Done()
		return errors.New("Guest agent is not responding: QEMU guest agent is not connected")
	}), replica: "vm1"}
	if got, msg := probeOnce(t, silent, 100*time.Millisecond); got != Failure || !strings.Contains(msg, "guest agent: Guest agent is not responding") {
		t.Errorf("an agent that does not answer: got %s %q; want a failure naming it", got, msg)
	}
}
