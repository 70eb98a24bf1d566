package api

import (
	"context"
	"encoding/json"
	"fmt"

	"google.golang.org/grpc"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/proto/apiproto"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
)

// regionService is RegionService: protobuf in, calls of the services
// that own what is asked, protobuf out. Only the global tier may call it
// (GRPCPolicy).
type regionService struct {
	regionv1.UnimplementedRegionServiceServer
	nodes      *nodes
	placements *placements
	policies   *policies
	replicas   *replicas
	events     EventLog
	summary    func() (api.RegionStatus, error)
}

func (r regionService) ApplyPlacements(ctx context.Context, req *regionv1.ApplyPlacementsRequest) (*regionv1.ApplyPlacementsResponse, error) {
	ps := make([]api.Placement, len(req.GetPlacements()))
	for i, p := range req.GetPlacements() {
		ps[i] = apiproto.PlacementFromPB(p)
	}
	results, err := r.placements.apply(ctx, ps)
	if err != nil {
		return nil, apiErr(err)
	}
	return &regionv1.ApplyPlacementsResponse{Results: resultsToPB(results)}, nil
}

func (r regionService) RemovePlacements(ctx context.Context, req *regionv1.RemovePlacementsRequest) (*regionv1.RemovePlacementsResponse, error) {
	refs := make([]placementRef, len(req.GetPlacements()))
	for i, p := range req.GetPlacements() {
		refs[i] = placementRef{Tenant: p.GetTenant(), Name: p.GetName(), UID: p.GetUid()}
	}
	results, err := r.placements.remove(ctx, refs, req.GetEpoch())
	if err != nil {
		return nil, apiErr(err)
	}
	return &regionv1.RemovePlacementsResponse{Results: resultsToPB(results)}, nil
}

func resultsToPB(results []placementResult) []*regionv1.PlacementResult {
	out := make([]*regionv1.PlacementResult, len(results))
	for i, res := range results {
		out[i] = &regionv1.PlacementResult{Key: res.Key, Applied: res.Applied}
		if res.Err != nil {
			out[i].Error = res.Err.Error()
		}
	}
	return out
}

func (r regionService) WatchShares(_ *regionv1.WatchSharesRequest, stream grpc.ServerStreamingServer[regionv1.WatchSharesResponse]) error {
	ctx := stream.Context()
	return apiErr(r.placements.watchShares(ctx, stream.Send))
}

func (r regionService) ListNodes(ctx context.Context, req *regionv1.ListNodesRequest) (*regionv1.ListNodesResponse, error) {
	nodes, err := r.nodes.list(req.GetSelector(), "", 0)
	if err != nil {
		return nil, apiErr(err)
	}
	out := &regionv1.ListNodesResponse{Items: make([]*resourcev1.Node, len(nodes))}
	for i := range nodes {
		out.Items[i] = apiproto.NodeToPB(&nodes[i])
	}
	return out, nil
}

func (r regionService) GetNode(ctx context.Context, req *regionv1.NodeRef) (*resourcev1.Node, error) {
	n, err := r.nodes.get(req.GetName())
	if err != nil {
		return nil, apiErr(err)
	}
	return apiproto.NodeToPB(&n), nil
}

func (r regionService) DeleteNode(ctx context.Context, req *regionv1.NodeRef) (*regionv1.DeleteNodeResponse, error) {
	if err := r.nodes.delete(ctx, req.GetName()); err != nil {
		return nil, apiErr(err)
	}
	return &regionv1.DeleteNodeResponse{}, nil
}

func (r regionService) CordonNode(ctx context.Context, req *regionv1.CordonNodeRequest) (*resourcev1.Node, error) {
	n, err := r.nodes.cordon(ctx, req.GetName(), req.GetReason())
	if err != nil {
		return nil, apiErr(err)
	}
	return apiproto.NodeToPB(&n), nil
}

func (r regionService) UncordonNode(ctx context.Context, req *regionv1.NodeRef) (*resourcev1.Node, error) {
	n, err := r.nodes.uncordon(ctx, req.GetName())
	if err != nil {
		return nil, apiErr(err)
	}
	return apiproto.NodeToPB(&n), nil
}

func (r regionService) DrainNode(ctx context.Context, req *regionv1.DrainNodeRequest) (*resourcev1.DrainStatus, error) {
	d, err := r.nodes.drain(ctx, req.GetName(), apiproto.DrainRequestFromPB(req.GetDrain()))
	if err != nil {
		return nil, apiErr(err)
	}
	return apiproto.DrainStatusToPB(&d), nil
}

func (r regionService) GetDrain(ctx context.Context, req *regionv1.NodeRef) (*resourcev1.DrainStatus, error) {
	d, err := r.nodes.getDrain(req.GetName())
	if err != nil {
		return nil, apiErr(err)
	}
	return apiproto.DrainStatusToPB(&d), nil
}

func (r regionService) ListReplicas(ctx context.Context, req *regionv1.ListReplicasRequest) (*regionv1.ListReplicasResponse, error) {
	reps, err := r.replicas.list(req.GetTenant(), req.GetResource(), req.GetNode())
	if err != nil {
		return nil, apiErr(err)
	}
	out := &regionv1.ListReplicasResponse{Items: make([]*resourcev1.Replica, len(reps))}
	for i := range reps {
		out.Items[i] = apiproto.ReplicaToPB(&reps[i])
	}
	return out, nil
}

func (r regionService) Logs(req *resourcev1.LogsRequest, stream grpc.ServerStreamingServer[resourcev1.LogChunk]) error {
	ctx := stream.Context()
	return apiErr(r.replicas.logs(ctx, req, stream.Send))
}

func (r regionService) ListEvents(ctx context.Context, req *regionv1.ListEventsRequest) (*regionv1.ListEventsResponse, error) {
	evs, err := listEvents(ctx, r.events, req.GetAfter(), int(req.GetLimit()), req.GetObject(), req.GetTenant())
	if err != nil {
		return nil, apiErr(err)
	}
	out := &regionv1.ListEventsResponse{Items: make([]*resourcev1.Event, len(evs))}
	for i := range evs {
		out.Items[i] = eventToPB(&evs[i])
	}
	return out, nil
}

func (r regionService) Status(ctx context.Context, _ *regionv1.StatusRequest) (*resourcev1.RegionStatus, error) {
	st, err := r.summary()
	if err != nil {
		return nil, apiErr(err)
	}
	return apiproto.RegionStatusToPB(&st), nil
}

func (r regionService) SyncPolicies(ctx context.Context, req *regionv1.SyncPoliciesRequest) (*regionv1.SyncPoliciesResponse, error) {
	ps := make([]api.NetworkPolicy, 0, len(req.GetPolicies()))
	for i, b := range req.GetPolicies() {
		var p api.NetworkPolicy
		if err := json.Unmarshal(b, &p); err != nil {
			return nil, apiErr(api.Invalid(fmt.Sprintf("policies[%d]", i), "not a network policy: %v", err))
		}
		if err := api.ValidateName(fmt.Sprintf("policies[%d].tenant", i), p.Tenant); err != nil {
			return nil, apiErr(err)
		}
		if err := p.Validate(); err != nil {
			return nil, apiErr(err)
		}
		ps = append(ps, p)
	}
	n, err := r.policies.sync(ctx, ps, req.GetEpoch())
	if err != nil {
		return nil, apiErr(err)
	}
	return &regionv1.SyncPoliciesResponse{Changed: int32(n)}, nil
}

func (r regionService) PolicyStatus(ctx context.Context, req *regionv1.PolicyStatusRequest) (*regionv1.PolicyStatusResponse, error) {
	items, err := r.policies.status(ctx, req.GetTenant())
	if err != nil {
		return nil, apiErr(err)
	}
	return &regionv1.PolicyStatusResponse{Items: items}, nil
}
