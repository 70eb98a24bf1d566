package e2e

// How fast a failed readiness probe takes a replica out of its load
// balancer (issue 34, benchmark P2), on real containerd and real
// HAProxy, measured beside HAProxy's own health check as the baseline.
//
// Ten replicas "web" have a readiness probe (HTTP /ready, every second,
// one failure makes them unready) and sit behind the load balancer
// "lbs", whose HAProxy check asks for / (which keeps passing): only
// Strata's probe can take them out. Ten twins "plain" have no probe and
// sit behind "lbh", whose HAProxy check asks for /ready every second
// (fall 1): HAProxy alone takes them out. A failure is injected in a
// twin pair at once, by removing /ready from both replicas' root file
// systems; the HAProxy admin socket is read every 10 ms until each
// server is no longer up, then /ready is put back and both come back.
// The pairs are staggered and their failures start on a schedule of
// their own (open loop), at a random phase to the probes' period.
//
// The test asserts outcomes only (every failure leaves the load
// balancer, every server comes back); the figures are for make bench
// (bench/p2.go), which runs this test with STRATA_P2_SAMPLES of 200 or
// more and reads the "p2 sample" lines it logs.
//
// The cluster uses names no other test uses: bridge e2e-p2, subnet
// 10.238.0.0/24, region e2e-p2.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratahq/strata/e2e/framework"
	"github.com/stratahq/strata/internal/api"
)

// p2Net is the network of this file's cluster.
var p2Net = hostNet{Name: "e2e-p2", Subnet: "10.238.0.0/24", Gateway: "10.238.0.1", Bridge: "e2e-p2", NodeMask: 24}

// p2Command serves / and /ready on port 80.
const p2Command = "mkdir -p /www; hostname > /www/index.html; touch /www/ready; exec httpd -f -p 80 -h /www"

const (
	// p2Pairs is how many twin pairs take turns; p2Cycle how often each
	// pair fails (the pairs are staggered by p2Cycle/p2Pairs).
	p2Pairs = 10
	p2Cycle = 3500 * time.Millisecond
	// p2Late is how long a failure may take to leave its load balancer
	// before the test fails, and p2Back how long a restored replica may
	// take to come back.
	p2Late = 10 * time.Second
	p2Back = 20 * time.Second
	// p2Poll is how often the admin socket is read.
	p2Poll = 10 * time.Millisecond
)

// p2Samples is how many failures are injected: STRATA_P2_SAMPLES, 20 by
// default (make test); make bench asks for 200 or more.
func p2Samples(t *testing.T) int {
	s := os.Getenv("STRATA_P2_SAMPLES")
	if s == "" {
		return 20
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("STRATA_P2_SAMPLES=%q: want a positive count", s)
	}
	return n
}

// p2Server is a server of the admin socket's "show servers state".
type p2Server struct {
	backend, name string
	// up is operational state 2 (running) with no admin state (not in
	// maintenance or drain).
	up bool
}

// p2ServersState parses "show servers state":
//
//	1
//	# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state ...
//	3 be.lbs-x.8080 1 web-ab12-0f3c 10.238.0.5 2 0 ...
func p2ServersState(out string) ([]p2Server, error) {
	var servers []p2Server
	for i, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue // the format's version, the header
		}
		if len(f) < 7 {
			return nil, fmt.Errorf("show servers state: line %q", line)
		}
		servers = append(servers, p2Server{backend: f[1], name: f[3], up: f[5] == "2" && f[6] == "0"})
	}
	return servers, nil
}

// p2Snapshot is what one read of the admin socket saw: whether each
// replica is an up server of the backend of a listener port, by
// "<port>/<replica>"; at is when the answer came (the conservative end
// of the read).
type p2Snapshot struct {
	at time.Time
	up map[string]bool
}

// p2Poller reads the admin socket every p2Poll and lets waiters see
// each new snapshot.
type p2Poller struct {
	sock     string
	replicas []string
	mu       sync.Mutex
	last     p2Snapshot
	next     chan struct{} // closed when last is replaced
	polls    int
	errs     int
	firstErr error
	stop     chan struct{}
	done     chan struct{}
}

func startP2Poller(t *testing.T, sock string, replicas []string) *p2Poller {
	p := &p2Poller{sock: sock, replicas: replicas, next: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		tick := time.NewTicker(p2Poll)
		defer tick.Stop()
		for {
			p.poll()
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(p.halt)
	return p
}

func (p *p2Poller) poll() {
	out, err := framework.HAProxyCLI(p.sock, "show servers state")
	var servers []p2Server
	if err == nil {
		servers, err = p2ServersState(out)
	}
	at := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.polls++
	if err != nil {
		p.errs++
		if p.firstErr == nil {
			p.firstErr = err
		}
		return
	}
	snap := p2Snapshot{at: at, up: map[string]bool{}}
	for _, s := range servers {
		port := s.backend[strings.LastIndexByte(s.backend, '.')+1:]
		for _, id := range p.replicas {
			if strings.HasPrefix(s.name, id+"-") && s.up {
				snap.up[port+"/"+id] = true
			}
		}
	}
	p.last = snap
	close(p.next)
	p.next = make(chan struct{})
}

func (p *p2Poller) halt() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}

// wait waits for the first snapshot read after since in which key is up
// (or not), until timeout; it returns when that snapshot came.
func (p *p2Poller) wait(key string, up bool, since time.Time, timeout time.Duration) (time.Time, bool) {
	deadline := time.After(timeout)
	for {
		p.mu.Lock()
		snap, next := p.last, p.next
		p.mu.Unlock()
		// A snapshot whose answer came after since may have been asked
		// for before it; the next one is asked for after.
		if snap.at.After(since.Add(p2Poll)) && snap.up[key] == up {
			return snap.at, true
		}
		select {
		case <-next:
		case <-deadline:
			return time.Time{}, false
		}
	}
}

// p2Result is one failure injected in a pair: how long each replica
// took to leave its load balancer (0 when it did not within p2Late).
type p2Result struct {
	pair           int
	probe, haproxy time.Duration
	back           bool
	err            error
}

// TestProbeFailureLeavesLoadBalancer injects readiness failures in twin
// pairs of replicas and measures how long each takes to leave its load
// balancer: through Strata's readiness probe, and through HAProxy's own
// check (the baseline).
func TestProbeFailureLeavesLoadBalancer(t *testing.T) {
	samples := p2Samples(t)
	c := startHostCluster(t, hostClusterOpts{region: "e2e-p2", network: p2Net, agents: 1, haproxy: true})
	c.flavor("small", 0.05, 32)
	c.image()
	probe := map[string]any{
		"httpGet":       map[string]any{"path": "/ready", "port": 80},
		"periodSeconds": 1, "failureThreshold": 1,
	}
	c.create(hostCompute("web", p2Pairs, p2Command, map[string]any{"readinessProbe": probe}))
	c.create(hostCompute("plain", p2Pairs, p2Command, nil))
	portS, portH := framework.FreePort(t), framework.FreePort(t)
	lbs := lbResource("lbs", portS)
	lbh := lbResource("lbh", portH)
	hspec := lbh["spec"].(map[string]any)["loadbalancer"].(map[string]any)
	hspec["selector"] = map[string]string{"app": "plain"}
	hspec["healthCheck"] = map[string]any{"type": "http", "path": "/ready", "interval": "1s", "rise": 1, "fall": 1}
	c.create(lbs)
	c.create(lbh)
	web := c.waitReady("web", p2Pairs, 90*time.Second)
	plain := c.waitReady("plain", p2Pairs, 90*time.Second)
	c.waitReady("lbs", 1, 60*time.Second)
	c.waitReady("lbh", 1, 60*time.Second)
	c.waitBackendsUp("lbs", web, 60*time.Second)
	c.waitBackendsUp("lbh", plain, 60*time.Second)

	node := c.nodes[0]
	tasks, err := framework.CtrTasks(c.ns[node])
	if err != nil {
		t.Fatal(err)
	}
	// Each replica's /ready, through its task's root.
	paths := map[string]string{}
	for _, r := range append(slices.Clone(web), plain...) {
		task, ok := tasks[r.ID]
		if !ok || task.PID == 0 {
			t.Fatalf("replica %s: no task in %s (%v)", r.ID, c.ns[node], tasks)
		}
		paths[r.ID] = fmt.Sprintf("/proc/%d/root/www/ready", task.PID)
	}
	ready := func(r api.Replica) string { return paths[r.ID] }
	keyS := func(r api.Replica) string { return fmt.Sprintf("%d/%s", portS, r.ID) }
	keyH := func(r api.Replica) string { return fmt.Sprintf("%d/%s", portH, r.ID) }
	poller := startP2Poller(t, filepath.Join(c.haproxyDir(node), "admin.sock"), append(hostIDs(web), hostIDs(plain)...))
	for i := range p2Pairs {
		if _, ok := poller.wait(keyS(web[i]), true, time.Now(), 10*time.Second); !ok {
			t.Fatalf("%s is not an up server of the admin socket", keyS(web[i]))
		}
		if _, ok := poller.wait(keyH(plain[i]), true, time.Now(), 10*time.Second); !ok {
			t.Fatalf("%s is not an up server of the admin socket", keyH(plain[i]))
		}
	}

	// One failure: remove both files at once, wait until both servers
	// are out, put the files back, wait until both are up again.
	inject := func(pair int) p2Result {
		res := p2Result{pair: pair}
		w, p := web[pair], plain[pair]
		t0 := time.Now()
		errS, errH := os.Remove(ready(w)), os.Remove(ready(p))
		if err := errors.Join(errS, errH); err != nil {
			res.err = err
			return res
		}
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			if at, ok := poller.wait(keyS(w), false, t0, p2Late); ok {
				res.probe = at.Sub(t0)
			}
		}()
		go func() {
			defer wg.Done()
			if at, ok := poller.wait(keyH(p), false, t0, p2Late); ok {
				res.haproxy = at.Sub(t0)
			}
		}()
		wg.Wait()
		t1 := time.Now()
		errS, errH = os.WriteFile(ready(w), nil, 0o644), os.WriteFile(ready(p), nil, 0o644)
		if err := errors.Join(errS, errH); err != nil {
			res.err = err
			return res
		}
		_, okS := poller.wait(keyS(w), true, t1, p2Back)
		_, okH := poller.wait(keyH(p), true, t1, p2Back)
		res.back = okS && okH
		return res
	}

	// Pair i fails at start + i*p2Cycle/p2Pairs + k*p2Cycle + a random
	// phase of up to one probe period, until samples failures are done.
	var (
		mu      sync.Mutex
		results []p2Result
		wg      sync.WaitGroup
	)
	start := time.Now()
	for i := range p2Pairs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				n := k*p2Pairs + i
				if n >= samples {
					return
				}
				at := start.Add(time.Duration(n) * p2Cycle / p2Pairs).Add(rand.N(time.Second))
				time.Sleep(time.Until(at))
				r := inject(i)
				mu.Lock()
				results = append(results, r)
				mu.Unlock()
				if r.err != nil || !r.back {
					return // the pair is broken: the checks below say how
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	poller.halt()

	var probeMS, haproxyMS []float64
	late, notBack := 0, 0
	for _, r := range results {
		if r.err != nil {
			t.Errorf("pair %d: %v", r.pair, r.err)
			continue
		}
		if r.probe == 0 || r.haproxy == 0 {
			late++
			t.Errorf("pair %d (%s, %s): out of the load balancer after %s (probe) and %s (HAProxy check); 0 is not within %s",
				r.pair, web[r.pair].ID, plain[r.pair].ID, r.probe, r.haproxy, p2Late)
		}
		if !r.back {
			notBack++
			t.Errorf("pair %d (%s, %s): not back in the load balancers %s after /ready was restored", r.pair, web[r.pair].ID, plain[r.pair].ID, p2Back)
		}
		if r.probe > 0 {
			probeMS = append(probeMS, float64(r.probe.Microseconds())/1000)
		}
		if r.haproxy > 0 {
			haproxyMS = append(haproxyMS, float64(r.haproxy.Microseconds())/1000)
		}
	}
	for _, ms := range probeMS {
		t.Logf("p2 sample probe %.1f", ms)
	}
	for _, ms := range haproxyMS {
		t.Logf("p2 sample haproxy %.1f", ms)
	}
	poller.mu.Lock()
	polls, sockErrs, firstErr := poller.polls, poller.errs, poller.firstErr
	poller.mu.Unlock()
	slices.Sort(probeMS)
	slices.Sort(haproxyMS)
	t.Logf("p2 summary: %d failures in %s; probe: %d samples, median %.1f ms, max %.1f ms; HAProxy check: %d samples, median %.1f ms, max %.1f ms; %d late, %d not back; %d socket reads, %d failed (first: %v)",
		len(results), took.Round(time.Millisecond), len(probeMS), p2Median(probeMS), p2Max(probeMS),
		len(haproxyMS), p2Median(haproxyMS), p2Max(haproxyMS), late, notBack, polls, sockErrs, firstErr)
	if len(results) != samples {
		t.Errorf("%d failures injected; want %d", len(results), samples)
	}
	if sockErrs*100 > polls {
		t.Errorf("%d of %d reads of the admin socket failed; first: %v", sockErrs, polls, firstErr)
	}
	// Every replica is back where it was.
	c.waitBackendsUp("lbs", web, 30*time.Second)
	c.waitBackendsUp("lbh", plain, 30*time.Second)
}

// p2Median and p2Max of sorted values, for the summary line.
func p2Median(sorted []float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[len(sorted)/2]
}

func p2Max(sorted []float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[len(sorted)-1]
}
