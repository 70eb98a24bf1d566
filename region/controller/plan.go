package controller

import (
	"context"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/events"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/region/state"
)

// maxOpsPerTxn keeps each transaction under etcd's --max-txn-ops with
// room for the guard's compare.
const maxOpsPerTxn = 500

// plan collects one pass's writes, grouped by resource so that a
// resource's writes always commit together.
type plan struct {
	st    *state.State
	units []*unit
	byKey map[string]*unit
	// done counts units whose transaction committed.
	done int
	// touched records which caches must catch up after the commit.
	touchedAssignments, touchedShares, touchedPlacements, touchedDrains, touchedStatuses, touchedPorts bool
}

type unit struct {
	ops    []func(t *store.Txn) error
	events []events.Event
}

func newPlan(st *state.State) *plan {
	return &plan{st: st, byKey: map[string]*unit{}}
}

func (p *plan) unit(key string) *unit {
	u := p.byKey[key]
	if u == nil {
		u = &unit{}
		p.byKey[key] = u
		p.units = append(p.units, u)
	}
	return u
}

// ops counts the operations the plan writes.
func (p *plan) ops() int {
	n := 0
	for _, u := range p.units {
		n += len(u.ops)
	}
	return n
}

func (p *plan) empty() bool {
	for _, u := range p.units {
		if len(u.ops) > 0 {
			return false
		}
	}
	return true
}

func (u *unit) event(ev events.Event) { u.events = append(u.events, ev) }

func (p *plan) createAssignment(key string, a *api.Assignment) {
	p.touchedAssignments = true
	p.unit(key).ops = append(p.unit(key).ops, func(t *store.Txn) error {
		return p.st.Assignments.TxnCreate(t, a.ID, a)
	})
}

func (p *plan) updateAssignment(key string, a *api.Assignment, modRev int64) {
	p.touchedAssignments = true
	p.unit(key).ops = append(p.unit(key).ops, func(t *store.Txn) error {
		return p.st.Assignments.TxnUpdate(t, a.ID, a, modRev)
	})
}

// deleteAssignment removes a replica's records: the assignment, its
// status and its address.
func (p *plan) deleteAssignment(key string, a *api.Assignment, modRev int64, hasStatus bool) {
	p.touchedAssignments = true
	u := p.unit(key)
	u.ops = append(u.ops, func(t *store.Txn) error {
		p.st.Assignments.TxnDelete(t, a.ID, modRev)
		return nil
	})
	if hasStatus {
		p.touchedStatuses = true
		u.ops = append(u.ops, func(t *store.Txn) error {
			p.st.Statuses.TxnDelete(t, a.ID, 0)
			return nil
		})
	}
	if a.Network != nil && a.Network.Address != "" {
		p.touchedPorts = true
		u.ops = append(u.ops, func(t *store.Txn) error {
			p.st.Ports.TxnDelete(t, state.PortName(a.Network.Network, a.Network.Address), 0)
			return nil
		})
	}
}

func (p *plan) putShare(key string, s *state.Share) {
	p.touchedShares = true
	p.unit(key).ops = append(p.unit(key).ops, func(t *store.Txn) error {
		return p.st.Shares.TxnPut(t, key, s)
	})
}

func (p *plan) deleteShare(key string) {
	p.touchedShares = true
	p.unit(key).ops = append(p.unit(key).ops, func(t *store.Txn) error {
		p.st.Shares.TxnDelete(t, key, 0)
		return nil
	})
}

func (p *plan) deletePlacement(key string, modRev int64) {
	p.touchedPlacements = true
	p.unit(key).ops = append(p.unit(key).ops, func(t *store.Txn) error {
		p.st.Placements.TxnDelete(t, key, modRev)
		return nil
	})
}

// createPort records an address taken by a replica. It is created only if
// absent: the address is the key, so two replicas can never hold one
// address, whoever writes first.
func (p *plan) createPort(key string, port *api.Port) {
	p.touchedPorts = true
	p.unit(key).ops = append(p.unit(key).ops, func(t *store.Txn) error {
		return p.st.Ports.TxnCreate(t, state.PortName(port.Network, port.Address), port)
	})
}

func (p *plan) updateDrain(d *api.DrainStatus, modRev int64) {
	p.touchedDrains = true
	key := "drain/" + d.Node
	p.unit(key).ops = append(p.unit(key).ops, func(t *store.Txn) error {
		return p.st.Drains.TxnUpdate(t, d.Node, d, modRev)
	})
}

// commit writes the units in as few fenced transactions as fit, whole
// units per transaction, in order. It stops at the first failure; the
// units before it stay committed (each unit is consistent on its own).
func (p *plan) commit(ctx context.Context, guard store.Guard) (int64, error) {
	var rev int64
	i := 0
	for i < len(p.units) {
		t := p.st.Store.Txn().Guard(guard)
		n := 0
		for i < len(p.units) {
			u := p.units[i]
			if n > 0 && n+len(u.ops) > maxOpsPerTxn {
				break
			}
			for _, op := range u.ops {
				if err := op(t); err != nil {
					return rev, err
				}
			}
			n += len(u.ops)
			i++
		}
		if n == 0 {
			p.done = i
			continue
		}
		r, err := t.Commit(ctx)
		if err != nil {
			return rev, err
		}
		rev = r
		p.done = i
	}
	return rev, nil
}

// committedEvents are the events of the units that committed.
func (p *plan) committedEvents() []events.Event {
	var out []events.Event
	for _, u := range p.units[:p.done] {
		out = append(out, u.events...)
	}
	return out
}

// waitCaches blocks until the caches this plan wrote to have seen rev.
func (p *plan) waitCaches(ctx context.Context, c *state.Caches, rev int64) error {
	if rev == 0 {
		return nil
	}
	waits := []struct {
		touched bool
		wait    func(context.Context, int64) error
	}{
		{p.touchedAssignments, c.Assignments.WaitForRev},
		{p.touchedShares, c.Shares.WaitForRev},
		{p.touchedPlacements, c.Placements.WaitForRev},
		{p.touchedDrains, c.Drains.WaitForRev},
		{p.touchedStatuses, c.Statuses.WaitForRev},
		{p.touchedPorts, c.Ports.WaitForRev},
	}
	for _, w := range waits {
		if w.touched {
			if err := w.wait(ctx, rev); err != nil {
				return err
			}
		}
	}
	return nil
}
