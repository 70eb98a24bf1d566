package etcdserver

import (
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

func TestMethodLabel(t *testing.T) {
	get := &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("k")}}}
	put := &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("k")}}}
	cmp := &pb.Compare{Key: []byte("k")}
	for _, tc := range []struct {
		name string
		req  any
		want string
	}{
		{"range", &pb.RangeRequest{}, "Range"},
		{"reads only", &pb.TxnRequest{Success: []*pb.RequestOp{get, get}}, "Txn (read)"},
		{"a write", &pb.TxnRequest{Success: []*pb.RequestOp{get, put}}, "Txn"},
		{"a compare", &pb.TxnRequest{Compare: []*pb.Compare{cmp}, Success: []*pb.RequestOp{get}}, "Txn"},
		{"empty", &pb.TxnRequest{}, "Txn"},
	} {
		full := "/etcdserverpb.KV/Range"
		if _, ok := tc.req.(*pb.TxnRequest); ok {
			full = "/etcdserverpb.KV/Txn"
		}
		if got := Method(full, tc.req); got != tc.want {
			t.Errorf("%s: Method = %q; want %q", tc.name, got, tc.want)
		}
	}
}
