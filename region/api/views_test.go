package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/internal/transport"
	"github.com/stratahq/strata/internal/transport/transporttest"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	"github.com/stratahq/strata/proto/apiproto"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
)

func TestReadViews(t *testing.T) {
	e := newEnv(t)
	gpu := testNode("n2")
	gpu.Labels = map[string]string{"zone": "a", "gpu": "yes"}
	e.register(testNode("n1"))
	e.register(gpu)
	e.putAssignments(testAssignment("b1", "acme", "web", "n2"), testAssignment("a1", "acme", "web", "n1"),
		testAssignment("c1", "acme", "db", "n1"))
	if _, err := e.agent.ReportStatus(e.ctx(), &agentv1.ReportStatusRequest{Node: "n1", Statuses: []*resourcev1.AssignmentStatus{
		apiproto.AssignmentStatusToPB(&api.AssignmentStatus{ID: "a1", Phase: api.PhaseReady}),
	}}); err != nil {
		t.Fatal(err)
	}

	t.Run("nodes", func(t *testing.T) {
		tests := []struct {
			selector string
			want     []string
			wantErr  error
		}{
			{"", []string{"n1", "n2"}, nil},
			{"gpu=yes", []string{"n2"}, nil},
			{"zone in (a,b),!gpu", []string{"n1"}, nil},
			{"bad key!", nil, api.ErrInvalid},
		}
		for _, tt := range tests {
			resp, err := e.region.ListNodes(e.ctx(), &regionv1.ListNodesRequest{Selector: tt.selector})
			wantErr(t, "selector "+tt.selector, err, tt.wantErr)
			var got []string
			for _, n := range resp.GetItems() {
				got = append(got, n.GetName())
				if n.GetStatus().GetHealth() != string(api.HealthUp) {
					t.Errorf("selector %q: got %s health %q; want the status joined (Up)", tt.selector, n.GetName(), n.GetStatus().GetHealth())
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("selector %q: got %v; want %v", tt.selector, got, tt.want)
			}
		}
		if _, err := e.region.GetNode(e.ctx(), &regionv1.NodeRef{Name: "nope"}); !errors.Is(err, api.ErrNotFound) {
			t.Errorf("got GetNode(nope) error %v; want NotFound", err)
		}
	})

	t.Run("replicas", func(t *testing.T) {
		tests := []struct {
			name    string
			req     *regionv1.ListReplicasRequest
			want    []string // id:phase
			wantErr error
		}{
			{"by resource", &regionv1.ListReplicasRequest{Tenant: "acme", Resource: "web"}, []string{"a1:ready", "b1:created"}, nil},
			{"by node, sorted by resource", &regionv1.ListReplicasRequest{Node: "n1"}, []string{"c1:created", "a1:ready"}, nil},
			{"neither", &regionv1.ListReplicasRequest{Tenant: "acme"}, nil, api.ErrInvalid},
			{"both", &regionv1.ListReplicasRequest{Tenant: "acme", Resource: "web", Node: "n1"}, nil, api.ErrInvalid},
			{"unknown node", &regionv1.ListReplicasRequest{Node: "nope"}, nil, api.ErrNotFound},
		}
		for _, tt := range tests {
			resp, err := e.region.ListReplicas(e.ctx(), tt.req)
			wantErr(t, tt.name, err, tt.wantErr)
			var got []string
			for _, r := range resp.GetItems() {
				got = append(got, r.GetAssignment().GetId()+":"+r.GetPhase())
				if r.GetRegion() != testRegion {
					t.Errorf("%s: got region %q; want %q", tt.name, r.GetRegion(), testRegion)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("%s: got %v; want %v", tt.name, got, tt.want)
			}
		}
	})

	t.Run("status", func(t *testing.T) {
		st, err := e.region.Status(e.ctx(), &regionv1.StatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		got := fmt.Sprintf("%s leader=%s nodes=%d up=%d replicas=%d ready=%d", st.GetHealth(), st.GetLeader(),
			st.GetNodes(), st.GetNodesUp(), st.GetReplicas(), st.GetReady())
		if want := "Up leader=controller-1 nodes=2 up=2 replicas=3 ready=1"; got != want {
			t.Errorf("got status %q; want %q", got, want)
		}
	})

	t.Run("events", func(t *testing.T) {
		e.waitEvent("NodeRegistered", "node/n2")
		resp, err := e.region.ListEvents(e.ctx(), &regionv1.ListEventsRequest{Object: "node/n2", Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetItems()) != 1 || resp.GetItems()[0].GetReason() != "NodeRegistered" || resp.GetItems()[0].GetRegion() != testRegion {
			t.Errorf("got events %v; want one NodeRegistered of region %s", resp.GetItems(), testRegion)
		}
		if _, err := e.region.ListEvents(e.ctx(), &regionv1.ListEventsRequest{After: "garbage"}); !errors.Is(err, api.ErrInvalid) {
			t.Errorf("got %v for a bad cursor; want ErrInvalid", err)
		}
	})
}

// fakeNode is an agent's NodeService serving logs.
type fakeNode struct {
	agentv1.UnimplementedNodeServiceServer
}

func (fakeNode) Logs(req *agentv1.NodeLogsRequest, stream grpc.ServerStreamingServer[resourcev1.LogChunk]) error {
	if req.GetAssignmentId() == "gone" {
		return api.NotFound("container of replica", "gone")
	}
	for i := range 3 {
		line := fmt.Sprintf("%s line %d follow=%v tail=%d container=%s\n", req.GetAssignmentId(), i, req.GetFollow(), req.GetTailLines(), req.GetContainer())
		if err := stream.Send(&resourcev1.LogChunk{Data: []byte(line), Stream: "stdout"}); err != nil {
			return err
		}
	}
	return nil
}

func TestLogs(t *testing.T) {
	e := newEnv(t)
	// Insecure as the env's agent links are (see newEnv).
	addr := transporttest.Serve(t, transport.Insecure(), transport.Policy{
		agentv1.NodeService_ServiceDesc.ServiceName: {Kinds: []pki.Kind{pki.KindRegion}},
	}, testLogger(t), func(g *grpc.Server) { agentv1.RegisterNodeServiceServer(g, fakeNode{}) })

	n1 := testNode("n1")
	n1.Address = addr
	e.register(n1)
	e.putAssignments(testAssignment("a2", "acme", "web", "n1"), testAssignment("a1", "acme", "web", "n1"),
		testAssignment("gone", "acme", "old", "n1"))

	tests := []struct {
		name    string
		req     *resourcev1.LogsRequest
		want    string
		wantErr error
	}{
		{"a replica", &resourcev1.LogsRequest{Tenant: "acme", Resource: "web", Replica: "a2", Follow: true, TailLines: 10},
			"a2 line 0 follow=true tail=10 container=\na2 line 1 follow=true tail=10 container=\na2 line 2 follow=true tail=10 container=\n", nil},
		{"a container of a replica", &resourcev1.LogsRequest{Tenant: "acme", Resource: "web", Replica: "a2", Container: "side"},
			"a2 line 0 follow=false tail=0 container=side\na2 line 1 follow=false tail=0 container=side\na2 line 2 follow=false tail=0 container=side\n", nil},
		{"the resource's first replica", &resourcev1.LogsRequest{Tenant: "acme", Resource: "web"},
			"a1 line 0 follow=false tail=0 container=\na1 line 1 follow=false tail=0 container=\na1 line 2 follow=false tail=0 container=\n", nil},
		{"an unknown replica", &resourcev1.LogsRequest{Replica: "nope"}, "", api.ErrNotFound},
		{"a replica of another resource", &resourcev1.LogsRequest{Tenant: "acme", Resource: "db", Replica: "a1"}, "", api.ErrNotFound},
		{"the agent's error comes through", &resourcev1.LogsRequest{Replica: "gone"}, "", api.ErrNotFound},
	}
	for _, tt := range tests {
		got, err := readLogs(e.ctx(), e.region, tt.req)
		wantErr(t, tt.name, err, tt.wantErr)
		if got != tt.want {
			t.Errorf("%s: got logs %q; want %q", tt.name, got, tt.want)
		}
	}
}

func readLogs(ctx context.Context, c regionv1.RegionServiceClient, req *resourcev1.LogsRequest) (string, error) {
	stream, err := c.Logs(ctx, req)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return b.String(), nil
		}
		if err != nil {
			return "", err
		}
		b.Write(chunk.GetData())
	}
}
