package libvirt

import (
	"context"
	"fmt"
	"sort"

	"libvirt.org/go/libvirt"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
)

// Status implements provider.Provider.
func (p *Provider) Status(_ context.Context, id string) (api.AssignmentStatus, error) {
	c, err := p.conn.connect()
	if err != nil {
		return api.AssignmentStatus{}, fmt.Errorf("libvirt: status %s: %w", id, err)
	}
	st, err := p.status(c, id)
	if err != nil {
		return api.AssignmentStatus{}, fmt.Errorf("libvirt: status %s: %w", id, err)
	}
	return st, nil
}

// status is the status of replica id: its domain's, else its volume's.
func (p *Provider) status(c *libvirt.Connect, id string) (api.AssignmentStatus, error) {
	if st, found, err := p.domains.lookup(c, id); err != nil || found {
		return st, err
	}
	rec, ok, err := p.volumes.record(id)
	if err != nil {
		return api.AssignmentStatus{}, err
	}
	if ok {
		return p.volumes.status(c, rec), nil
	}
	return api.AssignmentStatus{}, fmt.Errorf("replica %q: %w", id, provider.ErrNotFound)
}

// List implements provider.Provider: this node's strata- domains (by their
// metadata) and Volume replicas, sorted by id.
func (p *Provider) List(context.Context) ([]provider.Listed, error) {
	c, err := p.conn.connect()
	if err != nil {
		return nil, fmt.Errorf("libvirt: list: %w", err)
	}
	out, err := p.domains.list(c)
	if err != nil {
		return nil, fmt.Errorf("libvirt: %w", err)
	}
	recs, err := p.volumes.records()
	if err != nil {
		return nil, fmt.Errorf("libvirt: list: %w", err)
	}
	for _, r := range recs {
		out = append(out, provider.Listed{ID: r.ID, Kind: api.KindVolume, Generation: r.Generation, Status: p.volumes.status(c, r)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}
