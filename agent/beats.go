package agent

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentv1 "github.com/stratahq/strata/proto/agent/v1"
)

// beatStream is StreamHeartbeats on one goroutine (the session's): a beat
// is sent on the open stream and its response read back, under the same
// bound as a Heartbeat call. A stream that fails is dropped, and the beat
// tried once more on a new one; after that the beat has failed, as a
// call would have, and the next beat, an interval later, opens the next
// stream. A region that answers Unimplemented (older than the stream) is
// given unary Heartbeat calls for unaryFor before the stream is tried
// again (the region may have been upgraded meanwhile).
type beatStream struct {
	client  agentv1.AgentServiceClient
	timeout time.Duration
	// unaryFor is how long the agent beats with Heartbeat after a region
	// answered Unimplemented.
	unaryFor time.Duration
	clock    func() time.Time

	stream grpc.BidiStreamingClient[agentv1.HeartbeatRequest, agentv1.HeartbeatResponse]
	// ctx is the stream's, cancelled by close (or a beat's timeout).
	ctx    context.Context
	cancel context.CancelFunc
	// unaryUntil is when to try the stream again.
	unaryUntil time.Time
}

// errBeatTimeout is a beat whose response did not come within the bound.
var errBeatTimeout = errors.New("no heartbeat response in time")

// beat delivers req and returns the region's response.
func (b *beatStream) beat(ctx context.Context, req *agentv1.HeartbeatRequest) (*agentv1.HeartbeatResponse, error) {
	if b.clock().Before(b.unaryUntil) {
		return b.unary(ctx, req)
	}
	// An open stream may have broken since the last beat (the region
	// restarted, its leader moved): one fresh stream is worth a try
	// before the beat counts as failed. A region that let a beat time
	// out is not asked twice.
	fresh := b.stream == nil
	resp, err := b.send(ctx, req)
	if err != nil && !fresh && ctx.Err() == nil && !isUnimplemented(err) && !errors.Is(err, errBeatTimeout) {
		resp, err = b.send(ctx, req)
	}
	if isUnimplemented(err) {
		b.unaryUntil = b.clock().Add(b.unaryFor)
		return b.unary(ctx, req)
	}
	return resp, err
}

// send sends req on the stream (opening one if none is open) and reads
// its response, all within the timeout; on any failure the stream is
// closed.
func (b *beatStream) send(ctx context.Context, req *agentv1.HeartbeatRequest) (*agentv1.HeartbeatResponse, error) {
	if b.stream == nil {
		b.ctx, b.cancel = context.WithCancel(ctx)
	}
	// A stream's open and reads have no deadline of their own: a region
	// that does not answer is given up by cancelling the stream.
	var timedOut atomic.Bool
	cancel := b.cancel
	watchdog := time.AfterFunc(b.timeout, func() { timedOut.Store(true); cancel() })
	resp, err := b.roundTrip(req)
	if !watchdog.Stop() && timedOut.Load() {
		err = fmt.Errorf("%w (%s)", errBeatTimeout, b.timeout)
	}
	if err != nil {
		b.close()
		return nil, err
	}
	return resp, nil
}

func (b *beatStream) roundTrip(req *agentv1.HeartbeatRequest) (*agentv1.HeartbeatResponse, error) {
	if b.stream == nil {
		stream, err := b.client.StreamHeartbeats(b.ctx)
		if err != nil {
			return nil, err
		}
		b.stream = stream
	}
	// Send reports a broken stream as io.EOF; Recv says why.
	if err := b.stream.Send(req); err != nil {
		if _, rerr := b.stream.Recv(); rerr != nil {
			return nil, rerr
		}
		return nil, err
	}
	return b.stream.Recv()
}

func (b *beatStream) unary(ctx context.Context, req *agentv1.HeartbeatRequest) (*agentv1.HeartbeatResponse, error) {
	hctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	return b.client.Heartbeat(hctx, req)
}

// close ends the open stream, if any.
func (b *beatStream) close() {
	if b.stream != nil {
		_ = b.stream.CloseSend()
	}
	if b.cancel != nil {
		b.cancel()
	}
	b.stream, b.ctx, b.cancel = nil, nil, nil
}

func isUnimplemented(err error) bool {
	return err != nil && status.Code(err) == codes.Unimplemented
}
