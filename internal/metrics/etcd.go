package metrics

import (
	"context"
	"path"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
)

// EtcdClient returns a dial option for a tier's etcd client that times
// every unary call (Range, Txn, Put, LeaseGrant...; not the watch and
// keepalive streams) by method, from the tier's side: the wait for etcd
// and for this process's own CPU to read the answer. A transaction of
// reads only is "Txn (read)", apart from the writes.
func (r *Registry) EtcdClient() grpc.DialOption {
	d := r.histogramVec("strata_etcd_request_duration_seconds", "etcd call latency as this tier sees it, by method (a transaction of reads only: \"Txn (read)\").", "method")
	return grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		start := time.Now()
		err := invoker(ctx, method, req, reply, cc, opts...)
		d.WithLabelValues(etcdMethod(method, req)).Observe(time.Since(start).Seconds())
		return err
	})
}

// etcdMethod is the label of an etcd call: the gRPC method's name, and
// for a transaction without compares whose operations all read, "Txn
// (read)".
func etcdMethod(method string, req any) string {
	m := path.Base(method)
	t, ok := req.(*pb.TxnRequest)
	if !ok || len(t.Compare) > 0 || len(t.Success) == 0 || len(t.Failure) > 0 {
		return m
	}
	for _, op := range t.Success {
		if op.GetRequestRange() == nil {
			return m
		}
	}
	return m + " (read)"
}
