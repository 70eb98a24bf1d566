package global

import (
	"github.com/stratahq/strata/global/alerts"
	"github.com/stratahq/strata/internal/metrics"
)

// registerAlertMetrics exposes the alert delivery of this replica (it
// delivers while it is the master).
func registerAlertMetrics(reg *metrics.Registry, d *alerts.Dispatcher) {
	stat := func(pick func(sent, failed, dropped uint64, pending int64) float64) func() float64 {
		return func() float64 { return pick(d.Stats()) }
	}
	reg.CounterFunc("strata_alerts_sent_total", "Alert notifications receivers took (2xx) under this replica's mastership.",
		stat(func(s, _, _ uint64, _ int64) float64 { return float64(s) }))
	reg.CounterFunc("strata_alerts_failed_total", "Alert notification posts that failed (network error or non-2xx); retried with backoff.",
		stat(func(_, f, _ uint64, _ int64) float64 { return float64(f) }))
	reg.CounterFunc("strata_alerts_dropped_total", "Alerts given up on after the last retry.",
		stat(func(_, _, dr uint64, _ int64) float64 { return float64(dr) }))
	reg.CounterFunc("strata_alerts_passes_total", "Alert passes completed under this replica's mastership (rules and events read, state written, due notifications started).",
		func() float64 { return float64(d.Passes()) })
	reg.GaugeFunc("strata_alerts_pending", "Alerts waiting to be sent (grouping window or retries); 0 on a replica that is not the master.",
		stat(func(_, _, _ uint64, p int64) float64 { return float64(p) }))
}
