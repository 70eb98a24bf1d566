package controller

import (
	"context"
	"errors"
	"maps"
	"strings"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/events"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/region/state"
)

// plan collects one pass's writes as the steps of a store.Batch, one group
// per resource. A step is what must apply together (a replica's
// assignment and its address); a resource's steps apply in the order the
// pass made them, the resource's share last, in as many fenced
// transactions as they need, so a resource of any size can be written,
// and a resource whose write fails stops alone. Drains are written after
// the resources, and only when every resource's writes applied: their
// counts follow from the resources' moves.
type plan struct {
	st     *state.State
	main   *store.Batch
	drains *store.Batch
	// last is each group's latest step in main: the step its next event
	// follows.
	last   map[string]int
	events []planEvent
	// res and drainRes are what the commit applied; committed is false
	// when an error stopped it (not one resource's failure).
	res, drainRes store.BatchResult
	committed     bool
	// touched records which caches must catch up after the commit.
	touchedAssignments, touchedShares, touchedPlacements, touchedDrains, touchedStatuses, touchedPorts bool
}

// planEvent is an event emitted once the step it follows applied; step
// -1 follows none and is emitted unless its group failed.
type planEvent struct {
	group string
	step  int
	drain bool
	ev    events.Event
}

func newPlan(st *state.State) *plan {
	return &plan{st: st, main: st.Store.Batch(), drains: st.Store.Batch(), last: map[string]int{}}
}

// step starts a step of key's group.
func (p *plan) step(key string) *store.Txn {
	t := p.main.Step(key)
	p.last[key] = p.main.Len() - 1
	return t
}

// event records ev to emit once key's latest step applied.
func (p *plan) event(key string, ev events.Event) {
	// Every plan event is about a tenant's resource or replica (key is
	// tenant/name): the tenant may see it.
	if ev.Tenant == "" {
		ev.Tenant, _, _ = strings.Cut(key, "/")
	}
	// A replica's event names its resource, as the region API's do: the
	// emitter coalesces a resource's replica events by it, and alert
	// rules select on the resource's labels through it.
	if strings.HasPrefix(ev.Object, "replica/") && ev.Fields["resource"] == "" {
		ev.Fields = maps.Clone(ev.Fields)
		if ev.Fields == nil {
			ev.Fields = map[string]string{}
		}
		ev.Fields["resource"] = key
	}
	step, ok := p.last[key]
	if !ok {
		step = -1
	}
	p.events = append(p.events, planEvent{group: key, step: step, ev: ev})
}

// ops counts the operations the plan writes.
func (p *plan) ops() int { return p.main.Ops() + p.drains.Ops() }

func (p *plan) empty() bool { return p.main.Len() == 0 && p.drains.Len() == 0 }

// placeReplica writes a replica that got a node: created, or updated at
// modRev, together with its address (port may be nil). The port is
// created only if absent: the address is the key, so two replicas can
// never hold one address, whoever writes first.
func (p *plan) placeReplica(key string, a *api.Assignment, modRev int64, port *api.Port) {
	t := p.step(key)
	if port != nil {
		p.touchedPorts = true
		_ = p.st.Ports.TxnCreate(t, state.PortName(port.Network, port.Address), port)
	}
	p.touchedAssignments = true
	if modRev == 0 {
		_ = p.st.Assignments.TxnCreate(t, a.ID, a) // build errors fail the step
	} else {
		_ = p.st.Assignments.TxnUpdate(t, a.ID, a, modRev)
	}
}

func (p *plan) createAssignment(key string, a *api.Assignment) { p.placeReplica(key, a, 0, nil) }

func (p *plan) updateAssignment(key string, a *api.Assignment, modRev int64) {
	p.placeReplica(key, a, modRev, nil)
}

// deleteAssignment removes a replica's records: the assignment, its
// status and its address.
func (p *plan) deleteAssignment(key string, a *api.Assignment, modRev int64, hasStatus bool) {
	t := p.step(key)
	p.touchedAssignments = true
	p.st.Assignments.TxnDelete(t, a.ID, modRev)
	if hasStatus {
		p.touchedStatuses = true
		p.st.Statuses.TxnDelete(t, a.ID, 0)
	}
	if a.Network != nil && a.Network.Address != "" {
		p.touchedPorts = true
		p.st.Ports.TxnDelete(t, state.PortName(a.Network.Network, a.Network.Address), 0)
	}
}

func (p *plan) putShare(key string, s *state.Share) {
	p.touchedShares = true
	_ = p.st.Shares.TxnPut(p.step(key), key, s)
}

func (p *plan) deleteShare(key string) {
	p.touchedShares = true
	p.st.Shares.TxnDelete(p.step(key), key, 0)
}

func (p *plan) deletePlacement(key string, modRev int64) {
	p.touchedPlacements = true
	p.st.Placements.TxnDelete(p.step(key), key, modRev)
}

// updateDrain writes a drain's progress, after the resources; ev (if
// any) is emitted once it applied.
func (p *plan) updateDrain(d *api.DrainStatus, modRev int64, ev *events.Event) {
	p.touchedDrains = true
	_ = p.st.Drains.TxnUpdate(p.drains.Step("drain/"+d.Node), d.Node, d, modRev)
	if ev != nil {
		p.events = append(p.events, planEvent{group: "drain/" + d.Node, step: p.drains.Len() - 1, drain: true, ev: *ev})
	}
}

// commit writes the resources' steps, then, if all of them applied, the
// drains'. It returns the revision of the last transaction that applied
// (also on error: what applied stays applied). A *store.BatchError names
// the resources whose writes did not all apply.
func (p *plan) commit(ctx context.Context, guard store.Guard) (int64, error) {
	var err error
	p.res, err = p.main.Guard(guard).Commit(ctx)
	rev := p.res.Revision
	p.committed = err == nil || batchFailures(err) != nil
	if err != nil || p.drains.Len() == 0 {
		return rev, err
	}
	p.drainRes, err = p.drains.Guard(guard).Commit(ctx)
	if p.drainRes.Revision > 0 {
		rev = p.drainRes.Revision
	}
	return rev, err
}

// committedEvents are the events whose steps applied.
func (p *plan) committedEvents() []events.Event {
	var out []events.Event
	for _, e := range p.events {
		res := p.res
		if e.drain {
			res = p.drainRes
		}
		var ok bool
		if e.step < 0 {
			_, failed := res.Failed[e.group]
			ok = p.committed && !failed
		} else {
			ok = e.step < len(res.Applied) && res.Applied[e.step]
		}
		if ok {
			out = append(out, e.ev)
		}
	}
	return out
}

// waitCaches blocks until the caches this plan wrote to have seen rev.
func (p *plan) waitCaches(ctx context.Context, c *state.Caches, rev int64) error {
	if rev == 0 {
		return nil
	}
	var caches []store.RevWaiter
	for _, w := range []struct {
		touched bool
		cache   store.RevWaiter
	}{
		{p.touchedAssignments, c.Assignments},
		{p.touchedShares, c.Shares},
		{p.touchedPlacements, c.Placements},
		{p.touchedDrains, c.Drains},
		{p.touchedStatuses, c.Statuses},
		{p.touchedPorts, c.Ports},
	} {
		if w.touched {
			caches = append(caches, w.cache)
		}
	}
	return store.WaitForRev(ctx, rev, caches...)
}

// batchFailures returns the groups of a *store.BatchError, nil for any
// other error.
func batchFailures(err error) map[string]error {
	var be *store.BatchError
	if errors.As(err, &be) {
		return be.Failed
	}
	return nil
}
