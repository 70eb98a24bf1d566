package api

import (
	"context"
	"strings"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
	"github.com/stratahq/strata/region/state"
)

// list returns the placements with the region's share of each as
// its status, by tenant/name: those after after, at most limit of them
// (0: all).
func (s *placements) list(after string, limit int) []api.Placement {
	items := s.caches.Placements.Range("", after, limit, nil)
	out := make([]api.Placement, 0, len(items))
	for _, it := range items {
		p := *it.Value
		if sh, ok := s.caches.Shares.Get(it.Name); ok && sh.Value.UID == p.Resource.UID {
			p.Resource.Status = &api.ResourceStatus{
				UID:                sh.Value.UID,
				Phase:              sh.Value.Phase,
				Reason:             sh.Value.Reason,
				ObservedGeneration: sh.Value.ObservedGeneration,
				Revision:           sh.Value.Revision,
				Replicas:           sh.Value.Replicas,
				Ready:              sh.Value.Ready,
				Updated:            sh.Value.Updated,
				Regions:            map[string]api.RegionShare{s.region: sh.Value.RegionShare},
				Backends:           sh.Value.Backends,
				UpdatedAt:          sh.Value.UpdatedAt,
			}
		}
		out = append(out, p)
	}
	return out
}

// watchShares streams the region's shares: one snapshot, then changes.
func (s *placements) watchShares(ctx context.Context, send func(*regionv1.WatchSharesResponse) error) error {
	if err := waitSynced(ctx, s.caches.Shares.Synced()); err != nil {
		return err
	}
	// Subscribe before the snapshot: a change after the snapshot is then
	// sent, and one before it at worst twice.
	w := newWatch[state.Share](s.tune.watchBuffer)
	unsubscribe := s.caches.ShareFeed.Subscribe(w.offer)
	defer unsubscribe()

	items := s.caches.Shares.List()
	snap := &regionv1.WatchSharesResponse{Snapshot: true, Events: make([]*regionv1.ShareEvent, 0, len(items))}
	for _, it := range items {
		snap.Events = append(snap.Events, state.ShareToPB(it.Value))
	}
	if err := send(snap); err != nil {
		return err
	}
	return pump(ctx, w, s.tune.shareWindow, s.tune.maxBatch, func(changes []store.Change[state.Share]) error {
		msg := &regionv1.WatchSharesResponse{Events: make([]*regionv1.ShareEvent, 0, len(changes))}
		for _, c := range changes {
			if c.New != nil {
				msg.Events = append(msg.Events, state.ShareToPB(c.New.Value))
				continue
			}
			tenant, name, _ := strings.Cut(c.Name, "/")
			msg.Events = append(msg.Events, &regionv1.ShareEvent{Tenant: tenant, Name: name, Uid: c.Old.Value.UID, Removed: true})
		}
		return send(msg)
	})
}
