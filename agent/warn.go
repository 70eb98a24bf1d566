package agent

import (
	"log/slog"
	"time"
)

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
