package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/stratahq/strata/internal/backoff"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"
)

const (
	retryMin = 50 * time.Millisecond
	retryMax = 2 * time.Second
	// progressTimeout bounds a progress request, which waits while the
	// watch stream reconnects; the reflector must not stall that long.
	progressTimeout = time.Second
)

var errWatchClosed = errors.New("watch channel closed")

// reflector is the state of one Reflect call.
type reflector struct {
	s      *Store
	prefix string // relative to the store prefix
	h      Handler
	log    *slog.Logger
	// progress asks the reflector to request an etcd progress notification
	// (nil for plain Reflect). A Cache uses it when a caller waits for a
	// revision the watch would otherwise never report: one outside the
	// prefix.
	progress <-chan struct{}
	// rev is the last revision delivered to h: every change up to it has
	// been passed on, so the watch resumes at rev+1.
	rev int64
}

func (s *Store) reflect(ctx context.Context, prefix string, h Handler, progress <-chan struct{}) error {
	r := &reflector{
		s:        s,
		prefix:   prefix,
		h:        h,
		log:      s.log.With("prefix", s.prefix+prefix),
		progress: progress,
	}
	return r.run(ctx)
}

func (r *reflector) run(ctx context.Context) error {
	bo := backoff.Backoff{Min: retryMin, Max: retryMax, Jitter: backoff.Half}
	relist := true
	for {
		if relist {
			if err := r.list(ctx); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				d := bo.Next()
				r.log.Warn("store: list failed; retrying", "err", err, "retry_in", d)
				if err := backoff.Sleep(ctx, d); err != nil {
					return err
				}
				continue
			}
			relist = false
			bo.Reset()
		}

		err := r.watch(ctx, &bo)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, ErrCompacted) {
			// The changes since rev are gone: only a new list can tell the
			// handler what it missed. No backoff: the list is at a fresh
			// revision, so this cannot loop.
			r.log.Info("store: watch revision compacted; relisting", "rev", r.rev, "err", err)
			relist = true
			continue
		}
		d := bo.Next()
		r.log.Warn("store: watch ended; resuming", "err", err, "rev", r.rev, "retry_in", d)
		if err := backoff.Sleep(ctx, d); err != nil {
			return err
		}
	}
}

func (r *reflector) list(ctx context.Context) error {
	items, rev, err := r.s.ListAll(ctx, r.prefix)
	if err != nil {
		return err
	}
	r.rev = rev
	r.h.Replace(items, rev)
	return nil
}

// watch watches from r.rev+1 until the watch fails or ctx is done. The
// client already resumes across reconnects on its own; watch returns when it
// gives up (for example when the member loses its leader) and on compaction.
func (r *reflector) watch(ctx context.Context, bo *backoff.Backoff) error {
	// WithRequireLeader makes etcd cancel the watch when its member loses
	// the leader, instead of leaving it silently stalled on a partitioned
	// member; the retry then finds a healthy one.
	//
	// Each reflector gets a gRPC watch stream of its own (the client
	// shares one stream among watches with the same metadata): etcd
	// answers a progress request only when every watcher on the stream
	// has reached its start revision, so one watch started at "current
	// revision + 1" in a quiet store would starve every other watch on
	// its stream of progress, and WaitForRev would hang.
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(
		metadata.AppendToOutgoingContext(ctx, "strata-watch", r.s.prefix+r.prefix)))
	defer cancel() // releases the watch substream
	key, end := r.s.prefixRange(r.prefix)
	start := r.rev + 1
	wch := r.s.cli.Watch(wctx, key,
		clientv3.WithRange(end),
		clientv3.WithRev(start),
		clientv3.WithProgressNotify(),
	)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.progress:
			r.requestProgress(wctx)
		case resp, ok := <-wch:
			if !ok {
				return errWatchClosed
			}
			if resp.CompactRevision != 0 {
				return fmt.Errorf("store: watch from %d: %w at %d", start, ErrCompacted, resp.CompactRevision)
			}
			if err := resp.Err(); err != nil {
				return fmt.Errorf("store: watch from %d: %w", start, err)
			}
			bo.Reset()
			r.deliver(&resp)
		}
	}
}

func (r *reflector) deliver(resp *clientv3.WatchResponse) {
	if resp.IsProgressNotify() {
		// etcd only notifies progress to a watcher that has caught up, so
		// everything up to the header revision has been delivered.
		if resp.Header.Revision > r.rev {
			r.rev = resp.Header.Revision
			r.h.Apply(nil, r.rev)
		}
		return
	}
	events := make([]Event, 0, len(resp.Events))
	for _, ev := range resp.Events {
		// A resumed watch may repeat what was delivered already. A
		// revision is never split across responses, so this drops whole
		// revisions only.
		if ev.Kv.ModRevision <= r.rev {
			continue
		}
		events = append(events, r.s.event(ev))
	}
	if len(events) == 0 {
		return
	}
	// Not the header revision: while catching up, etcd stamps responses
	// with the current revision even though more events follow.
	r.rev = events[len(events)-1].KV.ModRevision
	r.h.Apply(events, r.rev)
}

// requestProgress asks etcd for a progress notification on the watch's
// stream. The client picks the stream by the context's metadata, which wctx
// shares with the watch.
func (r *reflector) requestProgress(wctx context.Context) {
	ctx, cancel := context.WithTimeout(wctx, progressTimeout)
	defer cancel()
	if err := r.s.cli.RequestProgress(ctx); err != nil && wctx.Err() == nil {
		r.log.Debug("store: progress request failed", "err", err)
	}
}
