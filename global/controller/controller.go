// Package controller is the global tier's master: every `strata global`
// replica runs it, and only the elected master acts. Its MainLoop pushes
// each resource's desired state to the regions that should run it
// (placements, idempotent on content) and pulls every region's status
// back into one aggregated status per resource. Its MonitorLoop follows
// region health: heartbeats, then a probe, then Down.
//
// Every write carries the master's leadership guard, and every placement
// carries the master's epoch, so a deposed master can neither write here
// nor be obeyed by a region.
package controller

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/heartbeat"
	"github.com/stratahq/strata/internal/metrics"
	"github.com/stratahq/strata/internal/reconcile"
	"github.com/stratahq/strata/internal/store"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
)

// Regions gives the RegionService client of a region, and drops the
// connection to one that stopped answering.
type Regions interface {
	Client(ctx context.Context, region string) (regionv1.RegionServiceClient, error)
	Forget(region string)
}

// Heartbeats lists the regions' last heartbeats.
type Heartbeats interface {
	List(ctx context.Context) ([]heartbeat.Beat, error)
}

// Guard is the master's leadership: a store guard with the election
// revision, which doubles as the epoch regions check.
type Guard interface {
	store.Guard
}

// Options configure a Controller.
type Options struct {
	State      *state.State
	Caches     *state.Caches
	Regions    Regions
	Heartbeats Heartbeats
	// HeartbeatInterval, SuspectAfter, DownAfter and ProbeTimeout set
	// region liveness; zero takes config.DefaultRegionsLiveness's.
	HeartbeatInterval time.Duration
	SuspectAfter      time.Duration
	DownAfter         time.Duration
	ProbeTimeout      time.Duration
	// Resync re-examines every resource this often.
	Resync time.Duration
	// SendBatch bounds the placements in one ApplyPlacements call.
	SendBatch int
	// SendInFlight bounds the calls sending placements or removals to
	// one region at once (a resource is in one of them at a time).
	SendInFlight int
	// Reverter performs auto-reverts of failed rollouts; nil disables
	// them.
	Reverter Reverter
	// Scaler sets the replicas of autoscaled resources; nil disables
	// autoscaling.
	Scaler Scaler
	// Pruner forgets old idempotency keys; nil keeps them.
	Pruner Pruner
	// Metrics and MonitorMetrics may be nil.
	Metrics        *metrics.Controller
	MonitorMetrics *metrics.Monitor
	Logger         *slog.Logger
	Clock          func() time.Time
}

// Controller is the global master controller.
type Controller struct {
	o   Options
	log *slog.Logger

	dirty *reconcile.Dirty
	// revisions reads the revisions regions that wait for a rollout run.
	revisions *revisionCache

	linksMu sync.Mutex
	links   map[string]*link

	// headroom is each region's headroom by flavor, from its last beat
	// as the monitor read it; replaced whole, never changed in place.
	headroomMu sync.Mutex
	headroom   map[string]map[string]int

	// load is what each region's replicas use, per resource, from its
	// last beat (keepLoad); scaling is the autoscaler's memory.
	loadMu  sync.Mutex
	load    map[string]regionLoad
	scaling scaling

	// propagations counts placements a region applied (for tests,
	// metrics and the benchmark's first-propagation time).
	propagations   atomicCounter
	firstPropagate chan struct{}
	firstOnce      sync.Once
}

// New returns a controller. It subscribes to the caches' feeds at once.
func New(o Options) *Controller {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Resync == 0 {
		o.Resync = 5 * time.Second
	}
	if o.SendBatch == 0 {
		o.SendBatch = 256
	}
	if o.SendInFlight == 0 {
		o.SendInFlight = 4
	}
	def := config.DefaultRegionsLiveness()
	o.HeartbeatInterval = cmp.Or(o.HeartbeatInterval, def.HeartbeatInterval)
	o.SuspectAfter = cmp.Or(o.SuspectAfter, def.SuspectAfter)
	o.DownAfter = cmp.Or(o.DownAfter, def.DownAfter)
	o.ProbeTimeout = cmp.Or(o.ProbeTimeout, def.ProbeTimeout)
	c := &Controller{
		o:              o,
		log:            o.Logger.With("component", "master"),
		dirty:          reconcile.NewDirty(),
		revisions:      newRevisionCache(o.State),
		links:          map[string]*link{},
		scaling:        scaling{byKey: map[string]*scaled{}},
		firstPropagate: make(chan struct{}),
	}
	o.Caches.ResourceFeed.Subscribe(func(ch []store.Change[api.Resource]) {
		for _, x := range ch {
			c.mark(x.Name)
		}
	})
	// A flavor, a region or a region's health changing can change any
	// placement.
	o.Caches.FlavorFeed.Subscribe(func([]store.Change[api.Flavor]) { c.markAll() })
	o.Caches.RegionFeed.Subscribe(func([]store.Change[api.Region]) { c.markAll() })
	o.Caches.RegionStatusFeed.Subscribe(func([]store.Change[api.RegionStatus]) { c.markAll() })
	// Policies go to every region whole (link.syncPolicies).
	o.Caches.PolicyFeed.Subscribe(func([]store.Change[api.NetworkPolicy]) {
		for _, l := range c.linkList() {
			l.wakeSender()
		}
	})
	return c
}

// Reverter makes a new revision from an old one on the master's behalf
// (the API service implements it), fenced by the master's leadership.
type Reverter interface {
	AutoRevert(ctx context.Context, tenant, name, uid string, failed, to int64, why string, guard store.Guard) error
}

// Pruner forgets the idempotency keys older than a day.
type Pruner interface {
	PruneRequests(ctx context.Context, olderThan time.Duration) (int, error)
}

// prune forgets old idempotency keys every ten minutes while leading.
func (c *Controller) prune(ctx context.Context) {
	t := time.NewTicker(10 * time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n, err := c.o.Pruner.PruneRequests(ctx, 24*time.Hour); err != nil {
			c.log.Warn("pruning idempotency keys failed", "err", err)
		} else if n > 0 {
			c.log.Info("pruned idempotency keys", "count", n)
		}
	}
}

// Propagations returns how many placements regions applied under this
// process's mastership.
func (c *Controller) Propagations() uint64 { return c.propagations.load() }

// FirstPropagation is closed when this process, as master, first saw a
// region apply a placement.
func (c *Controller) FirstPropagation() <-chan struct{} { return c.firstPropagate }

func (c *Controller) mark(key string) { c.dirty.Mark(key) }

func (c *Controller) markAll() { c.dirty.MarkAll() }

// every lists every resource key the master knows of: in the store, with
// a status, or reported by a region.
func (c *Controller) every() []string {
	var out []string
	for _, it := range c.o.Caches.Resources.List() {
		out = append(out, it.Name)
	}
	for _, it := range c.o.Caches.Statuses.List() {
		out = append(out, it.Name)
	}
	for _, l := range c.linkList() {
		out = append(out, l.shareKeys()...)
	}
	return out
}

// Lead runs the master's loops until ctx is cancelled (leadership lost
// or shutdown); it returns when every goroutine it started has ended.
func (c *Controller) Lead(ctx context.Context, guard Guard) error {
	if err := c.o.Caches.WaitSynced(ctx); err != nil {
		return err
	}
	c.log.Info("master leading", "epoch", guard.GuardRev())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer c.dropLinks()

	wg.Add(1)
	go func() {
		defer wg.Done()
		c.monitor(ctx, guard)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.autoscale(ctx, guard)
	}()
	if c.o.Pruner != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.prune(ctx)
		}()
	}
	err := reconcile.Loop{
		Dirty:  c.dirty,
		Resync: c.o.Resync,
		Every:  c.every,
		Before: func() { c.syncLinks(ctx, guard, &wg) },
		Pass:   func(ctx context.Context, keys []string) error { return c.pass(ctx, guard, keys) },
		Log:    c.log,
	}.Run(ctx)
	c.log.Info("master stopped leading")
	return err
}

// pass reconciles keys and commits the resulting status writes and
// finalisations in fenced transactions.
func (c *Controller) pass(ctx context.Context, guard Guard, keys []string) (err error) {
	now := c.o.Clock()
	start := time.Now()
	w := newWrites(c.o.State)
	defer func() { c.o.Metrics.Pass(start, len(keys), w.ops(), err) }()
	lap := c.o.Metrics.Lap()
	cat := catalog{caches: c.o.Caches, revisions: c.revisions, ctx: ctx}
	for _, key := range keys {
		c.reconcile(now, w, cat, key)
	}
	lap("plan")
	rev, err := w.commit(ctx, guard)
	lap("commit")
	if err != nil {
		// What applied stays: read it before the next pass decides.
		_ = w.waitCaches(ctx, c.o.Caches, rev)
		return err
	}
	for _, rv := range w.reverts {
		if c.o.Reverter == nil {
			break
		}
		if err := c.o.Reverter.AutoRevert(ctx, rv.Tenant, rv.Name, rv.UID, rv.Failed, rv.To, rv.Why, guard); err != nil {
			c.log.Warn("auto-revert failed", "resource", rv.Tenant+"/"+rv.Name, "err", err)
			continue
		}
		c.log.Warn("rollout failed; reverted", "resource", rv.Tenant+"/"+rv.Name, "failed", rv.Failed, "to", rv.To, "why", rv.Why)
	}
	defer lap("readback")
	return w.waitCaches(ctx, c.o.Caches, rev)
}

// syncLinks keeps one link per registered region, started under the
// leader context.
func (c *Controller) syncLinks(ctx context.Context, guard Guard, wg *sync.WaitGroup) {
	c.linksMu.Lock()
	defer c.linksMu.Unlock()
	want := map[string]bool{}
	for _, it := range c.o.Caches.Regions.List() {
		want[it.Name] = true
		if _, ok := c.links[it.Name]; ok {
			continue
		}
		l := newLink(c, it.Name, guard.GuardRev())
		c.links[it.Name] = l
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.run(ctx)
		}()
	}
	for name, l := range c.links {
		if !want[name] {
			l.stop()
			delete(c.links, name)
		}
	}
}

func (c *Controller) dropLinks() {
	c.linksMu.Lock()
	defer c.linksMu.Unlock()
	for name, l := range c.links {
		l.stop()
		delete(c.links, name)
	}
}

func (c *Controller) link(region string) *link {
	c.linksMu.Lock()
	defer c.linksMu.Unlock()
	return c.links[region]
}

func (c *Controller) linkList() []*link {
	c.linksMu.Lock()
	defer c.linksMu.Unlock()
	out := make([]*link, 0, len(c.links))
	for _, l := range c.links {
		out = append(out, l)
	}
	return out
}

func (c *Controller) regionClient(ctx context.Context, region string) (regionv1.RegionServiceClient, error) {
	cl, err := c.o.Regions.Client(ctx, region)
	if err != nil {
		return nil, fmt.Errorf("region %s: %w", region, err)
	}
	return cl, nil
}
