package libvirt

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
)

// Watch implements provider.Watcher. libvirt's lifecycle events (a guest
// shutting down, crashing, a domain destroyed or undefined) make it look
// at a replica at once; a rescan every rescan interval catches what
// events cannot tell (a guest printing its ready marker) or missed (a
// reconnect to a restarted libvirtd). Only changes of phase, reason,
// generation or restarts are sent; a deleted replica is sent once as
// destroyed. A watcher that falls provider.DefaultWatchBuffer changes
// behind is closed, as is every watcher when the provider closes.
func (p *Provider) Watch(ctx context.Context) (<-chan api.AssignmentStatus, error) {
	out := make(chan api.AssignmentStatus, provider.DefaultWatchBuffer)
	w := &watcher{kicks: make(chan string, provider.DefaultWatchBuffer), rescan: make(chan struct{}, 1)}
	if err := p.hub.join(w); err != nil {
		return nil, fmt.Errorf("libvirt: watch: %w", err)
	}
	// What exists when Watch returns is the baseline, not a change; it is
	// taken after joining, so that no change after it is missed.
	baseline := map[string]api.AssignmentStatus{}
	if ls, err := p.List(ctx); err == nil {
		for _, l := range ls {
			baseline[l.ID] = l.Status
		}
	} else {
		p.log.Debug("watch baseline", "err", err)
	}
	go func() {
		defer p.hub.leave(w)
		defer close(out)
		p.watch(ctx, w, baseline, out)
	}()
	return out, nil
}

// watch looks at what kicks name and rescans, sending what changed, until
// ctx ends, the provider closes, or out is full: a change that cannot be
// sent ends the watch rather than going missing (see provider.Watcher).
func (p *Provider) watch(ctx context.Context, w *watcher, sent map[string]api.AssignmentStatus, out chan<- api.AssignmentStatus) {
	ws := &watchStream{p: p, sent: sent, out: out}
	tick := time.NewTicker(p.rescanInterval)
	defer tick.Stop()
	for {
		ok := true
		select {
		case <-ctx.Done():
			return
		case <-p.hub.closing:
			return
		case id := <-w.kicks:
			ok = ws.look(ctx, id)
		case <-w.rescan:
			ok = ws.rescan(ctx)
		case <-tick.C:
			ok = ws.rescan(ctx)
		}
		if !ok {
			p.log.Warn("watcher fell behind; closing it (it watches again and relists)")
			return
		}
	}
}

// watchStream is what one watcher has sent; each of its methods reports
// false when out is full.
type watchStream struct {
	p    *Provider
	sent map[string]api.AssignmentStatus
	out  chan<- api.AssignmentStatus
}

// send sends st unless it is what was sent last for its replica.
func (ws *watchStream) send(st api.AssignmentStatus) bool {
	if prev, ok := ws.sent[st.ID]; ok && !changed(prev, st) {
		return true
	}
	select {
	case ws.out <- st:
		ws.sent[st.ID] = st
		return true
	default:
		return false
	}
}

// gone sends that replica id, once sent, is destroyed.
func (ws *watchStream) gone(id string) bool {
	prev, ok := ws.sent[id]
	if !ok {
		return true
	}
	now := time.Now()
	prev.Phase, prev.Reason, prev.Since, prev.UpdatedAt = api.PhaseDestroyed, "", now, now
	select {
	case ws.out <- prev:
		delete(ws.sent, id)
		return true
	default:
		return false
	}
}

// look sends the status of replica id.
func (ws *watchStream) look(ctx context.Context, id string) bool {
	st, err := ws.p.Status(ctx, id)
	switch {
	case err == nil:
		return ws.send(st)
	case errors.Is(err, provider.ErrNotFound):
		return ws.gone(id)
	}
	// libvirtd unreachable: the next rescan looks again.
	return true
}

// rescan sends what changed among every replica, the ones gone included.
func (ws *watchStream) rescan(ctx context.Context) bool {
	ls, err := ws.p.List(ctx)
	if err != nil {
		ws.p.log.Debug("watch rescan", "err", err)
		return true
	}
	seen := make(map[string]bool, len(ls))
	for _, l := range ls {
		seen[l.ID] = true
		if !ws.send(l.Status) {
			return false
		}
	}
	for id := range ws.sent {
		if !seen[id] && !ws.gone(id) {
			return false
		}
	}
	return true
}

func changed(a, b api.AssignmentStatus) bool {
	return a.Phase != b.Phase || a.Reason != b.Reason || a.ObservedGeneration != b.ObservedGeneration || a.Restarts != b.Restarts
}
