// Package framework runs Strata's real binaries for end-to-end tests:
// processes with their logs kept, reserved loopback ports, a JSON client for
// the REST APIs, and polling with deadlines.
package framework

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stratahq/strata/testkit/testenv"
	"github.com/stratahq/strata/testkit/testenv/ports"
)

// Bin returns the path of a binary built by `make build`.
func Bin(t testing.TB, name string) string {
	t.Helper()
	return testenv.Binary(t, "STRATA_BIN_"+strings.ToUpper(strings.ReplaceAll(name, "-", "_")), name)
}

// AgentCommand is the command line of a node agent reading the
// configuration file cfg: the agent's own binary, strata-agent, which the
// packages install and the strata-agent unit runs (`strata agent` is the
// same command in the binary of every tier).
func AgentCommand(t testing.TB, cfg string) (bin string, args []string) {
	t.Helper()
	return Bin(t, "strata-agent"), []string{"--config", cfg}
}

// StartAgent runs a node agent reading cfg (see AgentCommand) as process
// name; it is killed when the test ends.
func StartAgent(t testing.TB, name, cfg string) *Proc {
	t.Helper()
	bin, args := AgentCommand(t, cfg)
	return Start(t, name, bin, args)
}

// FreePort reserves a loopback port for the rest of the test: nothing
// else on the machine is handed it, so a process started later binds it
// without a race (see package ports).
func FreePort(t testing.TB) int {
	t.Helper()
	return ports.Get(t)
}

// FreePorts reserves n consecutive ports for the rest of the test and
// returns the first (for `strata dev`, which serves region i on port+i).
func FreePorts(t testing.TB, n int) int {
	t.Helper()
	return ports.GetRange(t, n)
}

// FreeAddr reserves a loopback host:port for the rest of the test (see
// FreePort).
func FreeAddr(t testing.TB) string {
	t.Helper()
	return ports.Addr(t)
}

// Proc is a process under test. Its output goes to a log file that is
// printed (last lines) when the test fails.
type Proc struct {
	t       testing.TB
	Name    string
	bin     string
	args    []string
	env     []string
	logPath string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Start runs bin with args; the process is killed when the test ends.
func Start(t testing.TB, name, bin string, args []string, env ...string) *Proc {
	t.Helper()
	p := &Proc{t: t, Name: name, bin: bin, args: args, env: env, logPath: filepath.Join(LogDir(t), name+".log")}
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("--- last lines of %s (%s):\n%s", name, p.logPath, p.Tail(40))
		}
	})
	return p
}

// LogDir is where a test's process logs go: $STRATA_ARTIFACTS/<test> when
// set (CI keeps them), else a temporary directory.
func LogDir(t testing.TB) string {
	if d := os.Getenv("STRATA_ARTIFACTS"); d != "" {
		dir := filepath.Join(d, strings.ReplaceAll(t.Name(), "/", "_"))
		if err := os.MkdirAll(dir, 0o755); err == nil {
			return dir
		}
	}
	return t.TempDir()
}

func (p *Proc) start() error {
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "=== %s %s %s\n", time.Now().Format(time.RFC3339Nano), p.bin, strings.Join(p.args, " "))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(done)
	}()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	return nil
}

// Pid returns the process id.
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}

// Kill stops the process with SIGKILL and waits for it.
func (p *Proc) Kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Process.Kill()
	<-done
}

// Stop sends SIGTERM and waits up to timeout, then kills.
func (p *Proc) Stop(timeout time.Duration) {
	p.Signal(syscall.SIGTERM)
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	select {
	case <-done:
	case <-time.After(timeout):
		p.Kill()
	}
}

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Restart kills the process and starts it again with the same arguments.
func (p *Proc) Restart() {
	p.t.Helper()
	p.Kill()
	if err := p.start(); err != nil {
		p.t.Fatal(err)
	}
}

// Log returns everything the process wrote, each start preceded by a
// "=== <time> <command>" line of the framework's.
func (p *Proc) Log() []byte {
	b, _ := os.ReadFile(p.logPath)
	return b
}

// Tail returns the last n lines of the process's log.
func (p *Proc) Tail(n int) string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// Eventually polls cond until it returns nil or timeout passes.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for {
		if err = cond(); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %s: %v", what, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Client speaks JSON to a Strata REST API.
type Client struct {
	Base  string
	Token string
	HTTP  *http.Client
}

// NewClient returns a client for base (http://host:port).
func NewClient(base, token string) *Client {
	return &Client{Base: base, Token: token, HTTP: &http.Client{Timeout: 30 * time.Second}}
}

// Response is a decoded reply.
type Response struct {
	Status int
	Body   []byte
}

// JSON decodes the body into v.
func (r *Response) JSON(v any) error {
	if err := json.Unmarshal(r.Body, v); err != nil {
		return fmt.Errorf("decode %s: %w", r.Body, err)
	}
	return nil
}

// Do sends method path with body (marshalled to JSON unless it is a
// string or []byte) and returns the reply.
func (c *Client) Do(ctx context.Context, method, path string, body any, headers ...string) (*Response, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, rd)
	if err != nil {
		return nil, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &Response{Status: resp.StatusCode, Body: b}, nil
}

// Must sends a request and fails the test unless the status is want.
func (c *Client) Must(t testing.TB, method, path string, body any, want int, out any) {
	t.Helper()
	resp, err := c.Do(context.Background(), method, path, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if resp.Status != want {
		t.Fatalf("%s %s: got %d %s; want %d", method, path, resp.Status, resp.Body, want)
	}
	if out != nil {
		if err := resp.JSON(out); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
}

// Get fetches path into out and returns the status.
func (c *Client) Get(path string, out any) (int, error) {
	resp, err := c.Do(context.Background(), http.MethodGet, path, nil)
	if err != nil {
		return 0, err
	}
	if out != nil && resp.Status == http.StatusOK {
		if err := resp.JSON(out); err != nil {
			return resp.Status, err
		}
	}
	return resp.Status, nil
}

// WaitHTTP polls url until it answers 200.
func WaitHTTP(t testing.TB, url string, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, "GET "+url, func() error {
		resp, err := http.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
}
