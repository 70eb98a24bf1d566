package controller

import (
	"fmt"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
)

func placeJob(name string, spec api.JobSpec) func(*api.Placement) {
	return func(pl *api.Placement) {
		spec.Default()
		pl.Resource.Kind = api.KindJob
		pl.Resource.Spec.Job = &spec
		pl.Resource.CreatedAt = time.Now()
	}
}

// TestJobRunsToCompletion checks a Job through the controller and etcd:
// 3 completions at most 2 at once, each attempt exiting 0; the attempts'
// replicas stay (stopped) after the run succeeded.
func TestJobRunsToCompletion(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1", "z1", api.HealthUp)
	h.set(h.hold, "t/batch", true)
	h.place("batch", 1, 1, placeJob("batch", api.JobSpec{Completions: 3, Parallelism: 2}))
	h.eventually("two attempts running", func() error {
		running, _ := h.replicas("batch")
		s := h.share("batch")
		if len(running) != 2 || s == nil || s.Job == nil || s.Job.Active != 2 {
			return fmt.Errorf("got %d replicas, share %+v", len(running), s)
		}
		for _, a := range running {
			if a.Spec.Compute.RestartPolicy != api.RestartNever || a.Labels[api.LabelJobRun] != "1" || a.Kind != api.KindCompute {
				return fmt.Errorf("attempt %s: restart policy %q, labels %v, kind %s; want never, run 1, Compute", a.ID, a.Spec.Compute.RestartPolicy, a.Labels, a.Kind)
			}
		}
		return nil
	})
	h.mu.Lock()
	h.hold["t/batch"] = false
	h.exit["t/batch"] = 0
	h.mu.Unlock()
	h.eventually("job succeeded", func() error {
		s := h.share("batch")
		if s == nil || s.Job == nil || s.Job.Phase != api.JobSucceeded || s.Phase != api.PhaseReady {
			return fmt.Errorf("share %+v", s)
		}
		if s.Job.Succeeded != 3 || s.Job.Failed != 0 || s.Job.Active != 0 {
			return fmt.Errorf("got %+v; want 3 succeeded", s.Job)
		}
		return nil
	})
	running, _ := h.replicas("batch")
	if len(running) != 3 {
		t.Errorf("got %d replicas kept after the run; want 3 (for their logs)", len(running))
	}
	// Still 3 after more passes: nothing restarts or replaces them.
	h.eventually("stable", func() error {
		s := h.share("batch")
		if n := len(s.Job.Runs[0].Attempts); n != 3 {
			return fmt.Errorf("got %d attempts; want 3", n)
		}
		return nil
	})
}

// TestJobBackoffLimit checks that a Job whose attempts exit 1 fails after
// backoffLimit+1 attempts, each with its exit code.
func TestJobBackoffLimit(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1", "z1", api.HealthUp)
	h.set(h.hold, "t/fails", false)
	h.mu.Lock()
	h.exit["t/fails"] = 1
	h.mu.Unlock()
	one := 1
	h.place("fails", 1, 1, placeJob("fails", api.JobSpec{BackoffLimit: &one}))
	h.eventually("job failed", func() error {
		s := h.share("fails")
		if s == nil || s.Job == nil || s.Job.Phase != api.JobFailed {
			return fmt.Errorf("share %+v", s)
		}
		return nil
	})
	s := h.share("fails")
	if s.Phase != api.PhaseError || s.Job.Reason != api.ReasonBackoffLimitExceeded || s.Job.Failed != 2 {
		t.Fatalf("got phase %s, job %+v; want error, BackoffLimitExceeded, 2 failed", s.Phase, s.Job)
	}
	for _, a := range s.Job.Runs[0].Attempts {
		if a.ExitCode == nil || *a.ExitCode != 1 || a.Node != "n1" {
			t.Errorf("attempt %+v: want exit code 1 on n1", a)
		}
	}
}
