package alerts

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/backoff"
	"github.com/stratahq/strata/internal/etcdserver/etcdtest"
	"github.com/stratahq/strata/internal/events"
	"github.com/stratahq/strata/internal/store"
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
	opts := Options{Collections: cols, Source: src, Poll: 20 * time.Millisecond, Backoff: backoff.Backoff{Min: 10 * time.Millisecond, Max: 50 * time.Millisecond}}

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
