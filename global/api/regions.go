package api

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/heartbeat"
	"github.com/stratahq/strata/internal/store"
)

// RegisterRegion registers a region or replaces the registration of a known
// one (endpoint, console URL, zones, labels). created says which.
func (s *Service) RegisterRegion(ctx context.Context, r api.Region) (reg api.Region, created bool, err error) {
	if _, err := authorize(ctx, writeRegions); err != nil {
		return api.Region{}, false, err
	}
	if err := r.Validate(); err != nil {
		return api.Region{}, false, err
	}
	return s.saveRegion(ctx, r, true, true)
}

// GetRegion returns a region with the monitor's view of it.
func (s *Service) GetRegion(ctx context.Context, name string) (api.Region, error) {
	if _, err := authorize(ctx, readRegions); err != nil {
		return api.Region{}, err
	}
	if err := api.ValidateName("name", name); err != nil {
		return api.Region{}, err
	}
	it, err := s.st.Regions.Get(ctx, name)
	if err != nil {
		return api.Region{}, storeErr(err, "region", name)
	}
	r := regionView(it)
	st := api.RegionStatus{Health: api.HealthUnknown}
	if cur, err := s.st.RegionStatus.Get(ctx, name); err == nil {
		st = *cur.Value
	} else if !errors.Is(err, store.ErrNotFound) {
		return api.Region{}, storeErr(err, "region status", name)
	}
	if b, ok := s.regionBeats(ctx)[name]; ok {
		withBeat(&st, b)
	}
	r.Status = &st
	return r, nil
}

// withBeat fills a region status with the numbers of its last heartbeat.
func withBeat(st *api.RegionStatus, b heartbeat.Beat) {
	st.LastHeartbeat = b.At
	st.Nodes = int(b.Metrics["nodes"])
	st.NodesUp = int(b.Metrics["nodes_up"])
	st.Resources = int(b.Metrics["resources"])
	st.Replicas = int(b.Metrics["replicas"])
	st.Ready = int(b.Metrics["ready"])
}

// ListRegions returns every region, by name, from the caches.
func (s *Service) ListRegions(ctx context.Context) ([]api.Region, error) {
	if _, err := authorize(ctx, readRegions); err != nil {
		return nil, err
	}
	return s.listRegions(ctx)
}

func (s *Service) listRegions(ctx context.Context) ([]api.Region, error) {
	if err := caught(ctx, s.regionCache, &s.wroteRegions); err != nil {
		return nil, err
	}
	// The monitor writes region status, never this replica: waiting for
	// its first list is enough.
	if err := caught(ctx, s.regionStatus, nil); err != nil {
		return nil, err
	}
	items := s.regionCache.List()
	beats := s.regionBeats(ctx)
	out := make([]api.Region, len(items))
	for i, it := range items {
		out[i] = regionView(it)
		st := api.RegionStatus{Health: api.HealthUnknown}
		if cur, ok := s.regionStatus.Get(it.Name); ok {
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

// regionBeats are the regions' last heartbeats, when the heartbeat store
// can list them; without them regions show their health only.
func (s *Service) regionBeats(ctx context.Context) map[string]heartbeat.Beat {
	lister, ok := s.heartbeats.(interface {
		List(ctx context.Context) ([]heartbeat.Beat, error)
	})
	if !ok {
		return nil
	}
	beats, err := lister.List(ctx)
	if err != nil {
		s.log.Warn("cannot read region heartbeats", "err", err)
		return nil
	}
	out := make(map[string]heartbeat.Beat, len(beats))
	for _, b := range beats {
		out[b.ID] = b
	}
	return out
}

// DeleteRegion removes a region no resource names, with its status, and
// returns it. Its nodes and replicas are the region's business.
func (s *Service) DeleteRegion(ctx context.Context, name string) (api.Region, error) {
	if _, err := authorize(ctx, writeRegions); err != nil {
		return api.Region{}, err
	}
	if err := api.ValidateName("name", name); err != nil {
		return api.Region{}, err
	}
	it, err := s.st.Regions.Get(ctx, name)
	if err != nil {
		return api.Region{}, storeErr(err, "region", name)
	}
	// From etcd, as for flavors: a resource left pointing at a deleted
	// region would never be placed.
	resources, _, err := s.st.Resources.ListAll(ctx)
	if err != nil {
		return api.Region{}, storeErr(err, "resources", "")
	}
	for _, r := range resources {
		if usesRegion(r.Value, name) {
			tenant, rname := state.SplitResourceName(r.Name)
			return api.Region{}, fmt.Errorf("region %q is named by resource %q of tenant %q: %w", name, rname, tenant, api.ErrConflict)
		}
	}
	txn := s.st.Store.Txn()
	s.st.Regions.TxnDelete(txn, name, it.ModRevision)
	s.st.RegionStatus.TxnDelete(txn, name, 0)
	rev, err := txn.Commit(ctx)
	if err != nil {
		return api.Region{}, storeErr(err, "region", name)
	}
	s.wroteRegions.note(rev)
	return regionView(it), nil
}

// saveRegion creates r's registration or brings a stored one in line with
// it. A registration (register: by hand, or a region process's first
// heartbeat) or a change refreshes registeredAt, which the region monitor
// takes as evidence of life that survives the heartbeat store losing its
// beats; otherwise nothing is written when nothing differs. Labels are an
// operator's and only replaced when withLabels (not from a heartbeat).
func (s *Service) saveRegion(ctx context.Context, in api.Region, withLabels, register bool) (api.Region, bool, error) {
	for attempt := 1; ; attempt++ {
		it, err := s.st.Regions.Get(ctx, in.Name)
		if errors.Is(err, store.ErrNotFound) {
			r := api.Region{
				Name: in.Name, Endpoint: in.Endpoint, ConsoleURL: in.ConsoleURL,
				Zones: in.Zones, Labels: in.Labels, RegisteredAt: now(),
			}
			rev, err := s.st.Regions.Create(ctx, r.Name, &r)
			if errors.Is(err, store.ErrExists) && attempt < writeAttempts {
				continue // registered meanwhile: compare with that
			}
			if err != nil {
				return api.Region{}, false, storeErr(err, "region", r.Name)
			}
			s.wroteRegions.note(rev)
			s.log.Info("region registered", "region", r.Name, "endpoint", r.Endpoint)
			r.ResourceVersion = rev
			return r, true, nil
		}
		if err != nil {
			return api.Region{}, false, storeErr(err, "region", in.Name)
		}
		next := *it.Value
		next.Endpoint, next.ConsoleURL, next.Zones = in.Endpoint, in.ConsoleURL, in.Zones
		if withLabels {
			next.Labels = in.Labels
		}
		if !register && api.SameJSON(it.Value, &next) {
			return regionView(it), false, nil
		}
		next.RegisteredAt = now()
		rev, err := s.st.Regions.Update(ctx, in.Name, &next, it.ModRevision)
		if errors.Is(err, store.ErrConflict) && attempt < writeAttempts {
			continue
		}
		if err != nil {
			return api.Region{}, false, storeErr(err, "region", in.Name)
		}
		s.wroteRegions.note(rev)
		s.log.Info("region registration changed", "region", in.Name, "endpoint", next.Endpoint)
		it.Value, it.ModRevision = &next, rev
		return regionView(it), false, nil
	}
}

// registeredAs reports whether the cache holds r's registration with the
// fields a heartbeat carries, so that a steady heartbeat costs no etcd
// access.
func (s *Service) registeredAs(r api.Region) bool {
	it, ok := s.regionCache.Get(r.Name)
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
