package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/stratahq/strata/testkit/testenv/ports"
)

// proc is a process of the benchmark cluster.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// pprofAddrs are where each started process serves its profiler.
var pprofAddrs = map[string]string{}

func start(dir, name, bin string, args ...string) (*proc, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if b := filepath.Base(bin); b == "strata" || b == "strata-agent" {
		addr := freeAddr()
		pprofAddrs[name] = addr
		cmd.Env = append(os.Environ(), "STRATA_PPROF="+addr)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) kill() {
	if p == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// rssMiB reads the process's resident set size.
func (p *proc) rssMiB() (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid()))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			kb, err := strconv.Atoi(strings.Fields(l)[1])
			return float64(kb) / 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS for %s", p.name)
}

func (p *proc) tail(n int) string {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// freeAddr reserves a loopback port for the rest of the run: the servers
// the benchmark starts bind it later, and nothing else may take it in
// between (see package ports).
func freeAddr() string {
	port, err := ports.Reserve()
	if err != nil {
		panic(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// waitFor polls cond every interval until it holds or ctx ends.
func waitFor(ctx context.Context, interval time.Duration, what string, cond func() error) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	var last error
	for {
		if last = cond(); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last: %v)", what, ctx.Err(), last)
		case <-t.C:
		}
	}
}

// client is a small JSON client for the REST API.
type client struct {
	base, token string
	http        *http.Client
}

func newClient(base, token string, tlsCfg *tls.Config) *client {
	tr := &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256, TLSClientConfig: tlsCfg}
	return &client{base: base, token: token, http: &http.Client{Timeout: 60 * time.Second, Transport: tr}}
}

func (c *client) do(ctx context.Context, method, path string, body any, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = strings.NewReader(string(b))
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, strings.TrimSpace(string(data)))
	}
	if out != nil {
		return resp.StatusCode, json.Unmarshal(data, out)
	}
	return resp.StatusCode, nil
}

// metric reads one sample from the /metrics endpoint of the API c
// speaks to (0 when absent).
func (c *client) metric(ctx context.Context, sample string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, sample+" ") {
			return strconv.ParseFloat(strings.TrimSpace(l[len(sample):]), 64)
		}
	}
	return 0, nil
}

// cpuSeconds is the CPU time (user + system) the process has used.
func (p *proc) cpuSeconds() (float64, error) {
	return cpuSecondsOf(p.pid())
}

func cpuSecondsOf(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command name, which may hold spaces, in
	// parentheses: utime and stime are the 12th and 13th of them.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	u, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %v %v", pid, err1, err2)
	}
	return (u + st) / clockTicks, nil
}

// clockTicks is USER_HZ, 100 on every Linux Go supports.
const clockTicks = 100
