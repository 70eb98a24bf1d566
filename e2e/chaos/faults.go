package chaos

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stratahq/strata/e2e/framework"
	"github.com/stratahq/strata/internal/api"
)

// The scenarios of this file are faults of one process at a time that
// a pause or an outage of its dependencies reaches: a region leader
// paused (its caches behind when it wakes), a region's etcd down (its
// election after it), an agent paused while its beats are lost, and a
// resource as large as a region takes.

// regionPauses is how many times region-leader-pause pauses a leader:
// the second is the leader the first pause made.
const regionPauses = 2

func regionLeaderPause(t *testing.T, r *Run) {
	tier := r.Top.Regions[r.Rng.IntN(len(r.Top.Regions))]
	r.fault()
	for round := range regionPauses {
		pauseRegionLeader(t, r, tier, round)
	}
	r.heal()
}

// pauseRegionLeader pauses tier's leader past its lease while a probe
// resource is deleted and another created; once the other replica lists
// that, it wakes the paused one with list requests already on their way
// to it: none may answer older than what the other replica answered
// before (reads must not go back in time, docs/architecture.md "Caches
// and watches").
func pauseRegionLeader(t *testing.T, r *Run, tier *Tier, round int) {
	var l *Replica
	framework.Eventually(t, 20*time.Second, "region leader", func() (err error) { l, err = regionLeader(r.Top, tier); return err })
	other := tier.Replicas[0]
	if other == l {
		other = tier.Replicas[1]
	}
	oldProbe, newProbe := fmt.Sprintf("pause-%d-old", round), fmt.Sprintf("pause-%d-new", round)
	rest := r.Top.REST(10 * time.Second)
	createProbe(t, rest, oldProbe, tier.Name)
	for _, x := range tier.Replicas {
		waitListed(t, r.Top, x, oldProbe, true)
	}

	l.Proc.Signal(syscall.SIGSTOP)
	paused := time.Now()
	rest.Must(t, http.MethodDelete, "/v1/resources/"+oldProbe, nil, http.StatusAccepted, nil)
	createProbe(t, rest, newProbe, tier.Name)
	framework.Eventually(t, 30*time.Second, "a new leader of "+tier.Name, func() error {
		n, err := regionLeader(r.Top, tier)
		if err == nil && n == l {
			err = fmt.Errorf("%s still leads", l.ID)
		}
		return err
	})
	if round == 0 {
		r.recovered()
	}
	waitListed(t, r.Top, other, newProbe, true)
	waitListed(t, r.Top, other, oldProbe, false)
	// Past the lease, so that the paused leader's election key is gone
	// when it wakes (as global-master-pause).
	time.Sleep(max(0, 6*time.Second-time.Since(paused)))

	// The lists are sent before the wake: they wait in the paused
	// process's accept queue, and are answered as it resumes, when its
	// watch has the whole pause to catch up with.
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		stale []string
		n     int
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for range 4 {
		wg.Go(func() {
			c := r.Top.ReplicaREST(l, regionHTTP, framework.RegionToken)
			c.HTTP.Timeout = 15 * time.Second
			for ctx.Err() == nil {
				names, err := listedPlacements(c)
				if err != nil {
					continue // the replica refusing: not a stale answer
				}
				mu.Lock()
				n++
				if !names[newProbe] || names[oldProbe] {
					stale = append(stale, fmt.Sprintf("%s listed %s=%t %s=%t", time.Now().Format(time.StampMilli), newProbe, names[newProbe], oldProbe, names[oldProbe]))
				}
				mu.Unlock()
			}
		})
	}
	time.Sleep(200 * time.Millisecond) // the requests reach the accept queue
	l.Proc.Signal(syscall.SIGCONT)
	wg.Wait()
	r.note("paused %s (leader of %s) for %.1fs; %d lists from it right after it woke", l.ID, tier.Name, time.Since(paused).Seconds(), n)
	if n == 0 {
		t.Errorf("%s answered no list within 2s of waking", l.ID)
	}
	for _, s := range stale {
		t.Errorf("%s, after %s had listed %s and not %s: a list went back in time", s, other.ID, newProbe, oldProbe)
	}
}

// createProbe creates a resource of no replicas placed in region.
func createProbe(t *testing.T, rest *framework.Client, name, region string) {
	t.Helper()
	rest.Must(t, http.MethodPost, "/v1/resources", map[string]any{
		"name": name, "kind": "Compute", "replicas": 0,
		"spec":     map[string]any{"flavor": flavorName, "compute": map[string]any{"image": "busybox"}},
		"schedule": map[string]any{"regions": []map[string]any{{"name": region}}},
	}, http.StatusCreated, nil)
}

// listedPlacements are the names of the resources a region replica lists.
func listedPlacements(c *framework.Client) (map[string]bool, error) {
	var list struct{ Items []api.Placement }
	code, err := c.Get("/v1/resources?limit=1000", &list)
	if err != nil || code != http.StatusOK {
		return nil, fmt.Errorf("list: %d %v", code, err)
	}
	out := map[string]bool{}
	for _, p := range list.Items {
		out[p.Resource.Name] = true
	}
	return out, nil
}

// waitListed waits until replica x lists name (in) or no longer does.
func waitListed(t *testing.T, top *Topology, x *Replica, name string, in bool) {
	t.Helper()
	c := top.ReplicaREST(x, regionHTTP, framework.RegionToken)
	framework.Eventually(t, 30*time.Second, fmt.Sprintf("%s lists %s: %t", x.ID, name, in), func() error {
		names, err := listedPlacements(c)
		if err != nil {
			return err
		}
		if names[name] != in {
			return fmt.Errorf("%s listed: %t", name, names[name])
		}
		return nil
	})
}

// Timings of region-etcd-outage. The outage is longer than the etcd
// client's reconnection backoff would grow to with gRPC's defaults; the
// region must then lead again within its lease TTL (config default, 3 s)
// of etcd answering, plus a second for the machine's load and this
// test's polling.
const (
	etcdOutage      = 30 * time.Second
	regionLeaseTTL  = 3 * time.Second
	leaderBackSlack = time.Second
)

func regionEtcdOutage(t *testing.T, r *Run) {
	tier := r.Top.Regions[r.Rng.IntN(len(r.Top.Regions))]
	e := tier.Etcd
	r.note("stopped every member of %s's etcd for %s", tier.Name, etcdOutage)
	// By design its agents keep running what they ran while the region
	// can change nothing: a delete or a scale-down acknowledged just
	// before the outage takes effect only after it, past the
	// over-count's window.
	for _, a := range r.Top.Agents {
		if a.Region == tier.Name {
			r.isolated = append(r.isolated, a.Name)
		}
	}
	r.fault()
	for _, m := range e.members {
		m.proc.Kill()
	}
	time.Sleep(etcdOutage)
	for _, m := range e.members {
		m.proc.Restart()
	}
	r.restartAt = time.Now()
	// Answering: a linearizable read from a new client (no backoff of
	// its own) succeeds. Polled with short timeouts, so that answering
	// is known to within a few hundred milliseconds.
	deadline := time.Now().Add(60 * time.Second)
	for !answers(e) {
		if time.Now().After(deadline) {
			t.Fatalf("%s etcd does not answer 60s after its members restarted", tier.Name)
		}
		time.Sleep(20 * time.Millisecond)
	}
	answering := time.Now()
	var leader string
	var at time.Time
	framework.Eventually(t, 30*time.Second, "a region leader elected after etcd answered", func() error {
		for _, x := range tier.Replicas {
			for _, l := range logLines(x.Proc, "became leader") {
				if l.Time.After(r.faultAt) && (at.IsZero() || l.Time.Before(at)) {
					leader, at = x.ID, l.Time
				}
			}
		}
		if at.IsZero() {
			return fmt.Errorf("no replica of %s became leader since etcd stopped", tier.Name)
		}
		return nil
	})
	r.failoverAt = at
	took := at.Sub(answering)
	// Negative when a replica led before the test's read succeeded.
	r.note("%s led %.1fs after %s's etcd was seen answering again", leader, took.Seconds(), tier.Name)
	if took > regionLeaseTTL+leaderBackSlack {
		t.Errorf("%s led %.1fs after %s's etcd answered again; want within the %s lease TTL (+%s)", leader, took.Seconds(), tier.Name, regionLeaseTTL, leaderBackSlack)
	}
	r.heal()
}

// answers reports whether the cluster answers a linearizable read
// within 300 ms, on a client of its own.
func answers(e *etcdCluster) bool {
	cli, err := e.dial(300 * time.Millisecond)
	if err != nil {
		return false
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = cli.Get(ctx, "chaos-probe")
	return err == nil
}

// Timings of agent-pause-redis-flush: the agent sleeps for less than
// downAfter (4 s) less a probe (1 s), so that it must not be judged
// Down, and its region's Redis loses every beat meanwhile.
const (
	agentPause = 2500 * time.Millisecond
	flushAfter = 300 * time.Millisecond
)

func agentPauseRedisFlush(t *testing.T, r *Run) {
	a := r.Top.Agents[r.Rng.IntN(len(r.Top.Agents))]
	tier := r.Top.tier(a.Region)
	rc := tier.RegionRedis.Client(t)
	r.note("paused %s for %s; flushed %s's Redis %s into the pause", a.Name, agentPause, a.Region, flushAfter)
	r.fault()
	a.Proc.Signal(syscall.SIGSTOP)
	time.Sleep(flushAfter)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	err := rc.FlushAll(ctx).Err()
	cancel()
	if err != nil {
		a.Proc.Signal(syscall.SIGCONT)
		t.Fatalf("flush %s's Redis: %v", a.Region, err)
	}
	time.Sleep(agentPause - flushAfter)
	a.Proc.Signal(syscall.SIGCONT)
	r.heal()
	time.Sleep(quietPast)
	noneDown(t, tier, r.faultAt)
}

// bigReplicas is the size of big-resource's resource, half the API's
// limit; it runs on a flavor small enough for the fake nodes to hold,
// and the regions' node blocks are /20 (4,094 addresses a node; the
// default /24 holds 254).
const bigReplicas = 5000

func bigResource(t *testing.T, r *Run) {
	rest := r.Top.REST(30 * time.Second)
	rest.Must(t, http.MethodPost, "/v1/flavors", map[string]any{
		"name": "tiny", "kind": "container", "spec": map[string]any{"vcpus": 0.01, "memoryMiB": 16},
	}, http.StatusCreated, nil)
	r.fault()
	rest.Must(t, http.MethodPost, "/v1/resources", map[string]any{
		"name": "big", "kind": "Compute", "replicas": bigReplicas,
		"spec":     map[string]any{"flavor": "tiny", "compute": map[string]any{"image": "busybox"}},
		"schedule": map[string]any{"nodeSelector": map[string]string{"runtime": "fake"}},
	}, http.StatusCreated, nil)
	var ready int
	framework.Eventually(t, 3*time.Minute, fmt.Sprintf("big ready with %d replicas", bigReplicas), func() error {
		var res struct {
			Status *struct {
				Ready int `json:"ready"`
			} `json:"status"`
		}
		if code, err := rest.Get("/v1/resources/big", &res); err != nil || code != http.StatusOK {
			return fmt.Errorf("get big: %d %v", code, err)
		}
		if res.Status != nil {
			ready = res.Status.Ready
		}
		if ready != bigReplicas {
			return fmt.Errorf("%d of %d ready", ready, bigReplicas)
		}
		return nil
	})
	r.recovered()
	r.note("big: %d replicas ready %.1fs after the create", bigReplicas, time.Since(r.faultAt).Seconds())
	// The providers run each replica once.
	framework.Eventually(t, 30*time.Second, "the providers run big's replicas", func() error {
		smpl := newSampler(t, r.Top).take(context.Background())
		n := smpl.count()["big"]
		if n != bigReplicas {
			return fmt.Errorf("the providers run %d replicas of big; want %d", n, bigReplicas)
		}
		return nil
	})
	r.heal()
}
