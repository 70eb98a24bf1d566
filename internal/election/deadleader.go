package election

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The fast path against a dead leader. A candidate waiting in the queue
// probes the leader's published address (Config.Addr) with TCP connects;
// when the leader's process is gone while its host is up, the host refuses
// them, and the standby revokes the dead leader's lease instead of waiting
// up to a TTL for etcd to expire it. Revoking deletes the election key, so
// every fenced write of a leader wrongly judged dead fails from then on,
// and that leader steps down when its keepalives or its key watch tell it
// (watchLease, watchKey). A host that is down or cut off gives timeouts,
// not refusals: no evidence, and its lease runs out as before.
//
// Guards against a false judgement:
//   - only a leader that published its address is probed (an older
//     candidate, or one with the fast path off, publishes none);
//   - only a term at least deadGrace old (by the start the leader
//     announced) is probed, since a new leader may not serve yet; the
//     evidence starts over when the term (key, create revision,
//     announcement) changes;
//   - a refusal counts only after this standby saw the address accept a
//     connection during the term, so an address that never served (a wrong
//     address, a firewall rejecting) is never taken for a dead process;
//   - deadRefusals refusals in a row are needed, deadProbeEvery apart; a
//     success, a timeout or any other error starts the count again;
//   - the revoke targets the lease of the key as it is right before the
//     revoke, only if its create revision is still the term's.
const (
	deadProbeEvery   = 200 * time.Millisecond
	deadProbeTimeout = 500 * time.Millisecond
	deadRefusals     = 3
	deadGrace        = time.Second
)

// probeTCP connects to addr and closes the connection at once.
func probeTCP(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: deadProbeTimeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return c.Close()
}

// refused reports whether a probe's error is the refusal a host answers
// for a port nothing listens on.
func refused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// ServingAddr returns a as an address other hosts can probe, or "" when it
// is not one: not TCP, or a wildcard (0.0.0.0, ::) that names no host.
func ServingAddr(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok || ta.IP == nil || ta.IP.IsUnspecified() {
		return ""
	}
	return ta.String()
}

// deadWatch is a standby's evidence about the current leader.
type deadWatch struct {
	leader  LeaderInfo
	served  bool // the address accepted a connection during this term
	refused int  // refusals in a row since
	revoked bool // this term's lease was revoked (or found gone)
}

// follow starts over when the leader's term changes; it reports whether
// it did.
func (w *deadWatch) follow(info LeaderInfo) bool {
	if w.leader.equal(info) && w.leader.addr == info.addr {
		return false
	}
	*w = deadWatch{leader: info}
	return true
}

// due reports whether the leader is to be probed now. own is this
// candidate's key: it never probes itself.
func (w *deadWatch) due(own string, now time.Time) bool {
	return w.leader.addr != "" && w.leader.Key != own && !w.revoked && now.Sub(w.leader.Since) >= deadGrace
}

// note records a probe's result; it reports whether the evidence suffices.
func (w *deadWatch) note(err error) bool {
	switch {
	case err == nil:
		w.served, w.refused = true, 0
	case refused(err) && w.served:
		w.refused++
	default:
		w.refused = 0
	}
	return w.refused >= deadRefusals
}

// startDeadWatch runs watchDead until the returned stop is called; stop
// waits for it. It does nothing when the fast path is off.
func (e *Elector) startDeadWatch(ctx context.Context, own string) (stop func()) {
	if e.noRevoke {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { e.watchDead(ctx, own) })
	return func() {
		cancel()
		wg.Wait()
	}
}

// watchDead follows the leader and probes it every deadProbeEvery, and
// at once on a new term (a standby that just started learns soonest that
// the address serves), until ctx is done, revoking the leader's lease on
// enough evidence that it is dead.
func (e *Elector) watchDead(ctx context.Context, own string) {
	obs := e.Observe(ctx)
	tick := time.NewTicker(deadProbeEvery)
	defer tick.Stop()
	var w deadWatch
	for {
		select {
		case info, ok := <-obs:
			if !ok {
				return
			}
			if w.follow(info) {
				e.deadRound(ctx, &w, own)
			}
		case <-tick.C:
			e.deadRound(ctx, &w, own)
		}
	}
}

// deadRound probes the leader if it is due, and revokes its lease when
// the evidence suffices.
func (e *Elector) deadRound(ctx context.Context, w *deadWatch, own string) {
	e.deadRounds.Add(1)
	if !w.due(own, time.Now()) {
		return
	}
	if w.note(e.probe(ctx, w.leader.addr)) {
		w.revoked = e.revokeDead(ctx, w.leader)
		w.refused = 0
	}
}

// revokeDead revokes the lease of leader's key if the key still stands
// as created for that term. It reports whether the lease is gone.
//
// Read, then revoke: etcd has no transaction that revokes a lease. If the
// key vanishes in between (its lease expired, or another standby revoked
// it), the revoke finds no lease; a new leader is never hit, since it
// holds a lease of its own and lease IDs are not reused.
func (e *Elector) revokeDead(ctx context.Context, leader LeaderInfo) bool {
	rctx, cancel := context.WithTimeout(ctx, e.ttl)
	defer cancel()
	resp, err := e.cli.Get(rctx, leader.Key)
	if err != nil {
		e.log.Debug("dead leader: re-read of its key failed", "err", err)
		return false
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != leader.Rev || resp.Kvs[0].Lease == 0 {
		return true // the term is over already
	}
	lease := clientv3.LeaseID(resp.Kvs[0].Lease)
	e.log.Warn("revoking the election lease of a leader whose process is gone",
		"leader", leader.ID, "addr", leader.addr, "key", leader.Key, "rev", leader.Rev, "lease", fmt.Sprintf("%x", lease),
		"evidence", fmt.Sprintf("its address accepted connections during its term, then refused %d in a row, %s apart", deadRefusals, deadProbeEvery))
	if _, err := e.cli.Revoke(rctx, lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		e.log.Warn("could not revoke the dead leader's lease; it expires within the TTL", "lease", fmt.Sprintf("%x", lease), "err", err)
		return false
	}
	return true
}
