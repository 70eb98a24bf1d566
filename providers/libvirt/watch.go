package libvirt

import (
	"context"
	"errors"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
)

// watchBuffer is how many changes a watcher may fall behind before changes
// are dropped for it; the next rescan sends them again.
const watchBuffer = 256

// watcher is one Watch: kicks name the replicas to look at now.
type watcher struct {
	kicks chan string
}

// Watch implements provider.Watcher. libvirt's lifecycle events (a guest
// shutting down, crashing, a domain undefined) make it look at a replica
// at once; a rescan every poll interval catches whatever events missed (a
// reconnect to a restarted libvirtd, a full buffer). Only changes of phase,
// reason or generation are sent; a deleted replica is sent once as
// destroyed.
func (p *Provider) Watch(ctx context.Context) (<-chan api.AssignmentStatus, error) {
	out := make(chan api.AssignmentStatus, watchBuffer)
	w := &watcher{kicks: make(chan string, watchBuffer)}
	p.mu.Lock()
	p.watchers[w] = struct{}{}
	p.mu.Unlock()
	// What exists when Watch returns is the baseline, not a change; it is
	// taken before returning so that no change after it is missed.
	baseline := map[string]api.AssignmentStatus{}
	if ls, err := p.List(ctx); err == nil {
		for _, l := range ls {
			baseline[l.ID] = l.Status
		}
	} else {
		p.log.Debug("watch baseline", "err", err)
	}
	go func() {
		defer close(out)
		defer func() {
			p.mu.Lock()
			delete(p.watchers, w)
			p.mu.Unlock()
		}()
		p.watch(ctx, w, baseline, out)
	}()
	return out, nil
}

func (p *Provider) watch(ctx context.Context, w *watcher, sent map[string]api.AssignmentStatus, out chan<- api.AssignmentStatus) {
	send := func(st api.AssignmentStatus) {
		if prev, ok := sent[st.ID]; ok && !changed(prev, st) {
			return
		}
		select {
		case out <- st:
			sent[st.ID] = st
		default: // full: the next rescan tries again
		}
	}
	gone := func(id string) {
		prev, ok := sent[id]
		if !ok {
			return
		}
		now := time.Now()
		prev.Phase, prev.Reason, prev.Since, prev.UpdatedAt = api.PhaseDestroyed, "", now, now
		select {
		case out <- prev:
			delete(sent, id)
		default:
		}
	}
	rescan := func() {
		ls, err := p.List(ctx)
		if err != nil {
			p.log.Debug("watch rescan", "err", err)
			return
		}
		seen := make(map[string]bool, len(ls))
		for _, l := range ls {
			seen[l.ID] = true
			send(l.Status)
		}
		for id := range sent {
			if !seen[id] {
				gone(id)
			}
		}
	}
	tick := time.NewTicker(p.pollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case id := <-w.kicks:
			st, err := p.Status(ctx, id)
			switch {
			case err == nil:
				send(st)
			case errors.Is(err, provider.ErrNotFound):
				gone(id)
			}
		case <-tick.C:
			rescan()
		}
	}
}

func changed(a, b api.AssignmentStatus) bool {
	return a.Phase != b.Phase || a.Reason != b.Reason || a.ObservedGeneration != b.ObservedGeneration || a.Restarts != b.Restarts
}

// kick tells every watcher to look at replica id now; it never blocks (it
// runs on libvirt's event loop).
func (p *Provider) kick(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for w := range p.watchers {
		select {
		case w.kicks <- id:
		default:
		}
	}
}
