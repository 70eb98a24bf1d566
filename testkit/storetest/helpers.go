package storetest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/testkit/etcdtest"
)

// waitTimeout bounds every wait of the suite. It is generous because a
// client cut off from etcd reconnects with gRPC's backoff (about a second).
const waitTimeout = 20 * time.Second

// Logger returns a logger that writes to the test's output. Everything that
// logs through it must stop before the test ends.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), nil))
}

// Eventually polls cond until it returns nil and fails the test with cond's
// last error once timeout has passed. cond's error should say what it got
// and what it wanted.
func Eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing after %s: %v", timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Recorder is a store.Handler that keeps the view Reflect maintains and
// checks the handler contract: Replace first, then events in revision order
// that never go back.
type Recorder struct {
	mu       sync.Mutex
	state    map[string]string
	rev      int64
	replaces []int64 // revision of each Replace
	events   []store.Event
	problems []string
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder { return &Recorder{state: map[string]string{}} }

// Replace implements store.Handler.
func (r *Recorder) Replace(items []store.KV, rev int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rev < r.rev {
		r.problems = append(r.problems, fmt.Sprintf("Replace at %d after revision %d", rev, r.rev))
	}
	r.state = make(map[string]string, len(items))
	for _, kv := range items {
		r.state[kv.Key] = string(kv.Value)
	}
	r.rev = rev
	r.replaces = append(r.replaces, rev)
}

// Apply implements store.Handler.
func (r *Recorder) Apply(events []store.Event, rev int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.replaces) == 0 {
		r.problems = append(r.problems, fmt.Sprintf("Apply at %d before any Replace", rev))
	}
	if rev <= r.rev {
		r.problems = append(r.problems, fmt.Sprintf("Apply at %d did not advance from %d", rev, r.rev))
	}
	last := r.rev
	for _, ev := range events {
		switch mr := ev.KV.ModRevision; {
		case mr <= r.rev:
			r.problems = append(r.problems, fmt.Sprintf("event %s %s at %d repeats revision %d", ev.Type, ev.KV.Key, mr, r.rev))
		case mr < last:
			r.problems = append(r.problems, fmt.Sprintf("event %s %s at %d after %d", ev.Type, ev.KV.Key, mr, last))
		}
		last = ev.KV.ModRevision
		switch ev.Type {
		case store.EventPut:
			r.state[ev.KV.Key] = string(ev.KV.Value)
		case store.EventDelete:
			delete(r.state, ev.KV.Key)
		default:
			r.problems = append(r.problems, fmt.Sprintf("event of type %d", ev.Type))
		}
	}
	if len(events) > 0 && rev != last {
		r.problems = append(r.problems, fmt.Sprintf("Apply at %d with last event at %d", rev, last))
	}
	r.events = append(r.events, events...)
	r.rev = rev
}

// State returns a copy of the view: key to value.
func (r *Recorder) State() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.state)
}

// Rev returns the revision of the view.
func (r *Recorder) Rev() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rev
}

// Replaces returns the revisions of the Replace calls so far.
func (r *Recorder) Replaces() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.replaces)
}

// Events returns every event applied so far.
func (r *Recorder) Events() []store.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// Check fails the test for every contract violation seen.
func (r *Recorder) Check(t testing.TB) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.problems {
		t.Errorf("handler contract: %s", p)
	}
}

// WantState returns a condition for Eventually: the view equals want.
func (r *Recorder) WantState(want map[string]string) func() error {
	return func() error {
		if got := r.State(); !maps.Equal(got, want) {
			return fmt.Errorf("view = %s; want %s", formatMap(got), formatMap(want))
		}
		return nil
	}
}

func formatMap(m map[string]string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%s", k, m[k])
	}
	b.WriteByte('}')
	return b.String()
}

// Go runs fn in a goroutine with a context that stop cancels; stop then waits
// for fn and returns its error. The test's cleanup stops it too and fails
// unless fn returned context.Canceled.
func Go(t testing.TB, fn func(ctx context.Context) error) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	var (
		once sync.Once
		err  error
	)
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(waitTimeout):
				err = fmt.Errorf("still running %s after cancellation", waitTimeout)
			}
		})
		return err
	}
	t.Cleanup(func() {
		if err := stop(); !errors.Is(err, context.Canceled) {
			t.Errorf("background run returned %v; want context.Canceled", err)
		}
	})
	return stop
}

// testCtx returns a context bounded by the test and by a minute.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// throughProxy returns a second Store on the same prefix whose client
// reaches etcd through a proxy the test can cut.
func throughProxy(t testing.TB, s *store.Store) (*store.Store, *proxy) {
	t.Helper()
	u, err := url.Parse(s.Client().Endpoints()[0])
	if err != nil {
		t.Fatalf("parse endpoint: %v", err)
	}
	network, addr := "tcp", u.Host
	if u.Scheme == "unix" {
		network, addr = "unix", u.Path
	}
	p := startProxy(t, network, addr)
	cli := etcdtest.Client(t, []string{"http://" + p.addr()})
	return store.New(cli, s.Prefix(), store.WithLogger(Logger(t))), p
}

// cut cuts the proxy and checks that the store behind it no longer reaches
// etcd, so that the test really exercises a disconnect.
func cut(t testing.TB, px *proxy, behind *store.Store) {
	t.Helper()
	px.Cut()
	ctx, cancel := context.WithTimeout(testCtx(t), 300*time.Millisecond)
	defer cancel()
	if _, err := behind.Get(ctx, "cut-probe"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("read through the cut proxy: err = %v; want it to hang until the deadline", err)
	}
}

// currentRev returns etcd's current revision.
func currentRev(t testing.TB, s *store.Store) int64 {
	t.Helper()
	resp, err := s.Client().Get(testCtx(t), s.Prefix()+"\x00revision-probe")
	if err != nil {
		t.Fatalf("read current revision: %v", err)
	}
	return resp.Header.Revision
}

// compact compacts etcd at its current revision and returns it.
func compact(t testing.TB, s *store.Store) int64 {
	t.Helper()
	rev := currentRev(t, s)
	if _, err := s.Client().Compact(testCtx(t), rev, clientv3.WithCompactPhysical()); err != nil {
		t.Fatalf("compact at %d: %v", rev, err)
	}
	return rev
}

func mustPut(t testing.TB, s *store.Store, key, val string) int64 {
	t.Helper()
	rev, err := s.Put(testCtx(t), key, []byte(val))
	if err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	return rev
}

func mustGet(t testing.TB, s *store.Store, key string) store.KV {
	t.Helper()
	kv, err := s.Get(testCtx(t), key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return kv
}

func mustAbsent(t testing.TB, s *store.Store, key string) {
	t.Helper()
	if kv, err := s.Get(testCtx(t), key); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("get %s = %q, %v; want ErrNotFound", key, kv.Value, err)
	}
}

func mustCommit(t testing.TB, txn *store.Txn) int64 {
	t.Helper()
	rev, err := txn.Commit(testCtx(t))
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	return rev
}

// wantTxnErr checks that err is a *store.TxnError for key wrapping want.
func wantTxnErr(t testing.TB, err, want error, key string) {
	t.Helper()
	var te *store.TxnError
	switch {
	case !errors.Is(err, want):
		t.Errorf("err = %v; want %v", err, want)
	case !errors.As(err, &te):
		t.Errorf("err = %v (%T); want a *store.TxnError", err, err)
	case te.Key != key:
		t.Errorf("TxnError.Key = %q; want %q (err %v)", te.Key, key, err)
	}
}

// wantUnchanged fails the test if etcd's revision moved from before, which
// means something was written.
func wantUnchanged(t testing.TB, s *store.Store, before int64) {
	t.Helper()
	if after := currentRev(t, s); after != before {
		t.Errorf("revision = %d after a failed write; want %d (nothing applied)", after, before)
	}
}

func waitSynced[T any](t testing.TB, c *store.Cache[T]) {
	t.Helper()
	select {
	case <-c.Synced():
	case <-time.After(waitTimeout):
		t.Fatalf("cache not synced after %s", waitTimeout)
	}
}

// guard is a store.Guard on a key the test writes directly.
type guard struct {
	key string
	rev int64
}

func (g guard) GuardKey() string { return g.key }
func (g guard) GuardRev() int64  { return g.rev }

// guardKey returns an absolute key outside the store prefix, as an election
// key would be.
func guardKey(s *store.Store, name string) string {
	return strings.TrimSuffix(s.Prefix(), "/") + ".guards/" + name
}

// newGuard (re)creates the guard key and returns a guard on it.
func newGuard(t testing.TB, s *store.Store, key string) guard {
	t.Helper()
	ctx := testCtx(t)
	if _, err := s.Client().Delete(ctx, key); err != nil {
		t.Fatalf("delete guard key: %v", err)
	}
	resp, err := s.Client().Put(ctx, key, "leader")
	if err != nil {
		t.Fatalf("put guard key: %v", err)
	}
	return guard{key: key, rev: resp.Header.Revision}
}
