package election_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stratahq/strata/internal/election"
	"github.com/stratahq/strata/testkit/etcdtest"
)

// The store package's guard, restated: Leadership must satisfy it.
var _ interface {
	GuardKey() string
	GuardRev() int64
} = (*election.Leadership)(nil)

// term is one call of a candidate's lead func.
type term struct {
	l     *election.Leadership
	ctx   context.Context // leaderCtx
	ended chan struct{}   // closed when lead returned
}

// candidate is an Elector whose Run goroutine the test controls.
type candidate struct {
	id     string
	e      *election.Elector
	terms  chan *term
	cancel context.CancelFunc
	done   chan error // receives Run's result
}

// leaders counts lead funcs running at the same time across candidates.
//
// After a voluntary handover (shutdown, lead returning) the successor can
// only win once the old lead func has returned, so at most one ever runs.
// After a forced deposition (lease revoked, key deleted) no such bound
// exists: the old leader hears of it from etcd at about the moment the
// successor wins, and either may be first. There the tests bound how soon
// the old leaderCtx is cancelled, and fencing keeps its writes out.
type leaders struct{ active, max atomic.Int32 }

func (c *leaders) enter() {
	n := c.active.Add(1)
	for m := c.max.Load(); n > m && !c.max.CompareAndSwap(m, n); m = c.max.Load() {
	}
}

func (c *leaders) leave() { c.active.Add(-1) }

func (c *leaders) check(t *testing.T) {
	t.Helper()
	if got := c.max.Load(); got > 1 {
		t.Errorf("lead funcs running at the same time: got %d; want at most 1", got)
	}
}

func newElector(t *testing.T, cli *clientv3.Client, prefix, id string, ttl time.Duration) *election.Elector {
	t.Helper()
	return newElectorCfg(t, election.Config{Client: cli, Prefix: prefix, ID: id, TTL: ttl})
}

// newElectorCfg is newElector with a whole Config; it adds the logger.
func newElectorCfg(t *testing.T, cfg election.Config) *election.Elector {
	t.Helper()
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})).With("test_candidate", cfg.ID)
	e, err := election.New(cfg)
	if err != nil {
		t.Fatalf("New(%s): %v", cfg.ID, err)
	}
	return e
}

// start runs a candidate until the test ends. Its lead func registers with
// count and holds leadership until leaderCtx is done, or returns at once if
// quit is set.
func start(t *testing.T, cli *clientv3.Client, prefix, id string, ttl time.Duration, count *leaders) *candidate {
	t.Helper()
	return run(t, newElector(t, cli, prefix, id, ttl), id, count)
}

// run is start with an Elector built by the test.
func run(t *testing.T, e *election.Elector, id string, count *leaders) *candidate {
	t.Helper()
	c := &candidate{
		id:    id,
		e:     e,
		terms: make(chan *term, 64),
		done:  make(chan error, 1),
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() {
		c.done <- c.e.Run(ctx, func(leaderCtx context.Context, l *election.Leadership) {
			count.enter()
			tm := &term{l: l, ctx: leaderCtx, ended: make(chan struct{})}
			defer close(tm.ended)
			defer count.leave()
			c.terms <- tm
			<-leaderCtx.Done()
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			t.Errorf("%s: Run did not return within 10s of cancel", id)
		}
	})
	return c
}

// stop cancels the candidate's Run and waits for its result.
func (c *candidate) stop(t *testing.T) error {
	t.Helper()
	c.cancel()
	select {
	case err := <-c.done:
		c.done <- err // for the cleanup
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: Run did not return within 10s of cancel", c.id)
		return nil
	}
}

func (c *candidate) waitTerm(t *testing.T, within time.Duration) *term {
	t.Helper()
	select {
	case tm := <-c.terms:
		return tm
	case <-time.After(within):
		t.Fatalf("%s: not leading within %s", c.id, within)
		return nil
	}
}

// waitDone waits for ctx to be cancelled and returns how long it took.
func waitDone(t *testing.T, what string, ctx context.Context, within time.Duration) time.Duration {
	t.Helper()
	begin := time.Now()
	select {
	case <-ctx.Done():
		return time.Since(begin)
	case <-time.After(within):
		t.Fatalf("%s: not cancelled within %s", what, within)
		return 0
	}
}

// eventually polls cond every 10ms until it holds or within elapses.
func eventually(t *testing.T, within time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: "+format, append([]any{within}, args...)...)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// keyCount returns how many election keys exist under prefix.
func keyCount(t *testing.T, cli *clientv3.Client, prefix string) int64 {
	t.Helper()
	resp, err := cli.Get(ctxTimeout(t, 5*time.Second), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatalf("count election keys: %v", err)
	}
	return resp.Count
}

// fencedPut writes key under the guard l, as the store does.
func fencedPut(t *testing.T, cli *clientv3.Client, l *election.Leadership, key, val string) bool {
	t.Helper()
	resp, err := cli.Txn(ctxTimeout(t, 5*time.Second)).If(l.Cmp()).Then(clientv3.OpPut(key, val)).Commit()
	if err != nil {
		t.Fatalf("fenced txn: %v", err)
	}
	return resp.Succeeded
}

func leaseOf(t *testing.T, cli *clientv3.Client, key string) clientv3.LeaseID {
	t.Helper()
	resp, err := cli.Get(ctxTimeout(t, 5*time.Second), key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	if len(resp.Kvs) == 0 {
		t.Fatalf("election key %s is missing", key)
	}
	return clientv3.LeaseID(resp.Kvs[0].Lease)
}

func TestNewValidatesConfig(t *testing.T) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:1"}, DialTimeout: time.Second})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })

	tests := []struct {
		name    string
		cfg     election.Config
		wantErr string
	}{
		{"valid", election.Config{Client: cli, Prefix: "/strata/global/election/", ID: "a"}, ""},
		{"valid without trailing slash", election.Config{Client: cli, Prefix: "/strata/global/election", ID: "a", TTL: 1500 * time.Millisecond}, ""},
		{"no client", election.Config{Prefix: "/e/", ID: "a"}, "client is required"},
		{"no id", election.Config{Client: cli, Prefix: "/e/"}, "id is required"},
		{"relative prefix", election.Config{Client: cli, Prefix: "e/", ID: "a"}, "absolute key prefix"},
		{"root prefix", election.Config{Client: cli, Prefix: "/", ID: "a"}, "absolute key prefix"},
		{"empty prefix", election.Config{Client: cli, ID: "a"}, "absolute key prefix"},
		{"negative ttl", election.Config{Client: cli, Prefix: "/e/", ID: "a", TTL: -time.Second}, "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := election.New(tt.cfg)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("New: got error %v; want none", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("New: got error %v; want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestLeaseTTLRoundsUpToSeconds(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, etcdtest.Embedded(t))
	tests := []struct {
		ttl  time.Duration
		want int64
	}{
		{0, 5},
		{time.Millisecond, 1},
		{1500 * time.Millisecond, 2},
		{2 * time.Second, 2},
	}
	for i, tt := range tests {
		t.Run(tt.ttl.String(), func(t *testing.T) {
			var count leaders
			c := start(t, cli, fmt.Sprintf("/test/ttl/%d/", i), "a", tt.ttl, &count)
			tm := c.waitTerm(t, 5*time.Second)
			lease := leaseOf(t, cli, tm.l.GuardKey())
			resp, err := cli.TimeToLive(ctxTimeout(t, 5*time.Second), lease)
			if err != nil {
				t.Fatalf("lease time to live: %v", err)
			}
			if resp.GrantedTTL != tt.want {
				t.Errorf("TTL %s: got lease TTL %ds; want %ds", tt.ttl, resp.GrantedTTL, tt.want)
			}
		})
	}
}

func TestSingleCandidateLeadsUntilCancelled(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, etcdtest.Embedded(t))
	const prefix = "/test/single/election/"
	var count leaders
	before := time.Now()
	c := start(t, cli, prefix, "node-a", 2*time.Second, &count)

	tm := c.waitTerm(t, 5*time.Second)
	l := tm.l
	if l.ID() != "node-a" {
		t.Errorf("Leadership.ID() = %q; want %q", l.ID(), "node-a")
	}
	if !strings.HasPrefix(l.GuardKey(), prefix) {
		t.Errorf("GuardKey() = %q; want a key under %q", l.GuardKey(), prefix)
	}
	if l.GuardRev() <= 0 {
		t.Errorf("GuardRev() = %d; want > 0", l.GuardRev())
	}
	if l.Since().Before(before) || l.Since().After(time.Now()) {
		t.Errorf("Since() = %s; want between %s and now", l.Since(), before)
	}
	if !c.e.IsLeader() {
		t.Errorf("IsLeader() = false while leading; want true")
	}
	info, err := c.e.Leader(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatalf("Leader(): %v", err)
	}
	want := election.LeaderInfo{ID: "node-a", Since: l.Since(), Key: l.GuardKey(), Rev: l.GuardRev()}
	if info.ID != want.ID || info.Key != want.Key || info.Rev != want.Rev || !info.Since.Equal(want.Since) {
		t.Errorf("Leader() = %+v; want %+v", info, want)
	}
	if err := c.e.Run(context.Background(), func(context.Context, *election.Leadership) {}); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("second concurrent Run: got %v; want an \"already running\" error", err)
	}

	c.cancel()
	waitDone(t, "leaderCtx after Run's ctx was cancelled", tm.ctx, 2*time.Second)
	if err := c.stop(t); !errors.Is(err, context.Canceled) {
		t.Errorf("Run() = %v; want %v", err, context.Canceled)
	}
	select {
	case <-tm.ended:
	default:
		t.Errorf("Run returned before lead returned")
	}
	if c.e.IsLeader() {
		t.Errorf("IsLeader() = true after Run returned; want false")
	}
	if _, err := c.e.Leader(ctxTimeout(t, 5*time.Second)); !errors.Is(err, election.ErrNoLeader) {
		t.Errorf("Leader() after shutdown: got error %v; want %v", err, election.ErrNoLeader)
	}
	count.check(t)
}

// TestHandover deposes the leader of two candidates in each way there is and
// checks that the other takes over, in time, and that the deposed leader's
// guard no longer fences writes while the new leader's does.
func TestHandover(t *testing.T) {
	t.Parallel()
	const ttl = 3 * time.Second
	cli := etcdtest.Client(t, etcdtest.Embedded(t))
	tests := []struct {
		name   string
		depose func(t *testing.T, a *candidate, l *election.Leadership)
		// within bounds the time from deposing to the new leader's start.
		within time.Duration
		// lostCause: the deposition is forced: the old leaderCtx's cause
		// wraps ErrNotLeader, and the old and new lead funcs may overlap
		// briefly (see leaders); a voluntary one allows no overlap.
		lostCause bool
	}{
		{
			name: "session lease revoked",
			depose: func(t *testing.T, _ *candidate, l *election.Leadership) {
				if _, err := cli.Revoke(ctxTimeout(t, 5*time.Second), leaseOf(t, cli, l.GuardKey())); err != nil {
					t.Fatalf("revoke leader's lease: %v", err)
				}
			},
			within:    ttl + time.Second,
			lostCause: true,
		},
		{
			name: "election key deleted",
			depose: func(t *testing.T, _ *candidate, l *election.Leadership) {
				if _, err := cli.Delete(ctxTimeout(t, 5*time.Second), l.GuardKey()); err != nil {
					t.Fatalf("delete leader's key: %v", err)
				}
			},
			within:    ttl + time.Second,
			lostCause: true,
		},
		{
			// Resigning must hand over far sooner than lease expiry would.
			name: "leader shuts down",
			depose: func(t *testing.T, a *candidate, _ *election.Leadership) {
				if err := a.stop(t); !errors.Is(err, context.Canceled) {
					t.Errorf("Run() = %v; want %v", err, context.Canceled)
				}
			},
			within: ttl / 3,
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix := fmt.Sprintf("/test/handover/%d/election/", i)
			dataKey := fmt.Sprintf("/test/handover/%d/data", i)
			var count leaders
			a := start(t, cli, prefix, "node-a", ttl, &count)
			oldTerm := a.waitTerm(t, 5*time.Second)
			b := start(t, cli, prefix, "node-b", ttl, &count)
			eventually(t, 5*time.Second, func() bool { return keyCount(t, cli, prefix) == 2 },
				"election keys: got %d; want 2 (b queued)", keyCount(t, cli, prefix))
			if !fencedPut(t, cli, oldTerm.l, dataKey, "a") {
				t.Fatalf("leader a's fenced put: got Succeeded=false; want true")
			}

			deposed := time.Now()
			tt.depose(t, a, oldTerm.l)

			took := waitDone(t, "deposed leader's leaderCtx", oldTerm.ctx, time.Second)
			t.Logf("old leaderCtx cancelled %s after deposing", took)
			cause := context.Cause(oldTerm.ctx)
			if got := errors.Is(cause, election.ErrNotLeader); got != tt.lostCause {
				t.Errorf("errors.Is(cause %q, ErrNotLeader) = %t; want %t", cause, got, tt.lostCause)
			}
			newTerm := b.waitTerm(t, tt.within)
			t.Logf("b leads %s after deposing", time.Since(deposed))
			if newTerm.l.ID() != "node-b" {
				t.Errorf("new leader ID() = %q; want %q", newTerm.l.ID(), "node-b")
			}
			if !b.e.IsLeader() || a.e.IsLeader() {
				t.Errorf("IsLeader(): a=%t b=%t; want a=false b=true", a.e.IsLeader(), b.e.IsLeader())
			}
			info, err := b.e.Leader(ctxTimeout(t, 5*time.Second))
			if err != nil || info.ID != "node-b" || info.Rev != newTerm.l.GuardRev() {
				t.Errorf("Leader() = %+v, %v; want ID node-b, Rev %d", info, err, newTerm.l.GuardRev())
			}

			// Fencing: the deposed leader's guard fails, the new one holds.
			if fencedPut(t, cli, oldTerm.l, dataKey, "stale a") {
				t.Errorf("deposed leader's fenced put: got Succeeded=true; want false")
			}
			if !fencedPut(t, cli, newTerm.l, dataKey, "b") {
				t.Errorf("new leader's fenced put: got Succeeded=false; want true")
			}
			resp, err := cli.Get(ctxTimeout(t, 5*time.Second), dataKey)
			if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "b" {
				t.Errorf("data after fenced puts: got %v, %v; want value %q", resp.Kvs, err, "b")
			}

			// A deposed but running candidate queues again behind b.
			if tt.lostCause {
				eventually(t, 5*time.Second, func() bool { return keyCount(t, cli, prefix) == 2 },
					"election keys: got %d; want 2 (a queued again)", keyCount(t, cli, prefix))
				select {
				case tm := <-a.terms:
					t.Errorf("a leads again (rev %d) while b leads", tm.l.GuardRev())
				default:
				}
			}
			if !tt.lostCause {
				count.check(t)
			}
		})
	}
}

// TestLeadReturnsResigns: a lead func that returns while still leader hands
// the election to the next candidate, and its Run campaigns again.
func TestLeadReturnsResigns(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, etcdtest.Embedded(t))
	const prefix = "/test/return/election/"
	var count leaders

	q := newElector(t, cli, prefix, "node-q", 3*time.Second)
	calls := make(chan *election.Leadership, 16)
	release := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- q.Run(ctx, func(_ context.Context, l *election.Leadership) {
			count.enter()
			defer count.leave()
			calls <- l
			<-release
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("node-q: Run did not return within 10s of cancel")
		}
	})
	var first *election.Leadership
	select {
	case first = <-calls:
	case <-time.After(5 * time.Second):
		t.Fatalf("node-q: not leading within 5s")
	}
	b := start(t, cli, prefix, "node-b", 3*time.Second, &count)
	eventually(t, 5*time.Second, func() bool { return keyCount(t, cli, prefix) == 2 },
		"election keys: got %d; want 2 (b queued)", keyCount(t, cli, prefix))

	returned := time.Now()
	close(release) // q's lead returns while q still holds the election
	bTerm := b.waitTerm(t, time.Second)
	t.Logf("b leads %s after q's lead returned", time.Since(returned))
	if fencedPut(t, cli, first, "/test/return/data", "q") {
		t.Errorf("resigned leader's fenced put: got Succeeded=true; want false")
	}
	// q queues again behind b rather than stopping.
	eventually(t, 5*time.Second, func() bool { return keyCount(t, cli, prefix) == 2 },
		"election keys: got %d; want 2 (q queued again)", keyCount(t, cli, prefix))
	b.stop(t)
	waitDone(t, "b's leaderCtx", bTerm.ctx, time.Second)
	select {
	case l := <-calls:
		if l.GuardRev() <= first.GuardRev() {
			t.Errorf("q's second term rev %d; want > first term rev %d", l.GuardRev(), first.GuardRev())
		}
	case <-time.After(time.Second):
		t.Fatalf("node-q: not leading again within 1s of b's resignation")
	}
	count.check(t)
}

// TestEtcdProcessKilled runs against a real etcd server process: killing it
// ends leadership within about the TTL, restarting it elects a leader again.
func TestEtcdProcessKilled(t *testing.T) {
	t.Parallel()
	const ttl = time.Second
	proc := etcdtest.StartProcess(t)
	const prefix = "/test/process/election/"
	var count leaders
	a := start(t, etcdtest.Client(t, proc.Endpoints()), prefix, "node-a", ttl, &count)
	old := a.waitTerm(t, 5*time.Second)
	b := start(t, etcdtest.Client(t, proc.Endpoints()), prefix, "node-b", ttl, &count)
	cli := etcdtest.Client(t, proc.Endpoints())
	eventually(t, 5*time.Second, func() bool { return keyCount(t, cli, prefix) == 2 },
		"election keys: got %d; want 2", keyCount(t, cli, prefix))

	killed := time.Now()
	proc.Kill()
	// The lease may have just been renewed when etcd died; the leader must
	// step down within one TTL of the last answer, plus scheduling slack.
	took := waitDone(t, "leaderCtx after etcd was killed", old.ctx, ttl+time.Second)
	t.Logf("leaderCtx cancelled %s after kill (TTL %s)", took, ttl)
	if cause := context.Cause(old.ctx); !errors.Is(cause, election.ErrNotLeader) {
		t.Errorf("leaderCtx cause = %v; want one wrapping %v", cause, election.ErrNotLeader)
	}
	if a.e.IsLeader() || b.e.IsLeader() {
		t.Errorf("IsLeader() with etcd down: a=%t b=%t; want both false", a.e.IsLeader(), b.e.IsLeader())
	}

	// A deliberate outage, not a wait for a condition: stay down for longer
	// than the TTL so that every candidate's session ends too.
	time.Sleep(max(0, 2*ttl-time.Since(killed)))
	restarted := time.Now() // Restart returns once etcd serves again
	if err := proc.Restart(); err != nil {
		t.Fatalf("restart etcd: %v", err)
	}
	var next *term
	select {
	case next = <-a.terms:
	case next = <-b.terms:
	case <-time.After(15 * time.Second):
		t.Fatalf("no leader within 15s of restarting etcd")
	}
	t.Logf("%s leads %s after restarting etcd began", next.l.ID(), time.Since(restarted))
	if next.l.GuardRev() <= old.l.GuardRev() {
		t.Errorf("new term rev %d; want > old term rev %d", next.l.GuardRev(), old.l.GuardRev())
	}
	if fencedPut(t, cli, old.l, "/test/process/data", "stale") {
		t.Errorf("pre-crash leader's fenced put: got Succeeded=true; want false")
	}
	if !fencedPut(t, cli, next.l, "/test/process/data", "fresh") {
		t.Errorf("new leader's fenced put: got Succeeded=false; want true")
	}
	count.check(t)
}

func TestObserve(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, etcdtest.Embedded(t))
	const prefix = "/test/observe/election/"
	observer := newElector(t, cli, prefix, "observer", time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := observer.Observe(ctx)

	next := func(what string) election.LeaderInfo {
		t.Helper()
		select {
		case info, ok := <-ch:
			if !ok {
				t.Fatalf("Observe channel closed while waiting for %s", what)
			}
			return info
		case <-time.After(5 * time.Second):
			t.Fatalf("no leader change within 5s while waiting for %s", what)
			return election.LeaderInfo{}
		}
	}
	// waitFor reads changes until one names id and returns the ids seen.
	waitFor := func(id string) (election.LeaderInfo, []string) {
		t.Helper()
		var seen []string
		for {
			info := next(id)
			seen = append(seen, info.ID)
			if info.ID == id {
				return info, seen
			}
		}
	}

	if got := next("the initial state"); got.ID != "" {
		t.Errorf("first observation: got leader %+v; want none", got)
	}
	var count leaders
	a := start(t, cli, prefix, "node-a", 2*time.Second, &count)
	aTerm := a.waitTerm(t, 5*time.Second)
	info, seen := waitFor("node-a")
	if info.Key != aTerm.l.GuardKey() || info.Rev != aTerm.l.GuardRev() {
		t.Errorf("observed %+v; want key %s rev %d", info, aTerm.l.GuardKey(), aTerm.l.GuardRev())
	}
	// The announcement of the term's start follows unless it was already seen.
	if !info.Since.Equal(aTerm.l.Since()) {
		info = next("node-a's announced start")
		if info.ID != "node-a" || !info.Since.Equal(aTerm.l.Since()) {
			t.Errorf("observed %+v; want node-a since %s", info, aTerm.l.Since())
		}
	}
	if want := []string{"node-a"}; strings.Join(seen, ",") != strings.Join(want, ",") {
		t.Errorf("observed leaders %q; want %q", seen, want)
	}

	b := start(t, cli, prefix, "node-b", 2*time.Second, &count)
	eventually(t, 5*time.Second, func() bool { return keyCount(t, cli, prefix) == 2 },
		"election keys: got %d; want 2", keyCount(t, cli, prefix))
	a.stop(t)
	bTerm := b.waitTerm(t, 5*time.Second)
	info, seen = waitFor("node-b")
	if info.Rev != bTerm.l.GuardRev() {
		t.Errorf("observed %+v; want rev %d", info, bTerm.l.GuardRev())
	}
	// b joining the queue is no leader change; a's resignation hands over
	// in one revision, so no leaderless state in between either.
	if want := []string{"node-b"}; strings.Join(seen, ",") != strings.Join(want, ",") {
		t.Errorf("observed leaders %q; want %q", seen, want)
	}

	b.stop(t)
	_, seen = waitFor("")
	for _, id := range seen[:len(seen)-1] {
		if id != "node-b" { // at most b's announcement precedes "no leader"
			t.Errorf("observed after the last leader stopped %q; want only node-b, then no leader", seen)
			break
		}
	}

	cancel()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				count.check(t)
				return
			}
		case <-deadline:
			t.Fatalf("Observe channel not closed within 5s of cancel")
		}
	}
}

// A candidate that wins after queueing does not refresh its lease to
// start leading: the lease keeps the expiry its session's keepalives gave
// it, so a leader that dies right after winning is replaced as soon as
// one that dies later in its term.
func TestWinningDoesNotRefreshLease(t *testing.T) {
	t.Parallel()
	// Keepalives every ttl/3 = 10 s: the queued candidate's lease is
	// refreshed when its session starts and not again during the test.
	const ttl = 30 * time.Second
	cli := etcdtest.Client(t, etcdtest.Embedded(t))
	prefix := "/test/" + t.Name() + "/"
	var count leaders
	a := start(t, cli, prefix, "node-a", ttl, &count)
	a.waitTerm(t, 10*time.Second)
	b := start(t, cli, prefix, "node-b", ttl, &count)
	eventually(t, 10*time.Second, func() bool { return keyCount(t, cli, prefix) == 2 }, "node-b did not queue")
	// Let the lease age, then hand over.
	const aged = 3 * time.Second
	time.Sleep(aged)
	if err := a.stop(t); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("node-a: %v", err)
	}
	tm := b.waitTerm(t, 10*time.Second)
	ttlResp, err := cli.TimeToLive(ctxTimeout(t, 5*time.Second), leaseOf(t, cli, tm.l.GuardKey()))
	if err != nil {
		t.Fatalf("time to live: %v", err)
	}
	// A refresh at the win would leave 29 s (the TTL, in whole seconds
	// rounded down); the session's own refresh, aged 3 s, leaves 26.
	if most := int64((ttl - aged + time.Second) / time.Second); ttlResp.TTL > most {
		t.Errorf("node-b's lease has %d s left after winning; want at most %d (refreshed at the win)", ttlResp.TTL, most)
	}
	if tm.ctx.Err() != nil {
		t.Errorf("node-b's term ended: %v", context.Cause(tm.ctx))
	}
	count.check(t)
}
