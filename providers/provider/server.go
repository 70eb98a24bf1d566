package provider

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/proto/apiproto"
	providerv1 "github.com/stratahq/strata/proto/provider/v1"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
)

// NewServer serves p over gRPC, for a plugin binary (see Serve) or a test.
// Register it on a server made by transport.NewServer, whose interceptors
// turn api sentinels into gRPC codes.
//
// Logs streams through p's Logger capability and Watch through its
// Watcher capability; a provider without one answers codes.Unimplemented,
// which NewClient turns back into ErrUnsupported. ErrUnsupported from any
// call travels the same way.
func NewServer(p Provider) providerv1.ProviderServiceServer {
	return newServer(p)
}

func newServer(p Provider) *server {
	return &server{p: p, stopping: make(chan struct{})}
}

type server struct {
	providerv1.UnimplementedProviderServiceServer
	p Provider

	// stopping is closed by stop.
	stopping chan struct{}
	stopOnce sync.Once
}

// stop ends the streams in flight and those that start after (Watch, a
// following Logs), so that a graceful stop of the gRPC server does not
// wait for them: they would otherwise last as long as their client.
func (s *server) stop() { s.stopOnce.Do(func() { close(s.stopping) }) }

// streamContext returns ctx, also cancelled when the server stops.
func (s *server) streamContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-s.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

func (s *server) Info(ctx context.Context, _ *providerv1.InfoRequest) (*providerv1.InfoResponse, error) {
	info, err := s.p.Info(ctx)
	if err != nil {
		return nil, wireError(err)
	}
	kinds := make([]string, len(info.Kinds))
	for i, k := range info.Kinds {
		kinds[i] = string(k)
	}
	return &providerv1.InfoResponse{
		Name:     info.Name,
		Version:  info.Version,
		Kinds:    kinds,
		Capacity: apiproto.CapacityToPB(info.Capacity),
		Features: info.Features,
	}, nil
}

func (s *server) Health(ctx context.Context, _ *providerv1.HealthRequest) (*providerv1.HealthResponse, error) {
	cs, err := s.p.Health(ctx)
	if err != nil {
		return nil, wireError(err)
	}
	return &providerv1.HealthResponse{Conditions: apiproto.ConditionsToPB(cs)}, nil
}

func (s *server) Apply(ctx context.Context, req *providerv1.ApplyRequest) (*providerv1.ApplyResponse, error) {
	if req.GetAssignment() == nil {
		return nil, api.Invalid("assignment", "is required")
	}
	a := apiproto.AssignmentFromPB(req.GetAssignment())
	st, err := applyWith(ctx, s.p, &a, req.GetConfig())
	if err != nil {
		return nil, wireError(err)
	}
	return &providerv1.ApplyResponse{Status: apiproto.AssignmentStatusToPB(&st)}, nil
}

func (s *server) Delete(ctx context.Context, req *providerv1.DeleteRequest) (*providerv1.DeleteResponse, error) {
	a := api.Assignment{ID: req.GetId()}
	if req.GetAssignment() != nil {
		a = apiproto.AssignmentFromPB(req.GetAssignment())
		if a.ID == "" {
			a.ID = req.GetId()
		}
	}
	if a.ID == "" {
		return nil, api.Invalid("id", "is required")
	}
	var grace time.Duration
	if g := req.GetGracePeriod(); g != nil {
		grace = g.AsDuration()
	}
	if err := s.p.Delete(ctx, &a, grace); err != nil {
		return nil, wireError(err)
	}
	return &providerv1.DeleteResponse{}, nil
}

func (s *server) Status(ctx context.Context, req *providerv1.StatusRequest) (*providerv1.StatusResponse, error) {
	st, err := s.p.Status(ctx, req.GetId())
	if err != nil {
		return nil, wireError(err)
	}
	return &providerv1.StatusResponse{Status: apiproto.AssignmentStatusToPB(&st)}, nil
}

func (s *server) List(ctx context.Context, _ *providerv1.ListRequest) (*providerv1.ListResponse, error) {
	ls, err := s.p.List(ctx)
	if err != nil {
		return nil, wireError(err)
	}
	items := make([]*providerv1.ListedReplica, len(ls))
	for i := range ls {
		items[i] = &providerv1.ListedReplica{
			Id:         ls[i].ID,
			Kind:       string(ls[i].Kind),
			Generation: ls[i].Generation,
			Status:     apiproto.AssignmentStatusToPB(&ls[i].Status),
		}
	}
	return &providerv1.ListResponse{Items: items}, nil
}

func (s *server) Logs(req *providerv1.LogsRequest, stream grpc.ServerStreamingServer[resourcev1.LogChunk]) error {
	l, ok := s.p.(Logger)
	if !ok {
		return status.Error(codes.Unimplemented, "this provider keeps no logs")
	}
	ctx, cancel := s.streamContext(stream.Context())
	defer cancel()
	opts := LogOptions{Follow: req.GetFollow(), TailLines: int(req.GetTailLines()), Container: req.GetContainer()}
	err := l.Logs(ctx, req.GetId(), opts, chunkWriter{stream})
	select {
	case <-s.stopping:
		// Cut short, not at its end: the client must not take it for one.
		return fmt.Errorf("logs: the provider is stopping: %w", api.ErrUnavailable)
	default:
		return wireError(err)
	}
}

// Watch sends an empty message once p's watch is in place, then every
// status p pushes. The stream ends with api.ErrUnavailable when p ends
// the watch (its watcher fell behind, it closed) or the server stops: the
// client then watches again and relists. A client that went away is no
// failure.
func (s *server) Watch(_ *providerv1.WatchRequest, stream grpc.ServerStreamingServer[providerv1.WatchResponse]) error {
	w, ok := s.p.(Watcher)
	if !ok {
		return status.Error(codes.Unimplemented, "this provider does not watch")
	}
	ctx, cancel := s.streamContext(stream.Context())
	defer cancel()
	ch, err := w.Watch(ctx)
	if err != nil {
		return wireError(err)
	}
	// Returning cancels ctx, which ends p's watch.
	if err := stream.Send(&providerv1.WatchResponse{}); err != nil {
		return s.watchEnded(stream, err)
	}
	for st := range ch {
		if err := stream.Send(&providerv1.WatchResponse{Status: apiproto.AssignmentStatusToPB(&st)}); err != nil {
			return s.watchEnded(stream, err)
		}
	}
	return s.watchEnded(stream, fmt.Errorf("watch: the provider ended it (the watcher fell behind, or the provider closed): %w", api.ErrUnavailable))
}

// watchEnded is what a Watch that ended with err returns.
func (s *server) watchEnded(stream grpc.ServerStream, err error) error {
	select {
	case <-stream.Context().Done():
		return nil // the client went away: nobody reads what we would say
	case <-s.stopping:
		return fmt.Errorf("watch: the provider is stopping: %w", api.ErrUnavailable)
	default:
		return err
	}
}

// chunkWriter sends every Write as one LogChunk.
type chunkWriter struct {
	stream grpc.ServerStreamingServer[resourcev1.LogChunk]
}

func (w chunkWriter) Write(b []byte) (int, error) {
	// Copied because a Writer must not keep b, and Send's encoding is the
	// transport's business.
	data := append([]byte(nil), b...)
	if err := w.stream.Send(&resourcev1.LogChunk{Data: data, Time: timestamppb.Now()}); err != nil {
		return 0, err
	}
	return len(b), nil
}

// wireError turns ErrUnsupported into codes.Unimplemented, the code the
// proto reserves for it, so that the client can turn it back. Every other
// error is left to the transport's interceptor.
func wireError(err error) error {
	if err != nil && errors.Is(err, ErrUnsupported) {
		return status.Error(codes.Unimplemented, err.Error())
	}
	return err
}
