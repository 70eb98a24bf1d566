package agent

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/internal/transport"
	"github.com/stratahq/strata/internal/version"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	"github.com/stratahq/strata/proto/apiproto"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
	"github.com/stratahq/strata/providers/provider"
)

// logChunkBytes caps one LogChunk, well below the message limit, so that a
// large write streams instead of stalling the reader.
const logChunkBytes = 32 << 10

// nodeServer serves NodeService for the region: the monitor's Status probe
// and replica logs. Only the agent's own region may call it
// (region:<region>); no global or other region's identity.
type nodeServer struct {
	agentv1.UnimplementedNodeServiceServer
	node      string
	startedAt time.Time
	table     *replicaTable
	health    *health
	clock     func() time.Time

	srv  *grpc.Server
	done chan struct{}
}

// startNodeService listens and serves until stop.
func (a *Agent) startNodeService() (*nodeServer, error) {
	lis := a.listener
	if lis == nil {
		var err error
		if lis, err = net.Listen("tcp", a.cfg.Listen.GRPC); err != nil {
			return nil, fmt.Errorf("agent: node service: %w", err)
		}
	}
	if err := a.sec.CheckListener(lis); err != nil {
		lis.Close()
		return nil, fmt.Errorf("agent: listen.grpc: %w", err)
	}
	srv, err := transport.NewServer(a.sec, transport.Policy{
		agentv1.NodeService_ServiceDesc.ServiceName: {Kinds: []pki.Kind{pki.KindRegion}, Region: a.region},
	}, a.log)
	if err != nil {
		lis.Close()
		return nil, fmt.Errorf("agent: node service: %w", err)
	}
	addr := a.cfg.Advertise.GRPC
	// An advertised address that merely repeats the listen address (the
	// configuration default) says nothing the listener does not know
	// better, port 0 and injected listeners included.
	if addr == "" || addr == a.cfg.Listen.GRPC {
		addr = lis.Addr().String()
	}
	a.addr.Store(&addr)

	s := &nodeServer{
		node: a.cfg.Node.Name, startedAt: a.startedAt, table: a.table, health: a.health, clock: a.clock,
		srv: srv, done: make(chan struct{}),
	}
	agentv1.RegisterNodeServiceServer(s.srv, s)
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(lis); err != nil {
			a.log.Error("node service stopped", "err", err)
		}
	}()
	a.log.Info("node service listening", "listen", lis.Addr().String(), "advertise", addr)
	return s, nil
}

// stop stops serving, letting calls in flight finish within timeout
// (a followed log stream would hold a graceful stop forever).
func (s *nodeServer) stop(timeout time.Duration) {
	graceful := make(chan struct{})
	go func() {
		defer close(graceful)
		s.srv.GracefulStop()
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-graceful:
	case <-t.C:
		s.srv.Stop()
		<-graceful
	}
	<-s.done
}

func (s *nodeServer) Status(ctx context.Context, _ *agentv1.NodeStatusRequest) (*agentv1.NodeStatusResponse, error) {
	all := s.table.statuses()
	sts := make([]*resourcev1.AssignmentStatus, len(all))
	for i := range all {
		sts[i] = apiproto.AssignmentStatusToPB(&all[i])
	}
	conds := apiproto.ConditionsToPB(s.health.current())
	slices.SortFunc(sts, func(x, y *resourcev1.AssignmentStatus) int { return strings.Compare(x.GetId(), y.GetId()) })
	return &agentv1.NodeStatusResponse{
		Node:         s.node,
		AgentVersion: version.String(),
		StartedAt:    timestamppb.New(s.startedAt),
		Conditions:   conds,
		Assignments:  sts,
	}, nil
}

func (s *nodeServer) Logs(req *agentv1.NodeLogsRequest, stream grpc.ServerStreamingServer[resourcev1.LogChunk]) error {
	ctx := stream.Context()
	id := req.GetAssignmentId()
	if id == "" {
		return api.Invalid("assignment_id", "is required")
	}
	e := s.table.providerOf(id)
	if e == nil {
		return api.NotFound("assignment", id)
	}
	lg, ok := e.p.(provider.Logger)
	if !ok {
		return errNoLogs(e.name)
	}
	opts := provider.LogOptions{Follow: req.GetFollow(), TailLines: max(0, int(req.GetTailLines())), Container: req.GetContainer()}
	err := lg.Logs(ctx, id, opts, &chunkWriter{stream: stream, clock: s.clock})
	switch {
	case err == nil:
		return nil
	case isUnsupported(err):
		return errNoLogs(e.name)
	case ctx.Err() != nil:
		// The caller went away, as followers do.
		return nil
	default:
		return fmt.Errorf("logs of %s: %w", id, api.FromGRPC(err))
	}
}

// chunkWriter turns a provider's output into LogChunks.
type chunkWriter struct {
	stream grpc.ServerStreamingServer[resourcev1.LogChunk]
	clock  func() time.Time
}

func (w *chunkWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		part := p[:min(len(p), logChunkBytes)]
		// The provider may reuse p once Write returns.
		if err := w.stream.Send(&resourcev1.LogChunk{Data: bytes.Clone(part), Time: timestamppb.New(w.clock())}); err != nil {
			return n, err
		}
		n += len(part)
		p = p[len(part):]
	}
	return n, nil
}
