package haproxy

import (
	"context"
	"fmt"

	"github.com/stratahq/strata/internal/api"
)

// Usage implements provider.Meter from one "show stat" (or the recent
// snapshot standing in for it during a reload): for each load balancer
// whose frontends haproxy runs, what its listeners served (HTTP requests,
// req_tot, of http frontends; connections, stot, of tcp ones) and the
// connections open on them now (scur). The counters are the worker's:
// they start again from zero at a reload or restart. While haproxy does
// not run there is nothing to measure.
func (p *Provider) Usage(ctx context.Context) (map[string]api.Usage, error) {
	snap, err := p.stats(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		if p.proc == nil {
			return map[string]api.Usage{}, nil
		}
		return nil, fmt.Errorf("haproxy: usage: %w", err)
	}
	out := map[string]api.Usage{}
	for id, l := range p.lbs {
		if u, ok := lbUsage(l, snap); ok {
			out[id] = u
		}
	}
	return out, nil
}

// lbUsage sums the frontends of l's listeners in snap; false when snap
// has none of them (l is in error, or not loaded yet).
func lbUsage(l *lb, snap stats) (api.Usage, bool) {
	var u api.Usage
	found := false
	for _, ls := range l.res.Listeners {
		fe, ok := snap.Frontends[frontendName(l.state.ID, ls.Port)]
		if !ok {
			continue
		}
		found = true
		served := fe.Connections
		if cmpOr(fe.Mode, ls.Mode) == "http" {
			served = fe.Requests
		}
		u.Requests += float64(served)
		u.Sessions += float64(fe.Sessions)
	}
	return u, found
}
