package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratahq/strata/e2e/framework"
	"github.com/stratahq/strata/internal/api"
)

// TestRolloutProgressDeadlineReverts: a revision whose replicas run but
// never become ready (the fake provider's STRATA_FAKE_FAIL=unready, as a
// failing readiness probe) halts at maxUnavailable — the old replicas
// keep serving, never fewer ready than asked — fails at its
// progressDeadlineSeconds, and autoRevert reverts it.
func TestRolloutProgressDeadlineReverts(t *testing.T) {
	c := startCluster(t, clusterOpts{globals: 1, regions: []string{"dev-1"}, agentsPerRegion: 2})
	g := c.global(0)
	createFlavor(t, g)
	regions := []map[string]any{{"name": "dev-1", "weight": 1}}
	web := compute("web", 2, regions, map[string]any{"rollout": map[string]any{"autoRevert": true, "maxSurge": 1, "progressDeadlineSeconds": 5}})
	g.Must(t, http.MethodPost, "/v1/resources", web, http.StatusCreated, nil)
	waitShares(t, g, "web", map[string]int{"dev-1": 2}, 60*time.Second)

	// Watch the rollout: the ready count, and why it failed.
	var (
		mu      sync.Mutex
		low     = 2
		failure string
	)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			r, err := resourceStatus(g, "web")
			if err != nil {
				continue
			}
			mu.Lock()
			if sh, ok := r.Status.Regions["dev-1"]; ok && sh.Ready < low {
				low = sh.Ready
			}
			if ro := r.Status.Rollout; ro != nil && ro.State == api.RolloutFailed {
				failure = ro.Message
			}
			mu.Unlock()
		}
	}()
	start := time.Now()
	web["spec"].(map[string]any)["compute"].(map[string]any)["env"] = map[string]string{"STRATA_FAKE_FAIL": "unready"}
	g.Must(t, http.MethodPut, "/v1/resources/web", web, http.StatusOK, nil)

	framework.Eventually(t, 90*time.Second, "auto-revert to a revision 3 with the spec of revision 1", func() error {
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
	if d := time.Since(start); d < 5*time.Second {
		t.Errorf("reverted %s after the update; want not before the progress deadline (5s)", d)
	}
	framework.Eventually(t, 60*time.Second, "ready again at revision 3", func() error {
		r, err := resourceStatus(g, "web")
		if err != nil {
			return err
		}
		if r.Status.Phase != api.PhaseReady || r.Status.Revision != 3 || r.Status.Ready != 2 {
			return fmt.Errorf("phase %s (%s) revision %d ready %d", r.Status.Phase, r.Status.Reason, r.Status.Revision, r.Status.Ready)
		}
		return nil
	})
	close(stop)
	<-done
	mu.Lock()
	defer mu.Unlock()
	if low < 2 {
		t.Errorf("ready replicas during the rollout: got a low of %d; want never below 2 (the unready ones replace nothing)", low)
	}
	if failure != "" && !strings.Contains(failure, "progress deadline") {
		t.Errorf("rollout failed with %q; want the progress deadline named", failure)
	}
	var reps struct{ Items []api.Replica }
	g.Must(t, http.MethodGet, "/v1/resources/web/replicas", nil, http.StatusOK, &reps)
	for _, r := range reps.Items {
		if r.Desired == api.DesiredRunning && r.Spec.Compute != nil && r.Spec.Compute.Env["STRATA_FAKE_FAIL"] != "" {
			t.Errorf("replica %s still runs the unready revision", r.ID)
		}
	}
}
