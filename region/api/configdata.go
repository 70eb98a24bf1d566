package api

import (
	"context"
	"fmt"

	"github.com/stratahq/strata/internal/api"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	globalv1 "github.com/stratahq/strata/proto/global/v1"
)

// configRelay owns the passing of Config and Secret data from the global
// tier to the agents: it checks that the asking node holds the assignment
// that names them, asks the global tier (ask; nil: the region does not
// reach it) and keeps nothing.
type configRelay struct {
	core
	ask func(ctx context.Context, req *globalv1.GetConfigDataRequest) (*globalv1.GetConfigDataResponse, error)
}

// get returns the data the assignment id of node names.
func (s *configRelay) get(ctx context.Context, node, id string) (*agentv1.GetConfigDataResponse, error) {
	it, ok := s.caches.Assignments.Get(id)
	if !ok || it.Value.Node != node {
		// Another node's assignment is as unknown as a missing one.
		return nil, api.NotFound("assignment", id)
	}
	asg := it.Value
	if asg.Spec.Compute == nil || len(asg.Spec.Compute.Refs()) == 0 {
		return &agentv1.GetConfigDataResponse{}, nil
	}
	if s.ask == nil {
		return nil, fmt.Errorf("this region does not reach the global tier: %w", api.ErrUnavailable)
	}
	// Exactly what the spec names, every container of its pod included:
	// the node names no refs of its own.
	req := &globalv1.GetConfigDataRequest{Region: s.region, Tenant: asg.Tenant, Resource: asg.Resource}
	named := map[string]bool{}
	for _, r := range asg.Spec.Compute.Refs() {
		req.Refs = append(req.Refs, &globalv1.ConfigDataRef{Kind: r.Kind(), Name: r.Name()})
		named[r.Kind()+"/"+r.Name()] = true
	}
	g, err := s.ask(ctx, req)
	if err != nil {
		return nil, err
	}
	out := &agentv1.GetConfigDataResponse{Items: make([]*agentv1.ConfigData, len(g.GetItems()))}
	for i, d := range g.GetItems() {
		if !named[d.GetKind()+"/"+d.GetName()] {
			// Never handed on: the node gets only what its replica's
			// spec names, whatever the answer holds.
			return nil, fmt.Errorf("the global tier sent %s %q, which assignment %s does not name", d.GetKind(), d.GetName(), id)
		}
		out.Items[i] = &agentv1.ConfigData{Kind: d.GetKind(), Name: d.GetName(), Data: d.GetData(), Type: d.GetType()}
	}
	return out, nil
}
