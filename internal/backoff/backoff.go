// Package backoff is Strata's one retry delay and its one context-aware
// sleep. Every retry loop uses them: store reflectors and optimistic
// writes, elections, the agent's calls to its region, the global master's
// links to regions, controllers' reconcile passes, plugin and task
// restarts, the CLI. A delay doubles from a first value up to a cap and
// may be spread (jitter) so that many clients cut off by one outage do not
// come back in lockstep.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Jitter says how a delay is spread.
type Jitter int

const (
	// None waits the delay itself.
	None Jitter = iota
	// Half waits uniformly in [d/2, d]: clients spread out, yet none
	// comes back sooner than half the delay.
	Half
	// Full waits uniformly in [0, d): for contention (optimistic write
	// conflicts), where retrying at once is as good as any time.
	Full
)

// Backoff yields the delays of consecutive failures: Min after the first,
// doubling after each further one up to Max, spread by Jitter. A Backoff
// counts failures for Next; it belongs to one retry loop (not safe for
// concurrent use). Delay reads no state: a package-level Backoff may
// serve several loops through it.
type Backoff struct {
	Min, Max time.Duration
	Jitter   Jitter

	failures int
}

// Next counts one more failure and returns the delay before retrying.
func (b *Backoff) Next() time.Duration {
	b.failures++
	return b.Delay(b.failures)
}

// Reset forgets the failures: the next delay is Min again.
func (b *Backoff) Reset() { b.failures = 0 }

// Delay is the delay after the n-th consecutive failure: none for n < 1,
// Min for the first, doubling up to Max (Max below Min means Min), spread
// by Jitter.
func (b Backoff) Delay(n int) time.Duration {
	if n < 1 || b.Min <= 0 {
		return 0
	}
	limit := max(b.Min, b.Max)
	d := b.Min
	for i := 1; i < n && d < limit; i++ {
		if d > limit/2 {
			d = limit
			break
		}
		d *= 2
	}
	d = min(d, limit)
	switch b.Jitter {
	case Half:
		if d > 1 {
			d = d/2 + rand.N(d/2+1)
		}
	case Full:
		d = rand.N(d)
	}
	return d
}

// Sleep waits d, or until ctx is done: it returns nil when d has passed
// and ctx.Err() when ctx ended first. A d of zero or less returns nil at
// once: no wait, nothing to interrupt.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
