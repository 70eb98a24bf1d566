package controller

import (
	"fmt"
	"slices"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/backoff"
	"github.com/stratahq/strata/internal/cron"
)

// This file is a Job's bookkeeping as a pure function (stepJob): from the
// status the region last wrote and what it sees of the attempts now, the
// next status and what to do. The status is the record: an attempt is
// counted once, when it is first seen finished, and stays counted after
// its replica is removed. jobs.reconcile (job.go) applies the result.

// jobObs is what a pass sees of one live attempt (a replica not asked to
// go).
type jobObs struct {
	ID      string
	Run     int64
	Node    string
	Created time.Time
	// ExitCode is set once the attempt's process exited (the replica is
	// then kept, stopped, for its logs); ExitedAt is when.
	ExitCode *int32
	ExitedAt time.Time
	// Broken says why an attempt failed without an exit code (its node
	// was lost, it could not start, it missed the provision deadline):
	// its replica is removed at once.
	Broken string
}

// jobInput is everything stepJob decides from.
type jobInput struct {
	Spec *api.JobSpec
	// Prev is the status last written (nil: none yet).
	Prev *api.JobStatus
	// Created is when the job was created: a schedule fires after it.
	Created time.Time
	// Enabled is false when the region runs no share of the job
	// (replicas 0): no attempt starts.
	Enabled bool
	Obs     []jobObs
	Now     time.Time
	// Backoff delays the attempt after the n-th failure of a run.
	Backoff backoff.Backoff
	// NewID names a new attempt.
	NewID func() string
}

// jobStart is an attempt to create.
type jobStart struct {
	ID  string
	Run int64
}

// jobEvent is something worth an event.
type jobEvent struct {
	Type, Reason, Message string
}

// jobResult is what stepJob decided.
type jobResult struct {
	Status api.JobStatus
	Start  []jobStart
	// Stop are live attempts to destroy, with why: broken ones, and
	// running ones of a run that ended.
	Stop map[string]string
	// Remove are finished attempts whose replica (and logs) go: their
	// TTL passed, or their run left the history.
	Remove map[string]string
	Events []jobEvent
	// Next is the earliest moment after Now at which time alone would
	// change the result (the schedule fires, a run's active deadline or
	// an attempt's back-off or TTL ends); zero for none.
	Next time.Time
}

// changesAt notes a moment at which time alone changes the result.
func (o *jobResult) changesAt(in jobInput, t time.Time) {
	if t.After(in.Now) && (o.Next.IsZero() || t.Before(o.Next)) {
		o.Next = t
	}
}

// stepJob advances a job by one pass.
func stepJob(in jobInput) jobResult {
	out := jobResult{Status: cloneJobStatus(in.Prev), Stop: map[string]string{}, Remove: map[string]string{}}
	st := &out.Status
	seen := out.observe(in)
	out.markGone(seen, in.Now)
	out.schedule(in)
	for i := range st.Runs {
		if !st.Runs[i].Finished() {
			out.advanceRun(in, &st.Runs[i])
		}
	}
	out.expire(in, seen)
	out.prune(in, seen)
	out.summarize()
	return out
}

func cloneJobStatus(s *api.JobStatus) api.JobStatus {
	if s == nil {
		return api.JobStatus{Phase: api.JobPending}
	}
	c := *s
	c.Runs = slices.Clone(s.Runs)
	for i := range c.Runs {
		c.Runs[i].Attempts = slices.Clone(c.Runs[i].Attempts)
		for j := range c.Runs[i].Attempts {
			if code := c.Runs[i].Attempts[j].ExitCode; code != nil {
				v := *code
				c.Runs[i].Attempts[j].ExitCode = &v
			}
		}
	}
	return c
}

// run returns the run numbered n, or nil.
func (o *jobResult) run(n int64) *api.JobRun {
	for i := range o.Status.Runs {
		if o.Status.Runs[i].Number == n {
			return &o.Status.Runs[i]
		}
	}
	return nil
}

// observe records what the live attempts show into their runs, and
// returns the run of each live attempt by ID. An attempt of a run the
// status no longer holds is removed.
func (o *jobResult) observe(in jobInput) map[string]int64 {
	seen := map[string]int64{}
	for _, ob := range in.Obs {
		r := o.run(ob.Run)
		if r == nil {
			o.Remove[ob.ID] = fmt.Sprintf("run %d is no longer kept", ob.Run)
			continue
		}
		seen[ob.ID] = ob.Run
		i := slices.IndexFunc(r.Attempts, func(a api.JobAttempt) bool { return a.ID == ob.ID })
		if i < 0 {
			r.Attempts = append(r.Attempts, api.JobAttempt{ID: ob.ID, Phase: api.AttemptRunning, StartedAt: ob.Created})
			i = len(r.Attempts) - 1
		}
		a := &r.Attempts[i]
		if ob.Node != "" {
			a.Node = ob.Node
		}
		if a.Phase != api.AttemptRunning {
			continue // counted already
		}
		o.finishAttempt(in, r, a, ob)
	}
	return seen
}

// finishAttempt turns a running attempt that exited or broke into a
// finished one.
func (o *jobResult) finishAttempt(in jobInput, r *api.JobRun, a *api.JobAttempt, ob jobObs) {
	switch {
	case ob.ExitCode != nil:
		code := *ob.ExitCode
		a.ExitCode = &code
		a.FinishedAt = ob.ExitedAt
		if a.FinishedAt.IsZero() {
			a.FinishedAt = in.Now
		}
		if code == 0 {
			a.Phase, a.Reason = api.AttemptSucceeded, ""
			return
		}
		a.Phase, a.Reason = api.AttemptFailed, fmt.Sprintf("exited with code %d", code)
	case ob.Broken != "":
		a.Phase, a.Reason, a.FinishedAt = api.AttemptFailed, ob.Broken, in.Now
		o.Stop[a.ID] = ob.Broken
	default:
		return
	}
	o.Events = append(o.Events, jobEvent{"Warning", "AttemptFailed", fmt.Sprintf("run %d: attempt %s on %s: %s", r.Number, a.ID, a.Node, a.Reason)})
}

// markGone finishes attempts whose replica is gone: a running one
// vanished (failed), a finished one was removed (its logs are gone).
func (o *jobResult) markGone(seen map[string]int64, now time.Time) {
	for i := range o.Status.Runs {
		r := &o.Status.Runs[i]
		for j := range r.Attempts {
			a := &r.Attempts[j]
			if _, ok := seen[a.ID]; ok {
				continue
			}
			if a.Phase == api.AttemptRunning {
				a.Phase, a.Reason = api.AttemptFailed, "its replica is gone"
				if r.Finished() {
					a.Phase = api.AttemptStopped
				}
			}
			if a.FinishedAt.IsZero() {
				a.FinishedAt = now
			}
			a.Removed = true
		}
	}
}

// schedule starts the runs that are due: the one run of a job without a
// schedule, or the newest firing of the schedule that has passed (missed
// firings are not caught up), as the concurrency policy allows.
func (o *jobResult) schedule(in jobInput) {
	st := &o.Status
	if in.Spec.Schedule == "" {
		if len(st.Runs) == 0 && in.Enabled {
			o.startRun(in.Now)
		}
		return
	}
	due := o.fired(in)
	if due.IsZero() || !in.Enabled {
		return
	}
	st.LastScheduleAt = due
	if o.active() > 0 {
		switch in.Spec.ConcurrencyPolicy {
		case api.ConcurrencyForbid:
			o.Events = append(o.Events, jobEvent{"Normal", "RunSkipped", fmt.Sprintf("schedule fired at %s while a run is active (concurrencyPolicy Forbid)", due.Format(time.RFC3339))})
			return
		case api.ConcurrencyReplace:
			for i := range st.Runs {
				if r := &st.Runs[i]; !r.Finished() {
					o.endRun(in, r, api.JobFailed, api.ReasonReplaced)
				}
			}
		}
	}
	o.startRun(in.Now)
}

// fired returns the newest firing of the schedule since the last one
// (or the job's creation) that is not after now, zero for none, and
// records when the schedule fires next.
func (o *jobResult) fired(in jobInput) time.Time {
	sched, err := cron.Parse(in.Spec.Schedule)
	if err != nil {
		return time.Time{} // refused by validation
	}
	base := o.Status.LastScheduleAt
	if base.IsZero() {
		base = in.Created
	}
	due := time.Time{}
	// Bounded: a region down for long fires once, not once per missed
	// minute.
	for t, n := sched.Next(base), 0; !t.IsZero() && !t.After(in.Now) && n < 100000; t, n = sched.Next(t), n+1 {
		due = t
	}
	o.Status.NextRunAt = sched.Next(in.Now)
	o.changesAt(in, o.Status.NextRunAt)
	return due
}

// active counts the runs not finished.
func (o *jobResult) active() int {
	n := 0
	for i := range o.Status.Runs {
		if !o.Status.Runs[i].Finished() {
			n++
		}
	}
	return n
}

// startRun adds a new run, newest first; its number follows the newest
// kept run's (the newest run is never pruned, so numbers never repeat).
func (o *jobResult) startRun(now time.Time) {
	n := int64(1)
	if len(o.Status.Runs) > 0 {
		n = o.Status.Runs[0].Number + 1
	}
	o.Status.Runs = slices.Insert(o.Status.Runs, 0, api.JobRun{Number: n, Phase: api.JobRunning, StartedAt: now})
	o.Events = append(o.Events, jobEvent{"Normal", "RunStarted", fmt.Sprintf("run %d started", n)})
}

// advanceRun counts a running run's attempts and ends it, or starts the
// attempts it lacks.
func (o *jobResult) advanceRun(in jobInput, r *api.JobRun) {
	countRun(r)
	spec := in.Spec
	limit := spec.Backoff()
	deadline := r.StartedAt.Add(spec.ActiveDeadline.Duration)
	switch {
	case r.Succeeded >= spec.Completions:
		o.endRun(in, r, api.JobSucceeded, "")
		return
	case r.Failed > limit:
		o.endRun(in, r, api.JobFailed, api.ReasonBackoffLimitExceeded)
		return
	case spec.ActiveDeadline.Duration > 0 && !in.Now.Before(deadline):
		o.endRun(in, r, api.JobFailed, api.ReasonDeadlineExceeded)
		return
	}
	if spec.ActiveDeadline.Duration > 0 {
		o.changesAt(in, deadline)
	}
	if !in.Enabled {
		return
	}
	n := min(spec.Parallelism-r.Active, spec.Completions-r.Succeeded-r.Active)
	if retryAt := lastFailure(r).Add(in.Backoff.Delay(r.Failed)); n > 0 && r.Failed > 0 && in.Now.Before(retryAt) {
		n = 0 // back off before retrying
		o.changesAt(in, retryAt)
	}
	for range max(n, 0) {
		id := in.NewID()
		r.Attempts = append(r.Attempts, api.JobAttempt{ID: id, Phase: api.AttemptRunning, StartedAt: in.Now})
		o.Start = append(o.Start, jobStart{ID: id, Run: r.Number})
	}
	countRun(r)
}

// endRun finishes a run: its running attempts are stopped.
func (o *jobResult) endRun(in jobInput, r *api.JobRun, phase api.JobPhase, reason string) {
	r.Phase, r.Reason, r.FinishedAt = phase, reason, in.Now
	for i := range r.Attempts {
		a := &r.Attempts[i]
		if a.Phase == api.AttemptRunning {
			a.Phase, a.Reason, a.FinishedAt = api.AttemptStopped, fmt.Sprintf("run %s", phaseWord(phase, reason)), in.Now
			o.Stop[a.ID] = a.Reason
		}
	}
	countRun(r)
	typ, msg := "Normal", fmt.Sprintf("run %d succeeded: %d of %d attempts exited 0", r.Number, r.Succeeded, in.Spec.Completions)
	if phase == api.JobFailed {
		typ, msg = "Warning", fmt.Sprintf("run %d failed (%s): %d failed attempts", r.Number, reason, r.Failed)
	}
	o.Events = append(o.Events, jobEvent{typ, "Run" + string(phase), msg})
}

func phaseWord(phase api.JobPhase, reason string) string {
	if reason != "" {
		return "failed (" + reason + ")"
	}
	return string(phase)
}

// countRun recounts a run's attempts.
func countRun(r *api.JobRun) {
	r.Active, r.Succeeded, r.Failed = 0, 0, 0
	for _, a := range r.Attempts {
		switch a.Phase {
		case api.AttemptRunning:
			r.Active++
		case api.AttemptSucceeded:
			r.Succeeded++
		case api.AttemptFailed:
			r.Failed++
		}
	}
}

func lastFailure(r *api.JobRun) time.Time {
	var t time.Time
	for _, a := range r.Attempts {
		if a.Phase == api.AttemptFailed && a.FinishedAt.After(t) {
			t = a.FinishedAt
		}
	}
	return t
}

// expire removes the replicas of attempts that exited more than the TTL
// ago; until then they stay, stopped, so that their logs can be read.
func (o *jobResult) expire(in jobInput, seen map[string]int64) {
	ttl := in.Spec.TTL.Duration
	for i := range o.Status.Runs {
		for _, a := range o.Status.Runs[i].Attempts {
			if _, live := seen[a.ID]; !live || a.Phase == api.AttemptRunning || o.Stop[a.ID] != "" {
				continue
			}
			if !in.Now.Before(a.FinishedAt.Add(ttl)) {
				o.Remove[a.ID] = fmt.Sprintf("finished %s ago (ttl %s)", in.Now.Sub(a.FinishedAt).Round(time.Second), ttl)
			} else {
				o.changesAt(in, a.FinishedAt.Add(ttl))
			}
		}
	}
}

// prune keeps the running runs and the newest HistoryLimit finished ones
// (the newest run always); the attempts of the others are removed.
func (o *jobResult) prune(in jobInput, seen map[string]int64) {
	runs := o.Status.Runs[:0]
	finished := 0
	for i, r := range o.Status.Runs {
		if r.Finished() {
			finished++
		}
		if i == 0 || !r.Finished() || finished <= in.Spec.HistoryLimit || in.Spec.Schedule == "" {
			runs = append(runs, r)
			continue
		}
		for _, a := range r.Attempts {
			if _, live := seen[a.ID]; live {
				o.Remove[a.ID] = fmt.Sprintf("run %d left the history (historyLimit %d)", r.Number, in.Spec.HistoryLimit)
			}
		}
	}
	o.Status.Runs = runs
	if len(runs) == 0 {
		o.Status.Runs = nil
	}
}

// summarize copies the newest run's state to the top of the status.
func (o *jobResult) summarize() {
	st := &o.Status
	if len(st.Runs) == 0 {
		st.Phase, st.Active, st.Succeeded, st.Failed = api.JobPending, 0, 0, 0
		return
	}
	r := st.Runs[0]
	st.Phase, st.Reason = r.Phase, r.Reason
	st.Active, st.Succeeded, st.Failed = r.Active, r.Succeeded, r.Failed
}
