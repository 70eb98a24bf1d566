package agent

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc"

	"github.com/stratahq/strata/internal/backoff"
	"github.com/stratahq/strata/internal/transport"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
)

// runAssignments recovers the table from the providers, then follows the
// node's assignment stream, reconnecting with backoff, until ctx is done.
func (a *Agent) runAssignments(ctx context.Context, client agentv1.AgentServiceClient, registered <-chan struct{}) {
	if err := a.recover(ctx); err != nil {
		return
	}
	select {
	case <-ctx.Done():
		return
	case <-registered:
	}
	a.followStream(ctx, "assignment stream", func(ctx context.Context) (int, error) { return a.watchOnce(ctx, client) })
}

// followStream runs once (one stream from the region, read until it
// ends) again and again, with jittered backoff between attempts that is
// reset by an attempt that delivered something, until ctx is done.
func (a *Agent) followStream(ctx context.Context, what string, once func(context.Context) (int, error)) {
	b := a.t.regionBackoff()
	warn := warnLimiter{every: a.t.warnEvery}
	for {
		got, err := once(ctx)
		if ctx.Err() != nil {
			return
		}
		if got > 0 {
			b.Reset()
		}
		if err == nil || errors.Is(err, io.EOF) {
			a.log.Info(what+" ended; reconnecting", "batches", got)
		} else {
			warn.fail(a.log, what+" failed; reconnecting", err, "batches", got)
		}
		if backoff.Sleep(ctx, b.Next()) != nil {
			return
		}
	}
}

// watchOnce reads one assignment stream until it fails and returns how
// many batches it delivered.
func (a *Agent) watchOnce(ctx context.Context, client agentv1.AgentServiceClient) (int, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A snapshot of the node's assignments is one message, larger than
	// the default limit on a busy node; it comes from the region, whose
	// certificate the connection checked.
	stream, err := client.WatchAssignments(sctx, &agentv1.WatchAssignmentsRequest{Node: a.cfg.Node.Name}, grpc.MaxCallRecvMsgSize(transport.LargeMessageBytes))
	if err != nil {
		return 0, err
	}
	epoch := a.beginStream()
	defer a.endStream(epoch)
	n := 0
	for {
		b, err := stream.Recv()
		if err != nil {
			return n, err
		}
		n++
		a.applyBatch(epoch, b)
	}
}

// beginStream numbers a new stream. Orphans found by its snapshots may be
// deleted only while it lives.
func (a *Agent) beginStream() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.epoch++
	a.liveEpoch = a.epoch
	return a.epoch
}

func (a *Agent) endStream(epoch int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.liveEpoch == epoch {
		a.liveEpoch = 0
	}
}
