package agent

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/backoff"
	"github.com/stratahq/strata/providers/provider"
)

// observer owns how one provider's replicas are observed after they
// are applied: it polls them every status interval, or, while the
// provider's Watch is in place, takes what the provider pushes. Either
// way what it sees goes to the table, which makes it the replica's
// status and reports it.
type observer struct {
	e        *providerEntry
	table    *replicaTable
	interval time.Duration
	t        *timings
	log      *slog.Logger
}

// runPoller polls one provider's running replicas every status interval,
// so that changes nobody pushed (a container that exited, a VM that
// crashed) still reach the region. It stands by while the provider's
// watch is in place (see runWatcher): those changes are pushed.
func (o *observer) runPoller(ctx context.Context) {
	t := time.NewTicker(o.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if o.e.watching.Load() {
				continue
			}
			o.poll(ctx)
		}
	}
}

// poll asks the provider for the status of its replicas that can be
// observed now.
func (o *observer) poll(ctx context.Context) {
	e := o.e
	todo := o.table.toPoll(e)
	if len(todo) == 0 {
		return
	}
	if len(todo) <= o.t.listThreshold {
		for _, p := range todo {
			sctx, cancel := context.WithTimeout(ctx, o.t.providerCall)
			st, err := e.p.Status(sctx, p.id)
			cancel()
			if ctx.Err() != nil {
				return
			}
			o.table.observe(p.id, p.ver, st, err)
		}
		return
	}
	// Many replicas: one List costs less than a Status each.
	lctx, cancel := context.WithTimeout(ctx, o.t.providerCall)
	listed, err := e.p.List(lctx)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			o.log.Debug("status poll by list failed", "provider", e.name, "err", err)
		}
		return
	}
	byID := make(map[string]api.AssignmentStatus, len(listed))
	for _, l := range listed {
		byID[l.ID] = l.Status
	}
	for _, p := range todo {
		st, ok := byID[p.id]
		if !ok {
			o.table.observe(p.id, p.ver, api.AssignmentStatus{}, provider.ErrNotFound)
			continue
		}
		o.table.observe(p.id, p.ver, st, nil)
	}
}

// runWatcher consumes the statuses a provider pushes. While its watch is
// in place the provider's poller stands by, so that a replica that dies
// is reported when the provider says so, not at the next poll. When the
// watch ends (the provider closed it, a plugin exited) the poller takes
// over until watching works again, and every new watch starts with a
// relist: changes made while there was none are not pushed.
func (o *observer) runWatcher(ctx context.Context, w provider.Watcher) {
	e := o.e
	b := o.t.regionBackoff()
	warn := warnLimiter{every: o.t.warnEvery}
	for {
		ch, err := w.Watch(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && isUnsupported(err):
			o.log.Debug("provider pushes no statuses; polling it", "provider", e.name)
			return
		case errors.Is(err, api.ErrUnavailable):
			// A plugin restarting, containerd's events not followed yet:
			// Health says why when it lasts.
			o.log.Debug("provider cannot watch now; polling it until it can", "provider", e.name, "err", err)
		case err != nil:
			warn.fail(o.log, "provider watch failed; polling it until watching works", err, "provider", e.name)
		default:
			warn.ok(o.log, "provider watch in place; its poller stands by", "provider", e.name)
			started := time.Now()
			e.watching.Store(true)
			// After the watch is in place, so that whatever changed
			// before it is found and whatever changes after it is
			// pushed. Pushes wait in ch meanwhile and are applied after,
			// in order: each is newer than what they replace.
			o.resync(ctx)
			for st := range ch {
				o.table.observePushed(e, st)
			}
			e.watching.Store(false)
			if ctx.Err() != nil {
				return
			}
			o.log.Info("provider watch ended; polling it until watching again works", "provider", e.name)
			if time.Since(started) > b.Max {
				b.Reset() // not a watch that keeps failing at once
			}
		}
		if backoff.Sleep(ctx, b.Next()) != nil {
			return
		}
	}
}

// resync relists what a provider holds for the agent: the replicas that
// can be observed now are (poll), the others (being applied, not yet
// adopted after a restart) are looked at once they can be.
func (o *observer) resync(ctx context.Context) {
	o.table.recheckUnpollable(o.e)
	o.poll(ctx)
}
