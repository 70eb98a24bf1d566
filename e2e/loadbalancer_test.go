package e2e

// End-to-end tests of load balancers (issue "Load balancers: the HAProxy
// provider"): agents run the containerd and haproxy providers; busybox
// web servers sit behind Loadbalancer resources whose haproxy listens on
// 127.0.0.1. Traffic is sent from the test through the load balancers;
// haproxy is observed through its pid file and master socket, as the
// provider leaves them in the agent's data directory.

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stratahq/strata/e2e/framework"
	"github.com/stratahq/strata/internal/api"
)

// lbNet is the network of this file's cluster.
var lbNet = hostNet{Name: "e2e-l0", Subnet: "10.232.0.0/24", Gateway: "10.232.0.1", Bridge: "e2e-l0", NodeMask: 24}

// lbWebCommand serves the replica's hostname over HTTP on port 80.
const lbWebCommand = "mkdir -p /www && hostname > /www/index.html && exec httpd -f -v -p 80 -h /www"

// lbResource is a Loadbalancer on 127.0.0.1:port in front of the app=web
// replicas, checking them over HTTP every 200ms.
func lbResource(name string, port int) map[string]any {
	return map[string]any{
		"name": name, "kind": "Loadbalancer", "replicas": 1,
		"spec": map[string]any{"loadbalancer": map[string]any{
			"listeners": []map[string]any{{"port": port, "protocol": "http", "targetPort": 80, "address": "127.0.0.1"}},
			"selector":  map[string]string{"app": "web"},
			"healthCheck": map[string]any{
				"type": "http", "path": "/", "interval": "200ms", "rise": 1, "fall": 2,
			},
		}},
	}
}

// backends reads a load balancer's backends at the global API, by
// replica.
func (c *hostCluster) backends(name string) (map[string]api.BackendStatus, error) {
	r, err := c.status(name)
	if err != nil {
		return nil, err
	}
	out := map[string]api.BackendStatus{}
	for _, b := range r.Status.Backends {
		out[b.Replica] = b
	}
	return out, nil
}

// waitBackendsUp waits until the load balancer's backends are exactly
// the replicas reps, all up.
func (c *hostCluster) waitBackendsUp(name string, reps []api.Replica, timeout time.Duration) {
	c.t.Helper()
	want := hostIDs(reps)
	framework.Eventually(c.t, timeout, fmt.Sprintf("%s: backends %v up", name, want), func() error {
		bes, err := c.backends(name)
		if err != nil {
			return err
		}
		var got []string
		for id, b := range bes {
			if b.Health != "up" {
				return fmt.Errorf("backend %s (%s:%d) is %s", id, b.Address, b.Port, b.Health)
			}
			got = append(got, id)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("backends %v", got)
		}
		return nil
	})
}

// lbHTTP sends each request on a new connection.
var lbHTTP = &http.Client{
	Timeout:   3 * time.Second,
	Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
}

// lbSpread sends n requests to url and counts the answers by body (the
// hostname of the replica that answered); any failure fails the test.
func lbSpread(t *testing.T, url string, n int) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for i := range n {
		body, err := hostGetBody(lbHTTP, url)
		if err != nil {
			t.Fatalf("request %d of %d to %s: %v", i+1, n, url, err)
		}
		counts[strings.TrimSpace(body)]++
	}
	return counts
}

// lbResult is one request of a load.
type lbResult struct {
	start, end time.Time
	host       string
	err        error
}

// lbLoad sends requests to a URL from several goroutines until stopped.
type lbLoad struct {
	stop chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	res  []lbResult
}

func lbStartLoad(t *testing.T, url string, workers int) *lbLoad {
	return lbStartLoadWith(t, &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}, url, workers)
}

// lbStartLoadWith sends the load with client (one that connects from
// another namespace, say).
func lbStartLoadWith(t *testing.T, client *http.Client, url string, workers int) *lbLoad {
	l := &lbLoad{stop: make(chan struct{})}
	for range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				r := lbResult{start: time.Now()}
				body, err := hostGetBody(client, url)
				r.end, r.host, r.err = time.Now(), strings.TrimSpace(body), err
				l.mu.Lock()
				l.res = append(l.res, r)
				l.mu.Unlock()
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	t.Cleanup(func() { l.halt() })
	return l
}

func (l *lbLoad) halt() []lbResult {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.res)
}

// lbSummarize counts the requests started in [from, to) and their failures.
func lbSummarize(res []lbResult, from, to time.Time) (n, failed int, firstErr error) {
	for _, r := range res {
		if r.start.Before(from) || !r.start.Before(to) {
			continue
		}
		n++
		if r.err != nil {
			failed++
			if firstErr == nil {
				firstErr = r.err
			}
		}
	}
	return n, failed, firstErr
}

// lbRefuses reports whether nothing listens on addr.
func lbRefuses(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		conn.Close()
		return fmt.Errorf("%s still accepts connections", addr)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("dial %s: %v; want connection refused", addr, err)
	}
	return nil
}

// TestLoadbalancerHAProxy puts three web replicas behind a load
// balancer, kills one and checks that no request fails once the load
// balancer reports it down, scales to four without reloading haproxy,
// deletes the load balancer while another keeps serving, and checks that
// haproxy stops with the last one.
func TestLoadbalancerHAProxy(t *testing.T) {
	c := startHostCluster(t, hostClusterOpts{region: "e2e-l", network: lbNet, agents: 1, haproxy: true})
	node := c.nodes[0]
	c.flavor("small", 0.25, 64)
	c.image()
	// restart policy never: a killed replica stays dead, and the region
	// replaces it.
	c.create(hostCompute("web", 3, lbWebCommand, map[string]any{"restartPolicy": "never"}))
	port1, port2 := framework.FreePort(t), framework.FreePort(t)
	url1, url2 := fmt.Sprintf("http://127.0.0.1:%d/", port1), fmt.Sprintf("http://127.0.0.1:%d/", port2)
	c.create(lbResource("lb", port1))
	c.create(lbResource("lb2", port2))
	web := c.waitReady("web", 3, 60*time.Second)
	c.waitReady("lb", 1, 60*time.Second)
	c.waitReady("lb2", 1, 60*time.Second)
	c.waitBackendsUp("lb", web, 30*time.Second)
	c.waitBackendsUp("lb2", web, 30*time.Second)

	// haproxy as the provider runs it: one master for both.
	dir := c.haproxyDir(node)
	masterSock := filepath.Join(dir, "master.sock")
	pid, err := framework.ReadPIDFile(filepath.Join(dir, "haproxy.pid"))
	if err != nil {
		t.Fatal(err)
	}
	before, err := framework.HAProxyShowProc(masterSock)
	if err != nil {
		t.Fatal(err)
	}
	if before.MasterPID != pid || !framework.ProcAlive(pid) {
		t.Fatalf("haproxy master: pid file says %d, the master socket %d", pid, before.MasterPID)
	}
	t.Logf("haproxy master pid %d, %d reloads, workers %v", pid, before.Reloads, before.Workers)

	// Round robin over the three replicas.
	counts := lbSpread(t, url1, 300)
	t.Logf("300 requests through lb: %v", counts)
	for _, r := range web {
		if counts[r.ID] < 50 {
			t.Errorf("replica %s answered %d of 300 requests; want at least 50", r.ID, counts[r.ID])
		}
	}
	if len(counts) != 3 {
		t.Errorf("answers from %v; want only the 3 replicas", counts)
	}

	// Kill one container under load.
	victim := web[0]
	tasks, err := framework.CtrTasks(c.ns[node])
	if err != nil {
		t.Fatal(err)
	}
	task, ok := tasks[victim.ID]
	if !ok || task.PID <= 0 {
		t.Fatalf("no task for %s in %v", victim.ID, tasks)
	}
	load := lbStartLoad(t, url1, 4)
	time.Sleep(500 * time.Millisecond)
	killed := time.Now()
	if err := syscall.Kill(task.PID, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d (%s): %v", task.PID, victim.ID, err)
	}
	// Down: haproxy's checks fail it, or the region takes the failed
	// replica out of the endpoints, whichever shows first.
	var detected time.Time
	how := ""
	framework.Eventually(t, 30*time.Second, "lb reports "+victim.ID+" down", func() error {
		bes, err := c.backends("lb")
		if err != nil {
			return err
		}
		// The others still listed and up: a status that lists none
		// (a load balancer being set up) says nothing of the victim.
		for _, r := range web[1:] {
			if b, ok := bes[r.ID]; !ok || b.Health != "up" {
				return fmt.Errorf("backend %s: %+v", r.ID, b)
			}
		}
		b, ok := bes[victim.ID]
		switch {
		case ok && b.Health == "up":
			return fmt.Errorf("%s is %s", victim.ID, b.Health)
		case ok:
			how = "health " + b.Health
		default:
			how = "removed from the backends"
		}
		detected = time.Now()
		return nil
	})
	// Keep the load on while the region replaces the replica.
	var replaced []api.Replica
	framework.Eventually(t, 60*time.Second, "the killed replica replaced behind lb", func() error {
		reps, err := c.replicas("web")
		if err != nil {
			return err
		}
		if len(reps) != 3 || slices.ContainsFunc(reps, func(r api.Replica) bool { return r.ID == victim.ID || r.Phase != api.PhaseReady }) {
			return fmt.Errorf("replicas %v", hostIDs(reps))
		}
		bes, err := c.backends("lb")
		if err != nil {
			return err
		}
		for _, r := range reps {
			if b, ok := bes[r.ID]; !ok || b.Health != "up" {
				return fmt.Errorf("backend %s: %+v", r.ID, b)
			}
		}
		replaced = reps
		return nil
	})
	back := time.Now()
	time.Sleep(time.Second)
	res := load.halt()
	end := time.Now()
	nBefore, failedBefore, errBefore := lbSummarize(res, time.Time{}, detected)
	nAfter, failedAfter, errAfter := lbSummarize(res, detected, end)
	t.Logf("kill -9 of %s: lb reported it down (%s) after %s; 3 backends up again after %s", victim.ID,
		how, detected.Sub(killed).Round(time.Millisecond), back.Sub(killed).Round(time.Millisecond))
	t.Logf("requests: %d before the detection (%d failed, first error %v), %d after it (%d failed)", nBefore, failedBefore, errBefore, nAfter, failedAfter)
	if failedAfter > 0 {
		t.Errorf("%d of %d requests started after lb reported %s down failed; first: %v", failedAfter, nAfter, victim.ID, errAfter)
	}
	if nAfter == 0 {
		t.Errorf("no request was sent after the detection")
	}

	// Scale to four: the new backend is added through the runtime API,
	// without a reload.
	c.global.Must(t, http.MethodPost, "/v1/resources/web/scale", map[string]any{"replicas": 4}, http.StatusOK, nil)
	four := c.waitReady("web", 4, 60*time.Second)
	c.waitBackendsUp("lb", four, 30*time.Second)
	var added string
	for _, r := range four {
		if !slices.ContainsFunc(replaced, func(o api.Replica) bool { return o.ID == r.ID }) {
			added = r.ID
		}
	}
	counts = lbSpread(t, url1, 200)
	t.Logf("200 requests through lb after the scale to 4: %v", counts)
	if counts[added] < 25 {
		t.Errorf("the new replica %s answered %d of 200 requests; want at least 25", added, counts[added])
	}
	after, err := framework.HAProxyShowProc(masterSock)
	if err != nil {
		t.Fatal(err)
	}
	if pidNow, err := framework.ReadPIDFile(filepath.Join(dir, "haproxy.pid")); err != nil || pidNow != pid || after.MasterPID != pid {
		t.Errorf("haproxy master: pid file %d (%v), master socket %d; want %d throughout", pidNow, err, after.MasterPID, pid)
	}
	if after.Reloads != before.Reloads {
		t.Errorf("haproxy reloaded %d times during the kill, the replacement and the scale; want endpoints changed at runtime only", after.Reloads-before.Reloads)
	}

	// Deleting lb closes its port; lb2, on the same haproxy, keeps
	// serving throughout.
	load2 := lbStartLoad(t, url2, 2)
	time.Sleep(300 * time.Millisecond)
	deleted := time.Now()
	c.global.Must(t, http.MethodDelete, "/v1/resources/lb", nil, http.StatusAccepted, nil)
	framework.Eventually(t, 30*time.Second, "lb deleted", func() error {
		if status, err := c.global.Get("/v1/resources/lb", nil); err != nil || status != http.StatusNotFound {
			return fmt.Errorf("GET /v1/resources/lb: %d %v", status, err)
		}
		return lbRefuses(fmt.Sprintf("127.0.0.1:%d", port1))
	})
	closed := time.Now()
	time.Sleep(500 * time.Millisecond)
	res2 := load2.halt()
	n2, failed2, err2 := lbSummarize(res2, time.Time{}, time.Now())
	t.Logf("lb deleted: port %d refused after %s; lb2 served %d requests meanwhile, %d failed", port1, closed.Sub(deleted).Round(time.Millisecond), n2, failed2)
	if failed2 > 0 || n2 == 0 {
		t.Errorf("lb2 while lb was deleted: %d of %d requests failed; first: %v", failed2, n2, err2)
	}
	if counts := lbSpread(t, url2, 40); len(counts) != 4 {
		t.Errorf("lb2 after lb's deletion: answers from %v; want the 4 replicas", counts)
	}
	if p, err := framework.HAProxyShowProc(masterSock); err != nil || p.MasterPID != pid {
		t.Errorf("after lb's deletion: master %+v (%v); want pid %d still (a reload, not a restart)", p, err, pid)
	} else {
		t.Logf("after lb's deletion: %d reloads (was %d)", p.Reloads, before.Reloads)
	}

	// The last load balancer gone, haproxy goes.
	c.global.Must(t, http.MethodDelete, "/v1/resources/lb2", nil, http.StatusAccepted, nil)
	framework.Eventually(t, 30*time.Second, "haproxy stopped with the last load balancer", func() error {
		if status, err := c.global.Get("/v1/resources/lb2", nil); err != nil || status != http.StatusNotFound {
			return fmt.Errorf("GET /v1/resources/lb2: %d %v", status, err)
		}
		if framework.ProcAlive(pid) {
			return fmt.Errorf("master pid %d still alive", pid)
		}
		if pids := framework.PidsWithArg(c.haproxyCfg(node)); len(pids) > 0 {
			return fmt.Errorf("haproxy processes %v still run %s", pids, c.haproxyCfg(node))
		}
		return lbRefuses(fmt.Sprintf("127.0.0.1:%d", port2))
	})
}
