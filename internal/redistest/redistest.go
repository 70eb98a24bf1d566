// Package redistest runs a real redis-server process for tests.
//
// The server listens on 127.0.0.1 on a port reserved for the test (see
// package ports: no other process can take it, also across Restart) and
// keeps no data on disk (`--save "" --appendonly no`), so Restart behaves
// like a production restart of a cache-style Redis: every key is gone
// afterwards. A missing
// redis-server skips the test on a laptop and fails it under CI=true.
package redistest

import (
	"bufio"
	"errors"
	"fmt"
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

	"github.com/stratahq/strata/internal/testenv"
	"github.com/stratahq/strata/internal/testenv/ports"
)

// readyTimeout bounds how long a fresh redis-server may take to answer PING.
const readyTimeout = 15 * time.Second

// Server is a running redis-server process owned by one test.
type Server struct {
	bin     string
	dir     string
	port    int
	logPath string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been reaped
}

// Start starts redis-server for the test and kills it when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testenv.Missing(t, "redis-server", err)
	}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatalf("redistest: temp dir: %v", err)
	}
	s := &Server{bin: bin, dir: dir, port: ports.Get(t)}
	s.logPath = filepath.Join(s.dir, "redis.log")
	t.Cleanup(s.Kill)
	if err := s.start(); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return s
}

// Addr is the host:port clients dial.
func (s *Server) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// Client returns a client for the server, closed when the test ends.
func (s *Server) Client(t testing.TB) *redis.Client {
	t.Helper()
	cli := redis.NewClient(&redis.Options{
		Addr: s.Addr(),
		// Short dial timeout: while the server restarts, a dial either
		// succeeds at once or is refused; waiting 5 s helps nobody.
		DialTimeout: time.Second,
	})
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

func (s *Server) start() error {
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	defer logf.Close()

	cmd := exec.Command(s.bin,
		"--bind", "127.0.0.1",
		"--port", strconv.Itoa(s.port),
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--daemonize", "no",
		"--loglevel", "warning",
	)
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
		if lastErr = probe(s.Addr(), s.dir); lastErr == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s not ready after %s: %w", s.Addr(), readyTimeout, lastErr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// probe asks the server for its working directory: an answer proves it is
// up, and the directory (unique per Server) proves it is our process, not
// one that holds the port without a reservation.
func probe(addr, dir string) error {
	conn, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := conn.Write([]byte("CONFIG GET dir\r\n")); err != nil {
		return err
	}
	// RESP2 reply: *2 $3 dir $N <dir>, or an error line such as -LOADING.
	r := bufio.NewReader(conn)
	var lines []string
	for len(lines) < 5 {
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		line = strings.TrimRight(line, "\r\n")
		if len(lines) == 0 && !strings.HasPrefix(line, "*") {
			return fmt.Errorf("probe answered %q", line)
		}
		lines = append(lines, line)
	}
	if lines[4] != dir {
		return fmt.Errorf("port %s is served by another redis-server (dir %q)", addr, lines[4])
	}
	return nil
}

func (s *Server) tail() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}
