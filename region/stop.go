package region

import (
	"context"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// errStopping ends the streams of a replica that stops.
var errStopping = errors.New("region replica stopping")

// endStreams ends every stream the server serves once stop is done. An
// agent's streams (assignments, network, heartbeats) and the global
// tier's share watch last as long as their client: without this a
// stopping replica's graceful stop would wait its whole grace for them,
// and only then cut them. Each ends with Unavailable, which its client
// retries through the load balancer, on the other replica.
func endStreams(stop context.Context) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, cancel := context.WithCancelCause(ss.Context())
		defer cancel(nil)
		unhook := context.AfterFunc(stop, func() { cancel(errStopping) })
		defer unhook()
		err := handler(srv, stoppingStream{ServerStream: ss, ctx: ctx})
		if errors.Is(context.Cause(ctx), errStopping) {
			return status.Error(codes.Unavailable, errStopping.Error())
		}
		return err
	}
}

// stoppingStream is a stream whose context ends when the replica stops.
type stoppingStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s stoppingStream) Context() context.Context { return s.ctx }
