package api

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/proto/apiproto"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
)

// Nodes are the node operations, which the global tier forwards to the
// node's region: nodes are the regions' to keep.
type Nodes struct {
	fan *regionFan
}

// NodeList is the nodes of one region or of all. Unreachable lists the
// regions that did not answer in time, so a partial list is never taken for
// a complete one.
type NodeList struct {
	Items       []api.Node `json:"items"`
	Unreachable []string   `json:"unreachable,omitempty"`
	// Continue fetches the next page; empty on the last one.
	Continue string `json:"continue,omitempty"`
}

// Page is one page of List, sorted by region and name: at most q.Limit
// nodes after those of the page whose continue token q carries. The
// regions are asked for every page (they keep the nodes, and answer
// from their caches).
func (n *Nodes) Page(ctx context.Context, region, selector string, q PageQuery) (NodeList, error) {
	limit, err := api.PageSize(q.Limit)
	if err != nil {
		return NodeList{}, err
	}
	after, err := api.AfterToken(q.Continue)
	if err != nil {
		return NodeList{}, err
	}
	list, err := n.List(ctx, region, selector)
	if err != nil {
		return NodeList{}, err
	}
	list.Items, list.Continue = api.Paginate(list.Items, func(n api.Node) string { return n.Region + "/" + n.Name }, after, limit)
	return list, nil
}

// List lists the nodes of region, or, with region "", of every region,
// asked concurrently; a region that fails to answer in time is reported in
// Unreachable instead of failing the list.
func (n *Nodes) List(ctx context.Context, region, selector string) (NodeList, error) {
	if _, err := authorize(ctx, useNodes); err != nil {
		return NodeList{}, err
	}
	if err := api.ValidateSelector("selector", selector); err != nil {
		return NodeList{}, err
	}
	list := NodeList{Items: []api.Node{}}
	if region != "" {
		c, err := n.fan.client(ctx, region)
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
	var mu sync.Mutex
	unreachable, err := n.fan.all(ctx, func(ctx context.Context, region string, c regionv1.RegionServiceClient) error {
		resp, err := c.ListNodes(ctx, &regionv1.ListNodesRequest{Selector: selector})
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		list.Items = append(list.Items, nodesFromPB(region, resp.GetItems())...)
		return nil
	})
	if err != nil {
		return NodeList{}, err
	}
	list.Unreachable = unreachable
	slices.SortFunc(list.Items, func(a, b api.Node) int {
		return cmp.Or(cmp.Compare(a.Region, b.Region), cmp.Compare(a.Name, b.Name))
	})
	return list, nil
}

// Get returns a node as its region sees it.
func (n *Nodes) Get(ctx context.Context, region, node string) (api.Node, error) {
	c, err := n.client(ctx, region, node)
	if err != nil {
		return api.Node{}, err
	}
	p, err := c.GetNode(ctx, &regionv1.NodeRef{Name: node})
	if err != nil {
		return api.Node{}, fmt.Errorf("region %q: %w", region, err)
	}
	return nodeFromPB(region, p), nil
}

// Delete removes a node from its region.
func (n *Nodes) Delete(ctx context.Context, region, node string) error {
	c, err := n.client(ctx, region, node)
	if err != nil {
		return err
	}
	if _, err := c.DeleteNode(ctx, &regionv1.NodeRef{Name: node}); err != nil {
		return fmt.Errorf("region %q: %w", region, err)
	}
	return nil
}

// Cordon stops new replicas from landing on a node.
func (n *Nodes) Cordon(ctx context.Context, region, node, reason string) (api.Node, error) {
	if err := api.ValidateText("reason", reason, 1024); err != nil {
		return api.Node{}, err
	}
	c, err := n.client(ctx, region, node)
	if err != nil {
		return api.Node{}, err
	}
	p, err := c.CordonNode(ctx, &regionv1.CordonNodeRequest{Name: node, Reason: reason})
	if err != nil {
		return api.Node{}, fmt.Errorf("region %q: %w", region, err)
	}
	return nodeFromPB(region, p), nil
}

// Uncordon makes a node schedulable again.
func (n *Nodes) Uncordon(ctx context.Context, region, node string) (api.Node, error) {
	c, err := n.client(ctx, region, node)
	if err != nil {
		return api.Node{}, err
	}
	p, err := c.UncordonNode(ctx, &regionv1.NodeRef{Name: node})
	if err != nil {
		return api.Node{}, fmt.Errorf("region %q: %w", region, err)
	}
	return nodeFromPB(region, p), nil
}

// Drain starts moving a node's replicas elsewhere.
func (n *Nodes) Drain(ctx context.Context, region, node string, d api.DrainRequest) (api.DrainStatus, error) {
	if err := d.Validate(); err != nil {
		return api.DrainStatus{}, err
	}
	c, err := n.client(ctx, region, node)
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
func (n *Nodes) GetDrain(ctx context.Context, region, node string) (api.DrainStatus, error) {
	c, err := n.client(ctx, region, node)
	if err != nil {
		return api.DrainStatus{}, err
	}
	ds, err := c.GetDrain(ctx, &regionv1.NodeRef{Name: node})
	if err != nil {
		return api.DrainStatus{}, fmt.Errorf("region %q: %w", region, err)
	}
	return apiproto.DrainStatusFromPB(ds), nil
}

// client authorizes a node operation and returns the client of the node's
// region.
func (n *Nodes) client(ctx context.Context, region, node string) (regionv1.RegionServiceClient, error) {
	if _, err := authorize(ctx, useNodes); err != nil {
		return nil, err
	}
	if err := api.ValidateName("node", node); err != nil {
		return nil, err
	}
	return n.fan.client(ctx, region)
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
