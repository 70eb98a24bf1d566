package serving

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"golang.org/x/sync/errgroup"
)

// shutdownGrace is how long a tier's servers get to finish what is in
// flight when the tier stops.
const shutdownGrace = 5 * time.Second

// GRPCServer is the part of a gRPC server a tier runs.
type GRPCServer interface {
	GRPC
	Serve(net.Listener) error
}

// Tier is what the global tier and a region serve: gRPC on one listener,
// HTTP (REST and console) on another.
type Tier struct {
	// Name is "global" or "region", in errors and the log.
	Name         string
	GRPC         GRPCServer
	GRPCListener net.Listener
	HTTP         *HTTP
	Log          *slog.Logger
}

// Listen returns l, or when l is nil a new TCP listener on addr; what
// names the listener in errors (listen.grpc).
func Listen(l net.Listener, addr, what string) (net.Listener, error) {
	if l != nil {
		return l, nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return l, nil
}

// Serve runs the tier's servers in g until ctx is done, then shuts them
// down, each given a grace period. Once start returns nil (the caches
// hold etcd's state, etcd takes transactions as large as configured) the
// tier is ready: ready is closed. An error from start stops the tier and
// is g's error; start returns nil when ctx ends first.
func (t Tier) Serve(ctx context.Context, g *errgroup.Group, ready chan<- struct{}, start func(context.Context) error) {
	g.Go(func() error {
		if err := t.GRPC.Serve(t.GRPCListener); err != nil && !errors.Is(err, net.ErrClosed) {
			return fmt.Errorf("%s: grpc: %w", t.Name, err)
		}
		return nil
	})
	g.Go(func() error {
		if err := t.HTTP.Serve(); err != nil {
			return fmt.Errorf("%s: http: %w", t.Name, err)
		}
		return nil
	})
	g.Go(func() error {
		err := start(ctx)
		if err != nil {
			err = fmt.Errorf("%s: %w", t.Name, err)
		} else if ctx.Err() == nil {
			t.Log.Info(t.Name+" serving", "http", t.HTTP.l.Addr().String(), "grpc", t.GRPCListener.Addr().String())
			close(ready)
			<-ctx.Done()
		}
		Shutdown(t.GRPC, t.HTTP.Server, shutdownGrace)
		return err
	})
}
