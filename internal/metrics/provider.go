package metrics

import (
	"context"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
)

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

// Instrument wraps p so that every call is timed and its failures
// counted. The wrapper offers the optional capabilities (logs, watch,
// close); where p lacks one it answers provider.ErrUnsupported, which the
// agent treats as "not offered".
func (m *Providers) Instrument(name string, p provider.Provider) provider.Provider {
	if m == nil {
		return p
	}
	return &instrumented{p: p, name: name, m: m}
}

type instrumented struct {
	p    provider.Provider
	name string
	m    *Providers
}

var (
	_ provider.Provider = (*instrumented)(nil)
	_ provider.Logger   = (*instrumented)(nil)
	_ provider.Watcher  = (*instrumented)(nil)
	_ provider.Closer   = (*instrumented)(nil)
)

func (i *instrumented) observe(op string, start time.Time, err error) {
	i.m.duration.WithLabelValues(i.name, op).Observe(time.Since(start).Seconds())
	if err != nil {
		i.m.errors.WithLabelValues(i.name, op).Inc()
	}
}

func (i *instrumented) Info(ctx context.Context) (provider.Info, error) {
	start := time.Now()
	v, err := i.p.Info(ctx)
	i.observe("info", start, err)
	return v, err
}

func (i *instrumented) Health(ctx context.Context) ([]api.Condition, error) {
	start := time.Now()
	v, err := i.p.Health(ctx)
	i.observe("health", start, err)
	return v, err
}

func (i *instrumented) Apply(ctx context.Context, a *api.Assignment) (api.AssignmentStatus, error) {
	start := time.Now()
	v, err := i.p.Apply(ctx, a)
	i.observe("apply", start, err)
	return v, err
}

func (i *instrumented) Delete(ctx context.Context, a *api.Assignment, grace time.Duration) error {
	start := time.Now()
	err := i.p.Delete(ctx, a, grace)
	i.observe("delete", start, err)
	return err
}

func (i *instrumented) Status(ctx context.Context, id string) (api.AssignmentStatus, error) {
	start := time.Now()
	v, err := i.p.Status(ctx, id)
	if err != nil && isNotFound(err) {
		i.observe("status", start, nil) // an answer, not a failure
		return v, err
	}
	i.observe("status", start, err)
	return v, err
}

func (i *instrumented) List(ctx context.Context) ([]provider.Listed, error) {
	start := time.Now()
	v, err := i.p.List(ctx)
	i.observe("list", start, err)
	return v, err
}

func (i *instrumented) Logs(ctx context.Context, id string, o provider.LogOptions, w io.Writer) error {
	l, ok := i.p.(provider.Logger)
	if !ok {
		return provider.ErrUnsupported
	}
	return l.Logs(ctx, id, o, w)
}

func (i *instrumented) Watch(ctx context.Context) (<-chan api.AssignmentStatus, error) {
	w, ok := i.p.(provider.Watcher)
	if !ok {
		return nil, provider.ErrUnsupported
	}
	return w.Watch(ctx)
}

func (i *instrumented) Close() error {
	if c, ok := i.p.(provider.Closer); ok {
		return c.Close()
	}
	return nil
}
