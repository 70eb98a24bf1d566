package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Controller is a reconcile loop's metrics. A nil *Controller records
// nothing, so components work without metrics (tests).
type Controller struct {
	passes   prometheus.Counter
	failures prometheus.Counter
	duration prometheus.Histogram
	queue    prometheus.Gauge
	keys     prometheus.Counter
	writes   prometheus.Counter
	phases   *prometheus.HistogramVec
}

// Controller returns the metrics of the tier's controller.
func (r *Registry) Controller() *Controller {
	return &Controller{
		passes:   r.Counter("strata_controller_passes_total", "Reconcile passes run by the controller (leader only)."),
		failures: r.Counter("strata_controller_pass_failures_total", "Reconcile passes whose writes failed (retried)."),
		duration: r.Histogram("strata_controller_pass_duration_seconds", "Time of one reconcile pass, writes and read-back included."),
		queue:    r.Gauge("strata_controller_queue_depth", "Resources waiting to be reconciled at the start of the last pass."),
		keys:     r.Counter("strata_controller_reconciles_total", "Resources reconciled."),
		writes:   r.Counter("strata_controller_write_ops_total", "etcd operations written by the controller."),
		phases:   r.HistogramVec("strata_controller_pass_phase_seconds", "Time of each phase of a reconcile pass (catchup, plan, commit, readback).", "phase"),
	}
}

// Lap starts timing a pass's phases: each call of the function it
// returns records the time since the previous call (or since Lap) as
// phase's.
func (c *Controller) Lap() func(phase string) {
	if c == nil {
		return func(string) {}
	}
	last := time.Now()
	return func(phase string) {
		now := time.Now()
		c.phases.WithLabelValues(phase).Observe(now.Sub(last).Seconds())
		last = now
	}
}

// Pass records one pass over n keys that wrote ops operations.
func (c *Controller) Pass(start time.Time, n, ops int, err error) {
	if c == nil {
		return
	}
	c.passes.Inc()
	c.duration.Observe(time.Since(start).Seconds())
	c.queue.Set(float64(n))
	c.keys.Add(float64(n))
	c.writes.Add(float64(ops))
	if err != nil {
		c.failures.Inc()
	}
}

// Scheduler is the scheduler's metrics.
type Scheduler struct {
	duration  prometheus.Histogram
	decisions *prometheus.CounterVec
}

// Scheduler returns the metrics of a region's scheduler.
func (r *Registry) Scheduler() *Scheduler {
	return &Scheduler{
		duration:  r.Histogram("strata_scheduler_batch_duration_seconds", "Time to place one batch of replicas."),
		decisions: r.CounterVec("strata_scheduler_decisions_total", "Placement decisions, by result.", "result"),
	}
}

// Batch records a batch of placements.
func (s *Scheduler) Batch(start time.Time, placed, unschedulable int) {
	if s == nil {
		return
	}
	s.duration.Observe(time.Since(start).Seconds())
	s.decisions.WithLabelValues("placed").Add(float64(placed))
	s.decisions.WithLabelValues("unschedulable").Add(float64(unschedulable))
}

// Monitor is the node (or region) monitor's metrics.
type Monitor struct {
	lag         prometheus.Histogram
	transitions *prometheus.CounterVec
	lateLooks   prometheus.Counter
	blind       prometheus.Counter
}

// Monitor returns the metrics of a liveness monitor.
func (r *Registry) Monitor() *Monitor {
	return &Monitor{
		lag:         r.Histogram("strata_heartbeat_lag_seconds", "Age of each node's (or region's) last heartbeat when the monitor looks."),
		transitions: r.CounterVec("strata_health_transitions_total", "Health transitions written, by new health.", "health"),
		lateLooks:   r.Counter("strata_monitor_late_looks_total", "Looks at the heartbeat store that came more than one look interval late (the monitor's process stalled, or the store could not be read)."),
		blind:       r.Counter("strata_monitor_blind_seconds_total", "The monitor's own blind time: how late its late looks were. Left out of every node's (or region's) quiet clock, up to DownAfter/2."),
	}
}

// Blind records a look that came d late (nothing when d is 0).
func (m *Monitor) Blind(d time.Duration) {
	if m != nil && d > 0 {
		m.lateLooks.Inc()
		m.blind.Add(d.Seconds())
	}
}

// Lag records the age of one heartbeat.
func (m *Monitor) Lag(d time.Duration) {
	if m != nil {
		m.lag.Observe(d.Seconds())
	}
}

// Transition records a health change.
func (m *Monitor) Transition(health string) {
	if m != nil {
		m.transitions.WithLabelValues(health).Inc()
	}
}

// Providers holds the provider operation metrics of an agent.
type Providers struct {
	duration *prometheus.HistogramVec
	errors   *prometheus.CounterVec
}

// Providers returns the metrics of an agent's providers.
func (r *Registry) Providers() *Providers {
	return &Providers{
		duration: r.HistogramVec("strata_provider_operation_duration_seconds", "Provider call latency, by provider and operation.", "provider", "op"),
		errors:   r.CounterVec("strata_provider_operation_errors_total", "Provider calls that failed, by provider and operation.", "provider", "op"),
	}
}

// ObserveCall records one provider call (provider.CallObserver).
func (m *Providers) ObserveCall(provider, op string, took time.Duration, err error) {
	m.duration.WithLabelValues(provider, op).Observe(took.Seconds())
	if err != nil {
		m.errors.WithLabelValues(provider, op).Inc()
	}
}
