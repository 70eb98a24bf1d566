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
	"strings"
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

func TestAutoscaleOnLoadBalancerRequests(t *testing.T) {
	c := startHostCluster(t, hostClusterOpts{region: "e2e-as", network: asNet, agents: 1, haproxy: true})
	c.flavor("small", 0.25, 64)
	c.image()
	port := framework.FreePort(t)
	lbURL := fmt.Sprintf("http://127.0.0.1:%d/", port)
	c.create(lbResource("lb", port))
	web := hostCompute("web", 1, lbWebCommand, nil)
	// 20 requests a second per replica, between 1 and 3 replicas; a
	// decision every 2 s, and a scale-down window of 6 s so that the
	// test sees the way down too.
	web["autoscale"] = map[string]any{
		"minReplicas": 1, "maxReplicas": 3,
		"loadBalancer": "lb", "requestsPerSecond": 20,
		// A CPU target no web server here reaches: its reading shows
		// that the replicas' cgroups are read, and it never asks for
		// more than the request rate does.
		"cpuPercent": 900,
		"period":     "2s",
		"scaleDown":  map[string]any{"stabilizationWindow": "6s"},
	}
	res := c.create(web)
	c.waitReady("web", 1, 60*time.Second)
	c.waitReady("lb", 1, 60*time.Second)

	// Idle at the minimum: the master reads the load balancer (0/s) and
	// keeps one replica.
	framework.Eventually(t, 30*time.Second, "web's autoscale status reads the load balancer", func() error {
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

	// Load: several workers in a loop, far more than 3 × 20 requests a
	// second through haproxy.
	load := lbStartLoad(t, lbURL, 4)
	c.waitReady("web", 3, 90*time.Second)
	r, err := c.status("web")
	if err != nil {
		t.Fatal(err)
	}
	if r.Replicas != 3 {
		t.Fatalf("under load web has %d replicas; want the maximum, 3", r.Replicas)
	}
	res2 := load.halt()
	n, failed, firstErr := lbSummarize(res2, time.Time{}, time.Now())
	t.Logf("load: %d requests, %d failed (%v); autoscale %+v", n, failed, firstErr, r.Status.Autoscale)
	if n < 200 {
		t.Fatalf("the load sent only %d requests; the test needs a rate well above 60/s", n)
	}

	// The load stops: after the window the master scales back to 1.
	c.waitReady("web", 1, 90*time.Second)
	msgs, err := c.scaledEvents(res)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Scaled events: %q", msgs)
	var up, down bool
	for _, m := range msgs {
		up = up || strings.HasPrefix(m, "1 → ") && strings.Contains(m, "requests") && strings.Contains(m, "e2e-as +")
		down = down || strings.HasSuffix(strings.SplitN(m, ",", 2)[0], "→ 1") && strings.Contains(m, "requests 0/s")
	}
	if !up || !down {
		t.Errorf("Scaled events %q: want one up from 1 naming the request rate and the region, and one down to 1 at 0/s", msgs)
	}
	// Never outside the bounds: every event's target within 1..3.
	for _, m := range msgs {
		var from, to int
		if _, err := fmt.Sscanf(m, "%d → %d", &from, &to); err != nil || to < 1 || to > 3 {
			t.Errorf("event %q: target outside 1..3 (%v)", m, err)
		}
	}
	// Manual scaling is refused while the resource scales itself.
	c.global.Must(t, http.MethodPost, "/v1/resources/web/scale", map[string]any{"replicas": 5}, http.StatusConflict, nil)
	if err := c.deleteAll(60 * time.Second); err != nil {
		t.Fatal(err)
	}
}
