package controller

import (
	"fmt"
	"reflect"
	"sort"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/events"
	"github.com/stratahq/strata/internal/store"
)

// maxDrainSteps bounds the steps a drain status keeps (the newest).
const maxDrainSteps = 200

// drainer owns drains: which replicas move off draining nodes (and a
// Job's attempts), and each running drain's progress.
type drainer struct {
	o     *Options
	index *index
	w     *assignmentWriter
}

// drainRun is one running drain as a pass sees it. Moves are
// make-before-break: a replacement is created elsewhere, and the replica
// on the draining node is destroyed only once its replacement is ready,
// so a resource never has fewer ready replicas than before. At most
// MaxParallel moves are in flight. Past the deadline the remaining
// replicas are destroyed without waiting. Replicas bound to a local
// volume on the node are not moved (their data would not follow): they
// count as failed and stay.
type drainRun struct {
	item   store.Item[api.DrainStatus]
	budget int
	forced bool
	steps  []api.DrainStep
	// moved and stopped count this pass's destroys; unmovable names the
	// replicas that cannot move.
	moved, stopped int
	unmovable      map[string]string
}

// unmovable says why a replica cannot be moved by a drain, or "".
func unmovable(r *replica) string {
	if r.a.Kind == api.KindVolume {
		return "a local volume: its data stays on the node"
	}
	if len(r.a.Volumes) > 0 {
		return "bound to local volume " + r.a.Volumes[0].Name + " on the node"
	}
	return ""
}

func (run *drainRun) step(v *view, r *replica, to, state, msg string) {
	run.steps = append(run.steps, api.DrainStep{
		Replica: r.a.ID, Resource: r.a.ResourceKey(), To: to, State: state, Message: msg, At: v.now,
	})
}

// progress adds this pass's moves, failures and steps to d, with running
// replicas still on the node.
func (run *drainRun) progress(d *api.DrainStatus, running int) {
	if d.Total == 0 && d.Moved == 0 && d.Failed == 0 && len(d.Steps) == 0 {
		d.Total = running + run.moved + run.stopped
	}
	d.Moved += run.moved
	d.Failed = len(run.unmovable) + countForced(d.Steps) + run.stopped
	d.Remaining = max(running-len(run.unmovable), 0)
	d.Steps = append(append([]api.DrainStep(nil), d.Steps...), run.steps...)
	if len(d.Steps) > maxDrainSteps {
		d.Steps = d.Steps[len(d.Steps)-maxDrainSteps:]
	}
	d.Message = fmt.Sprintf("%d moved, %d remaining, %d failed", d.Moved, d.Remaining, d.Failed)
	if len(run.unmovable) > 0 {
		ids := make([]string, 0, len(run.unmovable))
		for id := range run.unmovable {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		d.Message += fmt.Sprintf("; not moved: %s (%s)", ids[0], run.unmovable[ids[0]])
		if len(ids) > 1 {
			d.Message += fmt.Sprintf(" and %d more", len(ids)-1)
		}
	}
}

func countForced(steps []api.DrainStep) int {
	n := 0
	for _, s := range steps {
		if s.State == "forced" {
			n++
		}
	}
	return n
}

// hasReplacement reports whether a running replica replaces id.
func (dr *drainer) hasReplacement(id string) bool {
	key, ok := dr.index.resourceOf(id)
	if !ok {
		return false
	}
	for _, other := range dr.index.ofResource(key) {
		if it, ok := dr.o.Caches.Assignments.Get(other); ok && it.Value.Replaces == id && it.Value.Desired == api.DesiredRunning {
			return true
		}
	}
	return false
}

// keys are the resources with replicas on draining nodes: every pass
// looks at them so that drains progress without waiting for a resync;
// once a drain's deadline passes they are looked at again, to be forced.
func (dr *drainer) keys(v *view) []string {
	var out []string
	for node, run := range dr.runs(v) {
		d := run.item.Value
		for _, id := range dr.index.onNode(node) {
			if key, ok := dr.index.resourceOf(id); ok {
				out = append(out, key)
				if !run.forced && !d.Deadline.IsZero() {
					v.changesAt(key, justAfter(d.Deadline))
				}
			}
		}
	}
	return out
}

// moveOff starts, completes or forces the moves of a
// resource's replicas that sit on draining nodes.
func (dr *drainer) moveOff(v *view, p *plan, key string, pl *api.Placement, live []*replica) []*replica {
	runs := dr.runs(v)
	if len(runs) == 0 {
		return live
	}
	replacement := map[string]*replica{}
	for _, r := range live {
		if r.a.Replaces != "" {
			replacement[r.a.Replaces] = r
		}
	}
	for _, r := range append([]*replica(nil), live...) {
		run := runs[r.a.Node]
		if run == nil || r.a.Desired != api.DesiredRunning {
			continue
		}
		if why := unmovable(r); why != "" {
			run.unmovable[r.a.ID] = why
			continue
		}
		repl := replacement[r.a.ID]
		switch {
		case run.forced:
			dr.w.destroy(v, p, key, r, "drain deadline passed")
			run.stopped++
			run.step(v, r, "", "forced", "deadline passed before a replacement was ready")
		case repl == nil:
			if run.budget <= 0 {
				continue
			}
			run.budget--
			n := dr.w.create(v, p, key, pl, r.a.ID)
			live = append(live, n)
			run.step(v, r, "", "moving", "replacement "+n.a.ID+" created")
		case repl.phase == api.PhaseReady:
			dr.w.destroy(v, p, key, r, fmt.Sprintf("moved to %s by the drain of %s", repl.a.Node, r.a.Node))
			run.moved++
			run.step(v, r, repl.a.Node, "moved", "replacement "+repl.a.ID+" is ready")
		}
	}
	return alive(live)
}

// record updates every running drain's progress after the
// resources had their pass, and finishes drains with nothing left to move.
func (dr *drainer) record(v *view, p *plan) {
	for node, run := range dr.runs(v) {
		d := *run.item.Value
		// What still runs on the node, minus this pass's destroys.
		running := 0
		for _, id := range dr.index.onNode(node) {
			if it, ok := dr.o.Caches.Assignments.Get(id); ok && it.Value.Desired == api.DesiredRunning {
				running++
			}
		}
		running -= run.moved + run.stopped
		run.progress(&d, running)
		var ev *events.Event
		if d.Remaining == 0 {
			d.FinishedAt = v.now
			d.State = api.DrainSucceeded
			if d.Failed > 0 {
				d.State = api.DrainFailed
			}
			e := dr.w.event(events.TypeNormal, "DrainFinished", "node/"+node, d.State+": "+d.Message)
			ev = &e
		} else if len(run.steps) > 0 {
			e := dr.w.event(events.TypeNormal, "DrainProgress", "node/"+node, d.Message)
			ev = &e
		}
		if reflect.DeepEqual(&d, run.item.Value) {
			continue
		}
		p.updateDrain(&d, run.item.ModRevision, ev)
	}
}

// job takes a Job's attempts off draining nodes. An attempt cannot
// move: one that exited is removed at once (its output with it), one that
// runs is left to finish until the drain's deadline, then stopped (its
// run counts it failed and retries it elsewhere). obs holds
// the observations of the live attempts.
func (dr *drainer) job(v *view, p *plan, key string, live []*replica, obs []jobObs) {
	runs := dr.runs(v)
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
			dr.w.destroy(v, p, key, r, "finished job attempt removed by the drain of "+r.a.Node)
			run.moved++
			run.step(v, r, "", "removed", "finished job attempt")
		case run.forced:
			dr.w.destroy(v, p, key, r, "drain deadline passed")
			run.stopped++
			run.step(v, r, "", "forced", "job attempt stopped: deadline passed before it finished")
		}
	}
}

// runs returns the running drains of the pass, computing each one's
// budget of new moves from the moves already in flight.
func (dr *drainer) runs(v *view) map[string]*drainRun {
	if v.drainRuns != nil {
		return v.drainRuns
	}
	v.drainRuns = map[string]*drainRun{}
	for _, it := range dr.o.Caches.Drains.List() {
		d := it.Value
		if d.State != api.DrainRunning {
			continue
		}
		run := &drainRun{item: it, forced: !d.Deadline.IsZero() && v.now.After(d.Deadline), unmovable: map[string]string{}}
		inflight := 0
		for _, id := range dr.index.onNode(d.Node) {
			if dr.hasReplacement(id) {
				inflight++
			}
		}
		run.budget = max(d.MaxParallel, 1) - inflight
		v.drainRuns[d.Node] = run
	}
	return v.drainRuns
}
