//go:build unix

package probe

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// benchServerEnv makes the test binary the benchmark's HTTP server, in
// its own process: the CPU a benchmark measures is then the prober's
// alone (the containers' servers are not the agent's cost).
const benchServerEnv = "STRATA_PROBE_BENCH_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(benchServerEnv) != "" {
		serveBench()
		return
	}
	os.Exit(m.Run())
}

// serveBench answers 200 on every path until its stdin closes.
func serveBench() {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(l.Addr().String())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	}), ReadHeaderTimeout: 5 * time.Second}
	_ = srv.Serve(l)
}

// startBenchServer runs serveBench in a child process and returns its
// address.
func startBenchServer(b *testing.B) string {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), benchServerEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("bench server: %v", err)
	}
	return strings.TrimSpace(line)
}

// cpuTime is the process's CPU time so far, in user space and in the
// kernel (where a loopback connection's handshake, both ends of it, is
// spent).
func cpuTime() (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// BenchmarkManager500HTTP is issue 34's P1 on the prober alone: 500
// containers, each with an HTTP readiness probe every second, against
// one local server in another process. One op is one second of
// probing: run it with -benchtime=5x for five seconds. It reports the
// process's CPU time per second of wall time as a share of one core
// (%cpu, the P1 budget is 5; %user and %sys are its parts), the checks
// made per second, and the heap allocations per check.
func BenchmarkManager500HTTP(b *testing.B) {
	bench500(b, func(port int) *api.Probe {
		return &api.Probe{HTTPGet: &api.HTTPGetAction{Path: "/healthz", Port: port}, PeriodSeconds: ip(1)}
	})
}

// BenchmarkManager500HTTPKeepAlive is BenchmarkManager500HTTP with
// WithHTTPKeepAlive: one connection per container, kept.
func BenchmarkManager500HTTPKeepAlive(b *testing.B) {
	bench500(b, func(port int) *api.Probe {
		return &api.Probe{HTTPGet: &api.HTTPGetAction{Path: "/healthz", Port: port}, PeriodSeconds: ip(1)}
	}, WithHTTPKeepAlive())
}

// BenchmarkManager500TCP is the same with TCP probes: a connection's
// open and close alone, the floor of a check that opens a new connection
// each time, as the kubelet's do.
func BenchmarkManager500TCP(b *testing.B) {
	bench500(b, func(port int) *api.Probe {
		return &api.Probe{TCPSocket: &api.TCPSocketAction{Port: port}, PeriodSeconds: ip(1)}
	})
}

func bench500(b *testing.B, probe func(port int) *api.Probe, opts ...Option) {
	const replicas = 500
	host, portStr, err := net.SplitHostPort(startBenchServer(b))
	if err != nil {
		b.Fatal(err)
	}
	port, _ := strconv.Atoi(portStr)
	m := NewManager(opts...)
	defer m.Close()
	p := probe(port)
	for i := range replicas {
		if err := m.Add("r"+strconv.Itoa(i), "web", api.Probes{ReadinessProbe: p}, Target{Host: host}); err != nil {
			b.Fatal(err)
		}
	}
	for ready := 0; ready < replicas; {
		select {
		case u := <-m.Updates():
			if u.Result != Success {
				b.Fatalf("%s: %s %q", u.Replica, u.Result, u.Message)
			}
			ready++
		case <-time.After(30 * time.Second):
			b.Fatalf("%d of %d ready after 30 s", ready, replicas)
		}
	}
	// A second to settle: the first checks were spread over the first
	// period.
	time.Sleep(time.Second)

	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	user0, sys0 := cpuTime()
	probed0, start := m.probed.Load(), time.Now()
	b.ResetTimer()
	for range b.N {
		time.Sleep(time.Second)
	}
	b.StopTimer()
	user, sys := cpuTime()
	user, sys = user-user0, sys-sys0
	wall, probed := time.Since(start), m.probed.Load()-probed0
	runtime.ReadMemStats(&ms1)
	select {
	case u := <-m.Updates():
		b.Fatalf("a probe changed while measuring: %s %s %q", u.Replica, u.Result, u.Message)
	default:
	}
	if want := int64(float64(replicas) * wall.Seconds() * 0.9); probed < want {
		b.Fatalf("%d checks in %v; want about %d a second", probed, wall, replicas)
	}
	b.ReportMetric(100*(user+sys).Seconds()/wall.Seconds(), "%cpu")
	b.ReportMetric(100*user.Seconds()/wall.Seconds(), "%user")
	b.ReportMetric(100*sys.Seconds()/wall.Seconds(), "%sys")
	b.ReportMetric(float64(probed)/wall.Seconds(), "checks/s")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(probed), "allocs/check")
}
