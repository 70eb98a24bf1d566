package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/backoff"
)

// jobSim drives stepJob with a fake clock and a fake region: attempts it
// starts run until the test makes them exit.
type jobSim struct {
	t    *testing.T
	spec api.JobSpec
	now  time.Time
	st   *api.JobStatus
	// live are the attempts with a replica, by ID.
	live    map[string]*jobObs
	nextID  int
	enabled bool
	last    jobResult
}

var simStart = time.Date(2026, 1, 1, 10, 0, 30, 0, time.UTC)

func newJobSim(t *testing.T, spec api.JobSpec) *jobSim {
	spec.Default()
	return &jobSim{t: t, spec: spec, now: simStart, live: map[string]*jobObs{}, enabled: true}
}

// step runs one pass and applies its result as the region would.
func (s *jobSim) step() jobResult {
	var obs []jobObs
	for _, o := range s.live {
		obs = append(obs, *o)
	}
	res := stepJob(jobInput{
		Spec: &s.spec, Prev: s.st, Created: simStart, Enabled: s.enabled, Obs: obs, Now: s.now,
		Backoff: backoff.Backoff{Min: 10 * time.Second, Max: time.Minute},
		NewID:   func() string { s.nextID++; return fmt.Sprintf("a%d", s.nextID) },
	})
	for id := range res.Stop {
		delete(s.live, id)
	}
	for id := range res.Remove {
		delete(s.live, id)
	}
	for _, st := range res.Start {
		s.live[st.ID] = &jobObs{ID: st.ID, Run: st.Run, Node: "n1", Created: s.now}
	}
	st := res.Status
	s.st = &st
	s.last = res
	return res
}

// exit makes the n oldest running attempts exit with code.
func (s *jobSim) exit(n int, code int32) {
	s.t.Helper()
	for i := 1; i <= s.nextID && n > 0; i++ {
		o := s.live[fmt.Sprintf("a%d", i)]
		if o == nil || o.ExitCode != nil || o.Broken != "" {
			continue
		}
		c := code
		o.ExitCode, o.ExitedAt = &c, s.now
		n--
	}
	if n > 0 {
		s.t.Fatalf("exit: %d fewer running attempts than asked", n)
	}
}

func (s *jobSim) running() int {
	n := 0
	for _, o := range s.live {
		if o.ExitCode == nil && o.Broken == "" {
			n++
		}
	}
	return n
}

func (s *jobSim) counts() string {
	return fmt.Sprintf("%s %q active=%d succeeded=%d failed=%d", s.st.Phase, s.st.Reason, s.st.Active, s.st.Succeeded, s.st.Failed)
}

func intp(n int) *int { return &n }

// TestStepJobCounts walks jobs through their runs, pass by pass, on a
// fake clock: each step says what happens before the pass and what the
// status then says.
func TestStepJobCounts(t *testing.T) {
	type step struct {
		advance time.Duration
		exit    int   // attempts that exit before the pass
		code    int32 // with this code
		want    string
		running int // attempts running after the pass
	}
	tests := []struct {
		name  string
		spec  api.JobSpec
		steps []step
	}{
		{
			name: "3 completions, parallelism 2",
			spec: api.JobSpec{Completions: 3, Parallelism: 2},
			steps: []step{
				{want: `Running "" active=2 succeeded=0 failed=0`, running: 2},
				{exit: 1, want: `Running "" active=2 succeeded=1 failed=0`, running: 2},
				{exit: 1, want: `Running "" active=1 succeeded=2 failed=0`, running: 1},
				{exit: 1, want: `Succeeded "" active=0 succeeded=3 failed=0`, running: 0},
				{advance: time.Minute, want: `Succeeded "" active=0 succeeded=3 failed=0`, running: 0},
			},
		},
		{
			name: "backoff limit 1: two failures fail the run",
			spec: api.JobSpec{BackoffLimit: intp(1)},
			steps: []step{
				{want: `Running "" active=1 succeeded=0 failed=0`, running: 1},
				{exit: 1, code: 1, want: `Running "" active=0 succeeded=0 failed=1`, running: 0},
				// The retry waits out the back-off (10s after the first failure).
				{advance: 9 * time.Second, want: `Running "" active=0 succeeded=0 failed=1`, running: 0},
				{advance: time.Second, want: `Running "" active=1 succeeded=0 failed=1`, running: 1},
				{exit: 1, code: 1, want: `Failed "BackoffLimitExceeded" active=0 succeeded=0 failed=2`, running: 0},
				{advance: time.Hour, want: `Failed "BackoffLimitExceeded" active=0 succeeded=0 failed=2`, running: 0},
			},
		},
		{
			name: "backoff doubles",
			spec: api.JobSpec{BackoffLimit: intp(3)},
			steps: []step{
				{running: 1, want: `Running "" active=1 succeeded=0 failed=0`},
				{exit: 1, code: 2, running: 0, want: `Running "" active=0 succeeded=0 failed=1`},
				{advance: 10 * time.Second, running: 1, want: `Running "" active=1 succeeded=0 failed=1`},
				{exit: 1, code: 2, running: 0, want: `Running "" active=0 succeeded=0 failed=2`},
				{advance: 19 * time.Second, running: 0, want: `Running "" active=0 succeeded=0 failed=2`},
				{advance: time.Second, running: 1, want: `Running "" active=1 succeeded=0 failed=2`},
				{exit: 1, code: 0, running: 0, want: `Succeeded "" active=0 succeeded=1 failed=2`},
			},
		},
		{
			name: "deadline stops the run",
			spec: api.JobSpec{Parallelism: 2, Completions: 4, ActiveDeadline: api.D(time.Minute)},
			steps: []step{
				{running: 2, want: `Running "" active=2 succeeded=0 failed=0`},
				{advance: 59 * time.Second, exit: 1, running: 2, want: `Running "" active=2 succeeded=1 failed=0`},
				{advance: time.Second, running: 0, want: `Failed "DeadlineExceeded" active=0 succeeded=1 failed=0`},
			},
		},
		{
			name: "backoff limit 0: the first failure fails",
			spec: api.JobSpec{BackoffLimit: intp(0), Parallelism: 3, Completions: 3},
			steps: []step{
				{running: 3, want: `Running "" active=3 succeeded=0 failed=0`},
				// The other two are stopped, not counted.
				{exit: 1, code: 137, running: 0, want: `Failed "BackoffLimitExceeded" active=0 succeeded=0 failed=1`},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newJobSim(t, tc.spec)
			for i, st := range tc.steps {
				s.now = s.now.Add(st.advance)
				if st.exit > 0 {
					s.exit(st.exit, st.code)
				}
				s.step()
				if got := s.counts(); got != st.want {
					t.Fatalf("step %d: got %s; want %s", i, got, st.want)
				}
				if got := s.running(); got != st.running {
					t.Fatalf("step %d: got %d running attempts; want %d", i, got, st.running)
				}
			}
		})
	}
}

// TestStepJobAttempts checks what the status says of each attempt: node,
// exit code, times; and that a finished attempt's replica stays for its
// TTL (its logs), then goes, and its record stays.
func TestStepJobAttempts(t *testing.T) {
	s := newJobSim(t, api.JobSpec{BackoffLimit: intp(1), TTL: api.D(10 * time.Minute)})
	s.step()
	s.now = s.now.Add(5 * time.Second)
	s.exit(1, 1)
	s.step()
	s.now = s.now.Add(10 * time.Second)
	s.step() // the retry
	s.now = s.now.Add(time.Second)
	s.exit(1, 1)
	s.step()
	run := s.st.Runs[0]
	if len(run.Attempts) != 2 {
		t.Fatalf("got %d attempts; want 2", len(run.Attempts))
	}
	for i, a := range run.Attempts {
		if a.Phase != api.AttemptFailed || a.ExitCode == nil || *a.ExitCode != 1 || a.Node != "n1" || a.StartedAt.IsZero() || !a.FinishedAt.After(a.StartedAt) || a.Removed {
			t.Errorf("attempt %d: got %+v; want failed with exit code 1 on n1, started before it finished, not removed", i, a)
		}
	}
	if len(s.live) != 2 {
		t.Fatalf("got %d replicas kept; want both (their logs stay readable)", len(s.live))
	}
	s.now = run.Attempts[0].FinishedAt.Add(10*time.Minute - time.Second)
	s.step()
	if len(s.last.Remove) != 0 {
		t.Fatalf("before the TTL: removed %v; want none", s.last.Remove)
	}
	s.now = run.Attempts[0].FinishedAt.Add(10 * time.Minute)
	s.step()
	if _, ok := s.last.Remove["a1"]; !ok || len(s.last.Remove) != 1 {
		t.Fatalf("at the first attempt's TTL: removed %v; want a1 only", s.last.Remove)
	}
	s.step()
	a := s.st.Runs[0].Attempts[0]
	if !a.Removed || a.ExitCode == nil || *a.ExitCode != 1 || s.st.Failed != 2 {
		t.Errorf("after removal: got %+v, failed %d; want removed, exit code 1 kept, 2 failed", a, s.st.Failed)
	}
}

// TestStepJobBroken checks that an attempt that fails without exiting
// (lost node, could not start) counts as failed and its replica goes at
// once, and that a replica that vanishes counts as failed.
func TestStepJobBroken(t *testing.T) {
	s := newJobSim(t, api.JobSpec{Parallelism: 2, Completions: 2})
	s.step()
	s.now = s.now.Add(time.Minute)
	s.live["a1"].Broken = "node n1 is down"
	delete(s.live, "a2")
	s.step()
	if s.last.Stop["a1"] != "node n1 is down" {
		t.Errorf("stop: got %v; want a1 for its node", s.last.Stop)
	}
	if s.st.Failed != 2 {
		t.Errorf("got %s; want 2 failed", s.counts())
	}
	for _, a := range s.st.Runs[0].Attempts[:2] {
		if a.Phase != api.AttemptFailed || a.ExitCode != nil || !a.FinishedAt.Equal(s.now) {
			t.Errorf("attempt %s: got %+v; want failed without exit code, finished now (%s)", a.ID, a, s.now)
		}
	}
}

// TestStepJobSchedule checks cron runs under each concurrency policy and
// the history bound.
func TestStepJobSchedule(t *testing.T) {
	type step struct {
		advance time.Duration
		exit    int
		// runs is each kept run's number and phase, newest first.
		runs    string
		running int
	}
	tests := []struct {
		name   string
		policy api.ConcurrencyPolicy
		steps  []step
	}{
		{"allow", api.ConcurrencyAllow, []step{
			{runs: "", running: 0}, // created at 10:00:30; first firing 10:01
			{advance: 30 * time.Second, runs: "1:Running", running: 1},
			{advance: time.Minute, runs: "2:Running 1:Running", running: 2},
			{exit: 2, runs: "2:Succeeded 1:Succeeded", running: 0},
			{advance: time.Minute, runs: "3:Running 2:Succeeded 1:Succeeded", running: 1},
			{exit: 1, runs: "3:Succeeded 2:Succeeded", running: 0}, // historyLimit 2
		}},
		{"forbid", api.ConcurrencyForbid, []step{
			{advance: 30 * time.Second, runs: "1:Running", running: 1},
			{advance: time.Minute, runs: "1:Running", running: 1},
			{exit: 1, runs: "1:Succeeded", running: 0},
			{advance: time.Minute, runs: "2:Running 1:Succeeded", running: 1},
		}},
		{"replace", api.ConcurrencyReplace, []step{
			{advance: 30 * time.Second, runs: "1:Running", running: 1},
			{advance: time.Minute, runs: "2:Running 1:Failed(Replaced)", running: 1},
		}},
		{"missed firings run once", api.ConcurrencyAllow, []step{
			{advance: 10*time.Minute + 30*time.Second, runs: "1:Running", running: 1},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newJobSim(t, api.JobSpec{Schedule: "* * * * *", ConcurrencyPolicy: tc.policy, HistoryLimit: 2})
			for i, st := range tc.steps {
				s.now = s.now.Add(st.advance)
				if st.exit > 0 {
					s.exit(st.exit, 0)
				}
				s.step()
				var runs []string
				for _, r := range s.st.Runs {
					w := fmt.Sprintf("%d:%s", r.Number, r.Phase)
					if r.Reason != "" {
						w += "(" + r.Reason + ")"
					}
					runs = append(runs, w)
				}
				if got := strings.Join(runs, " "); got != st.runs {
					t.Fatalf("step %d at %s: got runs %q; want %q", i, s.now.Format("15:04:05"), got, st.runs)
				}
				if got := s.running(); got != st.running {
					t.Fatalf("step %d: got %d running attempts; want %d", i, got, st.running)
				}
				if want := s.now.Truncate(time.Minute).Add(time.Minute); !s.st.NextRunAt.Equal(want) {
					t.Fatalf("step %d: next run at %s; want %s", i, s.st.NextRunAt, want)
				}
			}
		})
	}
}

// TestStepJobSuspended checks that replicas 0 starts nothing.
func TestStepJobSuspended(t *testing.T) {
	s := newJobSim(t, api.JobSpec{})
	s.enabled = false
	s.step()
	if s.st.Phase != api.JobPending || len(s.live) != 0 {
		t.Errorf("got %s with %d replicas; want Pending with none", s.counts(), len(s.live))
	}
}

// TestStepJobNext checks the moment stepJob says time alone changes its
// result (what the controller marks the job for), and that at it the
// result does change: the retry after the back-off, the active deadline,
// the end of a finished attempt's TTL, the schedule's next firing.
func TestStepJobNext(t *testing.T) {
	s := newJobSim(t, api.JobSpec{BackoffLimit: intp(3), ActiveDeadline: api.D(time.Minute), TTL: api.D(10 * time.Minute)})
	s.step()
	if want := simStart.Add(time.Minute); !s.last.Next.Equal(want) {
		t.Fatalf("a running attempt: next %s; want the active deadline %s", s.last.Next, want)
	}
	s.now = s.now.Add(5 * time.Second)
	s.exit(1, 1)
	s.step()
	retryAt := s.now.Add(10 * time.Second) // the back-off's first delay
	if !s.last.Next.Equal(retryAt) || len(s.last.Start) != 0 {
		t.Fatalf("after a failure: next %s, started %v; want the back-off's end %s, nothing started", s.last.Next, s.last.Start, retryAt)
	}
	s.now = retryAt
	if s.step(); len(s.last.Start) != 1 {
		t.Fatalf("at the back-off's end: started %v; want the retry", s.last.Start)
	}
	s.now = simStart.Add(time.Minute)
	if s.step(); s.st.Phase != api.JobFailed || s.st.Reason != api.ReasonDeadlineExceeded {
		t.Fatalf("at the active deadline: %s; want failed, %s", s.counts(), api.ReasonDeadlineExceeded)
	}
	ttlEnd := simStart.Add(5*time.Second + 10*time.Minute) // the failed attempt's, the first to go
	if !s.last.Next.Equal(ttlEnd) {
		t.Fatalf("a finished run: next %s; want the first TTL's end %s", s.last.Next, ttlEnd)
	}
	s.now = ttlEnd
	if s.step(); len(s.last.Remove) != 1 {
		t.Fatalf("at the TTL's end: removed %v; want one attempt", s.last.Remove)
	}

	c := newJobSim(t, api.JobSpec{Schedule: "* * * * *"})
	c.step()
	if want := simStart.Truncate(time.Minute).Add(time.Minute); !c.last.Next.Equal(want) || len(c.st.Runs) != 0 {
		t.Fatalf("a schedule: next %s, %d runs; want the firing at %s, no run yet", c.last.Next, len(c.st.Runs), want)
	}
	c.now = c.last.Next
	if c.step(); len(c.st.Runs) != 1 {
		t.Fatalf("at the firing: %d runs; want 1", len(c.st.Runs))
	}
}
