package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/stratahq/strata/global/placement"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/backoff"
	"github.com/stratahq/strata/internal/transport"
	"github.com/stratahq/strata/proto/apiproto"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
)

// link is the master's connection to one region: a watch of the region's
// shares (its status of every resource) and a sender of placements and
// removals, batched. It remembers what the region acknowledged so that an
// unchanged resource costs nothing; the region dedups anyway, so
// forgetting (a reconnect) only costs a resend.
type link struct {
	c      *Controller
	region string
	epoch  int64
	log    interface {
		Info(string, ...any)
		Warn(string, ...any)
		Debug(string, ...any)
	}
	cancel context.CancelFunc
	kick   chan struct{}

	mu       sync.Mutex
	shares   map[string]*share
	synced   bool
	sent     map[string]string // key → fingerprint the region acknowledged
	pending  map[string]pendingPlacement
	removals map[string]string // key → uid to remove
	removed  map[string]bool   // removals the region acknowledged
	retryAt  map[string]time.Time
	// flying holds the keys of the calls in flight: a key is in one
	// call at a time, so that its placements and removal reach the
	// region in the order the master decided them.
	flying map[string]bool
	// policies is the fingerprint of the policy set the region
	// acknowledged ("" until then).
	policies string
}

type pendingPlacement struct {
	p  *api.Placement
	fp string
}

// share is one resource's status as a region reports it.
type share = placement.Share

func newLink(c *Controller, region string, epoch int64) *link {
	return &link{
		c: c, region: region, epoch: epoch,
		log:      c.log.With("region", region),
		kick:     make(chan struct{}, 1),
		shares:   map[string]*share{},
		sent:     map[string]string{},
		pending:  map[string]pendingPlacement{},
		removals: map[string]string{},
		removed:  map[string]bool{},
		retryAt:  map[string]time.Time{},
		flying:   map[string]bool{},
	}
}

func (l *link) run(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	l.mu.Lock()
	l.cancel = cancel
	l.mu.Unlock()
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		l.watch(ctx)
	}()
	l.send(ctx)
	wg.Wait()
}

func (l *link) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancel != nil {
		l.cancel()
	}
}

// wakeSender tells a sender loop that there is work, without waiting: a
// sender already woken takes it too.
func (l *link) wakeSender() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// queuePlacement asks for p to be in the region; nothing is sent when the region
// already acknowledged the same content.
func (l *link) queuePlacement(key string, p *api.Placement) {
	fp := fingerprint(p)
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.removals, key)
	delete(l.removed, key)
	if l.sent[key] == fp {
		delete(l.pending, key)
		return
	}
	if cur, ok := l.pending[key]; ok && cur.fp == fp {
		return
	}
	l.pending[key] = pendingPlacement{p: p, fp: fp}
	l.wakeSender()
}

// queueRemoval asks the region to destroy the resource.
func (l *link) queueRemoval(key, uid string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.pending, key)
	if l.removed[key] {
		return
	}
	if _, ok := l.removals[key]; ok {
		return
	}
	l.removals[key] = uid
	l.wakeSender()
}

func (l *link) share(key string) *share {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.shares[key]
}

// view is, in one look, what the region reports of key; whether that is
// live (the share stream is up, so the share is current rather than what
// the region said before it became unreachable); and whether the region
// is settled for key: it holds nothing of it and nothing is on its way,
// so the resource may be forgotten as far as this region goes.
func (l *link) view(key string) (sh *share, live, settled bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sh, live = l.shares[key], l.synced
	_, removing := l.removals[key]
	_, pending := l.pending[key]
	_, sent := l.sent[key]
	// A region we never told about key holds nothing of it; one we did
	// must be watched (synced) to be believed.
	settled = sh == nil && !removing && !pending && (!sent || l.synced)
	return sh, live, settled
}

func (l *link) shareKeys() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return keys(l.shares)
}

// linkBackoff paces reconnecting to a region and resending to it.
var linkBackoff = backoff.Backoff{Min: 200 * time.Millisecond, Max: 5 * time.Second}

// watch follows the region's shares, reconnecting with backoff. A
// stream that delivered its snapshot starts the backoff afresh
// (watchDelay): the delay is for a region that keeps failing, not a
// tally over the link's life, so that the stream lost with a region
// replica (a leader's failover) comes back after the first delay, not
// after one doubled by every earlier loss.
func (l *link) watch(ctx context.Context) {
	bo := linkBackoff
	for ctx.Err() == nil {
		synced, err := l.watchOnce(ctx)
		l.mu.Lock()
		l.synced = false
		l.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		l.log.Debug("share stream ended; reconnecting", "err", err)
		if backoff.Sleep(ctx, watchDelay(&bo, synced)) != nil {
			return
		}
	}
}

// watchDelay is the wait before the next share stream: the backoff's
// next delay, from its first when the stream that ended had synced.
func watchDelay(bo *backoff.Backoff, synced bool) time.Duration {
	if synced {
		bo.Reset()
	}
	return bo.Next()
}

// watchOnce reads one share stream until it ends; synced tells whether
// it delivered its snapshot.
func (l *link) watchOnce(ctx context.Context) (synced bool, err error) {
	cl, err := l.c.regionClient(ctx, l.region)
	if err != nil {
		return false, err
	}
	stream, err := cl.WatchShares(ctx, &regionv1.WatchSharesRequest{})
	if err != nil {
		return false, err
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return synced, nil
			}
			return synced, err
		}
		synced = synced || resp.GetSnapshot()
		changed := l.applyShares(resp)
		for _, k := range changed {
			l.c.mark(k)
		}
	}
}

func (l *link) applyShares(resp *regionv1.WatchSharesResponse) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var changed []string
	if resp.GetSnapshot() {
		// A new stream: the region may have lost or gained anything
		// while we were away, so forget what it acknowledged.
		for k := range l.shares {
			changed = append(changed, k)
		}
		l.shares = map[string]*share{}
		l.sent = map[string]string{}
		l.removed = map[string]bool{}
		l.policies = ""
		l.synced = true
		l.wakeSender()
	}
	for _, ev := range resp.GetEvents() {
		key := ev.GetTenant() + "/" + ev.GetName()
		changed = append(changed, key)
		if ev.GetRemoved() {
			delete(l.shares, key)
			continue
		}
		l.shares[key] = &share{
			UID:         ev.GetUid(),
			RegionShare: apiproto.RegionShareFromPB(ev.GetShare()),
			Backends:    apiproto.BackendStatusesFromPB(ev.GetBackends()),
		}
	}
	return changed
}

// send delivers pending placements and removals in batches, up to
// SendInFlight calls at once; the first sender also keeps the region's
// network policies in sync.
func (l *link) send(ctx context.Context) {
	var wg sync.WaitGroup
	for i := range l.c.o.SendInFlight {
		wg.Go(func() { l.sendLoop(ctx, i == 0) })
	}
	wg.Wait()
}

// sendLoop is one sender: it sends batches while there is anything to
// send, then waits for a wakeSender or the next tick.
func (l *link) sendLoop(ctx context.Context, policies bool) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	bo := linkBackoff
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.kick:
		case <-tick.C:
		}
		if policies {
			if err := l.syncPolicies(ctx); err != nil && ctx.Err() == nil {
				l.log.Warn("cannot send network policies to the region; will retry", "err", err)
			}
		}
		for ctx.Err() == nil {
			sentAny, err := l.sendBatch(ctx)
			if err != nil {
				l.log.Warn("cannot reach region; will retry", "err", err)
				if backoff.Sleep(ctx, bo.Next()) != nil {
					return
				}
				continue
			}
			bo.Reset()
			if !sentAny {
				break
			}
		}
	}
}

// claimBatch picks the next batch: placements, or else removals, that are due
// and whose key is in no call in flight; their keys are then in flight
// until releaseKeys. It wakes another sender, which may find more to send.
func (l *link) claimBatch() (batch []pendingPlacement, refs []*regionv1.PlacementRef, keysOut []string) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	due := func(k string) bool { return !l.flying[k] && !now.Before(l.retryAt[k]) }
	for k, p := range l.pending {
		if len(batch) >= l.c.o.SendBatch {
			break
		}
		if due(k) {
			batch = append(batch, p)
			keysOut = append(keysOut, k)
		}
	}
	for k, uid := range l.removals {
		if len(batch) > 0 || len(refs) >= l.c.o.SendBatch {
			break
		}
		if due(k) {
			tenant, name, _ := strings.Cut(k, "/")
			refs = append(refs, &regionv1.PlacementRef{Tenant: tenant, Name: name, Uid: uid})
			keysOut = append(keysOut, k)
		}
	}
	for _, k := range keysOut {
		l.flying[k] = true
	}
	if len(keysOut) > 0 {
		l.wakeSender()
	}
	return batch, refs, keysOut
}

// releaseKeys ends the call of keys: they may go in another, and a sender is
// woken for what waited for them.
func (l *link) releaseKeys(keys []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range keys {
		delete(l.flying, k)
	}
	if len(l.pending) > 0 || len(l.removals) > 0 {
		l.wakeSender()
	}
}

// sendBatch sends one batch of placements or removals; it reports whether
// there was anything to send.
func (l *link) sendBatch(ctx context.Context) (bool, error) {
	batch, refs, keysOut := l.claimBatch()
	if len(keysOut) == 0 {
		return false, nil
	}
	defer l.releaseKeys(keysOut)
	cl, err := l.c.regionClient(ctx, l.region)
	if err != nil {
		return true, err
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if len(batch) > 0 {
		req := &regionv1.ApplyPlacementsRequest{Placements: make([]*resourcev1.Placement, 0, len(batch))}
		for _, p := range batch {
			p.p.Epoch = l.epoch
			req.Placements = append(req.Placements, apiproto.PlacementToPB(p.p))
		}
		resp, err := cl.ApplyPlacements(cctx, req)
		if err != nil {
			return true, err
		}
		l.ackPlacements(batch, keysOut, resp.GetResults())
		return true, nil
	}
	resp, err := cl.RemovePlacements(cctx, &regionv1.RemovePlacementsRequest{Placements: refs, Epoch: l.epoch})
	if err != nil {
		return true, err
	}
	l.ackRemovals(refs, resp.GetResults())
	return true, nil
}

func (l *link) ackPlacements(batch []pendingPlacement, keysOut []string, results []*regionv1.PlacementResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	byKey := map[string]*regionv1.PlacementResult{}
	for _, r := range results {
		byKey[r.GetKey()] = r
	}
	for i, p := range batch {
		key := keysOut[i]
		r := byKey[key]
		if r == nil || r.GetError() != "" {
			msg := "no result"
			if r != nil {
				msg = r.GetError()
			}
			l.log.Warn("region refused a placement; will retry", "resource", key, "err", msg)
			l.retryAt[key] = time.Now().Add(2 * time.Second)
			continue
		}
		if r.GetApplied() {
			l.c.propagations.add(1)
			l.c.firstOnce.Do(func() { close(l.c.firstPropagate) })
			l.log.Debug("placement applied", "resource", key)
		}
		l.sent[key] = p.fp
		delete(l.retryAt, key)
		if cur, ok := l.pending[key]; ok && cur.fp == p.fp {
			delete(l.pending, key)
		}
	}
}

func (l *link) ackRemovals(refs []*regionv1.PlacementRef, results []*regionv1.PlacementResult) {
	l.forget(refs, results)
	// Marked outside the link's lock, as watchOnce does: the dirty set
	// is the controller's, and its passes take the link's lock.
	for _, ref := range refs {
		l.c.mark(ref.GetTenant() + "/" + ref.GetName())
	}
}

// forget drops the removals the region acknowledged, and has the others
// sent again.
func (l *link) forget(refs []*regionv1.PlacementRef, results []*regionv1.PlacementResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	byKey := map[string]*regionv1.PlacementResult{}
	for _, r := range results {
		byKey[r.GetKey()] = r
	}
	for _, ref := range refs {
		key := ref.GetTenant() + "/" + ref.GetName()
		if r := byKey[key]; r == nil || r.GetError() != "" {
			l.retryAt[key] = time.Now().Add(2 * time.Second)
			continue
		}
		delete(l.removals, key)
		delete(l.sent, key)
		delete(l.retryAt, key)
		l.removed[key] = true
	}
}

// fingerprint is a placement's content, without what changes on every
// send (the epoch, the time).
func fingerprint(p *api.Placement) string {
	cp := *p
	cp.Epoch = 0
	cp.UpdatedAt = time.Time{}
	b, _ := json.Marshal(&cp)
	return string(b)
}

type atomicCounter struct{ v atomic.Uint64 }

func (c *atomicCounter) add(n uint64) { c.v.Add(n) }
func (c *atomicCounter) load() uint64 { return c.v.Load() }
func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// syncPolicies sends the region every network policy when the set
// changed since the region last acknowledged it.
func (l *link) syncPolicies(ctx context.Context) error {
	items := l.c.o.Caches.Policies.List()
	req := &regionv1.SyncPoliciesRequest{Policies: make([][]byte, 0, len(items)), Epoch: l.epoch}
	h := sha256.New()
	for _, it := range items {
		p := *it.Value
		p.ResourceVersion, p.Status = 0, nil
		b, err := json.Marshal(&p)
		if err != nil {
			return err
		}
		req.Policies = append(req.Policies, b)
		h.Write(b)
	}
	fp := hex.EncodeToString(h.Sum(nil))
	l.mu.Lock()
	same := l.policies == fp
	l.mu.Unlock()
	if same {
		return nil
	}
	cl, err := l.c.regionClient(ctx, l.region)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	resp, err := cl.SyncPolicies(cctx, req, grpc.MaxCallSendMsgSize(transport.LargeMessageBytes))
	if err != nil {
		return err
	}
	if resp.GetChanged() > 0 {
		l.log.Info("network policies sent", "policies", len(items), "changed", resp.GetChanged())
	}
	l.mu.Lock()
	l.policies = fp
	l.mu.Unlock()
	return nil
}
