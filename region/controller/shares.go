package controller

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/region/state"
)

// shares owns each resource's status in the region (its share, which
// the global tier reads): aggregated from its replicas, or its job's,
// written only when it changed, and why a pass's writes failed.
type shares struct {
	o       *Options
	log     *slog.Logger
	retries *retries
}

// surface writes onto the share of each resource whose writes did not
// all apply why, so that the failure reaches the resource's status (and
// the global tier) rather than only the log. The share keeps the phase it
// had; the next pass that writes the resource replaces the reason. A
// resource that is gone from the region has nobody to tell: its work
// simply ends.
func (sh *shares) surface(ctx context.Context, guard store.Guard, now time.Time, failed map[string]error) (int64, error) {
	p := newPlan(sh.o.State)
	for key, ferr := range failed {
		sh.log.Warn("resource not written", "resource", key, "err", ferr)
		pl, ok := sh.o.Caches.Placements.Get(key)
		if !ok {
			continue
		}
		pr := &pl.Value.Resource
		reason := "the region could not store its changes (retrying): " + ferr.Error()
		s := &state.Share{Tenant: pr.Tenant, Name: pr.Name, UID: pr.UID}
		s.Phase, s.Replicas, s.Revision = api.PhaseCreated, pr.Replicas, pr.Revision
		if cur, ok := sh.o.Caches.Shares.Get(key); ok && cur.Value.UID == pr.UID {
			if cur.Value.Reason == reason {
				continue // already said
			}
			cp := *cur.Value
			s = &cp
		}
		s.Reason, s.UpdatedAt = reason, now
		p.putShare(key, s)
	}
	if p.empty() {
		return 0, nil
	}
	return p.commit(ctx, guard)
}

// writeJob writes the job's share when it changed. The share's phase
// follows the newest run: running is provision, succeeded (or waiting
// for the schedule) is ready, failed is error.
func (sh *shares) writeJob(v *view, p *plan, key string, pl *api.Placement, js *api.JobStatus, unplaced string) {
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
	sh.put(v, p, key, s)
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

// write computes the resource's status in this region and writes it
// when it changed. phase and reason, when set, override the computed ones.
func (sh *shares) write(v *view, p *plan, key string, pl *api.Placement, live []*replica, phase api.Phase, reason string) {
	pr := &pl.Resource
	s := &state.Share{Tenant: pr.Tenant, Name: pr.Name, UID: pr.UID}
	s.Replicas = pr.Replicas
	s.Revision = pr.Revision
	s.ObservedGeneration = pr.Generation
	s.FailoverFrom = pl.FailoverFrom
	if pr.Kind == api.KindImage {
		s.Replicas = 0
	}
	firstErr := countReplicas(s, live)
	avail := 0
	for _, r := range slotsOf(live) {
		minReady := pr.Rollout.MinReady()
		if r.a.Revision != pr.Revision {
			minReady = 0 // available before the rollout (see replace)
		}
		if available(v, key, r, minReady) {
			avail++
		}
	}
	switch {
	case phase != "":
		s.Phase, s.Reason = phase, reason
	case s.Ready == s.Replicas && avail == s.Replicas && s.Updated == s.Replicas && len(slotsOf(live)) == s.Replicas:
		s.Phase = api.PhaseReady
		sh.retries.readyAgain(v, key)
	case firstErr != nil:
		s.Phase = api.PhaseError
		s.Reason = fmt.Sprintf("replica %s on %s: %s", firstErr.a.ID, firstErr.a.Node, reasonOf(firstErr))
	case reason != "":
		s.Phase, s.Reason = api.PhaseCreated, reason
	case s.Ready > avail:
		s.Phase = api.PhaseProvision
		s.Reason = fmt.Sprintf("%d/%d ready, %d available (ready for minReadySeconds %d)", s.Ready, s.Replicas, avail, pr.Rollout.MinReadySeconds)
	default:
		s.Phase = api.PhaseProvision
		s.Reason = fmt.Sprintf("%d/%d ready", s.Ready, s.Replicas)
	}
	if phase == "" || phase == api.PhaseReady {
		sh.progress(v, key, pr, s, avail)
		sh.health(v, key, pr, s)
	}
	sh.put(v, p, key, s)
}

// stored is key's share as stored, when it is of the resource uid.
func (sh *shares) stored(key, uid string) *state.Share {
	if cur, ok := sh.o.Caches.Shares.Get(key); ok && cur.Value.UID == uid {
		return cur.Value
	}
	return nil
}

// progress keeps the share's ProgressingSince, the start of the region's
// rollout of its revision: set when the share moves to a new revision
// (or first appears) unready, cleared once it is ready, and then not set
// again at that revision (a replica that turns unready later is no
// rollout). A rollout still progressing rollout.progressDeadlineSeconds
// after it started has failed: the share says so in phase error, which
// stops the global rollout and, with autoRevert, reverts it. A paused
// rollout is not held to its deadline.
func (sh *shares) progress(v *view, key string, pr *api.Resource, s *state.Share, avail int) {
	old := sh.stored(key, pr.UID)
	switch {
	case s.Phase == api.PhaseReady:
		s.ProgressingSince = time.Time{}
		return
	case old == nil || old.Revision != s.Revision:
		s.ProgressingSince = v.now
	default:
		s.ProgressingSince = old.ProgressingSince
	}
	if s.ProgressingSince.IsZero() || pr.Rollout.Paused || pr.Kind != api.KindCompute {
		return
	}
	deadline := s.ProgressingSince.Add(pr.Rollout.ProgressDeadline())
	if v.now.Before(deadline) {
		v.changesAt(key, deadline)
		return
	}
	why := fmt.Sprintf("rollout of revision %d exceeded its progress deadline (%s): %d/%d replicas available",
		s.Revision, pr.Rollout.ProgressDeadline(), avail, s.Replicas)
	if s.Reason != "" {
		why += " (" + s.Reason + ")" // what held it up: unplaced, not ready
	}
	s.Phase, s.Reason = api.PhaseError, why
}

// health keeps the share's UnhealthySince: since when fewer of its
// replicas are ready than the resource's minHealthy (at least 1, at most
// the region's share), which failover.onUnhealthy acts on.
func (sh *shares) health(v *view, key string, pr *api.Resource, s *state.Share) {
	if pr.Kind != api.KindCompute || s.Replicas == 0 || s.Ready >= min(max(pr.Rollout.MinHealthy, 1), s.Replicas) {
		s.UnhealthySince = time.Time{}
		return
	}
	if old := sh.stored(key, pr.UID); old != nil && !old.UnhealthySince.IsZero() {
		s.UnhealthySince = old.UnhealthySince
		return
	}
	s.UnhealthySince = v.now
}

// countReplicas counts into s the ready, updated and unplaced replicas
// of live and gathers their backends; it returns the first replica in
// error, if any. A replacement waiting for a node while the replica it
// replaces runs (a surge, a drain's make-before-break) is not a slot,
// so it is not unplaced: the slot holds its node.
func countReplicas(s *state.Share, live []*replica) (firstErr *replica) {
	for _, r := range slotsOf(live) {
		if r.phase == api.PhaseReady {
			s.Ready++
		}
		if r.a.Node == "" {
			s.Unplaced++
		}
		if r.a.Revision == s.Revision {
			s.Updated++
		}
		if r.phase == api.PhaseError && firstErr == nil {
			firstErr = r
		}
	}
	for _, r := range live {
		if r.st != nil {
			s.Backends = append(s.Backends, r.st.Backends...)
		}
	}
	return firstErr
}

// put writes s as key's share unless the share stored says the same
// (its time aside): a resource whose status holds costs no write.
func (sh *shares) put(v *view, p *plan, key string, s *state.Share) {
	if cur, ok := sh.o.Caches.Shares.Get(key); ok {
		old := *cur.Value
		old.UpdatedAt = time.Time{}
		if reflect.DeepEqual(&old, s) {
			return
		}
	}
	s.UpdatedAt = v.now
	p.putShare(key, s)
}
