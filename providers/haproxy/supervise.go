package haproxy

import (
	"context"
	"os"
	"slices"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// watchBuffer is how many changes a watcher may fall behind before it is
// closed (see provider.Watchers).
const watchBuffer = 64

// Watch implements provider.Watcher: while load balancers exist, their
// statuses are polled every second and changes (a backend going down,
// a frontend lost) are sent, as are the results of Apply and Delete.
func (p *Provider) Watch(ctx context.Context) (<-chan api.AssignmentStatus, error) {
	return p.watchers.Watch(ctx)
}

// publishLocked sends st to the watchers if it differs from what they
// were last sent for its replica; p.mu is held, so that watchers see
// changes in order.
func (p *Provider) publishLocked(st api.AssignmentStatus) {
	if prev, ok := p.pushed[st.ID]; ok && sameStatus(prev, st) {
		return
	}
	p.pushed[st.ID] = st
	p.watchers.Send(st)
}

func sameStatus(a, b api.AssignmentStatus) bool {
	return a.Phase == b.Phase && a.Reason == b.Reason && a.ObservedGeneration == b.ObservedGeneration &&
		slices.Equal(a.Backends, b.Backends)
}

// supervise runs until Close: it restarts haproxy when it dies, retries
// what failed to converge, and polls statuses for watchers.
func (p *Provider) supervise(ctx context.Context) {
	defer close(p.done)
	tick := time.NewTicker(superviseEvery)
	defer tick.Stop()
	nextPoll := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			p.checkProcess()
			if p.needsConverge(now) {
				if err := p.lockOp(ctx); err != nil {
					return
				}
				err := p.converge(ctx, stopGrace)
				p.unlockOp()
				if err != nil && ctx.Err() == nil {
					p.log.Warn("haproxy did not converge; retrying", "err", err)
				}
			}
			if !now.Before(nextPoll) {
				nextPoll = now.Add(watchEvery)
				p.pollWatchers(ctx)
			}
		}
	}
}

// checkProcess notices a master that died without being asked to. A
// start, reload or stop in progress owns the process: it is left alone.
func (p *Provider) checkProcess() {
	select {
	case p.op <- struct{}{}:
	default:
		return
	}
	defer p.unlockOp()
	p.mu.Lock()
	pr := p.proc
	p.mu.Unlock()
	if pr == nil || procAlive(pr.pid, p.paths.Config) {
		return
	}
	exit := cmpOr(reap(pr), "exited")
	now := time.Now()
	p.mu.Lock()
	p.proc = nil
	p.loaded = runningState{}
	p.restarts++
	p.crashes = append(p.crashes, now)
	p.lastExit = exit
	p.dirty = true
	// The first crash restarts at once; a crash loop backs off.
	p.retryAt = now.Add(retryBackoff.Delay(p.recentCrashesLocked(now) - 1))
	restarts := p.restarts
	p.mu.Unlock()
	_ = os.Remove(p.paths.Running)
	p.log.Warn("haproxy exited unexpectedly; restarting it", "pid", pr.pid, "exit", exit, "restarts", restarts)
}

func (p *Provider) needsConverge(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if now.Before(p.retryAt) {
		return false
	}
	want := p.activeCountLocked() > 0
	return p.dirty || want != (p.proc != nil)
}

// pollWatchers sends the statuses that changed since the last poll.
func (p *Provider) pollWatchers(ctx context.Context) {
	p.mu.Lock()
	idle := p.watchers.Len() == 0 || len(p.lbs) == 0
	p.mu.Unlock()
	if idle {
		return
	}
	snap, snapErr := p.stats(ctx)
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lbs {
		p.publishLocked(p.statusLocked(l, snap, snapErr, now))
	}
}
