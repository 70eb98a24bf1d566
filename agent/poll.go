package agent

import (
	"context"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
)

// polled is a replica to poll and its version when the poll started.
type polled struct {
	id  string
	ver int64
}

// runPoller polls one provider's running replicas every status interval,
// so that changes nobody pushed (a container that exited, a VM that
// crashed) still reach the region.
func (a *Agent) runPoller(ctx context.Context, e *providerEntry) {
	t := time.NewTicker(a.cfg.StatusInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
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

// runWatcher consumes the statuses a provider pushes, re-subscribing with
// backoff when its channel closes early; polling goes on meanwhile.
func (a *Agent) runWatcher(ctx context.Context, e *providerEntry, w provider.Watcher) {
	b := backoff{min: a.t.registerMin, max: a.t.registerMax}
	for {
		ch, err := w.Watch(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if isUnsupported(err) {
				a.log.Debug("provider pushes no statuses; polling only", "provider", e.name)
				return
			}
			a.log.Warn("provider watch failed; relying on polling", "provider", e.name, "err", err)
		} else {
			for st := range ch {
				a.observePushed(e, st)
				b.reset()
			}
		}
		if !sleepCtx(ctx, b.next()) {
			return
		}
	}
}

// observePushed records a status a provider pushed, for a replica it
// holds at the wanted generation.
func (a *Agent) observePushed(e *providerEntry, st api.AssignmentStatus) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.replicas[st.ID]
	if !ok || r.prov != e || !r.pollable() {
		return
	}
	var err error
	if st.Phase == api.PhaseDestroyed {
		// Gone without the agent asking: as lost as a NotFound.
		err = provider.ErrNotFound
	}
	a.observedLocked(r, st, err)
}
