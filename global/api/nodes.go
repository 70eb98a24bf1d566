package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/api/apiproto"
	"github.com/stratahq/strata/internal/election"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
)

// NodeList is the nodes of one region or of all. Unreachable lists the
// regions that did not answer in time, so a partial list is never taken for
// a complete one.
type NodeList struct {
	Items       []api.Node `json:"items"`
	Unreachable []string   `json:"unreachable,omitempty"`
}

// ReplicaList is the replicas of a resource in every region it runs in.
type ReplicaList struct {
	Items       []api.Replica `json:"items"`
	Unreachable []string      `json:"unreachable,omitempty"`
}

// Status is the global tier's overview.
type Status struct {
	// ID is the replica that answered.
	ID          string       `json:"id"`
	Leader      string       `json:"leader,omitempty"`
	LeaderSince time.Time    `json:"leaderSince,omitzero"`
	IsLeader    bool         `json:"isLeader"`
	Version     string       `json:"version"`
	Regions     []api.Region `json:"regions"`
}

// ListNodes lists the nodes of region, or, with region "", of every region,
// asked concurrently; a region that fails to answer in time is reported in
// Unreachable instead of failing the list.
func (s *Service) ListNodes(ctx context.Context, region, selector string) (NodeList, error) {
	if _, err := authorize(ctx, useNodes); err != nil {
		return NodeList{}, err
	}
	if _, err := api.ParseSelector(selector); err != nil {
		return NodeList{}, err
	}
	list := NodeList{Items: []api.Node{}}
	if region != "" {
		c, err := s.regionClient(ctx, region)
		if err != nil {
			return NodeList{}, err
		}
		resp, err := c.ListNodes(ctx, &regionv1.ListNodesRequest{Selector: selector})
		if err != nil {
			return NodeList{}, fmt.Errorf("region %q: %w", region, err)
		}
		list.Items = nodesFromPB(region, resp.GetItems())
		return list, nil
	}
	regions, err := s.listRegions(ctx)
	if err != nil {
		return NodeList{}, err
	}
	var mu sync.Mutex
	list.Unreachable = s.fanOut(ctx, regionNames(regions), func(ctx context.Context, region string, c regionv1.RegionServiceClient) error {
		resp, err := c.ListNodes(ctx, &regionv1.ListNodesRequest{Selector: selector})
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		list.Items = append(list.Items, nodesFromPB(region, resp.GetItems())...)
		return nil
	})
	slices.SortFunc(list.Items, func(a, b api.Node) int {
		return cmp.Or(cmp.Compare(a.Region, b.Region), cmp.Compare(a.Name, b.Name))
	})
	return list, nil
}

// GetNode returns a node as its region sees it.
func (s *Service) GetNode(ctx context.Context, region, node string) (api.Node, error) {
	c, err := s.nodeClient(ctx, region, node)
	if err != nil {
		return api.Node{}, err
	}
	n, err := c.GetNode(ctx, &regionv1.NodeRef{Name: node})
	if err != nil {
		return api.Node{}, fmt.Errorf("region %q: %w", region, err)
	}
	return nodeFromPB(region, n), nil
}

// DeleteNode removes a node from its region.
func (s *Service) DeleteNode(ctx context.Context, region, node string) error {
	c, err := s.nodeClient(ctx, region, node)
	if err != nil {
		return err
	}
	if _, err := c.DeleteNode(ctx, &regionv1.NodeRef{Name: node}); err != nil {
		return fmt.Errorf("region %q: %w", region, err)
	}
	return nil
}

// CordonNode stops new replicas from landing on a node.
func (s *Service) CordonNode(ctx context.Context, region, node, reason string) (api.Node, error) {
	c, err := s.nodeClient(ctx, region, node)
	if err != nil {
		return api.Node{}, err
	}
	n, err := c.CordonNode(ctx, &regionv1.CordonNodeRequest{Name: node, Reason: reason})
	if err != nil {
		return api.Node{}, fmt.Errorf("region %q: %w", region, err)
	}
	return nodeFromPB(region, n), nil
}

// UncordonNode makes a node schedulable again.
func (s *Service) UncordonNode(ctx context.Context, region, node string) (api.Node, error) {
	c, err := s.nodeClient(ctx, region, node)
	if err != nil {
		return api.Node{}, err
	}
	n, err := c.UncordonNode(ctx, &regionv1.NodeRef{Name: node})
	if err != nil {
		return api.Node{}, fmt.Errorf("region %q: %w", region, err)
	}
	return nodeFromPB(region, n), nil
}

// DrainNode starts moving a node's replicas elsewhere.
func (s *Service) DrainNode(ctx context.Context, region, node string, d api.DrainRequest) (api.DrainStatus, error) {
	if err := d.Validate(); err != nil {
		return api.DrainStatus{}, err
	}
	c, err := s.nodeClient(ctx, region, node)
	if err != nil {
		return api.DrainStatus{}, err
	}
	ds, err := c.DrainNode(ctx, &regionv1.DrainNodeRequest{Name: node, Drain: apiproto.DrainRequestToPB(&d)})
	if err != nil {
		return api.DrainStatus{}, fmt.Errorf("region %q: %w", region, err)
	}
	return apiproto.DrainStatusFromPB(ds), nil
}

// GetDrain returns the progress of a node's drain.
func (s *Service) GetDrain(ctx context.Context, region, node string) (api.DrainStatus, error) {
	c, err := s.nodeClient(ctx, region, node)
	if err != nil {
		return api.DrainStatus{}, err
	}
	ds, err := c.GetDrain(ctx, &regionv1.NodeRef{Name: node})
	if err != nil {
		return api.DrainStatus{}, fmt.Errorf("region %q: %w", region, err)
	}
	return apiproto.DrainStatusFromPB(ds), nil
}

// ListReplicas asks every region the resource runs in, or is scheduled to,
// for its replicas. A resource spread over any region (no regions in its
// schedule) that has no status yet is looked for everywhere.
func (s *Service) ListReplicas(ctx context.Context, tenant, name string) (ReplicaList, error) {
	tenant, err := resourceScope(ctx, readResources, tenant, name)
	if err != nil {
		return ReplicaList{}, err
	}
	it, st, err := s.getResource(ctx, tenant, name)
	if err != nil {
		return ReplicaList{}, err
	}
	r := it.Value
	var names []string
	for _, t := range r.Schedule.Regions {
		names = append(names, t.Name)
	}
	if st != nil {
		names = append(names, sortedKeys(st.Regions)...)
	}
	if len(names) == 0 {
		regions, err := s.listRegions(ctx)
		if err != nil {
			return ReplicaList{}, err
		}
		names = regionNames(regions)
	}
	slices.Sort(names)
	names = slices.Compact(names)

	list := ReplicaList{Items: []api.Replica{}}
	var mu sync.Mutex
	list.Unreachable = s.fanOut(ctx, names, func(ctx context.Context, region string, c regionv1.RegionServiceClient) error {
		resp, err := c.ListReplicas(ctx, &regionv1.ListReplicasRequest{Tenant: tenant, Resource: name})
		if errors.Is(err, api.ErrNotFound) {
			return nil // the region answered: it holds none of it (failed over, removed)
		}
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for _, p := range resp.GetItems() {
			rep := apiproto.ReplicaFromPB(p)
			// A replica of a deleted namesake is not this resource's.
			if rep.ResourceUID != "" && rep.ResourceUID != r.UID {
				continue
			}
			if rep.Region == "" {
				rep.Region = region
			}
			list.Items = append(list.Items, rep)
		}
		return nil
	})
	slices.SortFunc(list.Items, func(a, b api.Replica) int {
		return cmp.Or(cmp.Compare(a.Region, b.Region), cmp.Compare(a.ID, b.ID))
	})
	return list, nil
}

// Status reports this replica, the master and the regions.
func (s *Service) Status(ctx context.Context) (Status, error) {
	if _, err := authorize(ctx, readStatus); err != nil {
		return Status{}, err
	}
	out := Status{ID: s.id, Version: s.version}
	if s.leader != nil {
		l, err := s.leader.Leader(ctx)
		switch {
		case err == nil:
			out.Leader, out.LeaderSince, out.IsLeader = l.ID, l.Since, l.ID == s.id
			// The elector itself knows best (its candidate id need not be
			// this replica's id).
			if e, ok := s.leader.(interface{ IsLeader() bool }); ok {
				out.IsLeader = e.IsLeader()
			}
		case errors.Is(err, election.ErrNoLeader):
		default:
			// The overview is still worth having without the leader.
			s.log.Warn("status: reading the leader", "err", err)
		}
	}
	regions, err := s.listRegions(ctx)
	if err != nil {
		return Status{}, err
	}
	out.Regions = regions
	return out, nil
}

// fanOut calls fn for every region concurrently, each call bounded by the
// region timeout, and returns the regions that failed, sorted.
func (s *Service) fanOut(ctx context.Context, regions []string, fn func(context.Context, string, regionv1.RegionServiceClient) error) []string {
	var (
		mu     sync.Mutex
		failed []string
		wg     sync.WaitGroup
	)
	for _, region := range regions {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, s.regionWait)
			defer cancel()
			c, err := s.regionClient(ctx, region)
			if err == nil {
				err = fn(ctx, region, c)
			}
			if err != nil {
				s.log.Warn("region did not answer", "region", region, "err", err)
				mu.Lock()
				failed = append(failed, region)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(failed)
	return failed
}

// nodeClient authorizes a node operation and returns the client of the
// node's region.
func (s *Service) nodeClient(ctx context.Context, region, node string) (regionv1.RegionServiceClient, error) {
	if _, err := authorize(ctx, useNodes); err != nil {
		return nil, err
	}
	if err := api.ValidateName("node", node); err != nil {
		return nil, err
	}
	return s.regionClient(ctx, region)
}

func (s *Service) regionClient(ctx context.Context, region string) (regionv1.RegionServiceClient, error) {
	if err := api.ValidateName("region", region); err != nil {
		return nil, err
	}
	if s.regions == nil {
		return nil, fmt.Errorf("no connections to regions are configured: %w", api.ErrUnavailable)
	}
	return s.regions.Client(ctx, region)
}

func nodesFromPB(region string, ps []*resourcev1.Node) []api.Node {
	out := make([]api.Node, len(ps))
	for i, p := range ps {
		out[i] = nodeFromPB(region, p)
	}
	return out
}

func nodeFromPB(region string, p *resourcev1.Node) api.Node {
	n := apiproto.NodeFromPB(p)
	if n.Region == "" {
		n.Region = region
	}
	return n
}

func regionNames(regions []api.Region) []string {
	names := make([]string, len(regions))
	for i, r := range regions {
		names[i] = r.Name
	}
	return names
}
