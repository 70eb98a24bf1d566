package api

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/internal/transport"
	"github.com/stratahq/strata/internal/transport/transporttest"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
)

// TestSecurityRegionPeers serves the region's gRPC API over mutual TLS as
// region.Server does and replays what each identity may and may not do:
// an agent acts only for its own node of this region, only the global
// tier calls RegionService, and nobody calls anything without a
// certificate.
func TestSecurityRegionPeers(t *testing.T) {
	e := newEnv(t)
	ca := transporttest.NewPKI(t)
	addr := transporttest.Serve(t, ca.Security(t, pki.Region(testRegion)), e.srv.GRPCPolicy(), testLogger(t), e.srv.RegisterGRPC)
	server := transport.ServerIs(pki.Region(testRegion))
	dial := func(id pki.Identity) *grpc.ClientConn {
		return transporttest.Dial(t, addr, ca.Security(t, id), server)
	}
	anonSec, err := transport.TokenClient(ca.TLS(t, pki.Region(testRegion)).CA)
	if err != nil {
		t.Fatal(err)
	}
	var (
		node        = dial(pki.Node(testRegion, "n1"))
		otherRegion = dial(pki.Node("r2", "n1")) // same node name, another region
		global      = dial(pki.Global("g1"))
		regionPeer  = dial(pki.Region(testRegion))
		anonymous   = transporttest.Dial(t, addr, anonSec, server)
	)
	agent := func(cc *grpc.ClientConn) agentv1.AgentServiceClient { return agentv1.NewAgentServiceClient(cc) }
	regionSvc := func(cc *grpc.ClientConn) regionv1.RegionServiceClient { return regionv1.NewRegionServiceClient(cc) }
	register := func(cc *grpc.ClientConn, name string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := agent(cc).Register(ctx, &agentv1.RegisterRequest{Node: testNode(name)})
			return err
		}
	}
	heartbeat := func(cc *grpc.ClientConn, name string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := agent(cc).Heartbeat(ctx, &agentv1.HeartbeatRequest{Node: name})
			return err
		}
	}
	// streamBeats sends one beat per name on one heartbeat stream and
	// returns the first error.
	streamBeats := func(cc *grpc.ClientConn, names ...string) func(context.Context) error {
		return func(ctx context.Context) error {
			s, err := agent(cc).StreamHeartbeats(ctx)
			if err != nil {
				return err
			}
			for i, name := range names {
				if err := s.Send(&agentv1.HeartbeatRequest{Node: name, Seq: uint64(i + 1)}); err != nil {
					_, err = s.Recv() // Send says io.EOF; Recv says why
					return err
				}
				if _, err := s.Recv(); err != nil {
					return err
				}
			}
			return s.CloseSend()
		}
	}
	watch := func(cc *grpc.ClientConn, name string) func(context.Context) error {
		return func(ctx context.Context) error {
			s, err := agent(cc).WatchAssignments(ctx, &agentv1.WatchAssignmentsRequest{Node: name})
			if err == nil {
				_, err = s.Recv()
			}
			return err
		}
	}
	report := func(cc *grpc.ClientConn, name string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := agent(cc).ReportStatus(ctx, &agentv1.ReportStatusRequest{Node: name})
			return err
		}
	}
	listNodes := func(cc *grpc.ClientConn) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := regionSvc(cc).ListNodes(ctx, &regionv1.ListNodesRequest{})
			return err
		}
	}
	applyPlacements := func(cc *grpc.ClientConn) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := regionSvc(cc).ApplyPlacements(ctx, &regionv1.ApplyPlacementsRequest{})
			return err
		}
	}

	tests := []struct {
		name    string
		call    func(ctx context.Context) error
		wantErr error
	}{
		{"a node registers itself", register(node, "n1"), nil},
		{"a node beats for itself", heartbeat(node, "n1"), nil},
		{"a node registers another", register(node, "n2"), api.ErrForbidden},
		{"a node beats for another", heartbeat(node, "n2"), api.ErrForbidden},
		{"a node beats for itself on a stream", streamBeats(node, "n1", "n1"), nil},
		{"a node beats for another on a stream", streamBeats(node, "n2"), api.ErrForbidden},
		{"a node beats for itself, then another, on one stream", streamBeats(node, "n1", "n2"), api.ErrForbidden},
		{"a node reports for another", report(node, "n2"), api.ErrForbidden},
		{"a node watches another's assignments", watch(node, "n2"), api.ErrForbidden},
		{"a node of another region registers", register(otherRegion, "n1"), api.ErrForbidden},
		{"a node of another region beats", heartbeat(otherRegion, "n1"), api.ErrForbidden},
		{"a node of another region watches", watch(otherRegion, "n1"), api.ErrForbidden},
		{"a node of another region beats on a stream", streamBeats(otherRegion, "n1"), api.ErrForbidden},
		{"the global tier beats on a stream", streamBeats(global, "n1"), api.ErrForbidden},
		{"a node calls RegionService", listNodes(node), api.ErrForbidden},
		{"the global tier calls RegionService", listNodes(global), nil},
		{"the global tier registers a node", register(global, "n1"), api.ErrForbidden},
		{"a region peer calls RegionService", listNodes(regionPeer), api.ErrForbidden},
		{"a region peer registers a node", register(regionPeer, "n1"), api.ErrForbidden},
		{"anonymous registers", register(anonymous, "rogue"), api.ErrUnauthenticated},
		{"anonymous beats", heartbeat(anonymous, "n1"), api.ErrUnauthenticated},
		{"anonymous watches", watch(anonymous, "n1"), api.ErrUnauthenticated},
		{"anonymous beats on a stream", streamBeats(anonymous, "n1"), api.ErrUnauthenticated},
		{"anonymous reports", report(anonymous, "n1"), api.ErrUnauthenticated},
		{"anonymous lists nodes", listNodes(anonymous), api.ErrUnauthenticated},
		{"anonymous applies placements", applyPlacements(anonymous), api.ErrUnauthenticated},
	}
	for _, tt := range tests {
		wantErr(t, tt.name, tt.call(e.ctx()), tt.wantErr)
	}
	if _, ok := e.caches.Nodes.Get("rogue"); ok {
		t.Error("got node rogue registered by a refused call; want none")
	}
}

// TestSecurityRegionMessageLimits checks that an agent's request is held
// to the small default limit (transport's own tests check that a larger
// rule admits larger messages).
func TestSecurityRegionMessageLimits(t *testing.T) {
	e := newEnv(t)
	ca := transporttest.NewPKI(t)
	addr := transporttest.Serve(t, ca.Security(t, pki.Region(testRegion)), e.srv.GRPCPolicy(), testLogger(t), e.srv.RegisterGRPC)
	big := grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(transport.LargeMessageBytes))
	node := transporttest.Dial(t, addr, ca.Security(t, pki.Node(testRegion, "n1")), transport.ServerIs(pki.Region(testRegion)), big)

	// Over 4 MiB of node labels.
	fat := testNode("n1")
	fat.Labels = map[string]string{}
	for i := range 80 {
		fat.Labels[fmt.Sprintf("l%d", i)] = strings.Repeat("x", 64<<10)
	}
	_, err := agentv1.NewAgentServiceClient(node).Register(e.ctx(), &agentv1.RegisterRequest{Node: fat})
	if !errors.Is(err, api.ErrTooLarge) {
		t.Errorf("a 5 MiB Register: got %v; want it refused as too large", err)
	}
	if _, ok := e.caches.Nodes.Get("n1"); ok {
		t.Error("got the oversized node registered; want none")
	}
}
