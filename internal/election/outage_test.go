package election_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/etcdserver"
	"github.com/stratahq/strata/testkit/etcdtest"
)

// tierClient connects to endpoints as a tier does (etcdserver.Open):
// what is measured here is the client's reconnection as much as the
// election's.
func tierClient(t *testing.T, endpoints []string) *clientv3.Client {
	t.Helper()
	cli, closeFn, err := etcdserver.Open(context.Background(), "", config.Etcd{Endpoints: endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("open etcd: %v", err)
	}
	t.Cleanup(closeFn)
	return cli
}

// TestLeaderBackAfterEtcdOutage stops the only etcd for longer than a
// client's reconnection backoff would wait with gRPC's defaults (1 s,
// growing 1.6 times per attempt up to 2 minutes: after 12 s down, the
// next attempt would come 1 to 7 s after etcd is back), then starts it
// again: a candidate leads within one lease TTL of etcd answering.
func TestLeaderBackAfterEtcdOutage(t *testing.T) {
	t.Parallel()
	const (
		ttl    = 2 * time.Second
		outage = 30 * time.Second
		// The client reconnects within a second of etcd answering
		// (etcdserver.Open's backoff, at most 1 s + 20 %), and the
		// candidate's next attempt is then under way; revoking its
		// earlier lease, granting a new one and campaigning take a few
		// round trips on loopback. The margin is for a machine whose
		// cores other tests load, not for the mechanism.
		margin = time.Second
	)
	proc := etcdtest.StartProcess(t)
	const prefix = "/test/outage/election/"
	var count leaders
	a := start(t, tierClient(t, proc.Endpoints()), prefix, "node-a", ttl, &count)
	old := a.waitTerm(t, 5*time.Second)
	b := start(t, tierClient(t, proc.Endpoints()), prefix, "node-b", ttl, &count)
	cli := etcdtest.Client(t, proc.Endpoints())
	eventually(t, 5*time.Second, func() bool { return keyCount(t, cli, prefix) == 2 },
		"election keys: got %d; want 2", keyCount(t, cli, prefix))

	proc.Kill()
	waitDone(t, "leaderCtx after etcd was killed", old.ctx, ttl+time.Second)
	// A deliberate outage, not a wait for a condition.
	time.Sleep(outage)
	if err := proc.Restart(); err != nil {
		t.Fatalf("restart etcd: %v", err)
	}
	answering := time.Now() // Restart returns once etcd answers a read
	var next *term
	select {
	case next = <-a.terms:
	case next = <-b.terms:
	case <-time.After(30 * time.Second):
		t.Fatalf("no leader within 30s of etcd answering")
	}
	took := time.Since(answering)
	t.Logf("%s leads %s after etcd answered again (TTL %s)", next.l.ID(), took, ttl)
	if took > ttl+margin {
		t.Errorf("a leader %s after etcd answered again; want within the %s lease TTL (+%s)", took, ttl, margin)
	}
	if next.l.GuardRev() <= old.l.GuardRev() {
		t.Errorf("new term rev %d; want > old term rev %d", next.l.GuardRev(), old.l.GuardRev())
	}
	count.check(t)
}
