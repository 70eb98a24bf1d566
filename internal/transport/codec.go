package transport

import (
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
)

// codec is gRPC's protobuf codec (google.golang.org/grpc/encoding/proto)
// with a finer pool of buffers. gRPC's own pool has sizes of 256 B,
// 4, 16 and 32 KiB, then 1 MiB: a message of 40 KiB (an etcd
// transaction of 128 puts, a watch response, a node list) takes 1 MiB,
// and the pool keeps what the busiest moment took until two garbage
// collections pass, a few MiB of a region's heap. With a size at every
// power of two up to 1 MiB a buffer is at most twice its message.
// The wire format is the same: the content subtype is "proto", which
// every gRPC server takes for its protobuf codec.
type codec struct{ pool mem.BufferPool }

var protoCodec = newCodec()

func newCodec() codec {
	pool, err := mem.NewBinaryTieredBufferPool(8, 10, 12, 13, 14, 15, 16, 17, 18, 19, 20)
	if err != nil {
		panic(fmt.Sprintf("transport: buffer pool: %v", err))
	}
	return codec{pool: pool}
}

// Codec makes a call use the finer-pooled protobuf codec (see codec):
// for clients Strata does not dial itself (etcd's), as
// grpc.WithDefaultCallOptions(transport.Codec()).
func Codec() grpc.CallOption { return grpc.ForceCodecV2(protoCodec) }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	m := messageOf(v)
	if m == nil {
		return nil, fmt.Errorf("proto: failed to marshal, message is %T, want proto.Message", v)
	}
	size := proto.Size(m)
	// UseCachedSize reuses the Size just computed; the message is not
	// changed meanwhile.
	opts := proto.MarshalOptions{UseCachedSize: true}
	if mem.IsBelowBufferPoolingThreshold(size) {
		buf, err := opts.Marshal(m)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(buf)}, nil
	}
	buf := c.pool.Get(size)
	if _, err := opts.MarshalAppend((*buf)[:0], m); err != nil {
		c.pool.Put(buf)
		return nil, err
	}
	return mem.BufferSlice{mem.NewBuffer(buf, c.pool)}, nil
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	m := messageOf(v)
	if m == nil {
		return fmt.Errorf("proto: failed to unmarshal, message is %T, want proto.Message", v)
	}
	buf := data.MaterializeToBuffer(c.pool)
	defer buf.Free()
	return proto.Unmarshal(buf.ReadOnlyData(), m)
}

func (codec) Name() string { return "proto" }

// messageOf is the protobuf message v holds (etcd's are of the older API).
func messageOf(v any) proto.Message {
	switch v := v.(type) {
	case protoadapt.MessageV1:
		return protoadapt.MessageV2Of(v)
	case protoadapt.MessageV2:
		return v
	}
	return nil
}
