package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/stratahq/strata/internal/transport"
	providerv1 "github.com/stratahq/strata/proto/provider/v1"
)

// stopGrace bounds how long Serve waits for calls in flight when its
// context ends (streams are ended first: see server.stop).
const stopGrace = 5 * time.Second

// Serve serves p on the unix socket at path socket until ctx is done, then
// stops gracefully (calls in flight get stopGrace to finish). It is what a
// plugin binary's main runs (see PluginMain).
//
// A socket file left by a process that died without cleaning up is
// removed first; any other file at that path is an error. The socket is
// created with mode 0600, readable by the agent's user only, and removed
// when Serve returns. Serve does not close p.
func Serve(ctx context.Context, p Provider, socket string, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := removeStaleSocket(socket); err != nil {
		return err
	}
	lc := net.ListenConfig{Control: socketControl}
	l, err := lc.Listen(ctx, "unix", socket)
	if err != nil {
		return fmt.Errorf("serve provider: %w", err)
	}
	// Removed by us below, not by the listener, so that a socket another
	// process has put in its place since is not removed with ours.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	mine, statErr := os.Stat(socket)
	defer func() {
		if now, err := os.Stat(socket); statErr == nil && err == nil && os.SameFile(mine, now) {
			os.Remove(socket)
		}
	}()
	// Also for systems where socketControl cannot set the mode before the
	// socket file exists.
	if err := os.Chmod(socket, 0o600); err != nil {
		l.Close()
		return fmt.Errorf("serve provider: %w", err)
	}

	// The socket's mode keeps other users out; the server also checks
	// each caller's uid (Local security).
	srv, err := transport.NewServer(transport.Local(), transport.Policy{
		providerv1.ProviderService_ServiceDesc.ServiceName: {Local: true, MaxRecvBytes: transport.LargeMessageBytes},
	}, log)
	if err != nil {
		l.Close()
		return fmt.Errorf("serve provider: %w", err)
	}
	ps := newServer(p)
	providerv1.RegisterProviderServiceServer(srv, ps)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	log.Info("provider serving", "socket", socket)

	select {
	case err := <-served:
		return fmt.Errorf("serve provider: %w", err)
	case <-ctx.Done():
	}
	// Watches and following Logs end now; their clients see the stream
	// break and come back once a plugin serves again.
	ps.stop()
	stopped := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(stopped)
	}()
	timer := time.NewTimer(stopGrace)
	defer timer.Stop()
	select {
	case <-stopped:
	case <-timer.C:
		srv.Stop()
		<-stopped
	}
	<-served
	log.Info("provider stopped", "socket", socket)
	return nil
}

func removeStaleSocket(socket string) error {
	fi, err := os.Lstat(socket)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("serve provider: %w", err)
	case fi.Mode().Type() != fs.ModeSocket:
		return fmt.Errorf("serve provider: %s exists and is not a socket", socket)
	}
	if err := os.Remove(socket); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("serve provider: remove stale socket: %w", err)
	}
	return nil
}

// Dial connects to a plugin already running on the unix socket at path
// socket (an agent configured with `socket:` rather than a binary). The
// connection is lazy and reconnects by itself: a plugin that is not up yet
// or restarts gives api.ErrUnavailable until it answers. Close the
// returned Closer when done with the client.
func Dial(socket string) (*Client, io.Closer, error) {
	cc, err := dialSocket(socket)
	if err != nil {
		return nil, nil, err
	}
	return NewClient(cc), cc, nil
}

func dialSocket(socket string) (*grpc.ClientConn, error) {
	abs, err := filepath.Abs(socket)
	if err != nil {
		return nil, fmt.Errorf("dial provider: %w", err)
	}
	// A local socket is either there or not: retry it quickly instead of
	// with gRPC's network back-off (1s doubling to 2m), so that a restarted
	// plugin is reachable again within a fraction of a second.
	cc, err := transport.Dial("unix://"+abs, transport.Local(), transport.AnyServer(), transport.WithLargeMessages(), grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
		MinConnectTimeout: time.Second,
	}))
	if err != nil {
		return nil, fmt.Errorf("dial provider: %w", err)
	}
	return cc, nil
}
