package agent

import (
	"context"
	"errors"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/backoff"
	"github.com/stratahq/strata/providers/provider"
)

// polled is a replica to poll and its version when the poll started.
type polled struct {
	id  string
	ver int64
}

// runPoller polls one provider's running replicas every status interval,
// so that changes nobody pushed (a container that exited, a VM that
// crashed) still reach the region. It stands by while the provider's
// watch is in place (see runWatcher): those changes are pushed.
func (a *Agent) runPoller(ctx context.Context, e *providerEntry) {
	t := time.NewTicker(a.cfg.StatusInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if e.watching.Load() {
				continue
			}
			a.pollProvider(ctx, e)
		}
	}
}

func (a *Agent) pollProvider(ctx context.Context, e *providerEntry) {
	var todo []polled
	a.mu.Lock()
	for id, r := range a.replicas {
		if r.prov == e && r.pollable() {
			todo = append(todo, polled{id: id, ver: r.version})
		}
	}
	a.mu.Unlock()
	if len(todo) == 0 {
		return
	}
	if len(todo) <= a.t.listThreshold {
		for _, p := range todo {
			sctx, cancel := context.WithTimeout(ctx, a.t.providerCall)
			st, err := e.p.Status(sctx, p.id)
			cancel()
			if ctx.Err() != nil {
				return
			}
			a.observe(p.id, p.ver, st, err)
		}
		return
	}
	// Many replicas: one List costs less than a Status each.
	lctx, cancel := context.WithTimeout(ctx, a.t.providerCall)
	listed, err := e.p.List(lctx)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			a.log.Debug("status poll by list failed", "provider", e.name, "err", err)
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
			a.observe(p.id, p.ver, api.AssignmentStatus{}, provider.ErrNotFound)
			continue
		}
		a.observe(p.id, p.ver, st, nil)
	}
}

// runWatcher consumes the statuses a provider pushes. While its watch is
// in place the provider's poller stands by, so that a replica that dies
// is reported when the provider says so, not at the next poll. When the
// watch ends (the provider closed it, a plugin exited) the poller takes
// over until watching works again, and every new watch starts with a
// relist: changes made while there was none are not pushed.
func (a *Agent) runWatcher(ctx context.Context, e *providerEntry, w provider.Watcher) {
	b := a.t.regionBackoff()
	warn := warnLimiter{every: a.t.warnEvery}
	for {
		ch, err := w.Watch(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && isUnsupported(err):
			a.log.Debug("provider pushes no statuses; polling it", "provider", e.name)
			return
		case errors.Is(err, api.ErrUnavailable):
			// A plugin restarting, containerd's events not followed yet:
			// Health says why when it lasts.
			a.log.Debug("provider cannot watch now; polling it until it can", "provider", e.name, "err", err)
		case err != nil:
			warn.fail(a.log, "provider watch failed; polling it until watching works", err, "provider", e.name)
		default:
			warn.ok(a.log, "provider watch in place; its poller stands by", "provider", e.name)
			started := time.Now()
			e.watching.Store(true)
			// After the watch is in place, so that whatever changed
			// before it is found and whatever changes after it is
			// pushed. Pushes wait in ch meanwhile and are applied after,
			// in order: each is newer than what they replace.
			a.resync(ctx, e)
			for st := range ch {
				a.observePushed(e, st)
			}
			e.watching.Store(false)
			if ctx.Err() != nil {
				return
			}
			a.log.Info("provider watch ended; polling it until watching again works", "provider", e.name)
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
// can be observed now are (pollProvider), the others (being applied, not
// yet adopted after a restart) are looked at once they can be.
func (a *Agent) resync(ctx context.Context, e *providerEntry) {
	a.mu.Lock()
	for _, r := range a.replicas {
		if r.prov == e && !r.pollable() {
			r.recheck = true
		}
	}
	a.mu.Unlock()
	a.pollProvider(ctx, e)
}

// observePushed records a status a provider pushed. A replica that cannot
// take it now (being applied, recovered but not yet adopted) is looked at
// again once it can: the push says something changed, and no other push
// may follow.
func (a *Agent) observePushed(e *providerEntry, st api.AssignmentStatus) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.replicas[st.ID]
	if !ok || r.prov != e {
		return
	}
	if !r.pollable() {
		if r.provisioning(e, st) {
			// How far an Apply in flight is (an image pull): the region
			// shows it; the Apply's answer follows.
			a.setStatusLocked(r, st, st.ObservedGeneration, false)
			return
		}
		r.recheck = true
		return
	}
	if st.ObservedGeneration != 0 && st.ObservedGeneration < r.appliedGen {
		return // about a generation applied over since
	}
	var err error
	if st.Phase == api.PhaseDestroyed {
		// Gone without the agent asking: as lost as a NotFound.
		err = provider.ErrNotFound
	}
	a.observedLocked(r, st, err)
}
