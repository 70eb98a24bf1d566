package agent

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"
)

// backoff doubles a delay from min to max; next adds jitter so that many
// agents that lost their region together do not come back in lockstep.
type backoff struct {
	min, max, cur time.Duration
}

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.min
	} else {
		b.cur = min(2*b.cur, b.max)
	}
	return jitter(b.cur)
}

func (b *backoff) reset() { b.cur = 0 }

// jitter returns a delay in [d/2, d].
func jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}

// sleepCtx waits d and reports whether ctx is still alive.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// warnLimiter logs a repeating failure at Warn at most once per period
// with how many failures it stands for, and the recovery at Info: a region
// outage must not flood the logs of a thousand agents. Used by one
// goroutine at a time.
type warnLimiter struct {
	every    time.Duration
	last     time.Time
	failures int // since the last warning
	failing  bool
	total    int
}

func (w *warnLimiter) fail(log *slog.Logger, msg string, err error, args ...any) {
	w.failures++
	w.total++
	w.failing = true
	if !w.last.IsZero() && time.Since(w.last) < w.every {
		return
	}
	log.Warn(msg, append(args, "err", err, "failures", w.failures)...)
	w.last = time.Now()
	w.failures = 0
}

func (w *warnLimiter) ok(log *slog.Logger, msg string, args ...any) {
	if !w.failing {
		return
	}
	log.Info(msg, append(args, "failures", w.total)...)
	*w = warnLimiter{every: w.every}
}
