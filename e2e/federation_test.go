package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/e2e/framework"
	"github.com/stratahq/strata/internal/api"
)

func createFlavor(t *testing.T, g *framework.Client) {
	t.Helper()
	g.Must(t, http.MethodPost, "/v1/flavors", map[string]any{
		"name": "small", "kind": "container", "spec": map[string]any{"vcpus": 0.25, "memoryMiB": 128},
	}, http.StatusCreated, nil)
}

func compute(name string, replicas int, regions []map[string]any, extra map[string]any) map[string]any {
	r := map[string]any{
		"name": name, "kind": "Compute", "replicas": replicas,
		"spec":     map[string]any{"flavor": "small", "compute": map[string]any{"image": "busybox"}},
		"schedule": map[string]any{"regions": regions},
	}
	for k, v := range extra {
		r[k] = v
	}
	return r
}

// waitShares waits until the resource is ready with exactly these ready
// replicas per region (and no other region holding any).
func waitShares(t *testing.T, g *framework.Client, name string, want map[string]int, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	framework.Eventually(t, timeout, fmt.Sprintf("%s ready as %v", name, want), func() error {
		r, err := resourceStatus(g, name)
		if err != nil {
			return err
		}
		got := map[string]int{}
		for region, sh := range r.Status.Regions {
			if strings.HasPrefix(sh.Reason, "region unreachable") {
				continue // shown, not counted
			}
			if sh.Replicas > 0 || sh.Ready > 0 {
				got[region] = sh.Ready
			}
		}
		if r.Status.Phase != api.PhaseReady || fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("phase %s (%s), ready per region %v", r.Status.Phase, r.Status.Reason, got)
		}
		return nil
	})
	return time.Since(start)
}

// TestMasterFailover: two global replicas share one etcd; SIGKILL the
// master and the other takes over within 5 s, a resource created right
// after the kill converges, and no region applies a placement twice.
func TestMasterFailover(t *testing.T) {
	c := startCluster(t, clusterOpts{globals: 2, regions: []string{"dev-1", "dev-2"}, agentsPerRegion: 2})
	g0 := c.global(0)
	createFlavor(t, g0)
	g0.Must(t, http.MethodPost, "/v1/resources", compute("web", 3,
		[]map[string]any{{"name": "dev-1", "weight": 2}, {"name": "dev-2", "weight": 1}}, nil), http.StatusCreated, nil)
	waitShares(t, g0, "web", map[string]int{"dev-1": 2, "dev-2": 1}, 60*time.Second)

	var master int
	framework.Eventually(t, 10*time.Second, "a master", func() (err error) {
		master, err = c.leader()
		return err
	})
	other := 1 - master
	t.Logf("master is g%d; killing it", master+1)
	c.globals[master].Kill()
	killed := time.Now()

	g := c.global(other)
	framework.Eventually(t, 10*time.Second, "create through the surviving replica", func() error {
		resp, err := g.Do(ctxT(t), http.MethodPost, "/v1/resources", compute("api", 2, []map[string]any{{"name": "dev-1"}}, nil))
		if err != nil {
			return err
		}
		if resp.Status != http.StatusCreated {
			return fmt.Errorf("status %d: %s", resp.Status, resp.Body)
		}
		return nil
	})
	framework.Eventually(t, 10*time.Second, "the other replica is master", func() error {
		m, err := c.leader()
		if err != nil {
			return err
		}
		if m != other {
			return fmt.Errorf("master is still g%d", m+1)
		}
		return nil
	})
	took := time.Since(killed)
	t.Logf("failover: g%d master %s after the kill", other+1, took.Round(10*time.Millisecond))
	if took > 5*time.Second {
		t.Errorf("failover took %s; want ≤ 5s", took)
	}
	waitShares(t, g, "api", map[string]int{"dev-1": 2}, 60*time.Second)
	waitShares(t, g, "web", map[string]int{"dev-1": 2, "dev-2": 1}, 30*time.Second)

	// Every placement was applied once: web in both regions, api in
	// dev-1; the new master's resend changed nothing.
	want := map[string]float64{"dev-1": 2, "dev-2": 1}
	for name, n := range want {
		got := metric(t, c.regions[name].http, `strata_region_placements_applied_total{tier="region"}`)
		if got != n {
			t.Errorf("region %s applied placements: got %v; want %v (none applied twice)", name, got, n)
		}
	}
}

// TestRegionFailover: a region dies; resources with a failover policy
// move to the other region; when it returns, its stale copies go (or,
// with failBack, the replicas come home) and nothing is duplicated.
func TestRegionFailover(t *testing.T) {
	c := startCluster(t, clusterOpts{
		globals: 1, regions: []string{"dev-1", "dev-2"}, agentsPerRegion: 2,
		globalYAML: "regions: {heartbeatInterval: 500ms, suspectAfter: 2s, downAfter: 4s, probeTimeout: 1s}\n",
	})
	g := c.global(0)
	createFlavor(t, g)
	both := []map[string]any{{"name": "dev-1", "weight": 1}, {"name": "dev-2", "weight": 1}}
	g.Must(t, http.MethodPost, "/v1/resources", compute("stay", 4, both,
		map[string]any{"failover": map[string]any{"enabled": true, "after": "2s"}}), http.StatusCreated, nil)
	g.Must(t, http.MethodPost, "/v1/resources", compute("home", 4, both,
		map[string]any{"failover": map[string]any{"enabled": true, "after": "2s", "failBack": true}}), http.StatusCreated, nil)
	g.Must(t, http.MethodPost, "/v1/resources", compute("pinned", 2, both, nil), http.StatusCreated, nil)
	for _, name := range []string{"stay", "home"} {
		waitShares(t, g, name, map[string]int{"dev-1": 2, "dev-2": 2}, 60*time.Second)
	}

	t.Log("killing region dev-2 and its agents")
	c.killRegion("dev-2")
	took := waitShares(t, g, "stay", map[string]int{"dev-1": 4}, 2*time.Second+15*time.Second+4*time.Second)
	t.Logf("failover: 4 replicas ready in dev-1 %s after the region died (after 2s, downAfter 4s)", took.Round(100*time.Millisecond))
	waitShares(t, g, "home", map[string]int{"dev-1": 4}, 10*time.Second)

	t.Log("bringing dev-2 back")
	c.startRegion("dev-2")
	// stay: dev-2's stale copies are removed, dev-1 keeps all 4.
	waitShares(t, g, "stay", map[string]int{"dev-1": 4}, 60*time.Second)
	framework.Eventually(t, 60*time.Second, "dev-2 holds nothing of stay", func() error {
		var reps struct{ Items []api.Replica }
		if _, err := c.region("dev-2").Get("/v1/resources/default/stay/replicas", &reps); err != nil {
			return err
		}
		if len(reps.Items) != 0 {
			return fmt.Errorf("dev-2 still has %d replicas of stay", len(reps.Items))
		}
		return nil
	})
	// home: the replicas go back to dev-2 and dev-1 returns to its share.
	waitShares(t, g, "home", map[string]int{"dev-1": 2, "dev-2": 2}, 60*time.Second)
	for _, name := range []string{"stay", "home"} {
		// Both regions must answer (a region just back may not yet), and
		// the resource must have exactly its 4 replicas running.
		framework.Eventually(t, 30*time.Second, name+": 4 running replicas, no duplicates", func() error {
			var reps struct {
				Items       []api.Replica
				Unreachable []string
			}
			if _, err := g.Get("/v1/resources/"+name+"/replicas", &reps); err != nil {
				return err
			}
			if len(reps.Unreachable) > 0 {
				return fmt.Errorf("regions %v did not answer", reps.Unreachable)
			}
			running := 0
			for _, r := range reps.Items {
				if r.Desired == api.DesiredRunning {
					running++
				}
			}
			if running != 4 {
				return fmt.Errorf("%d running replicas", running)
			}
			return nil
		})
	}
}

// TestRegionIndependence: with the global tier gone, a region keeps its
// replicas and replaces one lost with its node by itself; when the global
// tier returns, it sees the region's truth without anything restarting.
func TestRegionIndependence(t *testing.T) {
	c := startCluster(t, clusterOpts{
		globals: 1, regions: []string{"dev-1"}, agentsPerRegion: 2,
		regionYAML: "nodes: {heartbeatInterval: 500ms, suspectAfter: 2s, downAfter: 4s, probeTimeout: 1s}\n",
	})
	g := c.global(0)
	createFlavor(t, g)
	g.Must(t, http.MethodPost, "/v1/resources", compute("web", 2, []map[string]any{{"name": "dev-1"}},
		map[string]any{"schedule": map[string]any{"regions": []map[string]any{{"name": "dev-1"}}, "antiAffinity": "hard"}}), http.StatusCreated, nil)
	waitShares(t, g, "web", map[string]int{"dev-1": 2}, 60*time.Second)

	t.Log("stopping the global tier")
	c.globals[0].Kill()
	r := c.region("dev-1")
	t.Log("killing agent dev-1-a")
	c.regions["dev-1"].agents["dev-1-a"].Kill()
	// Hard anti-affinity cannot be kept on one node: the replacement of
	// the replica lost with dev-1-a waits unplaced, which proves the
	// region acted on its own.
	framework.Eventually(t, 30*time.Second, "the region replaced the lost replica by itself", func() error {
		var reps struct{ Items []api.Replica }
		if _, err := r.Get("/v1/resources/default/web/replicas", &reps); err != nil {
			return err
		}
		onA, replacements := 0, 0
		for _, rep := range reps.Items {
			if rep.Desired != api.DesiredRunning {
				continue
			}
			if rep.Node == "dev-1-a" {
				onA++
			}
			if rep.Node == "" {
				replacements++
			}
		}
		if onA != 0 || replacements != 1 {
			return fmt.Errorf("%d running replicas still on dev-1-a, %d replacements waiting", onA, replacements)
		}
		return nil
	})
	t.Log("bringing dev-1-a back: the replacement lands there")
	c.regions["dev-1"].agents["dev-1-a"].Restart()
	framework.Eventually(t, 30*time.Second, "2 ready in the region", func() error {
		var res struct{ Items []api.Placement }
		if _, err := r.Get("/v1/resources", &res); err != nil {
			return err
		}
		for _, x := range res.Items {
			if x.Resource.Name == "web" && x.Resource.Status != nil && x.Resource.Status.Ready == 2 {
				return nil
			}
		}
		return fmt.Errorf("web not 2/2 ready in the region yet")
	})
	t.Log("starting the global tier again")
	c.globals[0].Restart()
	framework.WaitHTTP(t, "http://"+c.globalHTTP[0]+"/readyz", 60*time.Second)
	waitShares(t, g, "web", map[string]int{"dev-1": 2}, 60*time.Second)
}

// TestRolloutAutoRevert: a new revision goes region by region; when its
// replicas fail in the first region, the rollout stops there (the second
// region never runs it) and, with autoRevert, a new revision with the old
// spec is rolled out. Then, on the same cluster, scaling reaches regions
// that a paused rollout holds back.
func TestRolloutAutoRevert(t *testing.T) {
	c := startCluster(t, clusterOpts{globals: 1, regions: []string{"dev-1", "dev-2"}, agentsPerRegion: 2})
	g := c.global(0)
	createFlavor(t, g)
	regions := []map[string]any{{"name": "dev-1", "weight": 1}, {"name": "dev-2", "weight": 1}}
	web := compute("web", 4, regions, map[string]any{"rollout": map[string]any{"autoRevert": true, "maxSurge": 1}})
	g.Must(t, http.MethodPost, "/v1/resources", web, http.StatusCreated, nil)
	waitShares(t, g, "web", map[string]int{"dev-1": 2, "dev-2": 2}, 60*time.Second)

	// Revision 2 fails on every replica (the fake provider fails on purpose).
	web["spec"].(map[string]any)["compute"].(map[string]any)["env"] = map[string]string{"STRATA_FAKE_FAIL": "apply"}
	g.Must(t, http.MethodPut, "/v1/resources/web", web, http.StatusOK, nil)

	framework.Eventually(t, 60*time.Second, "auto-revert to a revision 3 with the spec of revision 1", func() error {
		var revs struct{ Items []api.Revision }
		if _, err := g.Get("/v1/resources/web/revisions", &revs); err != nil {
			return err
		}
		for _, rv := range revs.Items {
			if rv.Number == 3 && strings.HasPrefix(rv.Cause, "auto-revert") && rv.Spec.Compute.Env == nil {
				return nil
			}
		}
		return fmt.Errorf("revisions: %+v", revs.Items)
	})
	framework.Eventually(t, 60*time.Second, "ready again at revision 3", func() error {
		r, err := resourceStatus(g, "web")
		if err != nil {
			return err
		}
		if r.Status.Phase != api.PhaseReady || r.Status.Revision != 3 || r.Status.Ready != 4 {
			return fmt.Errorf("phase %s (%s) revision %d ready %d", r.Status.Phase, r.Status.Reason, r.Status.Revision, r.Status.Ready)
		}
		return nil
	})
	// The failing revision never reached dev-2: its replicas kept running
	// (same ids, relabelled to revision 3 in place).
	var reps struct{ Items []api.Replica }
	g.Must(t, http.MethodGet, "/v1/resources/web/replicas", nil, http.StatusOK, &reps)
	for _, r := range reps.Items {
		if r.Region == "dev-2" && r.Desired == api.DesiredRunning && r.Spec.Compute != nil && r.Spec.Compute.Env["STRATA_FAKE_FAIL"] != "" {
			t.Errorf("replica %s in dev-2 runs the failing revision", r.ID)
		}
	}
	evs, err := g.Do(ctxT(t), http.MethodGet, "/v1/events?region=dev-2&limit=1000", nil)
	if err != nil {
		t.Fatal(err)
	}
	var list struct{ Items []api.Event }
	if err := evs.JSON(&list); err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.Reason == "ReplicaFailed" {
			t.Errorf("dev-2 saw a replica fail (%s): the failing revision reached it", e.Message)
		}
	}
	scaleDuringPausedRollout(t, g, regions)
}

// scaleDuringPausedRollout: a new revision paused before it reached any
// region holds every region at revision 1; scaling 4 → 2 still reaches
// both, at revision 1. Bug fixed: a held region got no placement, so the
// scale waited for a turn that a paused rollout never gives.
func scaleDuringPausedRollout(t *testing.T, g *framework.Client, regions []map[string]any) {
	t.Helper()
	svc := compute("svc", 4, regions, nil)
	g.Must(t, http.MethodPost, "/v1/resources", svc, http.StatusCreated, nil)
	waitShares(t, g, "svc", map[string]int{"dev-1": 2, "dev-2": 2}, 60*time.Second)
	svc["spec"].(map[string]any)["compute"].(map[string]any)["env"] = map[string]string{"V": "2"}
	svc["rollout"] = map[string]any{"paused": true}
	g.Must(t, http.MethodPut, "/v1/resources/svc", svc, http.StatusOK, nil)
	svc["replicas"] = 2
	g.Must(t, http.MethodPut, "/v1/resources/svc", svc, http.StatusOK, nil)
	framework.Eventually(t, 60*time.Second, "svc scaled to 1 per region at revision 1, rollout paused", func() error {
		var reps struct{ Items []api.Replica }
		if _, err := g.Get("/v1/resources/svc/replicas", &reps); err != nil {
			return err
		}
		running := map[string]int{}
		for _, r := range reps.Items {
			if r.Desired != api.DesiredRunning {
				continue
			}
			if r.Revision != 1 {
				return fmt.Errorf("replica %s in %s runs revision %d", r.ID, r.Region, r.Revision)
			}
			running[r.Region]++
		}
		if running["dev-1"] != 1 || running["dev-2"] != 1 || len(running) != 2 {
			return fmt.Errorf("running replicas per region %v", running)
		}
		return nil
	})
	r, err := resourceStatus(g, "svc")
	if err != nil {
		t.Fatal(err)
	}
	if ro := r.Status.Rollout; ro == nil || ro.State != api.RolloutPaused || r.Status.Phase == api.PhaseReady {
		t.Errorf("svc: phase %s, rollout %+v; want a paused rollout, not ready", r.Status.Phase, ro)
	}
}
