// Package etcdserver runs a single-member etcd inside the current process.
//
// It backs `strata dev` and the unit tests: production tiers talk to a real
// etcd cluster through the client only.
//
// A member listens on nothing any other user of the machine can reach: its
// clients connect to a unix socket of mode 0600 in its data directory
// (itself 0700), and it has no peer listener at all (one member has no
// peer to hear from; a plaintext raft port on loopback would let any local
// process append entries to its log). With Config.Auth it also has etcd
// authentication on, as user root with a random password kept in the data
// directory: what the tiers run (Open) always asks for it.
package etcdserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"golang.org/x/crypto/bcrypt"
)

// File names in a member's data directory, besides etcd's own member/.
const (
	// SocketName is the clients' unix socket.
	SocketName = "etcd.sock"
	// PasswordName holds the password of user root (Config.Auth).
	PasswordName = "root.password"
)

// RootUser is the etcd user of a member started with Config.Auth.
const RootUser = "root"

// maxSocketPath is the longest path a unix socket may have on Linux
// (sun_path is 108 bytes with the terminating NUL).
const maxSocketPath = 107

// Config describes one embedded member.
type Config struct {
	Name string
	// Dir is the member's data directory; it is made (or restricted to)
	// mode 0700, and holds the socket and the password file too.
	Dir string
	// Auth turns etcd authentication on: clients must log in as RootUser
	// with the password in Dir/PasswordName, made at the first start.
	// The tiers' members have it (Open); tests' members need not.
	Auth bool
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
	closeOnce sync.Once
	endpoint  string
	// password of RootUser; "" without Config.Auth.
	password string
}

// Start starts a member and waits until it serves clients.
func Start(ctx context.Context, c Config) (*Server, error) {
	if c.Dir == "" {
		return nil, errors.New("etcdserver: data dir is required")
	}
	c.defaults()
	dir, err := filepath.Abs(c.Dir)
	if err != nil {
		return nil, fmt.Errorf("etcdserver: %w", err)
	}
	sock := filepath.Join(dir, SocketName)
	if len(sock) > maxSocketPath {
		return nil, fmt.Errorf("etcdserver: socket path %s is %d bytes, more than the %d a unix socket allows: use a shorter data directory", sock, len(sock), maxSocketPath)
	}
	// The directory keeps other users away from the socket from the
	// moment etcd binds it, before its mode is narrowed below.
	if err := privateDir(dir); err != nil {
		return nil, err
	}
	// etcd removes a socket file in its way before it binds, which a
	// crash leaves; one that answers is another process's member, whose
	// data etcd would then wait for.
	if c, err := net.DialTimeout("unix", sock, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("etcdserver: another process serves the member in %s (%s)", dir, sock)
	}
	s := &Server{endpoint: "unix://" + sock}
	if c.Auth {
		if s.password, err = loadOrCreatePassword(filepath.Join(dir, PasswordName)); err != nil {
			return nil, err
		}
	}
	if s.etcd, err = startMember(ctx, c, dir, sock); err != nil {
		return nil, err
	}
	if err := os.Chmod(sock, 0o600); err != nil {
		s.Close()
		return nil, fmt.Errorf("etcdserver: %w", err)
	}
	if c.Auth {
		if err := s.enableAuth(ctx); err != nil {
			s.Close()
			return nil, fmt.Errorf("etcdserver: %s: %w", c.Name, err)
		}
	}
	return s, nil
}

func (c *Config) defaults() {
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
}

// startMember runs etcd in dir, its clients on the unix socket sock.
func startMember(ctx context.Context, c Config, dir, sock string) (*embed.Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Name = c.Name
	cfg.Dir = dir
	cfg.TickMs = c.TickMs
	cfg.ElectionMs = c.ElectionMs
	cfg.ListenClientUrls = []url.URL{{Scheme: "unix", Path: sock}}
	// etcd wants advertised URLs as host:port, which a socket's path is
	// not; nobody needs them (clients are given the socket, there are
	// no peers), so the member advertises no client URL and, for its
	// membership record, a peer URL no one can dial. Members that older
	// releases started keep the peer URL they recorded then.
	cfg.AdvertiseClientUrls = []url.URL{}
	cfg.ListenPeerUrls = nil
	pu := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.AdvertisePeerUrls = []url.URL{pu}
	cfg.InitialCluster = fmt.Sprintf("%s=%s", c.Name, pu.String())
	// etcd logs through zap; the member's own chatter (including errors
	// it logs while shutting down) is noise in Strata's logs.
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.UnsafeNoFsync = c.UnsafeNoFsync
	cfg.QuotaBackendBytes = 8 << 30
	cfg.AutoCompactionMode = "revision"
	cfg.AutoCompactionRetention = "10000"
	// bcrypt's cost protects weak passwords from guessing; root's is
	// 256 random bits, and a login at the default cost takes tens of
	// milliseconds of CPU (seconds on a loaded machine) per client.
	cfg.BcryptCost = uint(bcrypt.MinCost)

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcdserver: start %s: %w", c.Name, err)
	}
	timer := time.NewTimer(c.StartTimeout)
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
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
}

// enableAuth turns etcd authentication on with user root, unless it is on
// already (a member started before), in which case logging in with the
// password proves the file and the member belong together. A member an
// older release started, without users, is converted here.
func (s *Server) enableAuth(ctx context.Context) error {
	cli, err := s.Client()
	if err != nil {
		if errors.Is(err, rpctypes.ErrAuthFailed) {
			return fmt.Errorf("etcd refuses user %s with the password in %s (was the file replaced?)", RootUser, PasswordName)
		}
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err := cli.AuthStatus(ctx)
	if err != nil {
		return fmt.Errorf("auth status: %w", err)
	}
	if st.Enabled {
		return nil
	}
	// A start that stopped between adding the user and enabling auth
	// left the user: it takes this password.
	if _, err := cli.UserAdd(ctx, RootUser, s.password); errors.Is(err, rpctypes.ErrUserAlreadyExist) {
		_, err = cli.UserChangePassword(ctx, RootUser, s.password)
		if err != nil {
			return fmt.Errorf("set the password of user %s: %w", RootUser, err)
		}
	} else if err != nil {
		return fmt.Errorf("add user %s: %w", RootUser, err)
	}
	if _, err := cli.UserGrantRole(ctx, RootUser, "root"); err != nil {
		return fmt.Errorf("grant role root: %w", err)
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		return fmt.Errorf("enable auth: %w", err)
	}
	return nil
}

// Endpoints returns the client URLs: the unix socket.
func (s *Server) Endpoints() []string { return []string{s.endpoint} }

// ClientConfig is what a client needs to reach the member: its endpoint
// and, with Config.Auth, user root and its password.
func (s *Server) ClientConfig() clientv3.Config {
	// The client's own log says, for one, that auth is not enabled yet
	// when Start logs in to a member it is about to set up.
	cc := clientv3.Config{Endpoints: s.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	if s.password != "" {
		cc.Username, cc.Password = RootUser, s.password
	}
	return cc
}

// Err reports a fatal error of the member after start.
func (s *Server) Err() <-chan error { return s.etcd.Err() }

// Client returns a new client connected to the member.
func (s *Server) Client() (*clientv3.Client, error) {
	return clientv3.New(s.ClientConfig())
}

// Close stops the member; it may be called again.
func (s *Server) Close() { s.closeOnce.Do(s.etcd.Close) }

// privateDir makes dir, or narrows an existing one, to mode 0700.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("etcdserver: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("etcdserver: %w", err)
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("etcdserver: %w", err)
		}
	}
	return nil
}

// loadOrCreatePassword reads root's password from path, or makes one
// (256 random bits) and keeps it there, mode 0600.
func loadOrCreatePassword(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		if pw := strings.TrimSpace(string(b)); pw != "" {
			return pw, os.Chmod(path, 0o600)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("etcdserver: %w", err)
	}
	var secret [32]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return "", fmt.Errorf("etcdserver: %w", err)
	}
	pw := hex.EncodeToString(secret[:])
	if err := os.WriteFile(path, []byte(pw+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("etcdserver: %w", err)
	}
	return pw, os.Chmod(path, 0o600) // an empty file had its own mode
}
