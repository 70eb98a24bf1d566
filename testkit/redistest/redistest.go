// Package redistest runs real redis-server processes for tests: a single
// server (optionally over TLS, with ACL users), a master with a replica
// and three sentinels (StartSentinel), or a Redis Cluster (StartCluster).
//
// Every server listens on 127.0.0.1 (or the address of a test host, see
// OnHost) on a port reserved for the test (see
// package ports: no other process can take it, also across Restart) and
// keeps no data on disk (`save ""`, `appendonly no`), so Restart behaves
// like a production restart of a cache-style Redis: every key is gone
// afterwards. A missing redis-server skips the test on a laptop and fails
// it under CI=true.
package redistest

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stratahq/strata/testkit/testenv"
	"github.com/stratahq/strata/testkit/testenv/ports"
)

// readyTimeout bounds how long a fresh redis-server may take to answer.
const readyTimeout = 15 * time.Second

// AdminUser is the ACL user the harness itself logs in as when a server
// has users (WithUser): its probes, Client, replication and the sentinels.
const AdminUser = "admin"

// Option configures the servers a Start function starts.
type Option func(*settings)

type settings struct {
	tls   *TLS
	users []user
	host  Host
}

// Host is a machine other than the test's own loopback that servers run
// on: a test host of e2e/framework's Lab (a network namespace with its
// own address). The harness starts the servers there and reaches them
// only through it.
type Host interface {
	// Address is the host's IP address: servers bind it.
	Address() string
	// Command prepares bin with args to run on the host.
	Command(bin string, args ...string) *exec.Cmd
	// DialContext opens a connection from the host.
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
}

// OnHost runs the servers on h, bound to its address, instead of on
// 127.0.0.1.
func OnHost(h Host) Option { return func(s *settings) { s.host = h } }

type user struct {
	name, password string
	rules          []string
}

// WithTLS serves TLS only (no plaintext port), requiring client
// certificates signed by x's CA; replication, the cluster bus and the
// sentinels use TLS too.
func WithTLS(x *TLS) Option { return func(s *settings) { s.tls = x } }

// WithUser adds an ACL user with a password and ACL rules (e.g. "~*",
// "+@all"). A server with users turns the default user off; the harness
// logs in as AdminUser.
func WithUser(name, password string, rules ...string) Option {
	return func(s *settings) { s.users = append(s.users, user{name, password, rules}) }
}

// Server is a running redis-server process owned by one test.
type Server struct {
	bin     string
	dir     string
	port    int
	logPath string
	// conf holds the server's directives; written on the first start and
	// kept across restarts (Sentinel rewrites it, as in production).
	conf     []string
	sentinel bool
	set      settings
	adminPW  string // empty without users
	authArgs []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been reaped
}

// Start starts redis-server for the test and kills it when the test ends.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	var set settings
	for _, o := range opts {
		o(&set)
	}
	s := newServer(t, set, false)
	s.mustStart(t)
	return s
}

// newServer prepares a server (directory, port, credentials) without
// starting it.
func newServer(t testing.TB, set settings, sentinel bool) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testenv.Missing(t, "redis-server", err)
	}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatalf("redistest: temp dir: %v", err)
	}
	s := &Server{bin: bin, dir: dir, port: ports.Get(t), set: set, sentinel: sentinel}
	s.logPath = filepath.Join(s.dir, "redis.log")
	if len(set.users) > 0 && !sentinel {
		s.adminPW = randomPassword()
		s.authArgs = []string{"AUTH", AdminUser, s.adminPW}
	}
	t.Cleanup(s.Kill)
	return s
}

func (s *Server) mustStart(t testing.TB) {
	t.Helper()
	if err := s.start(); err != nil {
		t.Fatalf("redistest: %v", err)
	}
}

// baseConf is what every data node runs with.
func (s *Server) baseConf() []string {
	c := []string{
		"bind " + s.ip(),
		`save ""`,
		"appendonly no",
		// notice: replication and failover steps are in the log that a
		// failing test shows (LogTail).
		"loglevel notice",
		// A replica's first sync starts at once instead of waiting 5 s
		// for more replicas to share the transfer.
		"repl-diskless-sync-delay 0",
	}
	c = append(c, s.listenConf()...)
	if len(s.set.users) > 0 {
		c = append(c,
			"user default off",
			fmt.Sprintf("user %s on >%s ~* &* +@all", AdminUser, s.adminPW),
			// The replica of a Sentinel group logs in to its master as
			// the admin, like an operator's replication user would.
			"masteruser "+AdminUser,
			"masterauth "+s.adminPW,
		)
		for _, u := range s.set.users {
			c = append(c, fmt.Sprintf("user %s on >%s %s", u.name, u.password, strings.Join(u.rules, " ")))
		}
	}
	return c
}

// listenConf is the port (plaintext or TLS) of any server.
func (s *Server) listenConf() []string {
	port := strconv.Itoa(s.port)
	x := s.set.tls
	if x == nil {
		return []string{"port " + port}
	}
	return []string{
		"port 0",
		"tls-port " + port,
		"tls-cert-file " + x.ServerCert,
		"tls-key-file " + x.ServerKey,
		"tls-ca-cert-file " + x.CA,
		"tls-auth-clients yes",
		"tls-replication yes",
		"tls-cluster yes",
	}
}

// Addr is the host:port clients dial.
func (s *Server) Addr() string {
	return net.JoinHostPort(s.ip(), strconv.Itoa(s.port))
}

// ip is the address the server binds.
func (s *Server) ip() string {
	if s.set.host != nil {
		return s.set.host.Address()
	}
	return "127.0.0.1"
}

// dial is how the harness reaches the server.
func (s *Server) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if s.set.host != nil {
		return s.set.host.DialContext(ctx, network, addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// Port is the port clients dial.
func (s *Server) Port() int { return s.port }

// AdminPassword is AdminUser's password, empty when the server has no
// users.
func (s *Server) AdminPassword() string { return s.adminPW }

// Options are go-redis options for a client of the server logged in as the
// harness's admin (if the server has users), over TLS if it serves TLS.
func (s *Server) Options() *redis.Options {
	o := &redis.Options{
		Addr: s.Addr(),
		// Short dial timeout: while the server restarts, a dial either
		// succeeds at once or is refused; waiting 5 s helps nobody.
		DialTimeout: time.Second,
	}
	if s.set.host != nil {
		// A custom Dialer replaces go-redis's, TLS included.
		tlsCfg := s.tlsConfig()
		o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := s.set.host.DialContext(ctx, network, addr)
			if err != nil || tlsCfg == nil {
				return c, err
			}
			tc := tls.Client(c, tlsCfg)
			if err := tc.HandshakeContext(ctx); err != nil {
				c.Close()
				return nil, err
			}
			return tc, nil
		}
	}
	if s.adminPW != "" {
		o.Username, o.Password = AdminUser, s.adminPW
	}
	o.TLSConfig = s.tlsConfig()
	return o
}

// Client returns a client for the server (see Options), closed when the
// test ends.
func (s *Server) Client(t testing.TB) *redis.Client {
	t.Helper()
	cli := redis.NewClient(s.Options())
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// Restart kills the server and starts a new one on the same port. Like a
// real restart without persistence, all data is lost; clients see broken
// connections and have to reconnect.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Kill()
	if err := s.start(); err != nil {
		t.Fatalf("redistest: restart: %v", err)
	}
}

// Kill stops the server with SIGKILL and waits for it to exit. It is safe
// to call more than once.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd, s.exited = nil, nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-exited
}

func (s *Server) confPath() string {
	if s.sentinel {
		return filepath.Join(s.dir, "sentinel.conf")
	}
	return filepath.Join(s.dir, "redis.conf")
}

func (s *Server) start() error {
	if s.conf == nil {
		s.conf = s.baseConf()
	}
	conf := s.confPath()
	if _, err := os.Stat(conf); errors.Is(err, os.ErrNotExist) {
		body := append([]string{
			"dir " + s.dir,
			"daemonize no",
			`logfile ""`,
		}, s.conf...)
		if err := os.WriteFile(conf, []byte(strings.Join(body, "\n")+"\n"), 0o600); err != nil {
			return fmt.Errorf("write %s: %w", conf, err)
		}
	}
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	defer logf.Close()

	args := []string{conf}
	if s.sentinel {
		args = append(args, "--sentinel")
	}
	cmd := exec.Command(s.bin, args...)
	if s.set.host != nil {
		cmd = s.set.host.Command(s.bin, args...)
	}
	cmd.Stdout = logf
	cmd.Stderr = logf
	// If the test binary dies without running its cleanups, the server must
	// not outlive it and hold the port.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()

	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()

	if err := s.waitReady(exited); err != nil {
		return fmt.Errorf("%w\nredis log:\n%s", err, s.tail())
	}
	return nil
}

var errExited = errors.New("redis-server exited before answering")

// waitReady polls the server with a raw connection until it answers or the
// deadline passes. A raw dial keeps the probe independent of client retry
// and pool logic.
func (s *Server) waitReady(exited <-chan struct{}) error {
	deadline := time.Now().Add(readyTimeout)
	var lastErr error
	for {
		select {
		case <-exited:
			return errExited
		default:
		}
		if lastErr = s.probe(); lastErr == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s not ready after %s: %w", s.Addr(), readyTimeout, lastErr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// probe asks the server which configuration file it runs: an answer proves
// it is up, and the file (unique per Server) proves it is our process,
// not one that holds the port without a reservation.
func (s *Server) probe() error {
	var cmds [][]string
	if s.authArgs != nil {
		cmds = append(cmds, s.authArgs)
	}
	info, err := s.command(append(cmds, []string{"INFO", "server"})...)
	if err != nil {
		return err
	}
	want := "config_file:" + s.confPath()
	for _, line := range strings.Split(info, "\n") {
		if strings.TrimRight(line, "\r") == want {
			return nil
		}
	}
	return fmt.Errorf("port %s is served by another redis-server (no %q in INFO server)", s.Addr(), want)
}

// Command sends cmds over one fresh connection (TLS when tlsCfg is set) and
// returns the last reply, which must be a status or bulk string; an error
// reply to any command is an error.
func Command(addr string, tlsCfg *tls.Config, cmds ...[]string) (string, error) {
	var d net.Dialer
	return command(d.DialContext, addr, tlsCfg, cmds...)
}

// command sends cmds to the server (see Command), dialled from its host.
func (s *Server) command(cmds ...[]string) (string, error) {
	return command(s.dial, s.Addr(), s.tlsConfig(), cmds...)
}

func command(dial func(ctx context.Context, network, addr string) (net.Conn, error), addr string, tlsCfg *tls.Config, cmds ...[]string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	conn, err := dial(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	if tlsCfg != nil {
		if tlsCfg.ServerName == "" {
			tlsCfg = tlsCfg.Clone()
			tlsCfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(conn, tlsCfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return "", err
		}
		conn = tc
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	var b strings.Builder
	for _, c := range cmds {
		fmt.Fprintf(&b, "*%d\r\n", len(c))
		for _, a := range c {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
	}
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	var last string
	for range cmds {
		if last, err = readReply(r); err != nil {
			return "", err
		}
	}
	return last, nil
}

// readReply reads one RESP2 status, error or bulk string reply.
func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("redis replied %q", line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("reply %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	default:
		return "", fmt.Errorf("unexpected reply %q", line)
	}
}

// LogTail is the end of the server's log, for a failing test to show.
func (s *Server) LogTail() string { return s.tail() }

// tlsConfig is the client TLS configuration for the server, nil without
// TLS.
func (s *Server) tlsConfig() *tls.Config {
	if s.set.tls == nil {
		return nil
	}
	c := s.set.tls.ClientConfig()
	if s.set.host != nil {
		// The certificate names loopback and ServerName, not the host.
		c.ServerName = s.set.tls.ServerName
	}
	return c
}

func (s *Server) tail() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
}

func randomPassword() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
