package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/heartbeat"
	"github.com/stratahq/strata/internal/liveness"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
)

// monitor is the MonitorLoop of the seed: it follows every region's
// heartbeats. A region quiet for SuspectAfter is Suspect and probed
// (RegionService.Status); one quiet for DownAfter whose probe fails is
// Down. A region that answers its probe stays Up. The verdict is
// internal/liveness's, the same as the region's node monitor: a beat
// missing from the heartbeat store is measured from the newest evidence
// (this master's own start included), so losing Redis never makes a
// region Down at once. The same rule leaves this master's own blind time
// out of every region's quiet clock: the global API in this process stamps
// the beats of the regions connected to it, so while it stalls, or Redis
// cannot be read, their beats can be neither recorded nor seen. Only transitions are written to
// etcd.
func (c *Controller) monitor(ctx context.Context, guard Guard) {
	// What this master remembers of the heartbeat store starts now.
	tr := liveness.NewTracker()
	tick := time.NewTicker(c.lookEvery())
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := c.checkRegions(ctx, guard, tr); err != nil && ctx.Err() == nil {
			c.log.Warn("region monitor pass failed", "err", err)
		}
	}
}

// lookEvery is how often the monitor looks at the heartbeats.
func (c *Controller) lookEvery() time.Duration { return c.o.HeartbeatInterval / 2 }

func (c *Controller) checkRegions(ctx context.Context, guard Guard, tr *liveness.Tracker) error {
	beats, err := c.o.Heartbeats.List(ctx)
	if err != nil {
		return fmt.Errorf("list heartbeats: %w", err)
	}
	last := make(map[string]time.Time, len(beats))
	for _, b := range beats {
		last[b.ID] = b.At
	}
	c.keepHeadroom(beats)
	c.keepLoad(beats)
	now := c.o.Clock()
	th := liveness.Thresholds{SuspectAfter: c.o.SuspectAfter, DownAfter: c.o.DownAfter}
	c.o.MonitorMetrics.Blind(tr.Look(now, c.lookEvery(), th))
	tr.Retain(func(id string) bool { _, ok := c.o.Caches.Regions.Get(id); return ok })
	for _, it := range c.o.Caches.Regions.List() {
		name := it.Name
		e := liveness.Evidence{Registered: it.Value.RegisteredAt, Current: api.HealthUnknown}
		cur, have := c.o.Caches.RegionStatus.Get(name)
		if have {
			e.Recorded, e.Current = cur.Value.LastHeartbeat, cur.Value.Health
		}
		at, ok := last[name]
		tr.Observe(name, at, ok, now, &e)
		p := liveness.Probe{}
		if liveness.NeedsProbe(now, e, th) {
			start := c.o.Clock()
			p = liveness.Failed(c.probe(ctx, name))
			tr.Excuse(c.o.Clock().Sub(start)) // beats are recorded meanwhile
		}
		v := liveness.Judge(now, e, th, p)
		c.o.MonitorMetrics.Lag(v.Quiet)
		if have && cur.Value.Health == v.Health {
			continue
		}
		st := &api.RegionStatus{Health: v.Health, Reason: v.Reason, Since: now, LastHeartbeat: v.LastAlive}
		if _, err := c.o.State.RegionStatus.Put(ctx, name, st, guard); err != nil {
			return fmt.Errorf("region %s: %w", name, err)
		}
		c.o.MonitorMetrics.Transition(string(v.Health))
		level := c.log.Info
		if v.Health != api.HealthUp {
			level = c.log.Warn
		}
		level("region health changed", "region", name, "health", v.Health, "reason", v.Reason)
	}
	return nil
}

// keepHeadroom keeps each region's headroom, by flavor, from its last
// beat, for placement to fit splits to (a region without a beat, or
// whose beat carries none, has none known). Placement sees a change at
// the next pass over a resource: its resync, or a change of its own
// (a region reporting replicas it could not place).
func (c *Controller) keepHeadroom(beats []heartbeat.Beat) {
	all := make(map[string]map[string]int, len(beats))
	for _, b := range beats {
		hs := state.BeatHeadroom(b.Attrs)
		if hs == nil {
			continue
		}
		byFlavor := make(map[string]int, len(hs))
		for _, h := range hs {
			byFlavor[h.Flavor] = h.Replicas
		}
		all[b.ID] = byFlavor
	}
	c.headroomMu.Lock()
	c.headroom = all
	c.headroomMu.Unlock()
}

// headroomOf is region's headroom by flavor (nil when none is known);
// the caller must not change it.
func (c *Controller) headroomOf(region string) map[string]int {
	c.headroomMu.Lock()
	defer c.headroomMu.Unlock()
	return c.headroom[region]
}

// probe calls the region's Status. A failed probe drops the connection
// to the region, so that the next call dials again instead of failing on
// the old connection's reconnect backoff after the region restarted.
func (c *Controller) probe(ctx context.Context, region string) error {
	cl, err := c.regionClient(ctx, region)
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, c.o.ProbeTimeout)
	defer cancel()
	if _, err = cl.Status(pctx, &regionv1.StatusRequest{}); err != nil {
		c.o.Regions.Forget(region)
	}
	return err
}
