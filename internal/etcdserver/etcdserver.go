// Package etcdserver runs a single-member etcd inside the current process.
//
// It backs `strata dev` and the unit tests: production tiers talk to a real
// etcd cluster through the client only.
package etcdserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Config describes one embedded member.
type Config struct {
	Name string
	Dir  string
	// ClientAddr is host:port for clients; port 0 picks a free one.
	ClientAddr string
	// TickMs and ElectionMs are raft timing; zero means 10 ms / 100 ms,
	// which suits one member on one machine.
	TickMs, ElectionMs uint
	// UnsafeNoFsync trades durability for speed (tests only).
	UnsafeNoFsync bool
	// StartTimeout bounds how long to wait for the member to serve.
	StartTimeout time.Duration
}

// Server is a running embedded member.
type Server struct {
	etcd      *embed.Etcd
	endpoints []string
}

// Start starts a member and waits until it serves clients.
func Start(ctx context.Context, c Config) (*Server, error) {
	if c.Dir == "" {
		return nil, errors.New("etcdserver: data dir is required")
	}
	if c.Name == "" {
		c.Name = "strata"
	}
	if c.TickMs == 0 {
		c.TickMs = 10
	}
	if c.ElectionMs == 0 {
		c.ElectionMs = 100
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 30 * time.Second
	}
	if c.ClientAddr == "" {
		c.ClientAddr = "127.0.0.1:0"
	}
	// etcd must be told its ports before it binds them, so a port left to
	// pick (port 0, and always the peer port) is learnt by binding and
	// closing a listener, and another process may take it before etcd
	// binds it again. That fails at once and plainly: pick again.
	for attempt := 1; ; attempt++ {
		srv, err := start(ctx, c)
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) || attempt == pickAttempts {
			return srv, err
		}
	}
}

// pickAttempts bounds how often Start picks ports again after losing a
// picked port to another process.
const pickAttempts = 5

func start(ctx context.Context, c Config) (*Server, error) {
	clientAddr, err := resolvePort(c.ClientAddr)
	if err != nil {
		return nil, err
	}
	peerAddr, err := resolvePort("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	cu := url.URL{Scheme: "http", Host: clientAddr}
	pu := url.URL{Scheme: "http", Host: peerAddr}

	cfg := embed.NewConfig()
	cfg.Name = c.Name
	cfg.Dir = c.Dir
	cfg.TickMs = c.TickMs
	cfg.ElectionMs = c.ElectionMs
	cfg.ListenClientUrls = []url.URL{cu}
	cfg.AdvertiseClientUrls = []url.URL{cu}
	cfg.ListenPeerUrls = []url.URL{pu}
	cfg.AdvertisePeerUrls = []url.URL{pu}
	cfg.InitialCluster = fmt.Sprintf("%s=%s", c.Name, pu.String())
	// etcd logs through zap; the member's own chatter (including errors
	// it logs while shutting down) is noise in Strata's logs.
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.UnsafeNoFsync = c.UnsafeNoFsync
	cfg.QuotaBackendBytes = 8 << 30
	cfg.AutoCompactionMode = "revision"
	cfg.AutoCompactionRetention = "10000"

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcdserver: start %s: %w", c.Name, err)
	}
	timer := time.NewTimer(c.StartTimeout)
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcdserver: %s failed: %w", c.Name, err)
	case <-timer.C:
		e.Close()
		return nil, fmt.Errorf("etcdserver: %s not ready after %s", c.Name, c.StartTimeout)
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	}
	return &Server{etcd: e, endpoints: []string{cu.String()}}, nil
}

// Endpoints returns the client URLs.
func (s *Server) Endpoints() []string { return s.endpoints }

// Err reports a fatal error of the member after start.
func (s *Server) Err() <-chan error { return s.etcd.Err() }

// Client returns a new client connected to the member.
func (s *Server) Client() (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: s.endpoints, DialTimeout: 5 * time.Second})
}

// Close stops the member.
func (s *Server) Close() { s.etcd.Close() }

func resolvePort(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("etcdserver: bad address %q: %w", addr, err)
	}
	if port != "0" {
		return addr, nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", fmt.Errorf("etcdserver: pick a port on %s: %w", host, err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}
