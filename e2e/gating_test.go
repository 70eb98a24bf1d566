package e2e

// End-to-end tests of readiness gating (issue 34) on real containerd and
// real HAProxy, through every tier: a replica is ready only while its
// readiness probe passes, and that gates the load balancer's backends, a
// rollout (it halts at maxUnavailable, fails at its progress deadline,
// auto-reverts) and a drain (make-before-break waits until the
// replacement is ready). A client hammers the load balancer throughout
// and must see no failed request.
//
// The cluster uses names no other test uses: bridge e2e-g0, subnet
// 10.236.0.0/24, region e2e-gt.

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratahq/strata/e2e/framework"
	"github.com/stratahq/strata/internal/api"
)

// gatingNet is the network of this file's clusters.
var gatingNet = hostNet{Name: "e2e-g0", Subnet: "10.236.0.0/24", Gateway: "10.236.0.1", Bridge: "e2e-g0", NodeMask: 26}

// gatingReadyCommand serves the replica's hostname on port 80, and /ready
// (which the readiness probe asks for) once it has slept delay seconds.
func gatingReadyCommand(delay int) string {
	return fmt.Sprintf("mkdir -p /www; hostname > /www/index.html; (sleep %d; touch /www/ready) & exec httpd -f -v -p 80 -h /www", delay)
}

// gatingProbe is a readiness probe asking for /ready on port 80 every
// second; two failures in a row make a replica unready.
func gatingProbe() map[string]any {
	return map[string]any{
		"httpGet":       map[string]any{"path": "/ready", "port": 80},
		"periodSeconds": 1, "failureThreshold": 2,
	}
}

// gatingSample is what a sampler saw of a resource and its load
// balancer at one moment.
type gatingSample struct {
	at time.Time
	// ready is the resource's ready count at the global API; -1 when the
	// read failed.
	ready int
	// up are the load balancer's backends HAProxy reports up, by replica.
	up []string
	// backends are all its backends, whatever their health.
	backends []string
	rollout  *api.RolloutStatus
}

// gatingSampler reads a resource's status and its load balancer's
// backends every 100 ms until stopped.
type gatingSampler struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	got  []gatingSample
}

func startGatingSampler(c *hostCluster, resource, lb string) *gatingSampler {
	s := &gatingSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			smp := gatingSample{at: time.Now(), ready: -1}
			if r, err := c.status(resource); err == nil {
				smp.ready = r.Status.Ready
				smp.rollout = r.Status.Rollout
			}
			if bes, err := c.backends(lb); err == nil {
				for id, b := range bes {
					smp.backends = append(smp.backends, id)
					if b.Health == "up" {
						smp.up = append(smp.up, id)
					}
				}
				slices.Sort(smp.backends)
				slices.Sort(smp.up)
			}
			s.mu.Lock()
			s.got = append(s.got, smp)
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	c.t.Cleanup(func() { s.halt() })
	return s
}

func (s *gatingSampler) halt() []gatingSample {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

// lowest is the lowest ready count and the fewest up backends sampled
// (reads that failed left out), and how many samples there were.
func lowest(got []gatingSample) (ready, up, n int) {
	ready, up = -1, -1
	for _, s := range got {
		if s.ready < 0 {
			continue
		}
		n++
		if ready < 0 || s.ready < ready {
			ready = s.ready
		}
		if up < 0 || len(s.up) < up {
			up = len(s.up)
		}
	}
	return ready, up, n
}

// TestGatingRolloutUnderLoad rolls out a release whose process runs but
// whose readiness fails (no /ready: 404) behind a load balancer under
// load: the rollout halts at maxUnavailable, the unready replicas never
// become backends (though HAProxy's own check, on /, would pass them),
// the rollout fails at its progress deadline and auto-reverts, and the
// client sees no failed request throughout.
func TestGatingRolloutUnderLoad(t *testing.T) {
	c := startHostCluster(t, hostClusterOpts{region: "e2e-gt", network: gatingNet, agents: 1, haproxy: true})
	c.flavor("small", 0.25, 64)
	c.image()
	const replicas, maxUnavailable, deadline = 3, 1, 10
	web := hostCompute("web", replicas, gatingReadyCommand(0), map[string]any{"readinessProbe": gatingProbe()})
	web["rollout"] = map[string]any{"maxUnavailable": maxUnavailable, "maxSurge": 1, "progressDeadlineSeconds": deadline, "autoRevert": true}
	c.create(web)
	port := framework.FreePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	c.create(lbResource("lb", port))
	good := c.waitReady("web", replicas, 60*time.Second)
	c.waitReady("lb", 1, 60*time.Second)
	c.waitBackendsUp("lb", good, 30*time.Second)

	load := lbStartLoad(t, url, 4)
	sampler := startGatingSampler(c, "web", "lb")
	// The replicas of the bad revision, as the sampler of replicas sees
	// them.
	var (
		mu  sync.Mutex
		bad = map[string]bool{}
	)
	stopReps, repsDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(repsDone)
		for {
			if reps, err := c.replicas("web"); err == nil {
				mu.Lock()
				for _, r := range reps {
					if r.Revision == 2 {
						bad[r.ID] = true
					}
				}
				mu.Unlock()
			}
			select {
			case <-stopReps:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	time.Sleep(time.Second) // load before the update, to compare with
	start := time.Now()
	web["spec"].(map[string]any)["compute"].(map[string]any)["command"] = []string{"sh", "-c", lbWebCommand}
	var updated api.Resource
	c.global.Must(t, http.MethodPut, "/v1/resources/web", web, http.StatusOK, &updated)
	if updated.Revision != 2 {
		t.Fatalf("after the update: revision %d; want 2", updated.Revision)
	}

	// Halted: two new replicas run unready beside the two old ones left.
	framework.Eventually(t, 30*time.Second, "two replicas of revision 2 running unready", func() error {
		reps, err := c.replicas("web")
		if err != nil {
			return err
		}
		n := 0
		for _, r := range reps {
			if r.Revision == 2 && r.Status != nil && r.Desired == api.DesiredRunning && len(r.Status.Containers) > 0 &&
				r.Status.Containers[0].State == api.ContainerRunning && strings.Contains(r.Status.Reason, "not ready") {
				n++
			}
		}
		if n < 2 {
			return fmt.Errorf("%d of revision 2 running: %v", n, gatingPhases(reps))
		}
		return nil
	})
	halted := time.Now()

	var reverted api.Revision
	framework.Eventually(t, 60*time.Second, "auto-revert to revision 3", func() error {
		var revs struct{ Items []api.Revision }
		if _, err := c.global.Get("/v1/resources/web/revisions", &revs); err != nil {
			return err
		}
		for _, rv := range revs.Items {
			if rv.Number == 3 {
				reverted = rv
				return nil
			}
		}
		return fmt.Errorf("revisions: %d", len(revs.Items))
	})
	revertedAt := time.Since(start)
	// The failed state lasts one pass of the global master (the revert
	// follows at once); the revert's cause is what stays of it.
	if !strings.HasPrefix(reverted.Cause, "auto-revert: revision 2 failed in e2e-gt") || !strings.Contains(reverted.Cause, "progress deadline") {
		t.Errorf("revision 3: cause %q; want an auto-revert naming the region and the progress deadline", reverted.Cause)
	}
	if got := strings.Join(reverted.Spec.Compute.Command, " "); !strings.Contains(got, "touch /www/ready") {
		t.Errorf("revision 3: command %q; want revision 1's", got)
	}
	if revertedAt < deadline*time.Second {
		t.Errorf("reverted %s after the update; want not before the progress deadline (%ds)", revertedAt, deadline)
	}
	back := c.waitReady("web", replicas, 60*time.Second)
	c.waitBackendsUp("lb", back, 30*time.Second)
	recovered := time.Now()
	time.Sleep(time.Second) // load after, to compare with
	close(stopReps)
	<-repsDone
	samples := sampler.halt()
	res := load.halt()

	n, failed, firstErr := lbSummarize(res, time.Time{}, time.Now())
	low, lowUp, nSamples := lowest(samples)
	mu.Lock()
	defer mu.Unlock()
	t.Logf("rollout: halted %s after the update, reverted after %s, %d replicas ready at revision 3 after %s",
		halted.Sub(start).Round(time.Millisecond), revertedAt.Round(time.Millisecond), replicas, recovered.Sub(start).Round(time.Millisecond))
	t.Logf("load balancer: %d requests, %d failed (first: %v); %d samples: lowest ready %d, fewest backends up %d; %d replicas of revision 2 (%v); revert: %q",
		n, failed, firstErr, nSamples, low, lowUp, len(bad), slices.Sorted(maps.Keys(bad)), reverted.Cause)
	if failed > 0 {
		t.Errorf("%d of %d requests through the load balancer failed; first: %v", failed, n, firstErr)
	}
	if n < 100 {
		t.Errorf("only %d requests were sent", n)
	}
	if low < replicas-maxUnavailable {
		t.Errorf("ready replicas during the rollout: lowest %d; want never below %d (replicas - maxUnavailable)", low, replicas-maxUnavailable)
	}
	if lowUp < replicas-maxUnavailable {
		t.Errorf("backends up during the rollout: fewest %d; want never below %d", lowUp, replicas-maxUnavailable)
	}
	if len(bad) < 2 {
		t.Errorf("replicas of revision 2 seen: %v; want the two the surge and maxUnavailable allow", bad)
	}
	// The unready ones were never backends, nor answered a request.
	for _, s := range samples {
		for _, id := range s.backends {
			if bad[id] {
				t.Errorf("%s: backends %v include %s, of the unready revision 2", s.at.Format(time.StampMilli), s.backends, id)
			}
		}
	}
	served := map[string]int{}
	for _, r := range res {
		if r.err == nil {
			served[r.host]++
		}
	}
	for id := range bad {
		if served[id] > 0 {
			t.Errorf("unready replica %s answered %d requests", id, served[id])
		}
	}
	t.Logf("answers by replica: %v", served)
}

// gatingPhases is each replica's revision and phase, for messages.
func gatingPhases(reps []api.Replica) []string {
	var out []string
	for _, r := range reps {
		out = append(out, fmt.Sprintf("%s@%d:%s/%s", r.ID, r.Revision, r.Desired, r.Phase))
	}
	return out
}

// TestGatingDrainWaitsForReadiness drains a node whose replicas take 3 s
// to become ready after they start, behind a load balancer under load:
// no moment has fewer ready replicas than minHealthy (sampled every
// 100 ms), each move waits for its replacement's readiness, and the
// client sees no failed request.
func TestGatingDrainWaitsForReadiness(t *testing.T) {
	// The load balancer lives on node a (lb=yes), which is not drained:
	// its listener stays where the client sends the load.
	c := startHostCluster(t, hostClusterOpts{region: "e2e-gt", network: gatingNet, agents: 3, haproxy: true,
		labels: func(j int) map[string]string { return map[string]string{"lb": fmt.Sprint(j == 0)} }})
	c.flavor("small", 0.25, 64)
	c.image()
	const replicas, minHealthy, delay = 3, 3, 3
	web := hostCompute("web", replicas, gatingReadyCommand(delay), map[string]any{"readinessProbe": gatingProbe()})
	web["rollout"] = map[string]any{"minHealthy": minHealthy}
	c.create(web)
	port := framework.FreePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	c.create(c.onNodes(lbResource("lb", port), map[string]string{"lb": "true"}, ""))
	before := c.waitReady("web", replicas, 60*time.Second)
	c.waitReady("lb", 1, 60*time.Second)
	c.waitBackendsUp("lb", before, 30*time.Second)

	// Drain the node, other than the load balancer's, with most replicas.
	count := map[string]int{}
	for _, r := range before {
		count[r.Node]++
	}
	drained := ""
	for _, node := range c.nodes[1:] {
		if count[node] > count[drained] {
			drained = node
		}
	}
	if drained == "" {
		t.Fatalf("no replica off node %s: %v", c.nodes[0], count)
	}
	var moving []string
	for _, r := range before {
		if r.Node == drained {
			moving = append(moving, r.ID)
		}
	}

	load := lbStartLoad(t, url, 4)
	sampler := startGatingSampler(c, "web", "lb")
	time.Sleep(time.Second) // load before the drain, to compare with
	path := "/v1/regions/" + c.o.region + "/nodes/" + drained + "/drain"
	start := time.Now()
	c.global.Must(t, http.MethodPost, path, map[string]any{"deadline": "2m", "maxParallel": 1, "reason": "e2e"}, http.StatusOK, nil)
	var d api.DrainStatus
	framework.Eventually(t, 90*time.Second, "drain of "+drained+" finished", func() error {
		if _, err := c.global.Get(path, &d); err != nil {
			return err
		}
		if !d.Done() {
			return fmt.Errorf("%s: %s", d.State, d.Message)
		}
		return nil
	})
	took := time.Since(start)
	if d.State != api.DrainSucceeded || d.Moved != len(moving) || d.Failed != 0 {
		t.Fatalf("drain: %s, %s; want succeeded with %d moved", d.State, d.Message, len(moving))
	}
	after := c.waitReady("web", replicas, 30*time.Second)
	c.waitBackendsUp("lb", after, 30*time.Second)
	time.Sleep(time.Second) // load after, to compare with
	samples := sampler.halt()
	res := load.halt()

	for _, r := range after {
		if r.Node == drained || slices.Contains(moving, r.ID) {
			t.Errorf("after the drain: replica %s on %s", r.ID, r.Node)
		}
	}
	// Each move waited for its replacement: created, then ready (delay
	// seconds after its start at the earliest), then the old one went.
	created := map[string]time.Time{}
	var waits []time.Duration
	for _, s := range d.Steps {
		switch s.State {
		case "moving":
			created[s.Replica] = s.At
		case "moved":
			w := s.At.Sub(created[s.Replica])
			waits = append(waits, w.Round(time.Millisecond))
			if created[s.Replica].IsZero() || w < delay*time.Second {
				t.Errorf("replica %s moved %s after its replacement was created; want at least the %ds its readiness takes", s.Replica, w, delay)
			}
		}
	}
	n, failed, firstErr := lbSummarize(res, time.Time{}, time.Now())
	low, lowUp, nSamples := lowest(samples)
	t.Logf("drain of %s (%d replicas of %v): %s in %s; moves waited %v for their replacements",
		drained, len(moving), count, d.Message, took.Round(time.Millisecond), waits)
	t.Logf("load balancer: %d requests, %d failed (first: %v); %d samples: lowest ready %d, fewest backends up %d",
		n, failed, firstErr, nSamples, low, lowUp)
	if low < minHealthy {
		t.Errorf("ready replicas during the drain: lowest %d; want never below minHealthy %d", low, minHealthy)
	}
	if lowUp < minHealthy {
		t.Errorf("backends up during the drain: fewest %d; want never below minHealthy %d", lowUp, minHealthy)
	}
	if failed > 0 {
		t.Errorf("%d of %d requests through the load balancer failed; first: %v", failed, n, firstErr)
	}
	if n < 100 {
		t.Errorf("only %d requests were sent", n)
	}
}
