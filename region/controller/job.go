package controller

import (
	"cmp"
	"fmt"
	"reflect"
	"strconv"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/backoff"
	"github.com/stratahq/strata/internal/events"
	"github.com/stratahq/strata/region/state"
)

// reconcileJob runs a Job: attempts (replicas of the compute spec with
// restart policy never) are started, counted when they exit and retried,
// as stepJob decides; the job's status travels in its share.
func (c *Controller) reconcileJob(v *view, p *plan, key string, pl *api.Placement, live []*replica) {
	pr := &pl.Resource
	var prev *api.JobStatus
	if cur, ok := c.o.Caches.Shares.Get(key); ok && cur.Value.UID == pr.UID {
		prev = cur.Value.Job
	}
	byID := make(map[string]*replica, len(live))
	obs := make([]jobObs, 0, len(live))
	for _, r := range live {
		byID[r.a.ID] = r
		obs = append(obs, c.observeAttempt(v, r))
	}
	res := stepJob(jobInput{
		Spec:    pr.Spec.Job,
		Prev:    prev,
		Created: pr.CreatedAt,
		Enabled: pr.Replicas > 0,
		Obs:     obs,
		Now:     v.now,
		Backoff: backoff.Backoff{Min: c.o.RetryBackoff, Max: c.o.MaxBackoff},
		NewID:   func() string { return newID(pr.Name) },
	})
	v.changesAt(key, res.Next)
	for id, why := range res.Stop {
		if r := byID[id]; r != nil {
			c.destroy(v, p, key, r, why)
		}
	}
	for id, why := range res.Remove {
		if r := byID[id]; r != nil && r.a.Desired == api.DesiredRunning {
			c.destroy(v, p, key, r, why)
		}
	}
	// Each replica is written once per pass: what the drain removes is
	// not marked exited.
	c.drainJob(v, p, key, alive(live), obs)
	c.markExited(v, p, key, alive(live), obs)
	live = alive(live)
	for _, s := range res.Start {
		live = append(live, c.createAttempt(v, p, key, pl, s))
	}
	for _, ev := range res.Events {
		p.event(key, c.event(ev.Type, ev.Reason, "resource/"+key, ev.Message))
	}
	// Only running attempts are placed; finished ones keep their node.
	unplaced := c.schedule(v, p, key, pl, live)
	c.writeJobShare(v, p, key, pl, &res.Status, unplaced)
}

// markExited records on the assignment of each attempt that exited when
// it did, so that the scheduler no longer counts its CPU and memory. The
// generation stays: the agent has nothing to do (it never runs an exited
// attempt again). obs holds the observations of the live attempts.
func (c *Controller) markExited(v *view, p *plan, key string, live []*replica, obs []jobObs) {
	exitedAt := make(map[string]time.Time, len(obs))
	for _, ob := range obs {
		if ob.ExitCode != nil {
			exitedAt[ob.ID] = cmp.Or(ob.ExitedAt, v.now)
		}
	}
	for _, r := range live {
		at, ok := exitedAt[r.a.ID]
		if !ok || !r.a.ExitedAt.IsZero() || r.modRev == 0 {
			continue
		}
		a := *r.a
		a.ExitedAt = at
		p.updateAssignment(key, &a, r.modRev)
		r.a = &a
	}
}

// drainJob takes a Job's attempts off draining nodes. An attempt cannot
// move: one that exited is removed at once (its output with it), one that
// runs is left to finish until the drain's deadline, then stopped (its
// run counts it failed and retries it elsewhere). obs holds
// the observations of the live attempts.
func (c *Controller) drainJob(v *view, p *plan, key string, live []*replica, obs []jobObs) {
	runs := v.drains()
	if len(runs) == 0 {
		return
	}
	exited := make(map[string]bool, len(obs))
	for _, ob := range obs {
		exited[ob.ID] = ob.ExitCode != nil
	}
	for _, r := range live {
		run := runs[r.a.Node]
		switch {
		case run == nil:
		case exited[r.a.ID]:
			c.destroy(v, p, key, r, "finished job attempt removed by the drain of "+r.a.Node)
			run.moved++
			run.step(v, r, "", "removed", "finished job attempt")
		case run.forced:
			c.destroy(v, p, key, r, "drain deadline passed")
			run.stopped++
			run.step(v, r, "", "forced", "job attempt stopped: deadline passed before it finished")
		}
	}
}

// observeAttempt is what the pass sees of a live attempt.
func (c *Controller) observeAttempt(v *view, r *replica) jobObs {
	run, _ := strconv.ParseInt(r.a.Labels[api.LabelJobRun], 10, 64)
	ob := jobObs{ID: r.a.ID, Run: run, Node: r.a.Node, Created: r.a.CreatedAt}
	exited := r.st != nil && r.st.ExitCode != nil && r.phase == api.PhaseError && r.st.ObservedGeneration == r.a.Generation
	switch {
	case exited:
		code := *r.st.ExitCode
		ob.ExitCode, ob.ExitedAt = &code, r.st.Since
	case r.phase == api.PhaseError:
		ob.Broken = "failed: " + reasonOf(r)
	default:
		if lost, why := v.lost(r.a.Node); lost {
			ob.Broken = why
		} else if late, why := c.overdue(v, r); late {
			ob.Broken = why
		}
	}
	return ob
}

// createAttempt makes a new attempt of run s.Run: a compute replica that
// is never restarted in place, labelled with its run.
func (c *Controller) createAttempt(v *view, p *plan, key string, pl *api.Placement, s jobStart) *replica {
	r := c.create(v, p, key, pl, "")
	a := r.a
	a.ID = s.ID
	a.Kind = api.KindCompute
	labels := make(map[string]string, len(a.Labels)+1)
	for k, val := range a.Labels {
		labels[k] = val
	}
	labels[api.LabelJobRun] = strconv.FormatInt(s.Run, 10)
	a.Labels = labels
	if a.Spec.Compute != nil {
		cs := *a.Spec.Compute
		cs.RestartPolicy = api.RestartNever
		a.Spec.Compute = &cs
	}
	p.event(key, c.event(events.TypeNormal, "AttemptCreated", "replica/"+a.ID, fmt.Sprintf("run %d", s.Run)))
	return r
}

// writeJobShare writes the job's share when it changed. The share's phase
// follows the newest run: running is provision, succeeded (or waiting
// for the schedule) is ready, failed is error.
func (c *Controller) writeJobShare(v *view, p *plan, key string, pl *api.Placement, js *api.JobStatus, unplaced string) {
	pr := &pl.Resource
	s := &state.Share{Tenant: pr.Tenant, Name: pr.Name, UID: pr.UID}
	s.Replicas, s.Revision, s.ObservedGeneration = pr.Replicas, pr.Revision, pr.Generation
	s.FailoverFrom = pl.FailoverFrom
	s.Updated = pr.Replicas
	s.Job = js
	s.Phase, s.Reason = jobSharePhase(js, pr.Spec.Job, unplaced)
	if s.Phase == api.PhaseReady {
		s.Ready = s.Replicas
	}
	if cur, ok := c.o.Caches.Shares.Get(key); ok {
		old := *cur.Value
		old.UpdatedAt = time.Time{}
		if reflect.DeepEqual(&old, s) {
			return
		}
	}
	s.UpdatedAt = v.now
	p.putShare(key, s)
}

// jobSharePhase maps a job's state onto the lifecycle phases every
// resource has.
func jobSharePhase(js *api.JobStatus, spec *api.JobSpec, unplaced string) (api.Phase, string) {
	var run *api.JobRun
	if len(js.Runs) > 0 {
		run = &js.Runs[0]
	}
	switch {
	case run == nil && spec.Schedule != "":
		return api.PhaseReady, "waiting for the schedule (next run " + js.NextRunAt.UTC().Format(time.RFC3339) + ")"
	case run == nil:
		return api.PhaseCreated, "no run (replicas 0)"
	case run.Phase == api.JobSucceeded:
		return api.PhaseReady, fmt.Sprintf("run %d succeeded", run.Number)
	case run.Phase == api.JobFailed:
		return api.PhaseError, fmt.Sprintf("run %d failed: %s (%d failed attempts)", run.Number, run.Reason, run.Failed)
	case unplaced != "":
		return api.PhaseCreated, unplaced
	}
	return api.PhaseProvision, fmt.Sprintf("run %d: %d active, %d/%d succeeded, %d failed", run.Number, run.Active, run.Succeeded, spec.Completions, run.Failed)
}
