package api

import (
	"fmt"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/region/state"
)

// summarize counts the region's status from its caches.
func summarize(caches *state.Caches, leader string) (api.RegionStatus, error) {
	if !caches.IsSynced() {
		return api.RegionStatus{}, fmt.Errorf("region caches are still loading: %w", api.ErrUnavailable)
	}
	st := api.RegionStatus{
		Health:    api.HealthUp,
		Leader:    leader,
		Nodes:     caches.Nodes.Len(),
		Resources: caches.Placements.Len(),
	}
	for _, it := range caches.NodeStatus.List() {
		if _, ok := caches.Nodes.Get(it.Name); ok && it.Value.Health == api.HealthUp {
			st.NodesUp++
		}
	}
	for _, it := range caches.Assignments.List() {
		if it.Value.Desired != api.DesiredRunning {
			continue
		}
		st.Replicas++
		var status *api.AssignmentStatus
		if sit, ok := caches.Statuses.Get(it.Name); ok {
			status = sit.Value
		}
		if state.ReplicaPhase(it.Value, status) == api.PhaseReady {
			st.Ready++
		}
	}
	return st, nil
}
