package api

import (
	"context"
	"errors"
	"io"
	"time"

	"google.golang.org/grpc"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/transport"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	"github.com/stratahq/strata/proto/apiproto"
)

// agentService is AgentService: what the agents send up (registrations,
// heartbeats, statuses) and the streams down to them, each call handed to
// the service that owns it. An agent may act only for its own node of
// this region.
type agentService struct {
	agentv1.UnimplementedAgentServiceServer
	region     string
	hbInterval time.Duration
	nodes      *nodes
	beats      *beats
	statuses   *statuses
	streams    *agentStreams
	configs    *configRelay
}

func (a agentService) Register(ctx context.Context, req *agentv1.RegisterRequest) (*agentv1.RegisterResponse, error) {
	n := apiproto.NodeFromPB(req.GetNode())
	if err := a.authorize(ctx, n.Name); err != nil {
		return nil, err
	}
	stored, err := a.nodes.register(ctx, n)
	if err != nil {
		return nil, apiErr(err)
	}
	return &agentv1.RegisterResponse{Node: apiproto.NodeToPB(&stored), HeartbeatIntervalMs: a.hbInterval.Milliseconds()}, nil
}

func (a agentService) Heartbeat(ctx context.Context, req *agentv1.HeartbeatRequest) (*agentv1.HeartbeatResponse, error) {
	if err := a.authorize(ctx, req.GetNode()); err != nil {
		return nil, err
	}
	reregister, err := a.beats.record(ctx, req.GetNode(), req.GetSeq(), apiproto.ConditionsFromPB(req.GetConditions()), req.GetMetrics())
	if err != nil {
		return nil, apiErr(err)
	}
	return &agentv1.HeartbeatResponse{HeartbeatIntervalMs: a.hbInterval.Milliseconds(), Reregister: reregister}, nil
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
	return apiErr(a.streams.watchAssignments(ctx, req.GetNode(), stream.Send))
}

func (a agentService) WatchNetwork(req *agentv1.WatchNetworkRequest, stream grpc.ServerStreamingServer[agentv1.NetworkBatch]) error {
	ctx := stream.Context()
	if err := a.authorize(ctx, req.GetNode()); err != nil {
		return err
	}
	return apiErr(a.streams.watchNetwork(ctx, req.GetNode(), stream.Send))
}

func (a agentService) ReportStatus(ctx context.Context, req *agentv1.ReportStatusRequest) (*agentv1.ReportStatusResponse, error) {
	if err := a.authorize(ctx, req.GetNode()); err != nil {
		return nil, err
	}
	statuses := make([]api.AssignmentStatus, len(req.GetStatuses()))
	for i, st := range req.GetStatuses() {
		statuses[i] = apiproto.AssignmentStatusFromPB(st)
	}
	if err := a.statuses.report(ctx, req.GetNode(), statuses); err != nil {
		return nil, apiErr(err)
	}
	return &agentv1.ReportStatusResponse{}, nil
}

// GetConfigData passes the data of the Configs and Secrets one of the
// caller's assignments names from the global tier to the caller. Only the
// node the assignment is on may ask, and only for what its spec names;
// the region keeps and logs none of it.
func (a agentService) GetConfigData(ctx context.Context, req *agentv1.GetConfigDataRequest) (*agentv1.GetConfigDataResponse, error) {
	if err := a.authorize(ctx, req.GetNode()); err != nil {
		return nil, err
	}
	resp, err := a.configs.get(ctx, req.GetNode(), req.GetAssignmentId())
	if err != nil {
		return nil, apiErr(err)
	}
	return resp, nil
}

// authorize checks that a call names a node and that the caller is that
// node of this region: node:<region>/<node>.
func (a agentService) authorize(ctx context.Context, node string) error {
	if node == "" {
		return api.Invalid("node", "is required")
	}
	return transport.AuthorizeNode(ctx, a.region, node)
}
