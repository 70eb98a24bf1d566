// Package etcdtest starts etcd for tests: embedded in the test process, or
// as a real `etcd` server process built by `make build` (bin/etcd).
package etcdtest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/stratahq/strata/internal/etcdserver"
	"github.com/stratahq/strata/testkit/testenv"
	"github.com/stratahq/strata/testkit/testenv/ports"
)

// Embedded starts an embedded member for the test and returns its client
// endpoints: its unix socket in a temporary directory of the test (mode
// 0700, this user's only). It has no etcd users, so that the tests'
// clients need no credentials; the tiers' members have them
// (etcdserver.Open). It is stopped when the test ends.
func Embedded(t testing.TB) []string {
	t.Helper()
	srv, err := etcdserver.Start(context.Background(), etcdserver.Config{
		Dir:           t.TempDir(),
		UnsafeNoFsync: true,
	})
	if err != nil {
		t.Fatalf("start embedded etcd: %v", err)
	}
	t.Cleanup(srv.Close)
	return srv.Endpoints()
}

// Client connects to endpoints, with dial's options if any, and closes
// the client when the test ends.
func Client(t testing.TB, endpoints []string, dial ...grpc.DialOption) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, DialOptions: dial})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// Process is a real etcd server process.
type Process struct {
	cmd       *exec.Cmd
	exited    chan struct{} // closed when cmd has been reaped
	dir       string
	bin       string
	clientURL string
	peerURL   string
	logPath   string
}

// StartProcess starts bin/etcd (or $STRATA_ETCD_BIN) on loopback ports
// reserved for the test (see package ports: no other process can take
// them, also across Restart); it is killed when the test ends. Under
// CI=true a missing binary fails the test.
func StartProcess(t testing.TB) *Process {
	t.Helper()
	bin := testenv.Binary(t, "STRATA_ETCD_BIN", "etcd")
	p := &Process{bin: bin, dir: t.TempDir()}
	p.clientURL = "http://" + ports.Addr(t)
	p.peerURL = "http://" + ports.Addr(t)
	p.logPath = filepath.Join(p.dir, "etcd.log")
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill() })
	return p
}

func (p *Process) start() error {
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.bin,
		"--name", "test",
		"--data-dir", filepath.Join(p.dir, "data"),
		"--listen-client-urls", p.clientURL,
		"--advertise-client-urls", p.clientURL,
		"--listen-peer-urls", p.peerURL,
		"--initial-advertise-peer-urls", p.peerURL,
		"--initial-cluster", "test="+p.peerURL,
		"--heartbeat-interval", "10",
		"--election-timeout", "100",
		"--unsafe-no-fsync",
		"--log-level", "error",
	)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", p.bin, err)
	}
	logf.Close()
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	p.cmd, p.exited = cmd, exited
	return p.waitReady(30 * time.Second)
}

// waitReady polls the server until it answers. A server that exits (a
// bad flag, a port in use) fails at once, with its log.
func (p *Process) waitReady(timeout time.Duration) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: p.Endpoints(), DialTimeout: time.Second})
	if err != nil {
		return err
	}
	defer cli.Close()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cli.Get(ctx, "health-probe")
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("etcd process exited before answering: %s\netcd log:\n%s", p.cmd.ProcessState, p.tail())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcd process not ready after %s: %v\netcd log:\n%s", timeout, err, p.tail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *Process) tail() string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > 20 {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// Endpoints returns the client URLs.
func (p *Process) Endpoints() []string { return []string{p.clientURL} }

// Kill stops the process with SIGKILL and waits for it.
func (p *Process) Kill() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
	p.cmd = nil
}

// Restart kills the process and starts it again on the same data and ports.
func (p *Process) Restart() error {
	p.Kill()
	return p.start()
}

// Backend names an etcd to run a test against.
type Backend struct {
	Name      string
	Endpoints func(t testing.TB) []string
}

// Backends returns the embedded member and the real server process; a test
// suite runs against each.
func Backends() []Backend {
	return []Backend{
		{Name: "embedded", Endpoints: Embedded},
		{Name: "process", Endpoints: func(t testing.TB) []string { return StartProcess(t).Endpoints() }},
	}
}
