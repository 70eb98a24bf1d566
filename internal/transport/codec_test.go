package transport

import (
	"bytes"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The codec encodes as gRPC's protobuf codec does, for messages of both
// protobuf APIs (Strata's, etcd's), small and pooled; a pooled message
// takes a buffer at most twice its size, not gRPC's 1 MiB.
func TestCodecRoundTrips(t *testing.T) {
	for _, size := range []int{10, 40 << 10, 2 << 20} {
		in := wrapperspb.Bytes(bytes.Repeat([]byte{7}, size))
		data, err := protoCodec.Marshal(in)
		if err != nil {
			t.Fatalf("%d bytes: marshal: %v", size, err)
		}
		want, _ := proto.Marshal(in)
		if got := data.Materialize(); !bytes.Equal(got, want) {
			t.Fatalf("%d bytes: encoded %d bytes unlike proto.Marshal's %d", size, len(got), len(want))
		}
		if size == 40<<10 {
			if c := cap(data[0].ReadOnlyData()); c > 2*len(want) {
				t.Errorf("a message of %d bytes took a buffer of %d; want at most twice its size", len(want), c)
			}
		}
		// Received in pieces, as frames arrive.
		split := mem.BufferSlice{mem.SliceBuffer(want[:len(want)/2]), mem.SliceBuffer(want[len(want)/2:])}
		out := &wrapperspb.BytesValue{}
		if err := protoCodec.Unmarshal(split, out); err != nil || !proto.Equal(in, out) {
			t.Fatalf("%d bytes: unmarshal: %v (equal: %v)", size, err, proto.Equal(in, out))
		}
		data.Free()
	}

	kv := &mvccpb.KeyValue{Key: []byte("assignments/a1"), Value: bytes.Repeat([]byte("x"), 50<<10), ModRevision: 9}
	data, err := protoCodec.Marshal(kv)
	if err != nil {
		t.Fatalf("etcd message: marshal: %v", err)
	}
	var back mvccpb.KeyValue
	if err := protoCodec.Unmarshal(data, &back); err != nil || !bytes.Equal(back.Key, kv.Key) || !bytes.Equal(back.Value, kv.Value) || back.ModRevision != 9 {
		t.Fatalf("etcd message: unmarshal: %v, got key %q, %d value bytes, mod revision %d", err, back.Key, len(back.Value), back.ModRevision)
	}
	if _, err := protoCodec.Marshal("not a message"); err == nil {
		t.Error("marshal of a string: no error")
	}
}
