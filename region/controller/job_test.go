package controller

import (
	"fmt"
	"strings"
	"sync"
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
	h.checkCachedAssignments()
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

// TestJobDrain checks that a drain finishes on a node with a Job's
// attempts: the exited ones are removed, the running one is stopped at
// the drain's deadline, and its run retries it on another node.
func TestJobDrain(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1", "z1", api.HealthUp)
	h.mu.Lock()
	h.exit["t/done"] = 0
	h.hold["t/long"] = true
	h.mu.Unlock()
	h.place("done", 1, 1, placeJob("done", api.JobSpec{Completions: 2, Parallelism: 2}))
	h.place("long", 1, 1, placeJob("long", api.JobSpec{}))
	h.eventually("done succeeded, long running", func() error {
		d, l := h.share("done"), h.share("long")
		if d == nil || d.Job == nil || d.Job.Phase != api.JobSucceeded || l == nil || l.Job == nil || l.Job.Active != 1 {
			return fmt.Errorf("done %+v, long %+v", d, l)
		}
		return nil
	})
	h.addNode("n2", "z1", api.HealthUp)
	n1, _ := h.st.Nodes.Get(t.Context(), "n1")
	n1.Value.Schedulable = false
	h.putNode(n1.Value) // cordoned in the cache before the drain starts
	// The deadline has passed already: the running attempt is stopped.
	d := &api.DrainStatus{Node: "n1", State: api.DrainRunning, StartedAt: time.Now(), Deadline: time.Now().Add(-time.Second), MaxParallel: 2}
	if _, err := h.st.Drains.Create(t.Context(), "n1", d); err != nil {
		t.Fatal(err)
	}
	h.eventually("drain finished", func() error {
		it, ok := h.caches.Drains.Get("n1")
		if !ok || it.Value.Remaining != 0 || it.Value.State == api.DrainRunning {
			return fmt.Errorf("drain %+v", it.Value)
		}
		return nil
	})
	h.eventually("long retried on n2", func() error {
		s := h.share("long")
		running, _ := h.replicas("long")
		if s.Job.Failed != 1 || len(running) != 1 || running[0].Node != "n2" {
			return fmt.Errorf("job %+v, replicas %d", s.Job, len(running))
		}
		return nil
	})
	if s := h.share("done"); s.Job.Phase != api.JobSucceeded || s.Job.Succeeded != 2 {
		t.Errorf("done after the drain: %+v; want still succeeded with 2", s.Job)
	}
}

// TestJobSchedule runs a scheduled job through the controller and etcd on
// a fake clock: no run before the schedule fires, one run per firing,
// Forbid skips a firing while a run is active, and finished runs beyond
// the history limit go with their attempts.
func TestJobSchedule(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 3, 1, 10, 0, 30, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	h := newHarness(t, func(o *Options) { o.Clock = clock })
	// The controller's timers run on the wall clock, which a jump of the
	// fake one does not move: after a jump the job is looked at again, as
	// a resync would (TestJobScheduleFiresWithoutResync has the timers
	// fire).
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock(); h.ctrl.tracker.markAll() }
	h.addNode("n1", "z1", api.HealthUp)
	h.set(h.hold, "t/cron", true)
	h.place("cron", 1, 1, placeJob("cron", api.JobSpec{Schedule: "* * * * *", ConcurrencyPolicy: api.ConcurrencyForbid, HistoryLimit: 1}),
		func(pl *api.Placement) { pl.Resource.CreatedAt = clock() })
	runs := func(want string) func() error {
		return func() error {
			s := h.share("cron")
			if s == nil || s.Job == nil {
				return fmt.Errorf("no job status")
			}
			var got []string
			for _, r := range s.Job.Runs {
				got = append(got, fmt.Sprintf("%d:%s", r.Number, r.Phase))
			}
			if g := strings.Join(got, " "); g != want {
				return fmt.Errorf("runs %q; want %q", g, want)
			}
			return nil
		}
	}
	h.eventually("waiting for the schedule", func() error {
		s := h.share("cron")
		if s == nil || s.Job == nil || s.Job.Phase != api.JobPending || !s.Job.NextRunAt.Equal(time.Date(2026, 3, 1, 10, 1, 0, 0, time.UTC)) {
			return fmt.Errorf("share %+v", s)
		}
		return nil
	})
	advance(30 * time.Second)
	h.eventually("run 1 started", runs("1:Running"))
	advance(time.Minute) // run 1 still active: Forbid skips this firing
	h.eventually("firing skipped", func() error {
		if s := h.share("cron"); !s.Job.LastScheduleAt.Equal(time.Date(2026, 3, 1, 10, 2, 0, 0, time.UTC)) {
			return fmt.Errorf("last schedule %s", s.Job.LastScheduleAt)
		}
		return runs("1:Running")()
	})
	h.mu.Lock()
	h.hold["t/cron"] = false
	h.exit["t/cron"] = 0
	h.mu.Unlock()
	h.eventually("run 1 succeeded", runs("1:Succeeded"))
	advance(time.Minute)
	h.eventually("run 2 succeeded, run 1 out of the history", runs("2:Succeeded"))
	h.eventually("run 1's attempt removed", func() error {
		running, _ := h.replicas("cron")
		if len(running) != 1 || running[0].Labels[api.LabelJobRun] != "2" {
			return fmt.Errorf("%d replicas", len(running))
		}
		return nil
	})
}

// TestJobExitedAttemptsFreeTheNode checks that an exited attempt, kept
// for its logs, no longer takes its CPU and memory: a job whose attempts
// each fill the node's CPU runs them one after the other.
func TestJobExitedAttemptsFreeTheNode(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1", "z1", api.HealthUp)
	h.mu.Lock()
	h.exit["t/big"] = 0
	h.mu.Unlock()
	h.place("big", 1, 1, placeJob("big", api.JobSpec{Completions: 3}), func(pl *api.Placement) {
		pl.Flavor.Spec.VCPUs = 8 // the whole node
	})
	h.eventually("3 attempts ran on the one node", func() error {
		s := h.share("big")
		if s == nil || s.Job == nil || s.Job.Phase != api.JobSucceeded || s.Job.Succeeded != 3 {
			return fmt.Errorf("share %+v", s)
		}
		return nil
	})
	// The exits are written with the share, maybe in another transaction
	// of the pass, and the assignments' cache follows its own watch.
	h.eventually("every attempt's exit recorded", func() error {
		running, _ := h.replicas("big")
		for _, a := range running {
			if a.ExitedAt.IsZero() || a.Node != "n1" {
				return fmt.Errorf("attempt %s: exited at %s on %s; want its exit recorded, on n1", a.ID, a.ExitedAt, a.Node)
			}
		}
		return nil
	})
}
