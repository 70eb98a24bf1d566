package containerd

import (
	"context"
	"fmt"
	"sort"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
)

// Status implements provider.Provider from containerd's containers and
// tasks (or a volume's record): nothing is kept in memory.
func (p *Provider) Status(ctx context.Context, id string) (api.AssignmentStatus, error) {
	ctx = p.nsCtx(ctx)
	c, err := p.tasks.container(ctx, id)
	if err != nil {
		return api.AssignmentStatus{}, fmt.Errorf("containerd: status: %w", err)
	}
	if c == nil {
		v, err := p.volumes.read(id)
		if err != nil {
			return api.AssignmentStatus{}, fmt.Errorf("containerd: status: %w", err)
		}
		if v == nil {
			return api.AssignmentStatus{}, fmt.Errorf("containerd: replica %q: %w", id, provider.ErrNotFound)
		}
		return p.volumes.status(v), nil
	}
	t, err := p.tasks.task(ctx, id)
	if err != nil {
		return api.AssignmentStatus{}, fmt.Errorf("containerd: status: %w", err)
	}
	st := p.tasks.status(*c, t)
	p.tasks.withMembers(ctx, &st, *c)
	return st, nil
}

// List implements provider.Provider: every container of the namespace
// carrying LabelAssignment, and every volume, sorted by id.
func (p *Provider) List(ctx context.Context) ([]provider.Listed, error) {
	ctx = p.nsCtx(ctx)
	cs, err := p.client.ContainerService().List(ctx, fmt.Sprintf("labels.%q", LabelAssignment))
	if err != nil {
		return nil, fmt.Errorf("containerd: list: %w", err)
	}
	ts, err := p.tasks.all(ctx)
	if err != nil {
		return nil, fmt.Errorf("containerd: list: %w", err)
	}
	out := make([]provider.Listed, 0, len(cs))
	for _, c := range cs {
		st := p.tasks.status(c, ts[c.ID])
		p.tasks.withMembers(ctx, &st, c)
		out = append(out, provider.Listed{ID: c.ID, Kind: api.KindCompute, Generation: st.ObservedGeneration, Status: st})
	}
	vs, err := p.volumes.list()
	if err != nil {
		return nil, fmt.Errorf("containerd: list: %w", err)
	}
	for _, v := range vs {
		out = append(out, provider.Listed{ID: v.ID, Kind: api.KindVolume, Generation: v.Generation, Status: p.volumes.status(v)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}
