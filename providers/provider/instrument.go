package provider

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// CallObserver records provider calls: how long each took and whether it
// failed. The agent passes its metrics (metrics.Providers).
type CallObserver interface {
	ObserveCall(provider, op string, took time.Duration, err error)
}

// Instrument wraps p, named name, so that every call is reported to o.
// The wrapper offers the optional capabilities (logs, watch, close);
// where p lacks one it answers ErrUnsupported, which the agent treats as
// "not offered".
func Instrument(name string, p Provider, o CallObserver) Provider {
	return &instrumented{p: p, name: name, o: o}
}

type instrumented struct {
	p    Provider
	name string
	o    CallObserver
}

var (
	_ Provider   = (*instrumented)(nil)
	_ Logger     = (*instrumented)(nil)
	_ Watcher    = (*instrumented)(nil)
	_ Closer     = (*instrumented)(nil)
	_ HostServer = (*instrumented)(nil)
	_ Meter      = (*instrumented)(nil)
)

// timed runs one call of op and reports it.
func timed[T any](i *instrumented, op string, call func() (T, error)) (T, error) {
	start := time.Now()
	v, err := call()
	i.o.ObserveCall(i.name, op, time.Since(start), err)
	return v, err
}

func (i *instrumented) Info(ctx context.Context) (Info, error) {
	return timed(i, "info", func() (Info, error) { return i.p.Info(ctx) })
}

func (i *instrumented) Health(ctx context.Context) ([]api.Condition, error) {
	return timed(i, "health", func() ([]api.Condition, error) { return i.p.Health(ctx) })
}

func (i *instrumented) Apply(ctx context.Context, a *api.Assignment) (api.AssignmentStatus, error) {
	return timed(i, "apply", func() (api.AssignmentStatus, error) { return i.p.Apply(ctx, a) })
}

func (i *instrumented) Delete(ctx context.Context, a *api.Assignment, grace time.Duration) error {
	start := time.Now()
	err := i.p.Delete(ctx, a, grace)
	i.o.ObserveCall(i.name, "delete", time.Since(start), err)
	return err
}

func (i *instrumented) Status(ctx context.Context, id string) (api.AssignmentStatus, error) {
	start := time.Now()
	v, err := i.p.Status(ctx, id)
	observed := err
	if errors.Is(err, api.ErrNotFound) {
		observed = nil // an answer, not a failure
	}
	i.o.ObserveCall(i.name, "status", time.Since(start), observed)
	return v, err
}

func (i *instrumented) List(ctx context.Context) ([]Listed, error) {
	return timed(i, "list", func() ([]Listed, error) { return i.p.List(ctx) })
}

func (i *instrumented) Logs(ctx context.Context, id string, o LogOptions, w io.Writer) error {
	l, ok := i.p.(Logger)
	if !ok {
		return ErrUnsupported
	}
	return l.Logs(ctx, id, o, w)
}

func (i *instrumented) Watch(ctx context.Context) (<-chan api.AssignmentStatus, error) {
	w, ok := i.p.(Watcher)
	if !ok {
		return nil, ErrUnsupported
	}
	return w.Watch(ctx)
}

func (i *instrumented) Close() error {
	if c, ok := i.p.(Closer); ok {
		return c.Close()
	}
	return nil
}

func (i *instrumented) HostListeners() []HostListener {
	if h, ok := i.p.(HostServer); ok {
		return h.HostListeners()
	}
	return nil
}

func (i *instrumented) Usage(ctx context.Context) (map[string]api.Usage, error) {
	m, ok := i.p.(Meter)
	if !ok {
		return nil, ErrUnsupported
	}
	return timed(i, "usage", func() (map[string]api.Usage, error) { return m.Usage(ctx) })
}
