package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/heartbeat"
	"github.com/stratahq/strata/internal/store"
)

// Regions are the registered regions: registrations by hand and by
// heartbeat, with the monitor's view of each region's health and the
// numbers of its last heartbeat.
type Regions struct {
	st          *store.Store
	regions     *store.Collection[api.Region]
	statuses    *store.Collection[api.RegionStatus]
	resources   *store.Collection[api.Resource]
	cache       *store.Cache[api.Region]
	statusCache *store.Cache[api.RegionStatus]
	heartbeats  HeartbeatRecorder
	beatEvery   time.Duration
	log         *slog.Logger
	// wrote is this replica's latest registration, for read-your-writes.
	wrote written
}

// Register registers a region or replaces the registration of a known one
// (endpoint, console URL, zones, labels). created says which.
func (g *Regions) Register(ctx context.Context, r api.Region) (reg api.Region, created bool, err error) {
	if _, err := authorize(ctx, writeRegions); err != nil {
		return api.Region{}, false, err
	}
	if err := admit(ctx, regionAdmission, onRequest, &r); err != nil {
		return api.Region{}, false, err
	}
	return g.save(ctx, r, true, true)
}

// Get returns a region with the monitor's view of it.
func (g *Regions) Get(ctx context.Context, name string) (api.Region, error) {
	if _, err := authorize(ctx, readRegions); err != nil {
		return api.Region{}, err
	}
	if err := api.ValidateName("name", name); err != nil {
		return api.Region{}, err
	}
	it, err := g.regions.Get(ctx, name)
	if err != nil {
		return api.Region{}, storeErr(err, "region", name)
	}
	r := regionView(it)
	st := api.RegionStatus{Health: api.HealthUnknown}
	if cur, err := g.statuses.Get(ctx, name); err == nil {
		st = *cur.Value
	} else if !errors.Is(err, store.ErrNotFound) {
		return api.Region{}, storeErr(err, "region status", name)
	}
	if b, ok := g.beats(ctx)[name]; ok {
		withBeat(&st, b)
	}
	r.Status = &st
	return r, nil
}

// withBeat fills a region status with the numbers and the leader of its
// last heartbeat.
func withBeat(st *api.RegionStatus, b heartbeat.Beat) {
	st.LastHeartbeat = b.At
	st.Leader = b.Attrs["leader"]
	st.Nodes = int(b.Metrics["nodes"])
	st.NodesUp = int(b.Metrics["nodes_up"])
	st.Resources = int(b.Metrics["resources"])
	st.Replicas = int(b.Metrics["replicas"])
	st.Ready = int(b.Metrics["ready"])
	st.Headroom = state.BeatHeadroom(b.Attrs)
}

// List returns every region, by name, from the caches.
func (g *Regions) List(ctx context.Context) ([]api.Region, error) {
	if _, err := authorize(ctx, readRegions); err != nil {
		return nil, err
	}
	return g.all(ctx)
}

// all is List for the API itself, which needs no role to fan out.
func (g *Regions) all(ctx context.Context) ([]api.Region, error) {
	if err := caught(ctx, g.cache, &g.wrote); err != nil {
		return nil, err
	}
	// The monitor writes region status, never this replica: waiting for
	// its first list is enough.
	if err := caught(ctx, g.statusCache, nil); err != nil {
		return nil, err
	}
	items := g.cache.List()
	beats := g.beats(ctx)
	out := make([]api.Region, len(items))
	for i, it := range items {
		out[i] = regionView(it)
		st := api.RegionStatus{Health: api.HealthUnknown}
		if cur, ok := g.statusCache.Get(it.Name); ok {
			st = *cur.Value
		}
		// Health comes from the monitor (etcd, transitions only); the
		// numbers and the last heartbeat from the heartbeat itself.
		if b, ok := beats[it.Name]; ok {
			withBeat(&st, b)
		}
		out[i].Status = &st
	}
	return out, nil
}

// names lists the registered regions' names, sorted.
func (g *Regions) names(ctx context.Context) ([]string, error) {
	if err := caught(ctx, g.cache, &g.wrote); err != nil {
		return nil, err
	}
	items := g.cache.List()
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.Name
	}
	return out, nil
}

// known returns whether a region is registered, as of this replica's
// latest registration.
func (g *Regions) known(ctx context.Context) (func(name string) bool, error) {
	if err := caught(ctx, g.cache, &g.wrote); err != nil {
		return nil, err
	}
	return func(name string) bool {
		_, ok := g.cache.Get(name)
		return ok
	}, nil
}

// beats are the regions' last heartbeats, when the heartbeat store can
// list them; without them regions show their health only.
func (g *Regions) beats(ctx context.Context) map[string]heartbeat.Beat {
	lister, ok := g.heartbeats.(interface {
		List(ctx context.Context) ([]heartbeat.Beat, error)
	})
	if !ok {
		return nil
	}
	beats, err := lister.List(ctx)
	if err != nil {
		g.log.Warn("cannot read region heartbeats", "err", err)
		return nil
	}
	out := make(map[string]heartbeat.Beat, len(beats))
	for _, b := range beats {
		out[b.ID] = b
	}
	return out
}

// Delete removes a region no resource names, with its status, and returns
// it. Its nodes and replicas are the region's business.
func (g *Regions) Delete(ctx context.Context, name string) (api.Region, error) {
	if _, err := authorize(ctx, writeRegions); err != nil {
		return api.Region{}, err
	}
	if err := api.ValidateName("name", name); err != nil {
		return api.Region{}, err
	}
	it, err := g.regions.Get(ctx, name)
	if err != nil {
		return api.Region{}, storeErr(err, "region", name)
	}
	// From etcd, as for flavors: a resource left pointing at a deleted
	// region would never be placed.
	resources, _, err := g.resources.ListAll(ctx)
	if err != nil {
		return api.Region{}, storeErr(err, "resources", "")
	}
	for _, r := range resources {
		if usesRegion(r.Value, name) {
			tenant, rname := state.SplitResourceName(r.Name)
			return api.Region{}, fmt.Errorf("region %q is named by resource %q of tenant %q: %w", name, rname, tenant, api.ErrConflict)
		}
	}
	txn := g.st.Txn()
	g.regions.TxnDelete(txn, name, it.ModRevision)
	g.statuses.TxnDelete(txn, name, 0)
	rev, err := txn.Commit(ctx)
	if err != nil {
		return api.Region{}, storeErr(err, "region", name)
	}
	g.wrote.note(rev)
	return regionView(it), nil
}

// Heartbeat records that region r is alive (in the heartbeat store, not
// etcd) and registers it when its registration (endpoint, console URL,
// zones) is new or changed, or when the beat is the first of the region's
// process (seq 1): a region that restarted registers again, refreshing
// registeredAt. A steady heartbeat writes nothing to etcd. It returns the
// interval the region should beat at. The caller has established that r
// is who is calling.
func (g *Regions) Heartbeat(ctx context.Context, r api.Region, seq uint64, st *api.RegionStatus) (time.Duration, error) {
	if err := admit(ctx, regionAdmission, onRequest, &r); err != nil {
		return 0, err
	}
	if g.heartbeats == nil {
		return 0, fmt.Errorf("no heartbeat store is configured: %w", api.ErrUnavailable)
	}
	beat := heartbeat.Beat{ID: r.Name, At: now(), Seq: seq, Metrics: regionMetrics(st), Attrs: regionAttrs(st)}
	if err := g.heartbeats.Record(ctx, beat); err != nil {
		return 0, fmt.Errorf("record heartbeat of region %q: %w", r.Name, err)
	}
	if seq == 1 || !g.registeredAs(r) {
		if _, _, err := g.save(ctx, r, false, seq == 1); err != nil {
			return 0, err
		}
	}
	return g.beatEvery, nil
}

// regionMetrics are the numbers a region reports about itself, kept with
// its beat for the console.
func regionMetrics(st *api.RegionStatus) map[string]float64 {
	if st == nil {
		return nil
	}
	return map[string]float64{
		"nodes":     float64(st.Nodes),
		"nodes_up":  float64(st.NodesUp),
		"resources": float64(st.Resources),
		"replicas":  float64(st.Replicas),
		"ready":     float64(st.Ready),
	}
}

// regionAttrs are what a region reports about itself that is not a
// number: its leader, which changes too rarely to be worth more than the
// beat that carries it, and too often to be the registration's.
func regionAttrs(st *api.RegionStatus) map[string]string {
	if st == nil {
		return nil
	}
	attrs := map[string]string{}
	if st.Leader != "" {
		attrs["leader"] = st.Leader
	}
	if h, err := state.EncodeHeadroom(st.Headroom); err == nil {
		attrs[state.HeadroomAttr] = h
	}
	if len(st.Load) > 0 {
		if l, err := state.EncodeLoad(st.Load); err == nil {
			attrs[state.LoadAttr] = l
		}
	}
	return attrs
}

// save creates in's registration or brings a stored one in line with it.
// A registration (register: by hand, or a region process's first
// heartbeat) or a change refreshes registeredAt, which the region monitor
// takes as evidence of life that survives the heartbeat store losing its
// beats; otherwise nothing is written when nothing differs. Labels are an
// operator's and only replaced when withLabels (not from a heartbeat).
func (g *Regions) save(ctx context.Context, in api.Region, withLabels, register bool) (out api.Region, created bool, err error) {
	err = g.st.RetryConflicts(ctx, "register region "+in.Name, func() error {
		it, err := g.regions.Get(ctx, in.Name)
		if errors.Is(err, store.ErrNotFound) {
			out, created, err = g.create(ctx, in)
			return err
		}
		if err != nil {
			return err
		}
		out, err = g.update(ctx, it, in, withLabels, register)
		return err
	})
	return out, created, storeErr(err, "region", in.Name)
}

func (g *Regions) create(ctx context.Context, in api.Region) (api.Region, bool, error) {
	r := api.Region{
		Name: in.Name, Endpoint: in.Endpoint, ConsoleURL: in.ConsoleURL,
		Zones: in.Zones, Labels: in.Labels, RegisteredAt: now(),
	}
	rev, err := g.regions.Create(ctx, r.Name, &r)
	if errors.Is(err, store.ErrExists) {
		// Registered meanwhile: a lost race, to compare with the winner.
		return api.Region{}, false, fmt.Errorf("region %q: %w", r.Name, store.ErrConflict)
	}
	if err != nil {
		return api.Region{}, false, err
	}
	g.wrote.note(rev)
	g.log.Info("region registered", "region", r.Name, "endpoint", r.Endpoint)
	r.ResourceVersion = rev
	return r, true, nil
}

func (g *Regions) update(ctx context.Context, it store.Item[api.Region], in api.Region, withLabels, register bool) (api.Region, error) {
	next := *it.Value
	next.Endpoint, next.ConsoleURL, next.Zones = in.Endpoint, in.ConsoleURL, in.Zones
	if withLabels {
		next.Labels = in.Labels
	}
	if !register && api.SameJSON(it.Value, &next) {
		return regionView(it), nil
	}
	next.RegisteredAt = now()
	rev, err := g.regions.Update(ctx, in.Name, &next, it.ModRevision)
	if err != nil {
		return api.Region{}, err
	}
	g.wrote.note(rev)
	g.log.Info("region registration changed", "region", in.Name, "endpoint", next.Endpoint)
	it.Value, it.ModRevision = &next, rev
	return regionView(it), nil
}

// registeredAs reports whether the cache holds r's registration with the
// fields a heartbeat carries, so that a steady heartbeat costs no etcd
// access.
func (g *Regions) registeredAs(r api.Region) bool {
	it, ok := g.cache.Get(r.Name)
	if !ok {
		return false
	}
	c := it.Value
	return c.Endpoint == r.Endpoint && c.ConsoleURL == r.ConsoleURL && slices.Equal(c.Zones, r.Zones)
}

func usesRegion(r *api.Resource, region string) bool {
	if _, ok := r.Overrides[region]; ok {
		return true
	}
	if slices.ContainsFunc(r.Schedule.Regions, func(t api.RegionTarget) bool { return t.Name == region }) {
		return true
	}
	return r.Failover != nil && slices.Contains(r.Failover.ToRegions, region)
}

func regionView(it store.Item[api.Region]) api.Region {
	r := *it.Value
	r.ResourceVersion, r.Status = it.ModRevision, nil
	return r
}

// HeartbeatRecorder records region heartbeats (heartbeat.Store). If it
// also lists them (List(ctx) ([]heartbeat.Beat, error)), regions show the
// numbers of their last beat.
type HeartbeatRecorder interface {
	Record(ctx context.Context, b heartbeat.Beat) error
}
