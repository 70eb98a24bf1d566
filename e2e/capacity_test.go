package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/e2e/framework"
	"github.com/stratahq/strata/global/alerts"
	"github.com/stratahq/strata/internal/api"
)

// regionHeadroom is region's headroom for flavor, as GET /v1/regions
// shows it.
func regionHeadroom(g *framework.Client, region, flavor string) (int, error) {
	var r api.Region
	if _, err := g.Get("/v1/regions/"+region, &r); err != nil {
		return 0, err
	}
	if r.Status == nil {
		return 0, fmt.Errorf("%s: no status", region)
	}
	for _, h := range r.Status.Headroom {
		if h.Flavor == flavor {
			return h.Replicas, nil
		}
	}
	return 0, fmt.Errorf("%s: no headroom for %s in %+v", region, flavor, r.Status.Headroom)
}

// TestPlacementFitsHeadroom: on real processes (a global tier, two
// regions of two agents each, 4 CPUs a node), a flavor of 2 CPUs fits 4
// replicas a region. With dev-1 half full, 6 replicas weighted 1:1 go
// 2 to dev-1 and 4 to dev-2, and the status says why; the resource's
// reserve N+1 does not hold (dev-2's 4 would find no room in dev-1), and
// an alert rule on ReserveShort fires once at a real receiver. Scaled
// to 2, the split is the weights' again, the reserve holds and the
// alert resolves.
func TestPlacementFitsHeadroom(t *testing.T) {
	c := startCluster(t, clusterOpts{
		globals: 1, regions: []string{"dev-1", "dev-2"}, agentsPerRegion: 2,
		globalYAML: "alerts: {receiverNetworks: [127.0.0.0/8]}\n", // the receiver listens on loopback
	})
	g := c.global(0)
	g.Must(t, http.MethodPost, "/v1/flavors", map[string]any{
		"name": "big", "kind": "container", "spec": map[string]any{"vcpus": 2, "memoryMiB": 128},
	}, http.StatusCreated, nil)
	hook := &hookReceiver{}
	srv := httptest.NewServer(hook)
	t.Cleanup(srv.Close)
	g.Must(t, http.MethodPost, "/v1/alertrules", map[string]any{
		"name": "reserve", "reasons": []string{"ReserveShort"}, "groupWait": "0s",
		"receiver": map[string]any{"type": "webhook", "url": srv.URL + "/hook", "secret": e2eReceiverSecret},
	}, http.StatusCreated, nil)
	waitHeadroom := func(region string, want int) {
		t.Helper()
		framework.Eventually(t, 30*time.Second, fmt.Sprintf("%s has room for %d big", region, want), func() error {
			n, err := regionHeadroom(g, region, "big")
			if err == nil && n != want {
				err = fmt.Errorf("room for %d", n)
			}
			return err
		})
	}
	waitHeadroom("dev-1", 4)
	waitHeadroom("dev-2", 4)
	bigSpec := map[string]any{"flavor": "big", "compute": map[string]any{"image": "busybox"}}
	g.Must(t, http.MethodPost, "/v1/resources", compute("filler", 2, []map[string]any{{"name": "dev-1"}}, map[string]any{"spec": bigSpec}),
		http.StatusCreated, nil)
	waitShares(t, g, "filler", map[string]int{"dev-1": 2}, 60*time.Second)
	waitHeadroom("dev-1", 2)

	g.Must(t, http.MethodPost, "/v1/resources", compute("web", 6, nil, map[string]any{
		"spec":     bigSpec,
		"schedule": map[string]any{"regions": []map[string]any{{"name": "dev-1", "weight": 1}, {"name": "dev-2", "weight": 1}}, "reserve": "N+1"},
	}), http.StatusCreated, nil)
	waitShares(t, g, "web", map[string]int{"dev-1": 2, "dev-2": 4}, 60*time.Second)
	framework.Eventually(t, 30*time.Second, "the status says why, and that the reserve is short", func() error {
		r, err := resourceStatus(g, "web")
		if err != nil {
			return err
		}
		st := r.Status
		if want := "dev-1 has room for 2 of its 3; went to dev-2 +1"; st.Split != want {
			return fmt.Errorf("split note %q; want %q", st.Split, want)
		}
		want := &api.ReserveStatus{Holds: false, Lost: []string{"dev-2"}, Need: 4, Free: 0,
			Message: "losing dev-2 (4 replicas): room for 0 elsewhere (dev-1 0), 4 short"}
		if !reflect.DeepEqual(st.Reserve, want) {
			return fmt.Errorf("reserve %+v; want %+v", st.Reserve, want)
		}
		return nil
	})
	framework.Eventually(t, 60*time.Second, "one ReserveShort notification", func() error {
		if n, bad := hook.count(alerts.StatusFiring); n != 1 || bad != 0 {
			return fmt.Errorf("%d firing notifications, %d refused posts; want 1 and 0", n, bad)
		}
		return nil
	})
	hook.mu.Lock()
	fired := hook.taken[0]
	hook.mu.Unlock()
	if len(fired.Alerts) != 1 || fired.Alerts[0].Name != "ReserveShort" || !strings.HasSuffix(fired.Alerts[0].Object, "/web") ||
		!strings.Contains(fired.Alerts[0].Message, "does not hold: losing dev-2 (4 replicas)") {
		t.Fatalf("firing notification %+v; want ReserveShort of web, losing dev-2", fired)
	}

	g.Must(t, http.MethodPost, "/v1/resources/web/scale", map[string]any{"replicas": 2}, http.StatusOK, nil)
	waitShares(t, g, "web", map[string]int{"dev-1": 1, "dev-2": 1}, 60*time.Second)
	framework.Eventually(t, 30*time.Second, "the weights' split, and the reserve holds", func() error {
		r, err := resourceStatus(g, "web")
		if err != nil {
			return err
		}
		if r.Status.Split != "" || r.Status.Reserve == nil || !r.Status.Reserve.Holds {
			return fmt.Errorf("split note %q, reserve %+v; want none and a reserve that holds", r.Status.Split, r.Status.Reserve)
		}
		return nil
	})
	framework.Eventually(t, 60*time.Second, "the alert resolves", func() error {
		if n, bad := hook.count(alerts.StatusResolved); n != 1 || bad != 0 {
			return fmt.Errorf("%d resolved notifications, %d refused posts; want 1 and 0", n, bad)
		}
		return nil
	})
}

// TestPlanLoseRegionMatchesFailover: on real processes (a global tier,
// three regions of two agents each, 4 CPUs a node), a plan for losing
// dev-1 says, replica for replica, what the failover then does: web's 3
// replicas in dev-1 go 1 to dev-2 (which has room for 1 more besides its
// own 3) and 2 to dev-3. stratactl prints the same plan, and the plan
// changes nothing.
func TestPlanLoseRegionMatchesFailover(t *testing.T) {
	c := startCluster(t, clusterOpts{
		globals: 1, regions: []string{"dev-1", "dev-2", "dev-3"}, agentsPerRegion: 2,
		globalYAML: "regions: {heartbeatInterval: 500ms, suspectAfter: 2s, downAfter: 4s, probeTimeout: 1s}\n",
	})
	g := c.global(0)
	g.Must(t, http.MethodPost, "/v1/flavors", map[string]any{
		"name": "big", "kind": "container", "spec": map[string]any{"vcpus": 2, "memoryMiB": 128},
	}, http.StatusCreated, nil)
	g.Must(t, http.MethodPost, "/v1/resources", compute("web", 6, nil, map[string]any{
		"spec":     map[string]any{"flavor": "big", "compute": map[string]any{"image": "busybox"}},
		"schedule": map[string]any{"regions": []map[string]any{{"name": "dev-1", "weight": 1}, {"name": "dev-2", "weight": 1}}},
		"failover": map[string]any{"enabled": true, "after": "2s", "toRegions": []string{"dev-2", "dev-3"}},
	}), http.StatusCreated, nil)
	waitShares(t, g, "web", map[string]int{"dev-1": 3, "dev-2": 3}, 60*time.Second)
	for region, want := range map[string]int{"dev-2": 1, "dev-3": 4} {
		framework.Eventually(t, 30*time.Second, fmt.Sprintf("%s has room for %d big", region, want), func() error {
			n, err := regionHeadroom(g, region, "big")
			if err == nil && n != want {
				err = fmt.Errorf("room for %d", n)
			}
			return err
		})
	}

	var plan api.Plan
	g.Must(t, http.MethodPost, "/v1/plan", map[string]any{"loseRegions": []string{"dev-1"}}, http.StatusOK, &plan)
	want := api.ResourcePlan{Tenant: "default", Name: "web", Kind: api.KindCompute,
		Before: map[string]int{"dev-1": 3, "dev-2": 3}, After: map[string]int{"dev-2": 4, "dev-3": 2},
		Moves: []api.ReplicaMove{{From: "dev-1", To: "dev-2", Replicas: 1}, {From: "dev-1", To: "dev-3", Replicas: 2}},
		Split: "standing in for dev-1: dev-2 has room for 1 of its 2; went to dev-3 +1"}
	if len(plan.Resources) != 1 || !reflect.DeepEqual(plan.Resources[0], want) || plan.Moved != 3 || plan.Unfit != 0 {
		t.Fatalf("plan %+v; want %+v, 3 moved", plan, want)
	}
	ctl := exec.Command(framework.Bin(t, "stratactl"), "plan", "--lose-region", "dev-1")
	ctl.Env = append(os.Environ(), "STRATA_URL=http://"+c.globalHTTP[0], "STRATA_TOKEN="+c.token)
	out, err := ctl.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "dev-1→dev-2 1, dev-1→dev-3 2") ||
		!strings.Contains(string(out), "3 replicas would move, 0 would find no room, 0 changes blocked. Nothing was changed.") {
		t.Fatalf("stratactl plan: %v\n%s", err, out)
	}
	waitShares(t, g, "web", map[string]int{"dev-1": 3, "dev-2": 3}, time.Second) // nothing moved

	t.Log("killing region dev-1 and its agents")
	c.killRegion("dev-1")
	waitShares(t, g, "web", plan.Resources[0].After, 60*time.Second)
}
