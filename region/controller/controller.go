// Package controller is a region's leader-elected control loop. It turns
// placements (desired state from the global tier) into assignments (one
// per replica, placed on a node by the scheduler), replaces replicas that
// fail, miss a deadline or lose their node, rolls out new revisions, drains
// nodes, and writes each resource's status (a share) for the global tier.
//
// It never writes a replica's phase: phases follow from the assignment
// (what the controller asked) and the status (what the agent saw), see
// state.ReplicaPhase. It reads only its caches, batches every write of a
// pass into a few fenced transactions, and waits for its caches to see
// its own writes before the next pass, so that it never acts twice on a
// stale view.
package controller

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/reconcile"
	"github.com/stratahq/strata/internal/store"
)

// Controller is a region's control loop. Lead runs it while this process
// holds the region's leadership: each pass builds a view, has the
// reconciler decide every marked resource and the drainer every running
// drain, and commits the plan. What it decides with lives in its parts,
// each owning one thing.
type Controller struct {
	o   *Options
	log *slog.Logger

	dirty *reconcile.Dirty
	// tracker follows the caches' feeds and marks what needs a pass.
	tracker *tracker
	// addrs and retries keep what a pass learns for the next ones.
	addrs   *addresses
	retries *retries
	drains  *drainer
	shares  *shares
	recon   *reconciler
}

// New returns a controller; it subscribes to the caches' feeds at once so
// that its index is complete when the caches sync.
func New(o Options) *Controller {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	def := config.DefaultRegionController()
	o.ProvisionTimeout = cmp.Or(o.ProvisionTimeout, def.ProvisionTimeout)
	o.DestroyTimeout = cmp.Or(o.DestroyTimeout, def.DestroyTimeout)
	o.RetryBackoff = cmp.Or(o.RetryBackoff, def.RetryBackoff)
	o.Resync = cmp.Or(o.Resync, def.Resync)
	if o.MaxBackoff == 0 {
		o.MaxBackoff = time.Minute
	}
	if o.wallClock == nil {
		o.wallClock = time.Now
	}
	if o.afterFunc == nil {
		o.afterFunc = func(d time.Duration, f func()) { time.AfterFunc(d, f) }
	}
	log := o.Logger.With("component", "controller")
	dirty := reconcile.NewDirty()
	c := &Controller{o: &o, log: log, dirty: dirty, tracker: newTracker(&o, dirty)}
	x := c.tracker.index
	c.addrs = &addresses{log: log, next: map[blockKey]netip.Addr{}, caps: map[blockKey]int{}}
	c.retries = &retries{o: &o, byKey: map[string]*retry{}}
	w := &assignmentWriter{o: &o}
	sc := &placer{o: &o, index: x, w: w}
	c.drains = &drainer{o: &o, index: x, w: w}
	c.shares = &shares{o: &o, log: log, retries: c.retries}
	c.recon = &reconciler{o: &o, w: w, retries: c.retries, drains: c.drains, endpoints: &endpoints{o: &o, index: x}, placer: sc, shares: c.shares,
		jobs: &jobs{o: &o, w: w, placer: sc, drains: c.drains, shares: c.shares}}
	c.tracker.follow()
	return c
}

// Lead runs the control loop until ctx is cancelled (leadership lost or
// shutdown). Every write carries guard, so a deposed leader's writes fail.
func (c *Controller) Lead(ctx context.Context, guard store.Guard) error {
	if err := c.o.Caches.WaitSynced(ctx); err != nil {
		return err
	}
	c.log.Info("controller leading")
	c.retries.reset()
	err := reconcile.Loop{
		Dirty:  c.dirty,
		Resync: c.o.Resync,
		Every:  c.tracker.every,
		Pass:   func(ctx context.Context, keys []string) error { return c.pass(ctx, guard, keys) },
		Log:    c.log,
	}.Run(ctx)
	c.log.Info("controller stopped leading")
	return err
}

// pass reconciles keys against one consistent view and commits the result.
func (c *Controller) pass(ctx context.Context, guard store.Guard, keys []string) (err error) {
	now := c.o.Clock()
	start := time.Now()
	ops := 0
	defer func() { c.o.Metrics.Pass(start, len(keys), ops, err) }()
	lap := c.o.Metrics.Lap()
	if c.o.passed != nil {
		c.o.passed(keys)
	}
	if err := c.catchUp(ctx); err != nil {
		return err
	}
	lap("catchup")
	p := newPlan(c.o.State)
	view := c.newView(now)
	seen := make(map[string]bool, len(keys))
	for _, key := range append(keys, c.drains.keys(view)...) {
		if seen[key] {
			continue
		}
		seen[key] = true
		c.recon.reconcile(view, p, key)
	}
	c.drains.record(view, p)
	lap("plan")
	if p.empty() {
		return nil
	}
	ops = p.ops()
	rev, err := p.commit(ctx, guard)
	lap("commit")
	c.addrs.keep(view.pools)
	for _, ev := range p.committedEvents() {
		c.o.Events.Emit(ev)
	}
	if failed := batchFailures(err); failed != nil {
		if r, serr := c.shares.surface(ctx, guard, now, failed); serr != nil {
			c.log.Warn("could not record why resources were not written", "err", serr)
		} else if r > 0 {
			rev = r
		}
	}
	// Read our own writes before the next pass decides anything, also
	// those of a commit that stopped half-way: they stay.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	werr := p.waitCaches(wctx, c.o.Caches, rev)
	lap("readback")
	if werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// catchUp makes the pass's view causally consistent with the placements
// it acts on: a resource created right after a node registered must not
// be placed as if the node did not exist, and placements stay where they
// are put. It waits until the caches holding what others write and the
// scheduler reads (nodes, their status, drains, networks) have seen every
// change up to the newest placement. One watch feeds every region cache
// (state.Caches), so once the placements are at a revision the others are
// there or get there with the watch's batch in hand: the wait asks etcd
// nothing, and passes that no new placement triggered do not wait at all.
func (c *Controller) catchUp(ctx context.Context) error {
	cs := c.o.Caches
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := store.WaitForRev(ctx, cs.Placements.Rev(), cs.Nodes, cs.NodeStatus, cs.Drains, cs.Networks); err != nil {
		return fmt.Errorf("catch up with the placements: %w", err)
	}
	return nil
}

// Headroom is how many more replicas of each of flavors the region's
// nodes hold now (scheduler.Snapshot.Headroom), for the heartbeat. It may
// run beside the passes: it reads the caches and the index, which are
// safe for that, through a view of its own (and address capacities of
// its own, which a pass's view caches).
func (c *Controller) Headroom(flavors []api.Flavor) []api.FlavorHeadroom {
	if len(flavors) == 0 || !c.o.Caches.IsSynced() {
		return nil
	}
	v := c.newView(c.o.Clock())
	v.addrs = &addresses{log: c.log, next: map[blockKey]netip.Addr{}, caps: map[blockKey]int{}}
	_, hasNetwork := c.o.Caches.DefaultNetwork()
	return v.snapshot().Headroom(flavors, hasNetwork)
}
