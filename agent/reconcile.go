package agent

import (
	"context"
	"log/slog"

	"github.com/stratahq/strata/internal/api"
)

// reconciler makes one replica's provider match what the region wants:
// reconcile reads a copy of the replica's desired and observed state
// from the table, calls the provider without holding any lock, and
// records what the provider said in the table, which reports the
// replica's status. It owns no state of its own; retries and back-off
// are the work queue's.
type reconciler struct {
	table   *replicaTable
	configs *configFetcher
	// dns gives replicas the node's name server (nil: none).
	dns *nodeDNS
	t   *timings
	log *slog.Logger
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

// apply applies s.asg with its provider, configs, secrets and the
// node's resolver included (configFetcher.apply, nodeDNS.attach), within
// the Apply bound.
func (c *reconciler) apply(ctx context.Context, s step) (api.AssignmentStatus, error) {
	actx, cancel := context.WithTimeout(ctx, c.t.applyCall)
	defer cancel()
	return c.configs.apply(actx, s.prov, c.dns.attach(s.asg))
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
