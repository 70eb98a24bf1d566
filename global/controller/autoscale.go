package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stratahq/strata/global/autoscale"
	"github.com/stratahq/strata/global/placement"
	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/heartbeat"
	"github.com/stratahq/strata/internal/store"
)

// Scaler sets an autoscaled resource's replicas on the master's behalf
// (the API service implements it), fenced by the master's leadership,
// and records why as the resource's Scaled event.
type Scaler interface {
	AutoScale(ctx context.Context, tenant, name, uid string, from, to int, why string, guard store.Guard) error
}

// autoscaleTick is how often the master looks for autoscaled resources
// whose period is up.
const autoscaleTick = time.Second

// scaling is the master's memory of its autoscaled resources: each one's
// recommendations (for the stabilization windows), when it decides next
// and what it last read, which the resource's status carries. A new
// master starts empty, as the HPA's controller does.
type scaling struct {
	mu    sync.Mutex
	byKey map[string]*scaled
}

type scaled struct {
	uid     string
	next    time.Time
	last    time.Time // the last scale
	failed  string    // the last scale's error, logged once
	history autoscale.History
	status  *api.AutoscaleStatus
}

// regionLoad is what one region's last beat says its replicas use.
type regionLoad struct {
	at    time.Time
	byKey map[string]api.ResourceLoad
}

// keepLoad keeps each region's load from its last beat, for the
// autoscaler.
func (c *Controller) keepLoad(beats []heartbeat.Beat) {
	all := make(map[string]regionLoad, len(beats))
	for _, b := range beats {
		ls := state.BeatLoad(b.Attrs)
		if ls == nil {
			continue
		}
		byKey := make(map[string]api.ResourceLoad, len(ls))
		for _, l := range ls {
			byKey[l.Key()] = l
		}
		all[b.ID] = regionLoad{at: b.At, byKey: byKey}
	}
	c.loadMu.Lock()
	c.load = all
	c.loadMu.Unlock()
}

// loadOf is what resource key's replicas use, one entry per region whose
// beat is recent (within suspectAfter of now) and reports it, by region
// name.
func (c *Controller) loadOf(now time.Time, key string) []api.ResourceLoad {
	c.loadMu.Lock()
	defer c.loadMu.Unlock()
	var out []api.ResourceLoad
	for _, region := range slices.Sorted(maps.Keys(c.load)) {
		rl := c.load[region]
		if now.Sub(rl.at) > c.o.SuspectAfter {
			continue
		}
		if l, ok := rl.byKey[key]; ok {
			out = append(out, l)
		}
	}
	return out
}

// autoscaleStatus is the autoscaler's last reading of key, for its
// status; nil when there is none.
func (c *Controller) autoscaleStatus(key string) *api.AutoscaleStatus {
	c.scaling.mu.Lock()
	defer c.scaling.mu.Unlock()
	if s := c.scaling.byKey[key]; s != nil {
		return s.status
	}
	return nil
}

// autoscale decides, every autoscaleTick, for each autoscaled resource
// whose period is up, until ctx is done.
func (c *Controller) autoscale(ctx context.Context, guard Guard) {
	if c.o.Scaler == nil {
		return
	}
	t := time.NewTicker(autoscaleTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.autoscalePass(ctx, guard, c.o.Clock())
	}
}

// autoscalePass decides for the resources whose period is up at now, and
// forgets the ones no longer autoscaled.
func (c *Controller) autoscalePass(ctx context.Context, guard Guard, now time.Time) {
	seen := map[string]bool{}
	for _, it := range c.o.Caches.Resources.List() {
		r := it.Value
		if r.Autoscale == nil || r.Deleting() {
			continue
		}
		key := r.Key()
		seen[key] = true
		s := c.scaledOf(key, r.UID)
		if now.Before(s.next) {
			continue
		}
		s.next = now.Add(r.Autoscale.PeriodOrDefault())
		st := c.decideScale(ctx, guard, now, r, s)
		c.scaling.mu.Lock()
		changed := !api.SameJSON(s.status, st)
		s.status = st
		c.scaling.mu.Unlock()
		if changed {
			c.mark(key)
		}
	}
	c.scaling.mu.Lock()
	for key := range c.scaling.byKey {
		if !seen[key] {
			delete(c.scaling.byKey, key)
			c.mark(key)
		}
	}
	c.scaling.mu.Unlock()
}

// scaledOf is key's state, new for a new resource of the name.
func (c *Controller) scaledOf(key, uid string) *scaled {
	c.scaling.mu.Lock()
	defer c.scaling.mu.Unlock()
	s := c.scaling.byKey[key]
	if s == nil || s.uid != uid {
		s = &scaled{uid: uid}
		c.scaling.byKey[key] = s
	}
	return s
}

// decideScale makes one decision for r, scales it when the decision
// differs from its count, and returns the status to show.
func (c *Controller) decideScale(ctx context.Context, guard Guard, now time.Time, r *api.Resource, s *scaled) *api.AutoscaleStatus {
	p := r.Autoscale
	in := autoscale.Input{Policy: p, Current: r.Replicas, Load: c.loadOf(now, r.Key())}
	if f, ok := c.o.Caches.Flavors.Get(r.Spec.Flavor); ok {
		in.Flavor = f.Value.Spec
	}
	if p.LoadBalancer != "" {
		in.Balancer = c.loadOf(now, state.ResourceName(r.Tenant, p.LoadBalancer))
	}
	rec := autoscale.Recommend(in)
	st := &api.AutoscaleStatus{Desired: rec.Desired, Metrics: rec.Metrics, LastScaleAt: s.last}
	if !rec.Measured {
		st.Message = "no readings yet: no region has reported what the replicas use"
		return st
	}
	next, why := s.history.Decide(now, p, r.Replicas, rec.Desired)
	st.Message = why
	if next == r.Replicas {
		return st
	}
	msg := fmt.Sprintf("%d → %d, %s", r.Replicas, next, strings.Join(rec.Metrics, ", "))
	if d := c.regionDeltas(ctx, now, r, next); d != "" {
		msg += ", " + d
	}
	if err := c.o.Scaler.AutoScale(ctx, r.Tenant, r.Name, r.UID, r.Replicas, next, msg, guard); err != nil {
		// Said once: the same failure (a quota, say) comes back every
		// period, and the status keeps saying it.
		if err.Error() != s.failed {
			c.log.Warn("autoscale failed", "resource", r.Key(), "from", r.Replicas, "to", next, "err", err)
		}
		s.failed = err.Error()
		st.Message = "scaling failed: " + err.Error()
		return st
	}
	s.failed = ""
	c.log.Info("autoscaled", "resource", r.Key(), "from", r.Replicas, "to", next, "why", msg)
	s.last, st.LastScaleAt = now, now
	return st
}

// regionDeltas says how the split over regions changes when r goes to
// replicas, as placement would split it now (the same code as a real
// pass): "dev-1 +2, dev-2 +1".
func (c *Controller) regionDeltas(ctx context.Context, now time.Time, r *api.Resource, replicas int) string {
	cat := catalog{caches: c.o.Caches, revisions: c.revisions, ctx: ctx}
	before := placement.Decide(c.input(now, cat, r))
	next := *r
	next.Replicas = replicas
	after := placement.Decide(c.input(now, cat, &next))
	share := map[string]int{}
	for _, t := range before.Targets {
		share[t.Region] -= t.Replicas
	}
	for _, t := range after.Targets {
		share[t.Region] += t.Replicas
	}
	var parts []string
	for _, region := range slices.Sorted(maps.Keys(share)) {
		if d := share[region]; d != 0 {
			parts = append(parts, fmt.Sprintf("%s %+d", region, d))
		}
	}
	return strings.Join(parts, ", ")
}
