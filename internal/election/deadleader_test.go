package election_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stratahq/strata/internal/election"
	"github.com/stratahq/strata/testkit/etcdtest"
)

// longTTL is far beyond every test's deadline: a candidate that leads
// after a leader with this lease stopped its keepalives did so through the
// fast path, not the lease's expiry.
const longTTL = 60 * time.Second

// server is a TCP listener that accepts and closes connections, counting
// them: a replica's serving address as the standbys' probes see it.
type server struct {
	l        net.Listener
	accepted atomic.Int64
}

func serve(t *testing.T) *server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	s := &server{l: l}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { l.Close() })
	return s
}

func (s *server) addr() string { return s.l.Addr().String() }

// deadLeader writes what a leader whose process died leaves in etcd: its
// election key on a lease of longTTL that nothing keeps alive. value is
// the key's value, fmt-formatted with the address. It returns the key and
// the lease.
func deadLeader(t *testing.T, cli *clientv3.Client, prefix, value string) (string, clientv3.LeaseID) {
	t.Helper()
	ctx := ctxTimeout(t, 5*time.Second)
	g, err := cli.Grant(ctx, int64(longTTL/time.Second))
	if err != nil {
		t.Fatalf("grant: %v", err)
	}
	key := fmt.Sprintf("%s%x", prefix, g.ID)
	if _, err := cli.Put(ctx, key, value, clientv3.WithLease(g.ID)); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	t.Cleanup(func() { cli.Revoke(context.Background(), g.ID) })
	return key, g.ID
}

func deadValue(addr string) string {
	return fmt.Sprintf(`{"id":"dead","since":%q,"addr":%q}`, time.Now().UTC().Format(time.RFC3339Nano), addr)
}

// leaseAlive reports whether lease still exists in etcd.
func leaseAlive(t *testing.T, cli *clientv3.Client, lease clientv3.LeaseID) bool {
	t.Helper()
	resp, err := cli.TimeToLive(ctxTimeout(t, 5*time.Second), lease)
	if err != nil {
		t.Fatalf("lease time to live: %v", err)
	}
	return resp.TTL > 0
}

func standby(t *testing.T, cli *clientv3.Client, prefix string, count *leaders, probe func(context.Context, string) error) *candidate {
	t.Helper()
	e := newElectorCfg(t, election.Config{Client: cli, Prefix: prefix, ID: "standby", TTL: longTTL})
	if probe != nil {
		election.SetProbe(e, probe)
	}
	return run(t, e, "standby", count)
}

func TestDeadLeaderRevoked(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, etcdtest.Embedded(t))
	const prefix = "/test/dead/revoked/"
	srv := serve(t)
	key, lease := deadLeader(t, cli, prefix, deadValue(srv.addr()))
	var count leaders
	b := standby(t, cli, prefix, &count, nil)

	// The standby saw the address serve; then the process "dies": its
	// listener closes, and its lease, kept alive by nobody, stays.
	eventually(t, 20*time.Second, func() bool { return srv.accepted.Load() > 0 }, "the standby never probed the leader")
	srv.l.Close()

	tm := b.waitTerm(t, 20*time.Second)
	if tm.l.GuardKey() == key {
		t.Fatalf("standby leads with the dead leader's key %s", key)
	}
	if leaseAlive(t, cli, lease) {
		t.Errorf("dead leader's lease %x still exists; want it revoked", lease)
	}
	if n := keyCount(t, cli, prefix); n != 1 {
		t.Errorf("election keys: got %d; want 1 (the standby's)", n)
	}
}

func TestLiveLeaderNotRevoked(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, etcdtest.Embedded(t))
	const prefix = "/test/dead/live/"
	srv := serve(t)
	var count leaders
	a := run(t, newElectorCfg(t, election.Config{Client: cli, Prefix: prefix, ID: "leader", TTL: 3 * time.Second, Addr: srv.addr()}), "leader", &count)
	old := a.waitTerm(t, 10*time.Second)
	b := standby(t, cli, prefix, &count, nil)

	const probes = 15
	eventually(t, 30*time.Second, func() bool { return srv.accepted.Load() >= probes }, "the standby probed the leader %d times; want %d", srv.accepted.Load(), probes)
	if b.e.IsLeader() || old.ctx.Err() != nil {
		t.Errorf("after %d probes of a live leader: standby leads %t, leader's term ended %t; want false, false", probes, b.e.IsLeader(), old.ctx.Err() != nil)
	}
	if !fencedPut(t, cli, old.l, "/test/dead/live/data", "x") {
		t.Errorf("live leader's fenced put: got Succeeded=false; want true")
	}
	count.check(t)
}

var (
	errRefused = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	errTimeout = &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}
)

// script returns a probe that answers answers[i] for its i-th call and
// then repeats from again, and the count of its calls.
func script(again int, answers ...error) (func(context.Context, string) error, *atomic.Int64) {
	var n atomic.Int64
	return func(context.Context, string) error {
		i := int(n.Add(1) - 1)
		if i >= len(answers) {
			i = again + (i-again)%(len(answers)-again)
		}
		return answers[i]
	}, &n
}

// TestInsufficientEvidence: a leader is not revoked without refusals in a
// row after it served.
func TestInsufficientEvidence(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, etcdtest.Embedded(t))
	tests := []struct {
		name    string
		again   int
		answers []error
	}{
		// A host gone or cut off: connects time out.
		{"timeouts after serving", 1, []error{nil, errTimeout}},
		{"refusals broken by timeouts", 1, []error{nil, errRefused, errRefused, errTimeout}},
		{"refusals broken by successes", 1, []error{nil, errRefused, errRefused, nil}},
		// A wrong address, a firewall that rejects: it never served.
		{"refused but never served", 0, []error{errRefused}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			prefix := fmt.Sprintf("/test/dead/evidence/%d/", i)
			_, lease := deadLeader(t, cli, prefix, deadValue("192.0.2.1:9"))
			probe, probes := script(tt.again, tt.answers...)
			var count leaders
			b := standby(t, cli, prefix, &count, probe)
			const want = 12
			eventually(t, 30*time.Second, func() bool { return probes.Load() >= want }, "probes: got %d; want %d", probes.Load(), want)
			if b.e.IsLeader() || !leaseAlive(t, cli, lease) {
				t.Errorf("after %d probes: standby leads %t, leader's lease alive %t; want false, true", want, b.e.IsLeader(), leaseAlive(t, cli, lease))
			}
		})
	}
}

func TestLeaderWithoutAddrNotProbed(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, etcdtest.Embedded(t))
	const prefix = "/test/dead/noaddr/"
	value := fmt.Sprintf(`{"id":"old","since":%q}`, time.Now().UTC().Format(time.RFC3339Nano))
	_, lease := deadLeader(t, cli, prefix, value)
	probe, probes := script(0, errRefused)
	var count leaders
	b := standby(t, cli, prefix, &count, probe)
	const rounds = 12 // beyond the grace
	eventually(t, 30*time.Second, func() bool { return election.DeadRounds(b.e) >= rounds }, "dead-leader rounds: got %d; want %d", election.DeadRounds(b.e), rounds)
	if n := probes.Load(); n != 0 || b.e.IsLeader() || !leaseAlive(t, cli, lease) {
		t.Errorf("leader without address: probes %d, standby leads %t, lease alive %t; want 0, false, true", n, b.e.IsLeader(), leaseAlive(t, cli, lease))
	}
}

func TestKeepDeadLeadersOff(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, etcdtest.Embedded(t))
	const prefix = "/test/dead/off/"
	_, lease := deadLeader(t, cli, prefix, deadValue("192.0.2.1:9"))
	probe, probes := script(0, nil, errRefused)
	e := newElectorCfg(t, election.Config{Client: cli, Prefix: prefix, ID: "standby", TTL: longTTL, KeepDeadLeaders: true})
	election.SetProbe(e, probe)
	var count leaders
	b := run(t, e, "standby", &count)
	// A clock: a second standby, fast path on, whose probes time out.
	clockProbe, _ := script(0, errTimeout)
	c := standby(t, cli, prefix, &count, clockProbe)
	const rounds = 12 // beyond the grace
	eventually(t, 30*time.Second, func() bool { return election.DeadRounds(c.e) >= rounds }, "second standby's rounds: got %d; want %d", election.DeadRounds(c.e), rounds)
	if n := election.DeadRounds(b.e); n != 0 || probes.Load() != 0 {
		t.Errorf("fast path off: %d rounds, %d probes; want none", n, probes.Load())
	}
	if b.e.IsLeader() || !leaseAlive(t, cli, lease) {
		t.Errorf("fast path off: standby leads %t, lease alive %t; want false, true", b.e.IsLeader(), leaseAlive(t, cli, lease))
	}
}

// TestWronglyRevokedLeaderFenced: a live leader whose address refuses
// (here: its listener closed while it keeps its lease alive) is revoked;
// it must step down, and its fenced writes fail.
func TestWronglyRevokedLeaderFenced(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, etcdtest.Embedded(t))
	const prefix = "/test/dead/wrong/"
	srv := serve(t)
	var count leaders
	a := run(t, newElectorCfg(t, election.Config{Client: cli, Prefix: prefix, ID: "leader", TTL: 3 * time.Second, Addr: srv.addr()}), "leader", &count)
	old := a.waitTerm(t, 10*time.Second)
	oldLease := leaseOf(t, cli, old.l.GuardKey())
	b := standby(t, cli, prefix, &count, nil)
	eventually(t, 20*time.Second, func() bool { return srv.accepted.Load() > 0 }, "the standby never probed the leader")
	srv.l.Close()

	next := b.waitTerm(t, 20*time.Second)
	waitDone(t, "old leader's leaderCtx", old.ctx, 10*time.Second)
	if cause := context.Cause(old.ctx); !errors.Is(cause, election.ErrNotLeader) {
		t.Errorf("old leaderCtx cause = %v; want one wrapping %v", cause, election.ErrNotLeader)
	}
	if leaseAlive(t, cli, oldLease) {
		t.Errorf("old leader's lease %x still exists; want it revoked", oldLease)
	}
	if fencedPut(t, cli, old.l, "/test/dead/wrong/data", "stale") {
		t.Errorf("revoked leader's fenced put: got Succeeded=true; want false")
	}
	if !fencedPut(t, cli, next.l, "/test/dead/wrong/data", "fresh") {
		t.Errorf("new leader's fenced put: got Succeeded=false; want true")
	}
}
