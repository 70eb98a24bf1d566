package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/events"
)

func (h *harness) setUnready(fn func(*api.Assignment) bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.unready = fn
}

// newImage makes a revision that runs another image: its replicas are
// new ones, not the old relabelled.
func newImage(p *api.Placement) { p.Resource.Spec.Compute.Image = "busybox:2" }

// status is a replica's stored status, nil without one.
func (h *harness) status(id string) *api.AssignmentStatus {
	it, ok := h.caches.Statuses.Get(id)
	if !ok {
		return nil
	}
	return it.Value
}

// A new replica replaces an old one only once it has been ready for
// minReadySeconds; until then the old one keeps running and the share
// is not ready.
func TestRolloutWaitsMinReadySeconds(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1", "a", api.HealthUp)
	h.place("web", 1, 1)
	h.eventually("1 ready", h.readyWith("web", 1))
	h.place("web", 1, 2, newImage, func(p *api.Placement) { p.Resource.Rollout.MinReadySeconds = 2 })
	var readyAt time.Time
	h.eventually("the new replica ready", func() error {
		run, _ := h.replicas("web")
		for _, a := range run {
			if st := h.status(a.ID); a.Revision == 2 && st != nil && st.Phase == api.PhaseReady {
				readyAt = st.Since
				return nil
			}
		}
		return fmt.Errorf("no ready replica of revision 2")
	})
	// Well within minReadySeconds: the old replica still runs.
	time.Sleep(500 * time.Millisecond)
	run, dying := h.replicas("web")
	old := 0
	for _, a := range run {
		if a.Revision == 1 {
			old++
		}
	}
	if old != 1 || len(dying) != 0 {
		t.Fatalf("%s after the new replica became ready: %d old running, %d destroying; want the old one kept until minReadySeconds (2s)", time.Since(readyAt), old, len(dying))
	}
	if s := h.share("web"); s.Phase == api.PhaseReady {
		t.Fatalf("share %s (%s) before minReadySeconds; want not ready", s.Phase, s.Reason)
	}
	h.eventually("rolled to revision 2", h.readyWith("web", 1))
	if run, _ := h.replicas("web"); run[0].Revision != 2 {
		t.Fatalf("replica at revision %d; want 2", run[0].Revision)
	}
	if d := time.Since(readyAt); d < 2*time.Second {
		t.Errorf("rolled out %s after the new replica was ready; want at least minReadySeconds (2s)", d)
	}
}

// A rollout whose new replicas run but never become ready fails at its
// progress deadline: the share says so in phase error (what the global
// rollout, and autoRevert, act on), and the old replica keeps serving.
func TestRolloutFailsAtProgressDeadline(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1", "a", api.HealthUp)
	h.place("web", 1, 1)
	h.eventually("1 ready", h.readyWith("web", 1))
	h.setUnready(func(a *api.Assignment) bool { return a.Revision == 2 })
	start := time.Now()
	h.place("web", 1, 2, newImage, func(p *api.Placement) { p.Resource.Rollout.ProgressDeadlineSeconds = 1 })
	h.eventually("progressing", func() error {
		if s := h.share("web"); s == nil || s.Revision != 2 || s.ProgressingSince.IsZero() {
			return fmt.Errorf("share %+v; want revision 2 progressing", s)
		}
		return nil
	})
	if s := h.share("web"); s.Phase == api.PhaseError {
		t.Fatalf("share in error at once (%s); want it only past the deadline", s.Reason)
	}
	h.eventually("the deadline fails the rollout", func() error {
		s := h.share("web")
		if s.Phase != api.PhaseError || !strings.Contains(s.Reason, "progress deadline") {
			return fmt.Errorf("share %s (%s); want error naming the progress deadline", s.Phase, s.Reason)
		}
		return nil
	})
	if d := time.Since(start); d < time.Second {
		t.Errorf("failed after %s; want at the deadline (1s)", d)
	}
	run, _ := h.replicas("web")
	old := 0
	for _, a := range run {
		if st := h.status(a.ID); a.Revision == 1 && st != nil && st.Phase == api.PhaseReady {
			old++
		}
	}
	if old != 1 {
		t.Errorf("%d ready old replicas after the failure; want the old one kept", old)
	}
}

// Once a region rolled a revision out, a replica that turns unready is
// no rollout: the share is not failed by the progress deadline; it is
// marked unhealthy (below minHealthy) instead, for failover.onUnhealthy.
func TestUnreadyAfterRolloutIsUnhealthyNotFailed(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1", "a", api.HealthUp)
	deadline := func(p *api.Placement) { p.Resource.Rollout.ProgressDeadlineSeconds = 1 }
	h.place("web", 2, 1, deadline)
	h.eventually("2 ready", h.readyWith("web", 2))
	if s := h.share("web"); !s.ProgressingSince.IsZero() || !s.UnhealthySince.IsZero() {
		t.Fatalf("ready share progressing since %v, unhealthy since %v; want neither", s.ProgressingSince, s.UnhealthySince)
	}
	h.setUnready(func(*api.Assignment) bool { return true })
	h.eventually("unhealthy", func() error {
		if s := h.share("web"); s.Ready != 0 || s.UnhealthySince.IsZero() {
			return fmt.Errorf("share %d ready, unhealthy since %v; want 0 ready, unhealthy", s.Ready, s.UnhealthySince)
		}
		return nil
	})
	since := h.share("web").UnhealthySince
	time.Sleep(1500 * time.Millisecond)
	s := h.share("web")
	if s.Phase == api.PhaseError {
		t.Errorf("share failed (%s) for replicas turning unready after the rollout; want no progress deadline", s.Reason)
	}
	if !s.UnhealthySince.Equal(since) {
		t.Errorf("unhealthy since moved from %v to %v; want it kept", since, s.UnhealthySince)
	}
	h.setUnready(nil)
	h.eventually("healthy again", func() error {
		if s := h.share("web"); s.Ready != 2 || !s.UnhealthySince.IsZero() {
			return fmt.Errorf("share %d ready, unhealthy since %v", s.Ready, s.UnhealthySince)
		}
		return nil
	})
}

// Drain's make-before-break waits for the replacement to be ready, not
// merely running: a replacement whose readiness probe fails (phase
// provision) never lets the drain remove the replica it replaces.
func TestDrainKeepsTheOldReplicaWhileTheReplacementIsUnready(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1", "a", api.HealthUp)
	h.place("web", 1, 1)
	h.eventually("1 ready", h.readyWith("web", 1))
	run, _ := h.replicas("web")
	orig := run[0].ID
	h.addNode("n2", "a", api.HealthUp)
	h.setUnready(func(a *api.Assignment) bool { return a.Node == "n2" })
	n1, _ := h.st.Nodes.Get(t.Context(), "n1")
	n1.Value.Schedulable = false
	h.putNode(n1.Value)
	d := &api.DrainStatus{Node: "n1", State: api.DrainRunning, StartedAt: time.Now(), Deadline: time.Now().Add(time.Minute), MaxParallel: 1}
	if _, err := h.st.Drains.Create(t.Context(), "n1", d); err != nil {
		t.Fatal(err)
	}
	h.eventually("a replacement running unready on n2", func() error {
		run, _ := h.replicas("web")
		for _, a := range run {
			if st := h.status(a.ID); a.Node == "n2" && st != nil && st.Phase == api.PhaseProvision {
				return nil
			}
		}
		return fmt.Errorf("no unready replacement on n2")
	})
	time.Sleep(time.Second)
	run, dying := h.replicas("web")
	kept := false
	for _, a := range run {
		kept = kept || a.ID == orig
	}
	if !kept || len(dying) != 0 {
		t.Fatalf("while the replacement is unready: original kept %v, %d destroying; want it kept and none destroying", kept, len(dying))
	}
	if s := h.share("web"); s.Ready != 1 {
		t.Errorf("share %d ready; want the original still serving", s.Ready)
	}
	h.setUnready(nil)
	h.eventually("moved once the replacement is ready", func() error {
		run, dying := h.replicas("web")
		if len(run) != 1 || run[0].Node != "n2" || len(dying) != 0 {
			return fmt.Errorf("%d running (first on %v), %d destroying", len(run), run, len(dying))
		}
		return h.readyWith("web", 1)()
	})
}

// A replica with probes is not placed on a node whose provider does not
// advertise probes: FailedScheduling names the missing feature, and the
// replica is placed once a node that has it arrives.
func TestProbesNeedAProviderWithProbes(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1", "a", api.HealthUp)
	h.place("web", 1, 1, func(p *api.Placement) {
		p.Resource.Spec.Compute.ReadinessProbe = &api.Probe{TCPSocket: &api.TCPSocketAction{Port: 80}}
	})
	h.eventually("FailedScheduling naming the feature", func() error {
		got, _ := h.ev.Range(t.Context(), events.Query{Reason: "FailedScheduling"})
		for _, e := range got {
			if strings.Contains(e.Message, "provider lacks feature probes") {
				return nil
			}
		}
		return fmt.Errorf("no FailedScheduling naming probes in %d events", len(got))
	})
	if run, _ := h.replicas("web"); len(run) != 1 || run[0].Node != "" {
		t.Fatalf("replicas %+v; want one, unplaced", run)
	}
	n2 := newNode("n2", "a")
	n2.Providers[0].Features = []string{api.FeaturePods, api.FeatureProbes}
	h.putNode(n2)
	h.setHealth("n2", api.HealthUp)
	h.eventually("placed on the node with probes", func() error {
		run, _ := h.replicas("web")
		if len(run) != 1 || run[0].Node != "n2" {
			return fmt.Errorf("replicas %+v; want one on n2", run)
		}
		return nil
	})
}
