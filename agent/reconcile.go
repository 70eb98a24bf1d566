package agent

import (
	"context"
	"log/slog"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// result is what one reconcile asks of the work queue, as
// controller-runtime's reconcile.Result: by default nothing (the id
// waits for its next change); Requeue runs it again as soon as its
// worker is done; RequeueAfter runs it again after that long. A
// reconcile that returns an error is retried after the id's backoff
// instead (workQueue.finish).
type result struct {
	Requeue      bool
	RequeueAfter time.Duration
}

// stepKind is the provider call one reconcile of a replica makes.
type stepKind int

const (
	stepNone   stepKind = iota // no provider call
	stepDelete                 // Delete target with grace
	stepApply                  // Apply asg
	stepStatus                 // Status, while the replica settles
)

// step is what one reconcile needs of a replica to call its provider,
// copied out of the table under its lock (replicaTable.begin) and handed
// back to the table with what the provider said.
type step struct {
	do stepKind
	id string
	// rep is the table's replica, for the table to record the outcome
	// in (under its lock); the reconciler never reads it.
	rep  *replica
	prov *providerEntry
	// asg is the assignment applied or destroyed; target is what a
	// Delete is told, with grace.
	asg    *api.Assignment
	target *api.Assignment
	grace  time.Duration
	// gone: a Delete of a replica the region no longer assigns (removed:
	// explicitly, rather than left out of a snapshot).
	gone, removed bool
	// version is the replica's when a Status step began.
	version int64
	// res is the result of a step without a provider call; postponed:
	// it only waited (an orphan whose snapshot still settles), which
	// does not count towards Ready.
	res       result
	postponed bool
}

// reconciler makes one replica's provider match what the region wants:
// reconcile reads a copy of the replica's desired and observed state
// from the table, calls the provider without holding any lock, and
// records what the provider said in the table, which reports the
// replica's status. It owns no state of its own; retries and back-off
// are the work queue's.
type reconciler struct {
	table   *replicaTable
	configs *configFetcher
	t       *timings
	log     *slog.Logger
}

// reconcile is one pass over replica id; see result for what it asks
// of the queue.
func (c *reconciler) reconcile(ctx context.Context, id string) (result, error) {
	s := c.table.begin(id)
	res, err := c.call(ctx, s)
	if !s.postponed {
		c.table.reconciledOnce(id)
	}
	return res, err
}

// call makes step s's provider call and records its outcome.
func (c *reconciler) call(ctx context.Context, s step) (result, error) {
	switch s.do {
	case stepDelete:
		if s.gone {
			c.log.Info("deleting replica the region no longer assigns", "id", s.id, "provider", s.prov.name, "removed", s.removed)
		}
		err := c.delete(ctx, s)
		if err != nil && ctx.Err() != nil {
			c.table.abandoned(s)
			return result{}, ctx.Err()
		}
		return result{}, c.table.deleted(s, err)
	case stepApply:
		st, err := c.apply(ctx, s)
		if err != nil && ctx.Err() != nil {
			c.table.abandoned(s)
			return result{}, ctx.Err()
		}
		return c.table.applied(s, st, err)
	case stepStatus:
		st, err := c.status(ctx, s)
		if ctx.Err() != nil {
			return result{}, ctx.Err()
		}
		return c.table.polled(s, st, err), nil
	}
	return s.res, nil
}

// apply applies s.asg with its provider, configs and secrets included
// (configFetcher.apply), within the Apply bound.
func (c *reconciler) apply(ctx context.Context, s step) (api.AssignmentStatus, error) {
	actx, cancel := context.WithTimeout(ctx, c.t.applyCall)
	defer cancel()
	return c.configs.apply(actx, s.prov, s.asg)
}

// delete deletes s.target, within its grace period and the Apply bound.
func (c *reconciler) delete(ctx context.Context, s step) error {
	dctx, cancel := context.WithTimeout(ctx, s.grace+c.t.applyCall)
	defer cancel()
	return s.prov.p.Delete(dctx, s.target, s.grace)
}

// status asks for the status of a settling replica.
func (c *reconciler) status(ctx context.Context, s step) (api.AssignmentStatus, error) {
	sctx, cancel := context.WithTimeout(ctx, c.t.providerCall)
	defer cancel()
	return s.prov.p.Status(sctx, s.id)
}
