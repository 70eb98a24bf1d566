package api

import (
	"context"
	"fmt"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
	"github.com/stratahq/strata/region/state"
)

// policies owns the region's copy of the network policies, which the
// global tier's master syncs whole under the epoch fence, and the status
// of each (status). Their enforcement is the agents' (network.go).
type policies struct {
	core
	fence *epochFence
}

// sync makes the region's policies the set ps, which the master
// sends whole: what differs is written, what is missing removed, fenced
// by meta/epoch like placements. It returns how many policies changed.
func (s *policies) sync(ctx context.Context, ps []api.NetworkPolicy, epoch int64) (int, error) {
	for attempt := 1; ; attempt++ {
		ep, err := s.fence.read(ctx)
		if err != nil {
			return 0, err
		}
		if epoch < ep.Epoch.Epoch {
			return 0, fmt.Errorf("%s: %w", staleEpoch(epoch, ep.Epoch.Epoch), api.ErrConflict)
		}
		if err := waitSynced(ctx, s.caches.Policies.Synced()); err != nil {
			return 0, err
		}
		ep.Epoch.Epoch = epoch
		n, err := s.writePolicies(ctx, &ep, ps)
		if err != nil && retryable(err) && attempt < planAttempts {
			continue
		}
		return n, err
	}
}

// writePolicies writes the difference between ps and the cache in one
// batch, each transaction also moving meta/epoch (see writePlacements).
func (s *policies) writePolicies(ctx context.Context, ep *epochState, ps []api.NetworkPolicy) (int, error) {
	b := s.st.Store.Batch().Every(func(txn *store.Txn, prev int64) {
		if prev > 0 {
			ep.modRev = prev
		}
		if ep.modRev == 0 {
			_ = s.st.Meta.TxnCreate(txn, "epoch", &ep.Epoch)
		} else {
			_ = s.st.Meta.TxnUpdate(txn, "epoch", &ep.Epoch, ep.modRev)
		}
	})
	want := make(map[string]bool, len(ps))
	n := 0
	for i := range ps {
		p := &ps[i]
		key := p.Key()
		want[key] = true
		p.Status, p.ResourceVersion = nil, 0
		if cur, ok := s.caches.Policies.Get(key); ok && api.SameJSON(cur.Value, p) {
			continue
		}
		_ = s.st.Policies.TxnPut(b.Step(key), key, p)
		n++
	}
	for _, it := range s.caches.Policies.List() {
		if !want[it.Name] {
			s.st.Policies.TxnDelete(b.Step(it.Name), it.Name, 0)
			n++
		}
	}
	if n == 0 {
		return 0, nil
	}
	res, err := b.Commit(ctx)
	// meta/epoch moved (or may have): the next placement call reads it.
	s.fence.forget()
	if err != nil {
		return 0, err
	}
	if res.Revision > 0 {
		ep.modRev = res.Revision
	}
	s.log.Info("network policies synced", "changed", n, "policies", len(ps))
	return n, s.caches.Policies.WaitForRev(ctx, res.Revision)
}

// status says, for each of tenant's policies, the generation the
// region holds, and how many replicas it selects on how many nodes (the
// nodes whose hosts enforce it).
func (s *policies) status(ctx context.Context, tenant string) ([]*regionv1.PolicyRegionStatus, error) {
	if err := api.ValidateName("tenant", tenant); err != nil {
		return nil, err
	}
	for _, synced := range []<-chan struct{}{s.caches.Policies.Synced(), s.caches.Assignments.Synced()} {
		if err := waitSynced(ctx, synced); err != nil {
			return nil, err
		}
	}
	pols := s.caches.Policies.ListPrefix(tenant + "/")
	if len(pols) == 0 {
		return nil, nil
	}
	eps := endpointsOf(s.caches.Assignments.ByIndex(state.AssignmentsByTenant, tenant, "", "", 0, nil), map[string]bool{tenant: true}, s.caches.Statuses)
	out := make([]*regionv1.PolicyRegionStatus, 0, len(pols))
	for _, it := range pols {
		p := it.Value
		nodes := map[string]bool{}
		replicas := 0
		for _, e := range eps {
			if p.Selects(e.GetTenant(), e.GetLabels()) {
				replicas++
				nodes[e.GetNode()] = true
			}
		}
		out = append(out, &regionv1.PolicyRegionStatus{Name: p.Name, ObservedGeneration: p.Generation, Replicas: int32(replicas), Nodes: int32(len(nodes))})
	}
	return out, nil
}

// endpointsOf are the replicas of tenants that have an address: running
// (not being destroyed), placed, attached to a network; each says
// whether it is ready (by its status in statuses) and the ports it
// declares.
func endpointsOf(as []store.Item[api.Assignment], tenants map[string]bool, statuses *store.Cache[api.AssignmentStatus]) map[string]*agentv1.NetworkEndpoint {
	out := map[string]*agentv1.NetworkEndpoint{}
	for _, it := range as {
		a := it.Value
		if !tenants[a.Tenant] || !hasAddress(a) {
			continue
		}
		out[a.ID] = &agentv1.NetworkEndpoint{Id: a.ID, Address: a.Network.Address, Tenant: a.Tenant, Resource: a.Resource, Labels: a.Labels, Node: a.Node,
			Ready: replicaReady(a, statuses), Ports: endpointPorts(a)}
	}
	return out
}

// replicaReady reports whether a's phase is ready: its status, on the
// node it is assigned to, says so (state.ReplicaPhase).
func replicaReady(a *api.Assignment, statuses *store.Cache[api.AssignmentStatus]) bool {
	var st *api.AssignmentStatus
	if it, ok := statuses.Get(a.ID); ok {
		st = it.Value
	}
	return state.ReplicaPhase(a, st) == api.PhaseReady
}

// endpointPorts are the container ports a compute replica declares
// (ComputeSpec.AllPorts); other replicas have none.
func endpointPorts(a *api.Assignment) []*agentv1.EndpointPort {
	if a.Spec.Compute == nil {
		return nil
	}
	ps := a.Spec.Compute.AllPorts()
	if len(ps) == 0 {
		return nil
	}
	out := make([]*agentv1.EndpointPort, len(ps))
	for i, p := range ps {
		out[i] = &agentv1.EndpointPort{Name: p.Name, Protocol: p.Protocol, Port: int32(p.ContainerPort)}
	}
	return out
}

func hasAddress(a *api.Assignment) bool {
	return a.Desired == api.DesiredRunning && a.Node != "" && a.Network != nil && a.Network.Address != ""
}
