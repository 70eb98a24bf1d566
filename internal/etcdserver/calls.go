package etcdserver

import (
	"path"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"

	"github.com/stratahq/strata/internal/metrics"
)

// TimedCalls returns a dial option for a tier's etcd client that times
// every unary call (Range, Txn, Put, LeaseGrant...; not the watch and
// keepalive streams) by method in strata_etcd_request_duration_seconds.
// A transaction of reads only is "Txn (read)", apart from the writes.
func TimedCalls(r *metrics.Registry) grpc.DialOption {
	return r.ClientCalls("strata_etcd_request_duration_seconds",
		"etcd call latency as this tier sees it, by method (a transaction of reads only: \"Txn (read)\").", Method)
}

// Method is the label of an etcd call (full: the gRPC method, req: its
// request): the method's name, and for a transaction without compares
// whose operations all read, "Txn (read)". Tests that count a tier's
// calls use it too.
func Method(full string, req any) string {
	m := path.Base(full)
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
