package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/stratahq/strata/internal/api"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
)

// monitor is the MonitorLoop of the seed: it follows every region's
// heartbeats. A region quiet for SuspectAfter is Suspect and probed
// (RegionService.Status); one quiet for DownAfter whose probe fails is
// Down. A region that answers its probe stays Up. Only transitions are
// written to etcd.
func (c *Controller) monitor(ctx context.Context, guard Guard) {
	tick := time.NewTicker(c.o.HeartbeatInterval / 2)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := c.checkRegions(ctx, guard); err != nil && ctx.Err() == nil {
			c.log.Warn("region monitor pass failed", "err", err)
		}
	}
}

func (c *Controller) checkRegions(ctx context.Context, guard Guard) error {
	beats, err := c.o.Heartbeats.List(ctx)
	if err != nil {
		return fmt.Errorf("list heartbeats: %w", err)
	}
	last := make(map[string]time.Time, len(beats))
	for _, b := range beats {
		last[b.ID] = b.At
	}
	now := c.o.Clock()
	for _, it := range c.o.Caches.Regions.List() {
		name := it.Name
		seen, ok := last[name]
		if !ok {
			seen = it.Value.RegisteredAt
		}
		quiet := now.Sub(seen)
		c.o.MonitorMetrics.Lag(quiet)
		health, reason := api.HealthUp, ""
		if quiet >= c.o.SuspectAfter {
			perr := c.probe(ctx, name)
			switch {
			case perr == nil:
				health, reason = api.HealthUp, fmt.Sprintf("no heartbeat for %s but its probe answered", quiet.Round(time.Second))
			case quiet >= c.o.DownAfter:
				health, reason = api.HealthDown, fmt.Sprintf("no heartbeat for %s and its probe failed: %v", quiet.Round(time.Second), perr)
			default:
				health, reason = api.HealthSuspect, fmt.Sprintf("no heartbeat for %s; probe failed: %v", quiet.Round(time.Second), perr)
			}
		}
		cur, have := c.o.Caches.RegionStatus.Get(name)
		if have && cur.Value.Health == health {
			continue
		}
		st := &api.RegionStatus{Health: health, Reason: reason, Since: now, LastHeartbeat: seen}
		if _, err := c.o.State.RegionStatus.Put(ctx, name, st, guard); err != nil {
			return fmt.Errorf("region %s: %w", name, err)
		}
		c.o.MonitorMetrics.Transition(string(health))
		level := c.log.Info
		if health != api.HealthUp {
			level = c.log.Warn
		}
		level("region health changed", "region", name, "health", health, "reason", reason)
	}
	return nil
}

func (c *Controller) probe(ctx context.Context, region string) error {
	cl, err := c.regionClient(ctx, region)
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, c.o.ProbeTimeout)
	defer cancel()
	_, err = cl.Status(pctx, &regionv1.StatusRequest{})
	return err
}
