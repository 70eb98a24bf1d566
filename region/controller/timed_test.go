package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/events"
)

// The harness's resync is an hour: in these tests only the marks each
// time-based decision leaves for the moment it would change (changesAt)
// can wake the controller once the replicas and nodes stop changing.

// hasEvent is a condition: an event with this reason was emitted.
func (h *harness) hasEvent(reason string) func() error {
	return func() error {
		got, _ := h.ev.Range(context.Background(), events.Query{Reason: reason})
		if len(got) == 0 {
			return fmt.Errorf("no %s event", reason)
		}
		return nil
	}
}

// TestDestroyTimeoutWithoutResync silences a node's agent, then scales
// its resource to 0: nothing confirms the destroy, and nothing changes
// after it, yet the replica is forgotten once the destroy timeout passes.
func TestDestroyTimeoutWithoutResync(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.DestroyTimeout = 500 * time.Millisecond })
	h.addNode("n1", "a", api.HealthUp)
	h.place("web", 1, 1)
	h.eventually("ready", h.readyWith("web", 1))
	h.set(h.down, "n1", true)
	h.place("web", 0, 1)
	h.eventually("destroy requested", func() error {
		if _, dying := h.replicas("web"); len(dying) != 1 {
			return fmt.Errorf("%d destroying; want 1", len(dying))
		}
		return nil
	})
	h.eventually("destroy timed out", h.hasEvent("DestroyTimedOut"))
	h.eventually("replica forgotten", func() error {
		if run, dying := h.replicas("web"); len(run)+len(dying) != 0 {
			return fmt.Errorf("%d running, %d destroying; want none", len(run), len(dying))
		}
		return nil
	})
}

// TestRetryBackoffWithoutResync has a replica fail at once, again and
// again, with a back-off far longer than the simulated agent takes to
// report the failure: each replacement after the first waits for the
// back-off's end, which nothing but its timer marks.
func TestRetryBackoffWithoutResync(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.RetryBackoff = 300 * time.Millisecond })
	h.addNode("n1", "a", api.HealthUp)
	h.set(h.fail, "t/crash", true)
	h.place("crash", 1, 1)
	h.eventually("replaced three times", func() error {
		got, _ := h.ev.Range(context.Background(), events.Query{Reason: "ReplicaReplaced"})
		if len(got) < 3 {
			return fmt.Errorf("%d replacements", len(got))
		}
		return nil
	})
	h.set(h.fail, "t/crash", false)
	h.eventually("recovered", h.readyWith("crash", 1))
}

// TestDrainDeadlineWithoutResync drains a node whose replica's
// replacement never becomes ready: the drain waits, and once its deadline
// passes the replica is destroyed without waiting (a forced step).
func TestDrainDeadlineWithoutResync(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1", "a", api.HealthUp)
	h.place("web", 1, 1)
	h.eventually("ready on n1", h.readyWith("web", 1))
	h.addNode("n2", "a", api.HealthUp)
	h.set(h.hold, "t/web", true) // the replacement stays in provision
	n1, _ := h.st.Nodes.Get(t.Context(), "n1")
	n1.Value.Schedulable = false
	h.putNode(n1.Value)
	d := &api.DrainStatus{Node: "n1", State: api.DrainRunning, StartedAt: time.Now(), Deadline: time.Now().Add(time.Second), MaxParallel: 1}
	if _, err := h.st.Drains.Create(t.Context(), "n1", d); err != nil {
		t.Fatal(err)
	}
	h.eventually("replacement created", func() error {
		if run, _ := h.replicas("web"); len(run) != 2 {
			return fmt.Errorf("%d running; want the original and its replacement", len(run))
		}
		return nil
	})
	h.eventually("drain forced at its deadline", func() error {
		it, ok := h.caches.Drains.Get("n1")
		if !ok || it.Value.State == api.DrainRunning || countForced(it.Value.Steps) != 1 {
			return fmt.Errorf("drain %+v; want finished with one forced step", it.Value)
		}
		return nil
	})
	if run, _ := h.replicas("web"); len(run) != 1 || run[0].Node != "n2" {
		t.Fatalf("after the drain: %d running; want the replacement alone, on n2", len(run))
	}
}

// TestJobScheduleFiresWithoutResync runs a scheduled job on a clock set
// just before a minute's turn (the wall clock, shifted): nothing changes
// after the job is placed, yet its run starts when the schedule fires.
func TestJobScheduleFiresWithoutResync(t *testing.T) {
	start := time.Date(2026, 3, 1, 10, 0, 59, 0, time.UTC)
	shift := time.Until(start)
	clock := func() time.Time { return time.Now().Add(shift) }
	h := newHarness(t, func(o *Options) { o.Clock = clock })
	h.addNode("n1", "z1", api.HealthUp)
	h.set(h.hold, "t/cron", true)
	h.place("cron", 1, 1, placeJob("cron", api.JobSpec{Schedule: "* * * * *"}),
		func(pl *api.Placement) { pl.Resource.CreatedAt = clock() })
	h.eventually("run 1 started at 10:01", func() error {
		s := h.share("cron")
		if s == nil || s.Job == nil || len(s.Job.Runs) != 1 {
			return fmt.Errorf("share %+v; want one run", s)
		}
		if want := time.Date(2026, 3, 1, 10, 1, 0, 0, time.UTC); !s.Job.LastScheduleAt.Equal(want) || s.Job.Runs[0].StartedAt.Before(want) {
			return fmt.Errorf("last schedule %s, run started %s; want the firing at %s", s.Job.LastScheduleAt, s.Job.Runs[0].StartedAt, want)
		}
		return nil
	})
}

// TestJobDeadlineAndTTLWithoutResync runs a job that never finishes,
// ended by its active deadline, and one that exits at once, whose
// finished attempt goes when its TTL ends: both moments come with
// nothing else changing.
func TestJobDeadlineAndTTLWithoutResync(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1", "z1", api.HealthUp)
	h.mu.Lock()
	h.hold["t/long"] = true
	h.exit["t/short"] = 0
	h.mu.Unlock()
	h.place("long", 1, 1, placeJob("long", api.JobSpec{ActiveDeadline: api.D(500 * time.Millisecond)}))
	h.place("short", 1, 1, placeJob("short", api.JobSpec{TTL: api.D(500 * time.Millisecond)}))
	h.eventually("long past its deadline", func() error {
		s := h.share("long")
		if s == nil || s.Job == nil || s.Job.Phase != api.JobFailed || s.Job.Reason != api.ReasonDeadlineExceeded {
			return fmt.Errorf("share %+v; want failed, %s", s, api.ReasonDeadlineExceeded)
		}
		return nil
	})
	h.eventually("short succeeded, its attempt gone after the TTL", func() error {
		s := h.share("short")
		run, dying := h.replicas("short")
		if s == nil || s.Job == nil || s.Job.Phase != api.JobSucceeded || len(run)+len(dying) != 0 {
			return fmt.Errorf("share %+v, %d replicas; want succeeded, none left", s, len(run)+len(dying))
		}
		return nil
	})
}
