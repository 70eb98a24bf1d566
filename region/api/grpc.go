package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/internal/transport"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	"github.com/stratahq/strata/proto/apiproto"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
)

// GRPCPolicy says who may call the region's gRPC services: RegionService
// is the global tier's (global:*), with room for its large batches;
// AgentService is this region's agents' (node:<region>/*), each acting
// for its own node only (checked per call, agentService.authorize), with small
// messages.
func (s *Server) GRPCPolicy() transport.Policy {
	var audited transport.Auditor
	if s.audit != nil {
		audited = s.auditGRPC
	}
	return transport.Policy{
		regionv1.RegionService_ServiceDesc.ServiceName: {Kinds: []pki.Kind{pki.KindGlobal}, MaxRecvBytes: transport.LargeMessageBytes, Audit: audited},
		agentv1.AgentService_ServiceDesc.ServiceName:   {Kinds: []pki.Kind{pki.KindNode}, Region: s.region, Audit: audited},
	}
}

// regionService is RegionService: protobuf in, domain calls, protobuf
// out. Only the global tier may call it (GRPCPolicy).
type regionService struct {
	regionv1.UnimplementedRegionServiceServer
	s *Server
}

func (r regionService) ApplyPlacements(ctx context.Context, req *regionv1.ApplyPlacementsRequest) (*regionv1.ApplyPlacementsResponse, error) {
	ps := make([]api.Placement, len(req.GetPlacements()))
	for i, p := range req.GetPlacements() {
		ps[i] = apiproto.PlacementFromPB(p)
	}
	results, err := r.s.applyPlacements(ctx, ps)
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
	results, err := r.s.removePlacements(ctx, refs, req.GetEpoch())
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
	return apiErr(r.s.watchShares(ctx, stream.Send))
}

func (r regionService) ListNodes(ctx context.Context, req *regionv1.ListNodesRequest) (*regionv1.ListNodesResponse, error) {
	nodes, err := r.s.listNodes(req.GetSelector(), "", 0)
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
	n, err := r.s.getNode(req.GetName())
	if err != nil {
		return nil, apiErr(err)
	}
	return apiproto.NodeToPB(&n), nil
}

func (r regionService) DeleteNode(ctx context.Context, req *regionv1.NodeRef) (*regionv1.DeleteNodeResponse, error) {
	if err := r.s.deleteNode(ctx, req.GetName()); err != nil {
		return nil, apiErr(err)
	}
	return &regionv1.DeleteNodeResponse{}, nil
}

func (r regionService) CordonNode(ctx context.Context, req *regionv1.CordonNodeRequest) (*resourcev1.Node, error) {
	n, err := r.s.cordon(ctx, req.GetName(), req.GetReason())
	if err != nil {
		return nil, apiErr(err)
	}
	return apiproto.NodeToPB(&n), nil
}

func (r regionService) UncordonNode(ctx context.Context, req *regionv1.NodeRef) (*resourcev1.Node, error) {
	n, err := r.s.uncordon(ctx, req.GetName())
	if err != nil {
		return nil, apiErr(err)
	}
	return apiproto.NodeToPB(&n), nil
}

func (r regionService) DrainNode(ctx context.Context, req *regionv1.DrainNodeRequest) (*resourcev1.DrainStatus, error) {
	d, err := r.s.drain(ctx, req.GetName(), apiproto.DrainRequestFromPB(req.GetDrain()))
	if err != nil {
		return nil, apiErr(err)
	}
	return apiproto.DrainStatusToPB(&d), nil
}

func (r regionService) GetDrain(ctx context.Context, req *regionv1.NodeRef) (*resourcev1.DrainStatus, error) {
	d, err := r.s.getDrain(req.GetName())
	if err != nil {
		return nil, apiErr(err)
	}
	return apiproto.DrainStatusToPB(&d), nil
}

func (r regionService) ListReplicas(ctx context.Context, req *regionv1.ListReplicasRequest) (*regionv1.ListReplicasResponse, error) {
	reps, err := r.s.listReplicas(req.GetTenant(), req.GetResource(), req.GetNode())
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
	return apiErr(r.s.logs(ctx, req, stream.Send))
}

func (r regionService) ListEvents(ctx context.Context, req *regionv1.ListEventsRequest) (*regionv1.ListEventsResponse, error) {
	evs, err := r.s.listEvents(ctx, req.GetAfter(), int(req.GetLimit()), req.GetObject(), req.GetTenant())
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
	st, err := r.s.Summary()
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
	n, err := r.s.syncPolicies(ctx, ps, req.GetEpoch())
	if err != nil {
		return nil, apiErr(err)
	}
	return &regionv1.SyncPoliciesResponse{Changed: int32(n)}, nil
}

func (r regionService) PolicyStatus(ctx context.Context, req *regionv1.PolicyStatusRequest) (*regionv1.PolicyStatusResponse, error) {
	items, err := r.s.policyStatus(ctx, req.GetTenant())
	if err != nil {
		return nil, apiErr(err)
	}
	return &regionv1.PolicyStatusResponse{Items: items}, nil
}

// agentService is AgentService. An agent may act only for its own node
// of this region.
type agentService struct {
	agentv1.UnimplementedAgentServiceServer
	s *Server
}

func (a agentService) Register(ctx context.Context, req *agentv1.RegisterRequest) (*agentv1.RegisterResponse, error) {
	n := apiproto.NodeFromPB(req.GetNode())
	if err := a.authorize(ctx, n.Name); err != nil {
		return nil, err
	}
	stored, err := a.s.register(ctx, n)
	if err != nil {
		return nil, apiErr(err)
	}
	return &agentv1.RegisterResponse{Node: apiproto.NodeToPB(&stored), HeartbeatIntervalMs: a.s.hbInterval.Milliseconds()}, nil
}

func (a agentService) Heartbeat(ctx context.Context, req *agentv1.HeartbeatRequest) (*agentv1.HeartbeatResponse, error) {
	if err := a.authorize(ctx, req.GetNode()); err != nil {
		return nil, err
	}
	reregister, err := a.s.heartbeat(ctx, req.GetNode(), req.GetSeq(), apiproto.ConditionsFromPB(req.GetConditions()), req.GetMetrics())
	if err != nil {
		return nil, apiErr(err)
	}
	return &agentv1.HeartbeatResponse{HeartbeatIntervalMs: a.s.hbInterval.Milliseconds(), Reregister: reregister}, nil
}

// StreamHeartbeats is Heartbeat on one stream: a request in, its
// response out, with no per-beat call (headers, trailers, a goroutine)
// for the region to pay. Every request is authorized as a Heartbeat call
// is: a node beats for itself only. A beat the region fails to record
// ends the stream with that error, as the call would have failed.
//
// The beats are received by a goroutine of the stream's own, so that the
// stream ends as soon as its context does (the replica stops) rather
// than at the agent's next beat: a receive does not heed the context.
func (a agentService) StreamHeartbeats(stream grpc.BidiStreamingServer[agentv1.HeartbeatRequest, agentv1.HeartbeatResponse]) error {
	ctx := stream.Context()
	type received struct {
		req *agentv1.HeartbeatRequest
		err error
	}
	// Unbuffered: the receiver takes the next beat only once this one is
	// answered, as a loop of receive and send would. Once the handler
	// returns, gRPC ends the stream and the receive fails.
	beats := make(chan received)
	go func() {
		for {
			req, err := stream.Recv()
			select {
			case beats <- received{req, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	for {
		var r received
		select {
		case r = <-beats:
		case <-ctx.Done():
			return ctx.Err()
		}
		req, err := r.req, r.err
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		resp, err := a.Heartbeat(ctx, req)
		if err != nil {
			return err
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

func (a agentService) WatchAssignments(req *agentv1.WatchAssignmentsRequest, stream grpc.ServerStreamingServer[agentv1.AssignmentBatch]) error {
	ctx := stream.Context()
	if err := a.authorize(ctx, req.GetNode()); err != nil {
		return err
	}
	return apiErr(a.s.watchAssignments(ctx, req.GetNode(), stream.Send))
}

func (a agentService) WatchNetwork(req *agentv1.WatchNetworkRequest, stream grpc.ServerStreamingServer[agentv1.NetworkBatch]) error {
	ctx := stream.Context()
	if err := a.authorize(ctx, req.GetNode()); err != nil {
		return err
	}
	return apiErr(a.s.watchNetwork(ctx, req.GetNode(), stream.Send))
}

func (a agentService) ReportStatus(ctx context.Context, req *agentv1.ReportStatusRequest) (*agentv1.ReportStatusResponse, error) {
	if err := a.authorize(ctx, req.GetNode()); err != nil {
		return nil, err
	}
	statuses := make([]api.AssignmentStatus, len(req.GetStatuses()))
	for i, st := range req.GetStatuses() {
		statuses[i] = apiproto.AssignmentStatusFromPB(st)
	}
	if err := a.s.reportStatus(ctx, req.GetNode(), statuses); err != nil {
		return nil, apiErr(err)
	}
	return &agentv1.ReportStatusResponse{}, nil
}

// authorize checks that a call names a node and that the caller is that
// node of this region: node:<region>/<node>.
func (a agentService) authorize(ctx context.Context, node string) error {
	if node == "" {
		return api.Invalid("node", "is required")
	}
	return transport.AuthorizeNode(ctx, a.s.region, node)
}
