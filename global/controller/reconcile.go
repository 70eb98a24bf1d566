package controller

import (
	"context"
	"time"

	"github.com/stratahq/strata/global/placement"
	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
)

// reconcile reads what the master knows of one resource, lets placement
// decide where it runs, and carries the decision out: placements and
// removals through the links, the status and finalisation as writes of
// the pass.
func (c *Controller) reconcile(now time.Time, w *writes, cat catalog, key string) {
	it, ok := c.o.Caches.Resources.Get(key)
	if !ok {
		c.forget(w, key)
		return
	}
	d := placement.Decide(c.input(now, cat, it.Value))
	for _, t := range d.Targets {
		if l := c.link(t.Region); l != nil && t.Placement != nil {
			l.queuePlacement(key, t.Placement)
		}
	}
	for _, rm := range d.Remove {
		if l := c.link(rm.Region); l != nil {
			l.queueRemoval(key, rm.UID)
		}
	}
	if d.Revert != nil {
		w.revert(*d.Revert)
	}
	if d.Finalize {
		w.finalize(key, it.ModRevision)
	}
	if d.Status != nil {
		w.putStatus(key, d.Status)
	}
}

// forget removes a resource gone from the global store from every region
// and drops its status: nothing of it may stay anywhere.
func (c *Controller) forget(w *writes, key string) {
	for _, l := range c.linkList() {
		if sh := l.share(key); sh != nil {
			l.queueRemoval(key, sh.UID)
		}
	}
	if _, ok := c.o.Caches.Statuses.Get(key); ok {
		w.deleteStatus(key)
	}
}

// input is what placement needs to decide about r, from the caches and
// the links.
func (c *Controller) input(now time.Time, cat catalog, r *api.Resource) placement.Input {
	key := r.Key()
	in := placement.Input{Now: now, Resource: r, Catalog: cat, Autoscale: c.autoscaleStatus(key)}
	if st, ok := c.o.Caches.Statuses.Get(key); ok {
		in.Status = st.Value
	}
	seen := map[string]int{}
	for _, it := range c.o.Caches.Regions.List() {
		seen[it.Name] = len(in.Regions)
		in.Regions = append(in.Regions, placement.Region{Name: it.Name, Registered: true})
	}
	for _, l := range c.linkList() {
		i, ok := seen[l.region]
		if !ok {
			i = len(in.Regions)
			in.Regions = append(in.Regions, placement.Region{Name: l.region})
		}
		reg := &in.Regions[i]
		reg.Linked = true
		reg.Share, reg.Live, reg.Settled = l.view(key)
	}
	for i := range in.Regions {
		reg := &in.Regions[i]
		if st, ok := c.o.Caches.RegionStatus.Get(reg.Name); ok {
			reg.Health, reg.HealthSince = st.Value.Health, st.Value.Since
		}
		reg.Headroom = c.headroomOf(reg.Name)
	}
	return in
}

// catalog resolves flavors and images from the caches, and revisions
// through the revision cache (with the pass's context).
type catalog struct {
	caches    *state.Caches
	revisions *revisionCache
	ctx       context.Context
}

func (k catalog) Flavor(name string) (*api.Flavor, bool) {
	it, ok := k.caches.Flavors.Get(name)
	if !ok {
		return nil, false
	}
	return it.Value, true
}

func (k catalog) Image(tenant, name string) (*api.ImageSpec, bool) {
	it, ok := k.caches.Resources.Get(state.ResourceName(tenant, name))
	if !ok || it.Value.Kind != api.KindImage || it.Value.Spec.Image == nil {
		return nil, false
	}
	return it.Value.Spec.Image, true
}

func (k catalog) Revision(tenant, name, uid string, number int64) (*api.Revision, bool) {
	return k.revisions.get(k.ctx, tenant, name, uid, number)
}

// writes collects a pass's writes as the steps of a store.Batch, one
// group per resource, so that a pass over any number of resources (a
// failover moving hundreds) commits in fenced transactions that each fit
// under etcd.maxTxnOps, and a resource whose write fails stops alone.
type writes struct {
	st      *state.State
	batch   *store.Batch
	reverts []placement.Revert
	// touchedResources and touchedStatuses tell which caches the pass
	// must see its writes in before the next pass decides.
	touchedResources, touchedStatuses bool
}

func (w *writes) revert(r placement.Revert) { w.reverts = append(w.reverts, r) }

func newWrites(st *state.State) *writes { return &writes{st: st, batch: st.Store.Batch()} }

func (w *writes) putStatus(key string, s *api.ResourceStatus) {
	w.touchedStatuses = true
	_ = w.st.Statuses.TxnPut(w.batch.Step(key), key, s) // build errors fail the step
}

func (w *writes) deleteStatus(key string) {
	w.touchedStatuses = true
	w.st.Statuses.TxnDelete(w.batch.Step(key), key, 0)
}

// finalize forgets a deleted resource once no region holds anything of
// it: its record, its status and its revisions, in one step.
func (w *writes) finalize(key string, modRev int64) {
	w.touchedResources, w.touchedStatuses = true, true
	t := w.batch.Step(key)
	tenant, name := state.SplitResourceName(key)
	w.st.Resources.TxnDelete(t, key, modRev)
	w.st.Statuses.TxnDelete(t, key, 0)
	t.DeletePrefix(w.st.Revisions.Key(state.RevisionPrefix(tenant, name)))
}

// ops counts the operations of the pass.
func (w *writes) ops() int { return w.batch.Ops() }

// waitCaches waits until the caches the pass wrote to are current at
// rev, concurrently: a cache it did not write to needs no progress
// request (an etcd round trip) before the next pass.
func (w *writes) waitCaches(ctx context.Context, caches *state.Caches, rev int64) error {
	if rev <= 0 {
		return nil
	}
	var touched []store.RevWaiter
	if w.touchedResources {
		touched = append(touched, caches.Resources)
	}
	if w.touchedStatuses {
		touched = append(touched, caches.Statuses)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return store.WaitForRev(ctx, rev, touched...)
}

// commit writes every step, fenced by guard. It returns the revision of
// the last transaction that applied, also on error.
func (w *writes) commit(ctx context.Context, guard Guard) (int64, error) {
	res, err := w.batch.Guard(guard).Commit(ctx)
	return res.Revision, err
}
