package e2e

// End-to-end test of autoscaling (issue "Capacity-aware federation",
// item 3): busybox web servers behind a real haproxy; a load generator
// drives the load balancer's request rate up, the master scales the
// resource up to its maximum, and back down to its minimum once the load
// stops and the scale-down window has passed. The events carry the
// inputs.

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratahq/strata/e2e/framework"
	"github.com/stratahq/strata/internal/api"
)

// asNet is the network of this file's cluster.
var asNet = hostNet{Name: "e2e-as0", Subnet: "10.233.0.0/24", Gateway: "10.233.0.1", Bridge: "e2e-as0", NodeMask: 24}

// scaledEvents are the messages of the resource's Scaled events, oldest
// first.
func (c *hostCluster) scaledEvents(r api.Resource) ([]string, error) {
	var evs struct{ Items []api.Event }
	path := "/v1/events?limit=1000&object=" + url.QueryEscape("resource/"+r.Tenant+"/"+r.Name)
	if code, err := c.global.Get(path, &evs); err != nil || code != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %v", path, code, err)
	}
	var out []string
	for _, ev := range evs.Items {
		if ev.Reason == "Scaled" {
			out = append(out, ev.Message)
		}
	}
	return out, nil
}

// pacedLoad sends GETs to url at a fixed rate, open loop (each request
// on its own goroutine, started on the clock whatever the answers take),
// until stopped; it counts what it sent and what failed.
type pacedLoad struct {
	stop         chan struct{}
	done         chan struct{}
	sent, failed atomic.Int64
}

func startPacedLoad(t *testing.T, url string, perSecond int) *pacedLoad {
	l := &pacedLoad{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		var wg sync.WaitGroup
		defer wg.Wait()
		tick := time.NewTicker(time.Second / time.Duration(perSecond))
		defer tick.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-tick.C:
			}
			l.sent.Add(1)
			wg.Go(func() {
				if _, err := hostGetBody(lbHTTP, url); err != nil {
					l.failed.Add(1)
				}
			})
		}
	}()
	t.Cleanup(l.halt)
	return l
}

func (l *pacedLoad) halt() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
}

// a1Steps is how many load steps the test makes: STRATA_A1_STEPS (the
// benchmark A1 asks for several, bench/autoscale.go), 1 by default.
func a1Steps(t *testing.T) int {
	s := os.Getenv("STRATA_A1_STEPS")
	if s == "" {
		return 1
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("STRATA_A1_STEPS=%q: want a positive count", s)
	}
	return n
}

// a1Period is the autoscaler's period: STRATA_A1_PERIOD (the benchmark
// runs the default, 15s), 2s by default so that the test is quick.
func a1Period(t *testing.T) string {
	s := os.Getenv("STRATA_A1_PERIOD")
	if s == "" {
		return "2s"
	}
	if d, err := time.ParseDuration(s); err != nil || d <= 0 {
		t.Fatalf("STRATA_A1_PERIOD=%q: want a positive duration", s)
	}
	return s
}

// waitReadyAtLeast waits until name has at least n ready replicas and
// returns when it saw them (polled every 100 ms).
func (c *hostCluster) waitReadyAtLeast(name string, n int, timeout time.Duration) time.Time {
	c.t.Helper()
	var at time.Time
	framework.Eventually(c.t, timeout, fmt.Sprintf("%s with %d ready replicas", name, n), func() error {
		r, err := c.status(name)
		if err != nil {
			return err
		}
		if r.Status.Ready < n {
			return fmt.Errorf("%d ready of %d", r.Status.Ready, r.Replicas)
		}
		at = time.Now()
		return nil
	})
	return at
}

// TestAutoscaleOnLoadBalancerRequests: web scales itself on its load
// balancer's request rate, 20 requests a second per replica. A paced
// load of 20/s holds it at 1; a step to 80/s (×4) takes it to 4 ready
// replicas (the benchmark A1 times this step, against a twin resource
// scaled by hand to 4 in the same run: the replicas' start time); the
// load stopping takes it back to 1 once the scale-down window passed.
// The Scaled events carry the inputs and the region's change.
func TestAutoscaleOnLoadBalancerRequests(t *testing.T) {
	c := startHostCluster(t, hostClusterOpts{region: "e2e-as", network: asNet, agents: 1, haproxy: true})
	c.flavor("small", 0.25, 64)
	c.image()
	port := framework.FreePort(t)
	lbURL := fmt.Sprintf("http://127.0.0.1:%d/", port)
	c.create(lbResource("lb", port))
	web := hostCompute("web", 1, lbWebCommand, nil)
	// Between 1 and 6 replicas; a decision every 2 s (a1Period), and a
	// scale-down window of 6 s so that the test sees the way down too.
	web["autoscale"] = map[string]any{
		"minReplicas": 1, "maxReplicas": 6,
		"loadBalancer": "lb", "requestsPerSecond": 20,
		// A CPU target no web server here reaches: its reading shows
		// that the replicas' cgroups are read, and it never asks for
		// more than the request rate does.
		"cpuPercent": 900,
		"period":     a1Period(t),
		"scaleDown":  map[string]any{"stabilizationWindow": "6s"},
	}
	res := c.create(web)
	// The twin is scaled by hand: A1's baseline, the time replicas take
	// to start and be ready.
	c.create(hostCompute("twin", 1, lbWebCommand, nil))
	c.waitReady("web", 1, 60*time.Second)
	c.waitReady("twin", 1, 60*time.Second)
	c.waitReady("lb", 1, 60*time.Second)

	// Idle at the minimum: the master reads the load balancer (0/s) and
	// the replicas' CPU, and keeps one replica.
	framework.Eventually(t, 30*time.Second, "web's autoscale status reads the load balancer and the CPU", func() error {
		r, err := c.status("web")
		if err != nil {
			return err
		}
		a := r.Status.Autoscale
		if a == nil {
			return fmt.Errorf("no autoscale status yet")
		}
		metrics := strings.Join(a.Metrics, ", ")
		if !strings.Contains(metrics, "requests 0/s per replica of 20/s") || !strings.Contains(metrics, "% of 900 %") {
			return fmt.Errorf("autoscale metrics %q; want the request rate and the cpu read", metrics)
		}
		if r.Replicas != 1 {
			return fmt.Errorf("idle web has %d replicas; want 1", r.Replicas)
		}
		return nil
	})

	for step := range a1Steps(t) {
		// At the target: 20/s on one replica, read by the master.
		base := startPacedLoad(t, lbURL, 20)
		framework.Eventually(t, 60*time.Second, "the base load read", func() error {
			r, err := c.status("web")
			if err != nil {
				return err
			}
			a := r.Status.Autoscale
			if a == nil || r.Replicas != 1 || !slices.ContainsFunc(a.Metrics, func(m string) bool {
				var rate float64
				_, err := fmt.Sscanf(m, "requests %g/s", &rate)
				return err == nil && rate >= 16 && rate <= 24
			}) {
				return fmt.Errorf("replicas %d, autoscale %+v; want 1 at about 20/s", r.Replicas, a)
			}
			return nil
		})
		// The step: ×4.
		base.halt()
		stepAt := time.Now()
		load := startPacedLoad(t, lbURL, 80)
		readyAt := c.waitReadyAtLeast("web", 4, 120*time.Second)
		// The twin, scaled by hand to the same 4 under the same load.
		scaleAt := time.Now()
		c.global.Must(t, http.MethodPost, "/v1/resources/twin/scale", map[string]any{"replicas": 4}, http.StatusOK, nil)
		twinAt := c.waitReadyAtLeast("twin", 4, 90*time.Second)
		load.halt()
		t.Logf("a1 sample autoscale %.3f twin %.3f", readyAt.Sub(stepAt).Seconds()*1000, twinAt.Sub(scaleAt).Seconds()*1000)
		if n, failed := load.sent.Load(), load.failed.Load(); failed > 0 {
			t.Errorf("step %d: %d of %d requests through the load balancer failed", step+1, failed, n)
		}
		r, err := c.status("web")
		if err != nil {
			t.Fatal(err)
		}
		if r.Replicas < 4 || r.Replicas > 6 {
			t.Fatalf("step %d: at 80/s web has %d replicas; want 4 to 6 (the maximum)", step+1, r.Replicas)
		}
		// The load stops: after the window the master scales back to 1.
		c.global.Must(t, http.MethodPost, "/v1/resources/twin/scale", map[string]any{"replicas": 1}, http.StatusOK, nil)
		c.waitReady("web", 1, 90*time.Second)
		c.waitReady("twin", 1, 90*time.Second)
	}

	msgs, err := c.scaledEvents(res)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Scaled events: %q", msgs)
	var up, down bool
	for _, m := range msgs {
		up = up || strings.HasPrefix(m, "1 → ") && strings.Contains(m, "requests") && strings.Contains(m, "e2e-as +")
		down = down || strings.HasSuffix(strings.SplitN(m, ",", 2)[0], "→ 1") && strings.Contains(m, "requests ") && strings.Contains(m, "e2e-as -")
	}
	if !up || !down {
		t.Errorf("Scaled events %q: want one up from 1 and one down to 1, each naming the request rate and the region's change", msgs)
	}
	// Never outside the bounds: every event's target within 1..6.
	for _, m := range msgs {
		var from, to int
		if _, err := fmt.Sscanf(m, "%d → %d", &from, &to); err != nil || to < 1 || to > 6 {
			t.Errorf("event %q: target outside 1..6 (%v)", m, err)
		}
	}
	// Manual scaling is refused while the resource scales itself.
	c.global.Must(t, http.MethodPost, "/v1/resources/web/scale", map[string]any{"replicas": 5}, http.StatusConflict, nil)
	if err := c.deleteAll(60 * time.Second); err != nil {
		t.Fatal(err)
	}
}
