package metrics

import (
	"context"
	"time"

	"google.golang.org/grpc"
)

// ClientCalls returns a dial option that times every unary call of a gRPC
// client (not its streams) from this process's side, the wait for the
// server and for this process's own CPU to read the answer, in the
// histogram name, labelled "method" by label(full method, request).
func (r *Registry) ClientCalls(name, help string, label func(method string, req any) string) grpc.DialOption {
	d := r.histogramVec(name, help, "method")
	return grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		start := time.Now()
		err := invoker(ctx, method, req, reply, cc, opts...)
		d.WithLabelValues(label(method, req)).Observe(time.Since(start).Seconds())
		return err
	})
}
