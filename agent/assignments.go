package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"google.golang.org/grpc"

	"github.com/stratahq/strata/internal/backoff"
	"github.com/stratahq/strata/internal/transport"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	"github.com/stratahq/strata/providers/provider"
)

// assignmentStream owns the node's side of WatchAssignments: it fills
// the table from the providers' lists once, then follows the region's
// stream, merging each batch into the table, which queues what changed
// for the reconciler.
type assignmentStream struct {
	node   string
	client agentv1.AgentServiceClient
	table  *replicaTable
	provs  *providerSet
	t      *timings
	log    *slog.Logger
}

// run recovers the table from the providers, then follows the node's
// assignment stream, reconnecting with backoff, until ctx is done.
func (s *assignmentStream) run(ctx context.Context, registered <-chan struct{}) {
	if err := s.recover(ctx); err != nil {
		return
	}
	select {
	case <-ctx.Done():
		return
	case <-registered:
	}
	followStream(ctx, s.t, s.log, "assignment stream", s.watchOnce)
}

// recover fills the table from every provider's List, retrying until each
// answers, so that the first snapshot can adopt what already runs.
func (s *assignmentStream) recover(ctx context.Context) error {
	for _, e := range s.provs.list {
		var listed []provider.Listed
		b := s.t.regionBackoff()
		for {
			lctx, cancel := context.WithTimeout(ctx, s.t.providerCall)
			var err error
			listed, err = e.p.List(lctx)
			cancel()
			if err == nil {
				break
			}
			d := b.Next()
			s.log.Warn("list provider replicas failed; retrying", "provider", e.name, "err", err, "in", d)
			if backoff.Sleep(ctx, d) != nil {
				return ctx.Err()
			}
		}
		s.table.recovered(e, listed)
		s.log.Info("recovered replicas", "provider", e.name, "count", len(listed))
	}
	return nil
}

// watchOnce reads one assignment stream until it fails and returns how
// many batches it delivered.
func (s *assignmentStream) watchOnce(ctx context.Context) (int, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A snapshot of the node's assignments is one message, larger than
	// the default limit on a busy node; it comes from the region, whose
	// certificate the connection checked.
	stream, err := s.client.WatchAssignments(sctx, &agentv1.WatchAssignmentsRequest{Node: s.node}, grpc.MaxCallRecvMsgSize(transport.LargeMessageBytes))
	if err != nil {
		return 0, err
	}
	epoch := s.table.beginStream()
	defer s.table.endStream(epoch)
	n := 0
	for {
		b, err := stream.Recv()
		if err != nil {
			return n, err
		}
		n++
		s.table.applyBatch(epoch, b)
	}
}

// followStream runs once (one stream from the region, read until it
// ends) again and again, with jittered backoff between attempts that is
// reset by an attempt that delivered something, until ctx is done.
func followStream(ctx context.Context, t *timings, log *slog.Logger, what string, once func(context.Context) (int, error)) {
	b := t.regionBackoff()
	warn := warnLimiter{every: t.warnEvery}
	for {
		got, err := once(ctx)
		if ctx.Err() != nil {
			return
		}
		if got > 0 {
			b.Reset()
		}
		if err == nil || errors.Is(err, io.EOF) {
			log.Info(what+" ended; reconnecting", "batches", got)
		} else {
			warn.fail(log, what+" failed; reconnecting", err, "batches", got)
		}
		if backoff.Sleep(ctx, b.Next()) != nil {
			return
		}
	}
}
