// Package election elects one leader among Strata candidates through etcd
// and hands the winner a fencing token.
//
// Every candidate holds a session lease and puts a key named after it under
// the election prefix; the key with the lowest create revision leads (the
// same layout as go.etcd.io/etcd/client/v3/concurrency.Election, so etcdctl
// and that package see the same leader). A leader's key lives exactly as long
// as its lease, so its create revision is a fencing token: a write made
// conditional on CreateRevision(GuardKey) == GuardRev fails once the leader
// has been deposed, however late the deposed leader notices.
package election

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratahq/strata/internal/backoff"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"google.golang.org/grpc/metadata"
)

// DefaultTTL is the session lease TTL used when Config.TTL is zero.
const DefaultTTL = 5 * time.Second

// retryPolicy is the delay after a failed election attempt (etcd
// unreachable, session lost while queued, ...). Jittered so that
// candidates that failed together do not retry in lockstep. Each loop
// copies it.
var retryPolicy = backoff.Backoff{Min: 100 * time.Millisecond, Max: time.Second, Jitter: backoff.Half}

var (
	// ErrNotLeader is the cause of a leaderCtx cancelled because leadership
	// was lost; test it with errors.Is(context.Cause(leaderCtx), ErrNotLeader).
	ErrNotLeader = errors.New("election: not leader")
	// ErrNoLeader is returned by Leader when no candidate holds the election.
	ErrNoLeader = errors.New("election: no leader")
)

// errLeadReturned is the leaderCtx cause when lead returned on its own.
var errLeadReturned = errors.New("election: lead returned")

// Config configures an Elector.
type Config struct {
	Client *clientv3.Client
	// Prefix is the absolute etcd key prefix of the election, e.g.
	// "/strata/global/election/". A missing trailing slash is added.
	Prefix string
	// ID is this candidate's identity (e.g. hostname/addr); it is stored in
	// the election key's value.
	ID string
	// TTL is the session lease TTL, rounded up to whole seconds because etcd
	// leases have one-second granularity (minimum 1s; etcd may raise it to
	// its own minimum). Zero means DefaultTTL. A dead leader is replaced
	// within about one TTL, or sooner when its process is gone but its
	// host is up (Addr).
	TTL time.Duration
	// Addr is the address this candidate serves on (host:port; not a load
	// balancer's), published in its election key so that the standbys can
	// tell when its process is gone: a host that refuses connections to it
	// after it had accepted them has nothing serving there, and a standby
	// then revokes its lease instead of waiting for the lease to expire
	// (see deadleader.go). Empty: no fast path against this candidate.
	Addr string
	// KeepDeadLeaders turns that fast path off for this candidate: it
	// neither publishes Addr nor probes and revokes a dead leader.
	KeepDeadLeaders bool
	Logger          *slog.Logger
}

// Elector campaigns for one election on behalf of one candidate.
type Elector struct {
	cli     *clientv3.Client
	prefix  string // always ends in "/"
	id      string
	ttlSecs int64
	ttl     time.Duration
	log     *slog.Logger
	// addr is published in the election key ("" when the fast path is off).
	addr     string
	noRevoke bool
	// probe checks a leader's address (probeTCP; tests replace it).
	probe func(ctx context.Context, addr string) error
	// deadRounds counts watchDead's rounds, probed or not (for tests).
	deadRounds atomic.Int64

	running atomic.Bool
	// current is the Leadership being held, nil when not leading. Cleared
	// by compare-and-swap so that a late clear of one term cannot erase the
	// next term.
	current atomic.Pointer[Leadership]
}

// New validates cfg and returns an Elector. It does not talk to etcd.
func New(cfg Config) (*Elector, error) {
	if cfg.Client == nil {
		return nil, errors.New("election: config: client is required")
	}
	if cfg.ID == "" {
		return nil, errors.New("election: config: id is required")
	}
	// A relative or root prefix is almost certainly a mistake: the election
	// treats every key under the prefix as a candidate.
	if !strings.HasPrefix(cfg.Prefix, "/") || strings.Trim(cfg.Prefix, "/") == "" {
		return nil, fmt.Errorf("election: config: prefix %q must be an absolute key prefix such as /strata/global/election/", cfg.Prefix)
	}
	ttl := cfg.TTL
	switch {
	case ttl == 0:
		ttl = DefaultTTL
	case ttl < 0:
		return nil, fmt.Errorf("election: config: ttl %s is negative", cfg.TTL)
	}
	secs := int64((ttl + time.Second - 1) / time.Second)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	prefix := strings.TrimRight(cfg.Prefix, "/") + "/"
	addr := cfg.Addr
	if cfg.KeepDeadLeaders {
		addr = ""
	}
	return &Elector{
		cli:      cfg.Client,
		prefix:   prefix,
		id:       cfg.ID,
		ttlSecs:  secs,
		ttl:      time.Duration(secs) * time.Second,
		log:      log.With("election", prefix, "candidate", cfg.ID),
		addr:     addr,
		noRevoke: cfg.KeepDeadLeaders,
		probe:    probeTCP,
	}, nil
}

// Leadership is the proof of holding the election. Pass it as a store guard:
// it satisfies interface{ GuardKey() string; GuardRev() int64 }.
type Leadership struct {
	key   string
	rev   int64
	since time.Time
	id    string
}

// GuardKey returns the leader's election key (absolute).
func (l *Leadership) GuardKey() string { return l.key }

// GuardRev returns the create revision of the election key.
func (l *Leadership) GuardRev() int64 { return l.rev }

// Cmp is the fencing condition for callers building raw transactions: it
// holds only while this leadership's key still exists as created.
func (l *Leadership) Cmp() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(l.key), "=", l.rev)
}

// Since returns when this candidate became leader.
func (l *Leadership) Since() time.Time { return l.since }

// ID returns the leader's (this candidate's) identity.
func (l *Leadership) ID() string { return l.id }

// LeaderInfo describes the current leader. The zero value (ID == "") means
// that no leader is elected.
type LeaderInfo struct {
	ID    string    `json:"id"`
	Since time.Time `json:"since"`
	Key   string    `json:"key"` // the leader's election key
	Rev   int64     `json:"rev"` // its create revision; changes with every term
	addr  string    // the address it published (Config.Addr), if any
}

func (a LeaderInfo) equal(b LeaderInfo) bool {
	return a.ID == b.ID && a.Key == b.Key && a.Rev == b.Rev && a.Since.Equal(b.Since)
}

// campaignValue is the election key's value. etcd records no wall-clock
// time for a key, so the candidate stores when it started leading.
type campaignValue struct {
	ID    string    `json:"id"`
	Since time.Time `json:"since"`
	// Addr is where the candidate serves, for the standbys' probes
	// (Config.Addr); absent from older candidates' values.
	Addr string `json:"addr,omitempty"`
}

func encodeValue(id, addr string, since time.Time) string {
	b, err := json.Marshal(campaignValue{ID: id, Since: since.UTC(), Addr: addr})
	if err != nil {
		panic(fmt.Sprintf("election: marshal campaign value: %v", err)) // a string and a time cannot fail
	}
	return string(b)
}

func decodeLeader(kv *mvccpb.KeyValue) LeaderInfo {
	info := LeaderInfo{Key: string(kv.Key), Rev: kv.CreateRevision}
	var v campaignValue
	if err := json.Unmarshal(kv.Value, &v); err != nil || v.ID == "" {
		// A candidate that is not an Elector (etcdctl elect, an older
		// Strata) stores a bare identity; report it rather than fail.
		info.ID = string(kv.Value)
		return info
	}
	info.ID, info.Since, info.addr = v.ID, v.Since, v.Addr
	return info
}

// IsLeader reports whether this candidate holds the election right now. It
// turns false as soon as leadership loss is detected, even if lead has not
// returned yet.
func (e *Elector) IsLeader() bool { return e.current.Load() != nil }

// Leader returns the current leader, or ErrNoLeader.
func (e *Elector) Leader(ctx context.Context) (LeaderInfo, error) {
	resp, err := e.cli.Get(ctx, e.prefix, clientv3.WithFirstCreate()...)
	if err != nil {
		return LeaderInfo{}, fmt.Errorf("election: get leader: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return LeaderInfo{}, ErrNoLeader
	}
	return decodeLeader(resp.Kvs[0]), nil
}

// Observe sends the current leader and then every change of it (a new
// leader, no leader as the zero LeaderInfo, or the same leader announcing
// its start time) until ctx is done; then it closes the channel. Values are
// sent in order, consecutive duplicates are dropped, and a slow reader only
// misses intermediate states, never the latest one. etcd errors are retried;
// while etcd is unreachable nothing is sent, so the last value may be stale
// (check IsLeader or Leader with a deadline where that matters).
func (e *Elector) Observe(ctx context.Context) <-chan LeaderInfo {
	ch := make(chan LeaderInfo)
	go e.observe(ctx, ch)
	return ch
}

func (e *Elector) observe(ctx context.Context, ch chan<- LeaderInfo) {
	defer close(ch)
	var (
		retry = retryPolicy
		last  LeaderInfo
		sent  bool
	)
	for {
		resp, err := e.cli.Get(ctx, e.prefix, clientv3.WithFirstCreate()...)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			d := retry.Next()
			e.log.Warn("observe leader: get failed; retrying", "err", err, "retry_in", d)
			if backoff.Sleep(ctx, d) != nil {
				return
			}
			continue
		}
		var info LeaderInfo
		if len(resp.Kvs) > 0 {
			info = decodeLeader(resp.Kvs[0])
		}
		if !sent || !info.equal(last) {
			select {
			case ch <- info:
			case <-ctx.Done():
				return
			}
			last, sent = info, true
		}
		// Re-read on any change under the prefix rather than interpreting
		// events: a key created or deleted anywhere may change who is first.
		// Watching from the read's revision + 1 loses nothing in between.
		if err := e.waitChange(ctx, resp.Header.Revision+1); err != nil {
			if ctx.Err() != nil {
				return
			}
			d := retry.Next()
			e.log.Warn("observe leader: watch failed; retrying", "err", err, "retry_in", d)
			if backoff.Sleep(ctx, d) != nil {
				return
			}
			continue
		}
		retry.Reset()
	}
}

// waitChange returns when a key under the prefix changes at or after rev.
func (e *Elector) waitChange(ctx context.Context, rev int64) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for wr := range e.cli.Watch(wctx, e.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev)) {
		if err := wr.Err(); err != nil {
			return err
		}
		if len(wr.Events) > 0 {
			return nil
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.New("watch closed")
}

// Run campaigns until ctx is done. Each time this candidate wins, lead is
// called with a leaderCtx that is cancelled as soon as leadership is lost
// (session lease expired or revoked, election key deleted or replaced, no
// lease keepalive from etcd for a TTL) or ctx is done; the cancel cause wraps
// ErrNotLeader when leadership was lost. Run waits for lead to return before
// campaigning again, so two lead calls of one Elector never overlap. If lead
// returns while still leader, Run resigns and campaigns again.
//
// On ctx cancellation Run resigns, so that another candidate takes over at
// once instead of after the TTL, and returns ctx.Err(). If etcd is
// unreachable then, resigning gives up after the TTL, when the lease would
// have expired anyway. Run returns early only if lead is nil, Run is already
// running, or the etcd client is closed.
func (e *Elector) Run(ctx context.Context, lead func(leaderCtx context.Context, l *Leadership)) error {
	if lead == nil {
		return errors.New("election: run: lead func is nil")
	}
	if !e.running.CompareAndSwap(false, true) {
		return errors.New("election: run: already running")
	}
	defer e.running.Store(false)

	var (
		retry = retryPolicy
		// stale is a lease of an earlier term that could not be revoked
		// (etcd unreachable). Its key may still stand in the queue, and after
		// an etcd restart even lead it until the lease expires, so it is
		// revoked before campaigning anew.
		stale clientv3.LeaseID
	)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := e.cli.Ctx().Err(); err != nil {
			return fmt.Errorf("election: run: etcd client closed: %w", err)
		}
		began := time.Now()
		held, err := e.term(ctx, lead, &stale)
		if err := ctx.Err(); err != nil {
			return err
		}
		// Only a term that lasted resets the delay: a lead func that keeps
		// returning at once must not turn Run into a hot loop of writes.
		if held >= e.ttl {
			retry.Reset()
		}
		d := retry.Next()
		// An attempt that failed after waiting longer than the delay (a
		// call bounded by the TTL while etcd was unreachable) has waited
		// already: the next starts at once, so that one is under way
		// when etcd answers again and no delay adds to the reconnection.
		if err != nil && time.Since(began) >= d {
			d = 0
		}
		if err != nil {
			e.log.Warn("election attempt failed; retrying", "err", err, "retry_in", d)
		}
		if backoff.Sleep(ctx, d) != nil {
			return ctx.Err()
		}
	}
}

// term runs one session: grant a lease, campaign, lead, resign. It returns
// how long leadership was held, and an error if it could not campaign.
func (e *Elector) term(ctx context.Context, lead func(context.Context, *Leadership), stale *clientv3.LeaseID) (time.Duration, error) {
	if *stale != 0 {
		if err := e.revoke(ctx, *stale); err != nil {
			return 0, fmt.Errorf("revoke lease %x of an earlier session: %w", *stale, err)
		}
		*stale = 0
	}

	// Grant the lease here rather than inside NewSession so that the call is
	// bounded: clientv3 waits for a connection indefinitely, which would
	// hide an unreachable etcd from the retry log.
	gctx, cancel := context.WithTimeout(ctx, e.ttl)
	g, err := e.cli.Grant(gctx, e.ttlSecs)
	cancel()
	if err != nil {
		return 0, fmt.Errorf("grant session lease: %w", err)
	}
	lease := g.ID
	if g.TTL != e.ttlSecs {
		e.log.Debug("etcd adjusted the session lease TTL", "want_s", e.ttlSecs, "got_s", g.TTL)
	}
	// Revoking the lease deletes the election key with it: that is how this
	// candidate resigns or leaves the queue, on every way out of the term.
	// Detached from ctx because on shutdown ctx is already done, and
	// resigning is exactly what shutdown needs.
	defer func() {
		if err := e.revoke(context.WithoutCancel(ctx), lease); err != nil {
			e.log.Warn("could not revoke session lease; it expires within the TTL", "lease", fmt.Sprintf("%x", lease), "err", err)
			*stale = lease
		}
	}()

	sessCtx, stopSess := context.WithCancel(ctx)
	defer stopSess()
	sess, err := concurrency.NewSession(e.cli,
		concurrency.WithTTL(int(e.ttlSecs)),
		concurrency.WithLease(lease),
		concurrency.WithContext(sessCtx))
	if err != nil {
		return 0, fmt.Errorf("start session: %w", err)
	}
	// Orphan stops the keepalives and waits for the session's goroutine;
	// the revoke above then resigns.
	defer sess.Orphan()

	// Everything until leading runs under the session's context, which ends
	// when the lease is lost: a candidate queued on a dead lease would never
	// be elected.
	sctx := sess.Ctx()
	clock, err := e.followLease(sctx, lease)
	if err != nil {
		return 0, e.sessionErr(ctx, sctx, fmt.Errorf("listen to session keepalives: %w", err))
	}
	// While queued, watch for a leader whose process is gone.
	stopDeadWatch := e.startDeadWatch(sctx, e.keyOf(lease))
	key, rev, err := e.campaign(sctx, lease, encodeValue(e.id, e.addr, time.Now()))
	stopDeadWatch()
	if err != nil {
		return 0, e.sessionErr(ctx, sctx, fmt.Errorf("campaign: %w", err))
	}
	expiry, err := e.leaseExpiry(sctx, lease, clock)
	if err != nil {
		return 0, e.sessionErr(ctx, sctx, err)
	}

	// Announce the start of the term: the value written when joining the
	// queue carries the time of joining, not of winning.
	since := time.Now()
	pr, err := e.cli.Txn(sctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).
		Then(clientv3.OpPut(key, encodeValue(e.id, e.addr, since), clientv3.WithLease(lease))).
		Commit()
	if err != nil {
		return 0, e.sessionErr(ctx, sctx, fmt.Errorf("announce leadership: %w", err))
	}
	if !pr.Succeeded {
		return 0, fmt.Errorf("election key %s vanished before leading: %w", key, ErrNotLeader)
	}

	l := &Leadership{key: key, rev: rev, since: since, id: e.id}
	e.hold(ctx, sess, l, clock, expiry, pr.Header.Revision+1, lead)
	return time.Since(since), nil
}

// leaseClock follows the keepalive answers of a session's lease, from the
// start of the session: the local view of when etcd expires it.
type leaseClock struct {
	mu     sync.Mutex
	expiry time.Time // last answer's arrival + the TTL it granted; zero before the first
	// changed has a value when an answer came since it was last read.
	changed chan struct{}
	// done is closed when the keepalives end (lease expired or revoked,
	// etcd unreachable for a TTL, or the session's end).
	done chan struct{}
}

// followLease listens to the session lease's keepalive answers until ctx
// is done. It is a second listener beside the session's own, which keeps
// sending them: it adds no request.
func (e *Elector) followLease(ctx context.Context, lease clientv3.LeaseID) (*leaseClock, error) {
	kch, err := e.cli.KeepAlive(ctx, lease)
	if err != nil {
		return nil, err
	}
	c := &leaseClock{changed: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for r := range kch {
			c.answered(time.Now(), time.Duration(r.TTL)*time.Second)
		}
	}()
	return c, nil
}

func (c *leaseClock) answered(at time.Time, ttl time.Duration) {
	c.mu.Lock()
	c.expiry = at.Add(ttl)
	c.mu.Unlock()
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

func (c *leaseClock) get() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.expiry
}

// startExpiry decides a new term's first local lease expiry from the
// clock's (last keepalive answer + TTL): that one, if at least half the
// TTL of it is left at now; otherwise (no answer yet, or etcd slow to
// answer) ok is false and the lease must be refreshed first.
func startExpiry(now, clock time.Time, ttl time.Duration) (expiry time.Time, ok bool) {
	if clock.IsZero() || clock.Sub(now) < ttl/2 {
		return time.Time{}, false
	}
	return clock, true
}

// leaseExpiry anchors the local view of the lease's expiry at the start
// of a term. The session's keepalives (every third of the TTL) normally
// answered recently: their last answer is the anchor, as for the rest of
// the term (watchLease), so winning does not refresh the lease. Were it
// refreshed, a leader that dies right after winning would hold the
// election for the whole TTL, up to a keepalive period longer than one
// that dies later in its term. Without a recent answer the lease is
// refreshed: etcd expires it no earlier than sent + TTL.
func (e *Elector) leaseExpiry(ctx context.Context, lease clientv3.LeaseID, clock *leaseClock) (time.Time, error) {
	if expiry, ok := startExpiry(time.Now(), clock.get(), e.ttl); ok {
		return expiry, nil
	}
	sent := time.Now()
	ka, err := e.cli.KeepAliveOnce(ctx, lease)
	if err != nil {
		return time.Time{}, fmt.Errorf("refresh session lease: %w", err)
	}
	return sent.Add(time.Duration(ka.TTL) * time.Second), nil
}

// sessionErr explains an error caused by the end of the session.
func (e *Elector) sessionErr(ctx, sctx context.Context, err error) error {
	if ctx.Err() == nil && sctx.Err() != nil {
		return fmt.Errorf("session lease lost (expired, revoked, or etcd unreachable for %s): %w", e.ttl, err)
	}
	return err
}

// hold calls lead and cancels its context when leadership is lost. It
// returns when lead has returned and the watchers have stopped.
func (e *Elector) hold(ctx context.Context, sess *concurrency.Session, l *Leadership, clock *leaseClock, expiry time.Time, fromRev int64, lead func(context.Context, *Leadership)) {
	leaderCtx, cancel := context.WithCancelCause(ctx)
	// lose ends the term. IsLeader turns false before leaderCtx is
	// cancelled, so no one sees a cancelled leaderCtx and IsLeader() true.
	lose := func(cause error) {
		e.current.CompareAndSwap(l, nil)
		if ctx.Err() != nil {
			// Shutdown also ends the session, and a watcher may see that
			// before ctx's cancellation reaches leaderCtx: report the
			// shutdown, not a loss.
			cause = context.Cause(ctx)
		}
		cancel(cause)
	}
	var wg sync.WaitGroup
	// Deferred so that a panicking lead still stops the watchers.
	defer func() {
		lose(errLeadReturned)
		wg.Wait()
	}()

	e.current.Store(l)
	wg.Go(func() {
		if err := e.watchLease(leaderCtx, sess, clock, expiry); err != nil {
			lose(err)
		}
	})
	wg.Go(func() {
		if err := e.watchKey(leaderCtx, l, fromRev); err != nil {
			lose(err)
		}
	})
	wg.Go(func() {
		<-leaderCtx.Done()
		// Cancelled through ctx (shutdown) rather than lose.
		e.current.CompareAndSwap(l, nil)
		cause := context.Cause(leaderCtx)
		switch {
		case errors.Is(cause, ErrNotLeader):
			e.log.Info("lost leadership", "reason", cause.Error(), "key", l.key, "rev", l.rev)
		case ctx.Err() != nil:
			e.log.Info("resigning leadership", "reason", "shutdown", "key", l.key, "rev", l.rev)
		default:
			e.log.Info("resigning leadership", "reason", cause.Error(), "key", l.key, "rev", l.rev)
		}
	})

	e.log.Info("became leader", "key", l.key, "rev", l.rev)
	lead(leaderCtx, l)
}

// watchLease returns a cause wrapping ErrNotLeader when the session lease is
// lost, or nil when ctx is done.
//
// Besides the session's end, it keeps its own deadline of last keepalive
// answer + TTL (from expiry on, moved later by each answer). The client
// library reaps silent keepalives only once per second, and etcd expires
// the lease on its own clock, so without this a leader cut off from etcd
// would keep acting up to a second after a successor could have been
// elected. (The answer's transit time remains; fencing covers that.)
func (e *Elector) watchLease(ctx context.Context, sess *concurrency.Session, clock *leaseClock, expiry time.Time) error {
	deadline := time.NewTimer(time.Until(expiry))
	defer deadline.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-sess.Done():
			return fmt.Errorf("%w: session ended (lease expired or revoked, or etcd unreachable)", ErrNotLeader)
		case <-deadline.C:
			return fmt.Errorf("%w: no keepalive answer from etcd within the %s lease TTL", ErrNotLeader, e.ttl)
		case <-clock.done:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("%w: session keepalive ended (lease expired or revoked, or etcd unreachable)", ErrNotLeader)
		case <-clock.changed:
			// Only ever later: an answer read before the term began may
			// be older than a refresh made at its start.
			if next := clock.get(); next.After(expiry) {
				expiry = next
				deadline.Reset(time.Until(expiry))
			}
		}
	}
}

// watchKey returns a cause wrapping ErrNotLeader when the election key is
// deleted or replaced, or nil when ctx is done.
func (e *Elector) watchKey(ctx context.Context, l *Leadership, fromRev int64) error {
	retry := retryPolicy
	for {
		lost, err := e.watchKeyOnce(ctx, l, fromRev)
		if lost != nil || ctx.Err() != nil {
			return lost
		}
		// The watch broke (compaction, etcd lost quorum, ...): re-read the
		// key, then watch on from there. If etcd stays unreachable,
		// watchLease ends the leadership.
		e.log.Debug("leader key watch broke; re-reading the key", "err", err)
		resp, err := e.cli.Get(ctx, l.key)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if backoff.Sleep(ctx, retry.Next()) != nil {
				return nil
			}
			continue
		}
		if len(resp.Kvs) == 0 {
			return fmt.Errorf("%w: election key %s deleted", ErrNotLeader, l.key)
		}
		if cr := resp.Kvs[0].CreateRevision; cr != l.rev {
			return fmt.Errorf("%w: election key %s replaced (create revision %d, ours %d)", ErrNotLeader, l.key, cr, l.rev)
		}
		fromRev = resp.Header.Revision + 1
		retry.Reset()
	}
}

// watchKeyOnce watches the election key from fromRev. It returns a loss
// cause, or the watch's error when the watch broke.
func (e *Elector) watchKeyOnce(ctx context.Context, l *Leadership, fromRev int64) (lost, err error) {
	// RequireLeader: a member cut off from its cluster's quorum would
	// otherwise keep the watch open and silent.
	// Its own watch stream: a watch from a future revision holds back
	// etcd's progress notifications for every watch sharing its stream.
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(
		metadata.AppendToOutgoingContext(ctx, "strata-watch", "election:"+l.key)))
	defer cancel()
	for wr := range e.cli.Watch(wctx, l.key, clientv3.WithRev(fromRev)) {
		if err := wr.Err(); err != nil {
			return nil, err
		}
		for _, ev := range wr.Events {
			switch {
			case ev.Type == mvccpb.DELETE:
				return fmt.Errorf("%w: election key %s deleted", ErrNotLeader, l.key), nil
			case ev.Kv.CreateRevision != l.rev:
				return fmt.Errorf("%w: election key %s replaced (create revision %d, ours %d)", ErrNotLeader, l.key, ev.Kv.CreateRevision, l.rev), nil
			}
		}
	}
	return nil, errors.New("watch closed")
}

// campaign puts this candidate's key and waits until it is the oldest under
// the prefix. It is concurrency.Election.Campaign, except that it gives up
// cleanly when ctx ends: Campaign then resigns with the client's own context,
// which blocks for as long as etcd is unreachable, so shutdown would hang.
func (e *Elector) campaign(ctx context.Context, lease clientv3.LeaseID, val string) (key string, rev int64, err error) {
	key = e.keyOf(lease)
	resp, err := e.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, val, clientv3.WithLease(lease))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return "", 0, fmt.Errorf("put election key: %w", err)
	}
	rev = resp.Header.Revision
	if !resp.Succeeded {
		// The key is named after our fresh lease, so it can only exist if
		// the client retried this very transaction.
		kvs := resp.Responses[0].GetResponseRange().GetKvs()
		if len(kvs) == 0 {
			return "", 0, fmt.Errorf("election key %s: put failed but the key is missing", key)
		}
		rev = kvs[0].CreateRevision
	}
	for {
		// Wait for the next older candidate only, not for the whole prefix:
		// each change then wakes one candidate, not all of them.
		opts := append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(rev-1))
		r, err := e.cli.Get(ctx, e.prefix, opts...)
		if err != nil {
			return "", 0, fmt.Errorf("list older candidates: %w", err)
		}
		if len(r.Kvs) == 0 {
			return key, rev, nil
		}
		if err := e.waitDelete(ctx, string(r.Kvs[0].Key), r.Header.Revision+1); err != nil {
			return "", 0, fmt.Errorf("wait for older candidate %s: %w", r.Kvs[0].Key, err)
		}
	}
}

// waitDelete returns nil when key is deleted at or after rev, or when the
// watch breaks (the caller re-reads); it returns an error only when ctx is
// done.
func (e *Elector) waitDelete(ctx context.Context, key string, rev int64) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for wr := range e.cli.Watch(wctx, key, clientv3.WithRev(rev), clientv3.WithFilterPut()) {
		if wr.Err() != nil {
			return nil
		}
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.DELETE {
				return nil
			}
		}
	}
	return ctx.Err()
}

// keyOf returns the election key of the candidate holding lease.
func (e *Elector) keyOf(lease clientv3.LeaseID) string { return fmt.Sprintf("%s%x", e.prefix, lease) }

// revoke revokes lease, bounded by the TTL: after that long the lease has
// expired anyway. A lease that is already gone counts as revoked.
func (e *Elector) revoke(ctx context.Context, lease clientv3.LeaseID) error {
	rctx, cancel := context.WithTimeout(ctx, e.ttl)
	defer cancel()
	_, err := e.cli.Revoke(rctx, lease)
	if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return err
	}
	return nil
}
