package haproxy

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"
)

// converge makes haproxy serve exactly the load balancers held: it
// writes the configuration, starts, reloads or stops haproxy when the
// structure asks for it, then adds and removes servers through the
// runtime API. A load balancer haproxy refuses (a port it cannot bind)
// is put in error and left out, so that it does not hold back the
// others. The caller holds op.
func (p *Provider) converge(ctx context.Context, grace time.Duration) error {
	var r rendered
	refused := false
	// Each round either succeeds or puts at least one load balancer in
	// error, so there are at most as many rounds as load balancers.
	for round := 0; ; round++ {
		p.mu.Lock()
		active := p.activeLocked()
		pr, loaded := p.proc, p.loaded
		p.mu.Unlock()
		if len(active) == 0 {
			err := p.stopLocked(ctx, grace)
			p.converged(err)
			return err
		}
		r = render(p.paths, p.run, active)
		if err := writeFileIfChanged(p.paths.Config, r.Text); err != nil {
			p.converged(err)
			return fmt.Errorf("haproxy: %w", err)
		}
		var err error
		switch {
		case pr == nil:
			p.killStrays()
			pr, err = startProcess(ctx, p.cfg.Binary, p.paths, r)
			if err == nil {
				p.log.Info("haproxy started", "pid", pr.pid, "loadBalancers", len(active))
			}
		case r.Structure != loaded.Structure:
			start := time.Now()
			err = reloadProcess(ctx, p.paths, r)
			if err == nil {
				p.mu.Lock()
				p.reloads++
				p.mu.Unlock()
				p.log.Info("haproxy reloaded", "pid", pr.pid, "took", time.Since(start).Round(time.Millisecond), "loadBalancers", len(active))
			}
		default:
			// Same structure: the runtime API does the rest.
		}
		if round < len(active) && p.leaveOut(err) {
			refused = true
			continue
		}
		if err != nil {
			p.converged(err)
			return err
		}
		rs := runningState{PID: pr.pid, Structure: r.Structure, LBStructure: r.LBStructure}
		p.mu.Lock()
		p.proc, p.loaded = pr, rs
		p.mu.Unlock()
		if err := saveRunning(p.paths.Running, rs); err != nil {
			p.log.Warn("save running state", "err", err)
		}
		break
	}
	if refused {
		p.admin.waitResumed(ctx)
	}
	err := p.admin.syncServers(ctx, r)
	p.converged(err)
	return err
}

// leaveOut puts the load balancers haproxy refused (err, a loadError)
// in error, so that the next round leaves them out; it reports whether
// there were any.
func (p *Provider) leaveOut(err error) bool {
	var le *loadError
	if !errors.As(err, &le) || len(le.ByLB) == 0 {
		return false
	}
	p.mu.Lock()
	for id, reason := range le.ByLB {
		if l, ok := p.lbs[id]; ok {
			p.setErrorLocked(l, reason)
		}
	}
	p.mu.Unlock()
	p.log.Warn("haproxy refused load balancers; serving the others", "op", le.Op, "refused", le.ByLB)
	return true
}

// converged records the outcome of a converge.
func (p *Provider) converged(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil {
		p.dirty, p.lastErr, p.failures = false, "", 0
		return
	}
	p.dirty = true
	p.lastErr = err.Error()
	p.failures++
	p.retryAt = time.Now().Add(retryBackoff.Delay(p.failures))
}

// activeLocked resolves the load balancers haproxy should serve. Two
// load balancers cannot share a port (haproxy binds with SO_REUSEPORT
// and would split the traffic between them): the one already serving
// it keeps it, else the first by id, and the other goes to error.
func (p *Provider) activeLocked() []resolved {
	ls := make([]*lb, 0, len(p.lbs))
	for _, l := range p.lbs {
		if l.state.Error == "" {
			ls = append(ls, l)
		}
	}
	slices.SortFunc(ls, func(a, b *lb) int {
		al, bl := p.loaded.LBStructure[a.state.ID] != "", p.loaded.LBStructure[b.state.ID] != ""
		if al != bl {
			if al {
				return -1
			}
			return 1
		}
		return strings.Compare(a.state.ID, b.state.ID)
	})
	type holder struct {
		addr netip.Addr
		id   string
	}
	used := map[int][]holder{}
	var out []resolved
next:
	for _, l := range ls {
		for _, li := range l.res.Listeners {
			addr := netip.MustParseAddr(li.Address)
			for _, h := range used[li.Port] {
				if h.addr == addr || h.addr.IsUnspecified() || addr.IsUnspecified() {
					p.setErrorLocked(l, fmt.Sprintf("port %d on %s is used by load balancer %s", li.Port, li.Address, h.id))
					continue next
				}
			}
		}
		for _, li := range l.res.Listeners {
			used[li.Port] = append(used[li.Port], holder{netip.MustParseAddr(li.Address), l.state.ID})
		}
		out = append(out, l.res)
	}
	return out
}

// setErrorLocked puts l in error until it is applied again.
func (p *Provider) setErrorLocked(l *lb, reason string) {
	l.state.Error = reason
	if err := saveLB(p.paths.LBs, &l.state); err != nil {
		p.log.Warn("save load balancer", "id", l.state.ID, "err", err)
	}
}

// stopLocked stops haproxy, if it runs, and removes its runtime files.
// The caller holds op.
func (p *Provider) stopLocked(ctx context.Context, grace time.Duration) error {
	p.mu.Lock()
	pr := p.proc
	p.mu.Unlock()
	if pr == nil {
		p.killStrays()
		return nil
	}
	err := stopProcess(ctx, pr, p.paths.Config, grace)
	p.mu.Lock()
	p.proc, p.loaded = nil, runningState{}
	p.mu.Unlock()
	for _, f := range []string{p.paths.PID, p.paths.Master, p.paths.Admin, p.paths.Running, p.paths.ServerState} {
		_ = os.Remove(f)
	}
	p.log.Info("haproxy stopped", "pid", pr.pid)
	if err != nil {
		return fmt.Errorf("haproxy: %w", err)
	}
	return nil
}

// killStrays kills processes running our configuration that no master
// we know of owns: workers of a master that died, which would otherwise
// keep the ports a new master needs.
func (p *Provider) killStrays() {
	for _, pid := range ownedProcs(p.paths.Config) {
		p.log.Warn("killing a stray haproxy process", "pid", pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// writeFileIfChanged writes the configuration when its text changed.
func writeFileIfChanged(path, text string) error {
	if cur, err := os.ReadFile(path); err == nil && string(cur) == text {
		return nil
	}
	return writeFileAtomic(path, []byte(text), 0o600)
}
