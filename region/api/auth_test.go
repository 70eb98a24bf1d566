package api

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/internal/transport"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
)

// TestAuthorization serves the API over mutual TLS: agents may act only
// for their own node, and only the global tier may call RegionService.
func TestAuthorization(t *testing.T) {
	e := newEnv(t)
	ca, err := pki.NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	identity := func(file, id string, hosts ...string) pki.Files {
		f, err := ca.WriteIdentity(dir, file, id, hosts)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	srvFiles := identity("region", "region:"+testRegion, "127.0.0.1")
	srvTLS, err := pki.ServerConfig(srvFiles.CA, srvFiles.Cert, srvFiles.Key)
	if err != nil {
		t.Fatal(err)
	}
	g := transport.NewServer(srvTLS, testLogger(t))
	e.srv.RegisterGRPC(g)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	t.Cleanup(g.Stop)

	dial := func(file, id string) *grpc.ClientConn {
		f := identity(file, id)
		cfg, err := pki.ClientConfig(f.CA, f.Cert, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		cc, err := transport.Dial(lis.Addr().String(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return cc
	}
	nodeConn, globalConn := dial("n1", "node:n1"), dial("global", "global:g1")
	asNode, asGlobal := agentv1.NewAgentServiceClient(nodeConn), regionv1.NewRegionServiceClient(globalConn)
	nodeAsRegionClient, globalAsAgent := regionv1.NewRegionServiceClient(nodeConn), agentv1.NewAgentServiceClient(globalConn)

	tests := []struct {
		name    string
		call    func(ctx context.Context) error
		wantErr error
	}{
		{"a node registers itself", func(ctx context.Context) error {
			_, err := asNode.Register(ctx, &agentv1.RegisterRequest{Node: testNode("n1")})
			return err
		}, nil},
		{"a node registers another", func(ctx context.Context) error {
			_, err := asNode.Register(ctx, &agentv1.RegisterRequest{Node: testNode("n2")})
			return err
		}, api.ErrForbidden},
		{"a node beats for another", func(ctx context.Context) error {
			_, err := asNode.Heartbeat(ctx, &agentv1.HeartbeatRequest{Node: "n2"})
			return err
		}, api.ErrForbidden},
		{"a node reports for another", func(ctx context.Context) error {
			_, err := asNode.ReportStatus(ctx, &agentv1.ReportStatusRequest{Node: "n2"})
			return err
		}, api.ErrForbidden},
		{"a node watches another's assignments", func(ctx context.Context) error {
			s, err := asNode.WatchAssignments(ctx, &agentv1.WatchAssignmentsRequest{Node: "n2"})
			if err == nil {
				_, err = s.Recv()
			}
			return err
		}, api.ErrForbidden},
		{"a node calls RegionService", func(ctx context.Context) error {
			_, err := nodeAsRegionClient.ListNodes(ctx, &regionv1.ListNodesRequest{})
			return err
		}, api.ErrForbidden},
		{"the global tier calls RegionService", func(ctx context.Context) error {
			_, err := asGlobal.ListNodes(ctx, &regionv1.ListNodesRequest{})
			return err
		}, nil},
		{"the global tier registers a node", func(ctx context.Context) error {
			_, err := globalAsAgent.Register(ctx, &agentv1.RegisterRequest{Node: testNode("n1")})
			return err
		}, api.ErrForbidden},
	}
	for _, tt := range tests {
		wantErr(t, tt.name, tt.call(e.ctx()), tt.wantErr)
	}
}
