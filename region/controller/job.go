package controller

import (
	"cmp"
	"fmt"
	"strconv"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/backoff"
	"github.com/stratahq/strata/internal/events"
)

// jobs owns running Jobs: their attempts, started, observed and marked
// when they exit, as stepJob decides.
type jobs struct {
	o      *Options
	w      *assignmentWriter
	placer *placer
	drains *drainer
	shares *shares
}

// reconcile runs a Job: attempts (replicas of the compute spec with
// restart policy never) are started, counted when they exit and retried,
// as stepJob decides; the job's status travels in its share.
func (j *jobs) reconcile(v *view, p *plan, key string, pl *api.Placement, live []*replica) {
	pr := &pl.Resource
	var prev *api.JobStatus
	if cur, ok := j.o.Caches.Shares.Get(key); ok && cur.Value.UID == pr.UID {
		prev = cur.Value.Job
	}
	byID := make(map[string]*replica, len(live))
	obs := make([]jobObs, 0, len(live))
	for _, r := range live {
		byID[r.a.ID] = r
		obs = append(obs, j.observeAttempt(v, r))
	}
	res := stepJob(jobInput{
		Spec:    pr.Spec.Job,
		Prev:    prev,
		Created: pr.CreatedAt,
		Enabled: pr.Replicas > 0,
		Obs:     obs,
		Now:     v.now,
		Backoff: backoff.Backoff{Min: j.o.RetryBackoff, Max: j.o.MaxBackoff},
		NewID:   func() string { return newID(pr.Name) },
	})
	v.changesAt(key, res.Next)
	for id, why := range res.Stop {
		if r := byID[id]; r != nil {
			j.w.destroy(v, p, key, r, why)
		}
	}
	for id, why := range res.Remove {
		if r := byID[id]; r != nil && r.a.Desired == api.DesiredRunning {
			j.w.destroy(v, p, key, r, why)
		}
	}
	// Each replica is written once per pass: what the drain removes is
	// not marked exited.
	j.drains.job(v, p, key, alive(live), obs)
	j.markExited(v, p, key, alive(live), obs)
	live = alive(live)
	for _, s := range res.Start {
		live = append(live, j.createAttempt(v, p, key, pl, s))
	}
	for _, ev := range res.Events {
		p.event(key, j.w.event(ev.Type, ev.Reason, "resource/"+key, ev.Message))
	}
	// Only running attempts are placed; finished ones keep their node.
	unplaced := j.placer.schedule(v, p, key, pl, live)
	j.shares.writeJob(v, p, key, pl, &res.Status, unplaced)
}

// markExited records on the assignment of each attempt that exited when
// it did, so that the scheduler no longer counts its CPU and memory. The
// generation stays: the agent has nothing to do (it never runs an exited
// attempt again). obs holds the observations of the live attempts.
func (j *jobs) markExited(v *view, p *plan, key string, live []*replica, obs []jobObs) {
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

// observeAttempt is what the pass sees of a live attempt.
func (j *jobs) observeAttempt(v *view, r *replica) jobObs {
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
		} else if late, why := j.w.overdue(v, r); late {
			ob.Broken = why
		}
	}
	return ob
}

// createAttempt makes a new attempt of run s.Run: a compute replica that
// is never restarted in place, labelled with its run.
func (j *jobs) createAttempt(v *view, p *plan, key string, pl *api.Placement, s jobStart) *replica {
	r := j.w.create(v, p, key, pl, "")
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
	p.event(key, j.w.event(events.TypeNormal, "AttemptCreated", "replica/"+a.ID, fmt.Sprintf("run %d", s.Run)))
	return r
}
