package alerts

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/backoff"
	"github.com/stratahq/strata/internal/events"
	"github.com/stratahq/strata/internal/hostpolicy"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/testkit/etcdtest"
	"github.com/stratahq/strata/testkit/testenv/ports"
)

type testGuard struct {
	key string
	rev int64
}

func (g testGuard) GuardKey() string { return g.key }
func (g testGuard) GuardRev() int64  { return g.rev }

// listSource is a Source over a fixed list of one region's events.
type listSource struct {
	mu     sync.Mutex
	events []Event
}

func (s *listSource) Regions() []string        { return []string{"r1"} }
func (s *listSource) Levels(time.Time) []Event { return nil }

func (s *listSource) Read(_ context.Context, _ string, after string, limit int) ([]Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Event
	for _, e := range s.events {
		if c, err := compareIDs(e.ID, after); err == nil && c > 0 && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}

// compareIDs orders event ids as a stream does.
func compareIDs(a, b string) (int, error) { return events.CompareID(a, b) }

// loopback allows receivers on loopback, where the tests' receivers
// listen, as an operator allows a receivers' network.
func loopback(t *testing.T) hostpolicy.Networks {
	t.Helper()
	n, err := hostpolicy.ParseNetworks([]string{"127.0.0.0/8", "::1/128"})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func leadGuard(t *testing.T, cli *clientv3.Client, key string) testGuard {
	t.Helper()
	resp, err := cli.Put(t.Context(), key, "me")
	if err != nil {
		t.Fatal(err)
	}
	return testGuard{key: key, rev: resp.Header.Revision}
}

// TestDeposedAfterSendResendsSameKey: a master whose receiver took a
// notification but who lost its leadership before recording it (its
// write is fenced) leaves the notification in the outbox; the next
// master sends it again with the same dedupe key, and reads no event
// twice.
func TestDeposedAfterSendResendsSameKey(t *testing.T) {
	cli := etcdtest.Client(t, etcdtest.Embedded(t))
	cols := NewCollections(store.New(cli, "/strata/global/"))
	created := time.Now().UTC()
	zero := api.D(0)
	var (
		mu      sync.Mutex
		keys    []string
		got     = make(chan struct{}, 4)
		release = make(chan struct{})
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get(HeaderDedupeKey))
		first := len(keys) == 1
		mu.Unlock()
		got <- struct{}{}
		if first {
			<-release // the master is deposed while the post is in flight
		}
	}))
	t.Cleanup(hook.Close)
	rule := StoredRule{AlertRule: api.AlertRule{
		Name: "nodes", Reasons: []string{"NodeDown"}, GroupWait: &zero, CreatedAt: created,
		Receiver: api.AlertReceiver{Type: api.ReceiverWebhook, URL: hook.URL},
	}}
	if _, err := cols.Rules.Create(t.Context(), "nodes", &rule); err != nil {
		t.Fatal(err)
	}
	src := &listSource{events: []Event{{ID: "1-0", Reason: "NodeDown", Object: "node/n1", Region: "r1", Time: created.Add(time.Second)}}}
	opts := Options{Collections: cols, Source: src, Receivers: loopback(t), Poll: 20 * time.Millisecond, Backoff: backoff.Backoff{Min: 10 * time.Millisecond, Max: 50 * time.Millisecond}}

	ga := leadGuard(t, cli, "/test/master-a")
	doneA := make(chan error, 1)
	go func() { doneA <- New(opts).Lead(t.Context(), ga) }()
	select {
	case <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("master a sent nothing")
	}
	if _, err := cli.Delete(t.Context(), ga.key); err != nil { // a is deposed
		t.Fatal(err)
	}
	close(release)
	select {
	case err := <-doneA:
		if err != nil {
			t.Fatalf("master a: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("master a did not stop on its fenced write")
	}

	gb := leadGuard(t, cli, "/test/master-b")
	ctxB, cancelB := context.WithCancel(t.Context())
	doneB := make(chan error, 1)
	go func() { doneB <- New(opts).Lead(ctxB, gb) }()
	select {
	case <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("master b did not resend")
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := cols.States.Get(t.Context(), "nodes")
		if err == nil && st.Value.Delivery.Sent == 1 && len(st.Value.Outbox) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("state after the resend: %+v, %v; want sent 1, outbox empty", st.Value, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // ten more passes
	cancelB()
	<-doneB
	mu.Lock()
	defer mu.Unlock()
	if len(keys) != 2 || keys[0] != keys[1] || keys[0] == "" {
		t.Fatalf("dedupe keys posted: %q; want the same one twice (at least once, across masters)", keys)
	}
}

// countingServer is a loopback HTTP server that counts the connections
// it accepted and answers every post with code.
func countingServer(t *testing.T, addr string, code int) (url string, conns *atomic.Int64) {
	t.Helper()
	conns = new(atomic.Int64)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(code) }))
	srv.Listener.Close()
	srv.Listener = l
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL, conns
}

// leadRules stores rules on NodeDown, one per receiver URL, feeds them
// one NodeDown and runs a master with opts until each rule has failed
// attempts times (or delivered), and returns the rules' delivery states.
func leadRules(t *testing.T, opts Options, urls map[string]string, attempts int) map[string]api.AlertDelivery {
	t.Helper()
	cli := etcdtest.Client(t, etcdtest.Embedded(t))
	opts.Collections = NewCollections(store.New(cli, "/strata/global/"))
	created := time.Now().UTC()
	zero := api.D(0)
	for name, u := range urls {
		rule := StoredRule{AlertRule: api.AlertRule{
			Name: name, Reasons: []string{"NodeDown"}, GroupWait: &zero, CreatedAt: created,
			Receiver: api.AlertReceiver{Type: api.ReceiverWebhook, URL: u},
		}}
		if _, err := opts.Collections.Rules.Create(t.Context(), name, &rule); err != nil {
			t.Fatal(err)
		}
	}
	opts.Source = &listSource{events: []Event{{ID: "1-0", Reason: "NodeDown", Object: "node/n1", Region: "r1", Time: created.Add(time.Second)}}}
	opts.Poll, opts.Backoff = 20*time.Millisecond, backoff.Backoff{Min: 10 * time.Millisecond, Max: 20 * time.Millisecond}
	opts.MaxAttempts = 100
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- New(opts).Lead(ctx, leadGuard(t, cli, "/test/master")) }()
	defer func() { cancel(); <-done }()
	out := map[string]api.AlertDelivery{}
	deadline := time.Now().Add(30 * time.Second)
	for len(out) < len(urls) {
		for name := range urls {
			st, err := opts.Collections.States.Get(t.Context(), name)
			if err == nil && (st.Value.Delivery.Attempts >= attempts || st.Value.Delivery.Sent > 0) {
				out[name] = st.Value.View()
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not every rule tried %d times within 30s: %+v", attempts, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return out
}

// TestSecurityReceiverOnLoopbackRefused: without networks allowed, a
// receiver on loopback is never reached, by address or by a name that
// resolves to loopback when it is dialled (localhost); the rule's
// status says only that the receiver is unreachable.
func TestSecurityReceiverOnLoopbackRefused(t *testing.T) {
	u, conns := countingServer(t, "127.0.0.1:0", http.StatusNoContent)
	byName := strings.Replace(u, "127.0.0.1", "localhost", 1)
	got := leadRules(t, Options{}, map[string]string{"by-address": u + "/hook", "by-name": byName + "/hook"}, 2)
	for name, d := range got {
		if d.Sent != 0 || d.LastError != Unreachable {
			t.Errorf("rule %s: got %+v; want nothing sent, lastError %q", name, d, Unreachable)
		}
	}
	if n := conns.Load(); n != 0 {
		t.Fatalf("the loopback receiver accepted %d connections; want none", n)
	}
}

// TestSecurityDeliveryErrorsAreCoarse: a rule's status cannot tell a
// closed port from one that accepts and never answers, nor from an
// address the receivers' networks refuse: all three read "receiver
// unreachable", naming no address or cause. A receiver that answers is
// told apart by its HTTP status, and one that takes the post is sent
// to.
func TestSecurityDeliveryErrorsAreCoarse(t *testing.T) {
	allowed, err := hostpolicy.ParseNetworks([]string{"127.0.0.1/32"})
	if err != nil {
		t.Fatal(err)
	}
	closed := ports.Addr(t) // reserved: nothing listens on it
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	var held []net.Conn
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held = append(held, c) // accepts, never answers
		}
	}()
	outside, outsideConns := countingServer(t, "127.0.0.2:0", http.StatusNoContent)
	failing, _ := countingServer(t, "127.0.0.1:0", http.StatusServiceUnavailable)
	taking, _ := countingServer(t, "127.0.0.1:0", http.StatusNoContent)
	got := leadRules(t, Options{Receivers: allowed, Timeout: 300 * time.Millisecond}, map[string]string{
		"closed":  "http://" + closed + "/hook",
		"silent":  "http://" + silent.Addr().String() + "/hook",
		"outside": outside + "/hook",
		"failing": failing + "/hook",
		"taking":  taking + "/hook",
	}, 2)
	for _, name := range []string{"closed", "silent", "outside"} {
		if d := got[name]; d.LastError != Unreachable || d.Sent != 0 {
			t.Errorf("rule %s: got %+v; want lastError %q", name, d, Unreachable)
		}
	}
	if d := got["failing"]; d.LastError != "delivery failed: receiver answered 503 Service Unavailable" {
		t.Errorf("rule failing: got lastError %q; want the receiver's status", d.LastError)
	}
	if d := got["taking"]; d.Sent != 1 || d.LastError != "" {
		t.Errorf("rule taking: got %+v; want 1 sent", d)
	}
	if n := outsideConns.Load(); n != 0 {
		t.Errorf("the receiver outside the allowed networks accepted %d connections; want none", n)
	}
}
