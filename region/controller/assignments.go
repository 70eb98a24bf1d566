package controller

import (
	"crypto/rand"
	"fmt"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/events"
)

// assignmentWriter owns the writes of replicas' assignments a pass
// decides (create, destroy, forget, the reason one stays unplaced) and
// the events that tell of them, with the deadlines they run against.
type assignmentWriter struct {
	o *Options
}

// finishDestroy removes the records of a replica being destroyed once the
// agent confirms, its node is gone, or its deadline has passed. It reports
// whether the records go.
func (w *assignmentWriter) finishDestroy(v *view, p *plan, key string, r *replica) bool {
	_, nodeExists := v.node(r.a.Node)
	since := r.a.DestroyRequestedAt
	switch {
	case r.phase == api.PhaseDestroyed, r.a.Node == "", !nodeExists:
	case !since.IsZero() && v.now.Sub(since) > w.o.DestroyTimeout:
		p.deleteAssignment(key, r.a, r.modRev, r.st != nil)
		p.event(key, w.event(events.TypeWarning, "DestroyTimedOut", "replica/"+r.a.ID,
			fmt.Sprintf("node %s did not confirm within %s; forgetting the replica (its agent removes it when it returns)", r.a.Node, w.o.DestroyTimeout)))
		return true
	default:
		if !since.IsZero() {
			v.changesAt(key, justAfter(since.Add(w.o.DestroyTimeout)))
		}
		return false
	}
	p.deleteAssignment(key, r.a, r.modRev, r.st != nil)
	return true
}

// destroy asks the agent to remove a replica; a replica never placed is
// simply forgotten.
func (w *assignmentWriter) destroy(v *view, p *plan, key string, r *replica, why string) {
	if r.a.Node == "" {
		if r.modRev != 0 {
			p.deleteAssignment(key, r.a, r.modRev, r.st != nil)
		}
		a := *r.a
		a.Desired = api.DesiredDestroyed
		r.a = &a
		return
	}
	a := *r.a
	a.Desired = api.DesiredDestroyed
	a.DestroyRequestedAt = v.now
	a.Reason = why
	a.Generation++
	p.updateAssignment(key, &a, r.modRev)
	r.a = &a
	v.changesAt(key, justAfter(v.now.Add(w.o.DestroyTimeout)))
	p.event(key, w.event(events.TypeNormal, "Destroying", "replica/"+a.ID, fmt.Sprintf("on %s: %s", a.Node, why)))
}

// overdue reports a replica stuck in created (placed, not started) or
// provision past the provision deadline. One not late yet has its
// resource looked at again once the deadline passes.
func (w *assignmentWriter) overdue(v *view, r *replica) (bool, string) {
	var since time.Time
	switch r.phase {
	case api.PhaseCreated:
		if r.a.Node == "" {
			return false, ""
		}
		since = r.a.ScheduledAt
	case api.PhaseProvision:
		if r.st != nil {
			since = r.st.Since
		}
	default:
		return false, ""
	}
	if since.IsZero() {
		return false, ""
	}
	if v.now.Sub(since) <= w.o.ProvisionTimeout {
		v.changesAt(r.a.ResourceKey(), justAfter(since.Add(w.o.ProvisionTimeout)))
		return false, ""
	}
	return true, fmt.Sprintf("not ready on %s within the provision deadline (%s, phase %s)", r.a.Node, w.o.ProvisionTimeout, r.phase)
}

// create makes a new replica of the placement's current revision; the
// scheduler places it later in the pass.
func (w *assignmentWriter) create(v *view, p *plan, key string, pl *api.Placement, replaces string) *replica {
	pr := &pl.Resource
	a := &api.Assignment{
		ID:          newID(pr.Name),
		Tenant:      pr.Tenant,
		Resource:    pr.Name,
		ResourceUID: pr.UID,
		Kind:        pr.Kind,
		Provider:    providerOf(pl),
		Revision:    pr.Revision,
		Labels:      pr.Labels,
		Desired:     api.DesiredRunning,
		Spec:        pr.Spec,
		Image:       pl.Image,
		Generation:  1,
		CreatedAt:   v.now,
		Replaces:    replaces,
	}
	if pl.Flavor != nil {
		a.Flavor = pl.Flavor.Spec
	}
	if replaces != "" {
		a.Reason = "replaces " + replaces
	}
	return &replica{a: a, phase: api.PhaseCreated}
}

// leaveUnplaced records why a replica is not placed; the write happens
// only when the reason changes, so an unschedulable resource costs no
// writes per pass.
func (w *assignmentWriter) leaveUnplaced(v *view, p *plan, key string, r *replica, why string) {
	if r.modRev != 0 && r.a.Reason == why {
		return
	}
	a := *r.a
	a.Reason = why
	if r.modRev == 0 {
		p.createAssignment(key, &a)
	} else {
		p.updateAssignment(key, &a, r.modRev)
	}
	r.a = &a
	p.event(key, w.event(events.TypeWarning, "FailedScheduling", "replica/"+a.ID, why))
}

func (w *assignmentWriter) event(typ, reason, object, msg string) events.Event {
	return events.Event{Type: typ, Reason: reason, Object: object, Region: w.o.Region, Message: msg}
}

// providerOf says which provider kind serves a placement's replicas.
func providerOf(pl *api.Placement) api.ProviderKind {
	switch pl.Resource.Kind {
	case api.KindVolume:
		if v := pl.Resource.Spec.Volume; v != nil && v.Provider != "" {
			return v.Provider
		}
		return api.ProviderContainer
	case api.KindLoadbalancer:
		return api.ProviderLoadbalancer
	}
	if pl.Flavor != nil {
		return pl.Flavor.Kind
	}
	return api.ProviderContainer
}

// newID names a replica: its resource's name and a random suffix, short
// enough for container, domain and interface names.
func newID(name string) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	var b [8]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	if len(name) > 40 {
		name = name[:40]
	}
	return name + "-" + string(b[:])
}
