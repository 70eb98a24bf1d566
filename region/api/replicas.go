package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"google.golang.org/grpc"

	"github.com/stratahq/strata/internal/api"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
	"github.com/stratahq/strata/region/agentconn"
	"github.com/stratahq/strata/region/state"
)

// replicas owns the operators' and the global tier's view of the
// region's replicas: each assignment joined with the status its agent
// reported, and the logs its node's agent serves (NodeService, through the
// pool of agent connections).
type replicas struct {
	core
	agents *agentconn.Pool
}

// list returns the replicas of one resource (tenant and resource)
// or of one node, sorted by replicaKey.
func (s *replicas) list(tenant, resource, node string) ([]api.Replica, error) {
	byNode := node != ""
	switch {
	case byNode && (tenant != "" || resource != ""):
		return nil, api.Invalid("node", "give either a node or a tenant and resource, not both")
	case !byNode && (tenant == "" || resource == ""):
		return nil, api.Invalid("resource", "give a tenant and a resource, or a node")
	}
	selected := func(a *api.Assignment) bool { return a.Node == node }
	if !byNode {
		selected = func(a *api.Assignment) bool { return a.Tenant == tenant && a.Resource == resource }
	}
	out := []api.Replica{}
	for _, it := range s.caches.Assignments.List() {
		if selected(it.Value) {
			out = append(out, s.replica(it.Value))
		}
	}
	if len(out) == 0 {
		// Distinguish "nothing there yet" from a typo.
		if err := s.known(tenant, resource, node); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(out, func(a, b api.Replica) int { return cmp.Compare(replicaKey(a), replicaKey(b)) })
	return out, nil
}

// replicaKey is what replicas are sorted, and paged, by: their resource,
// then their id.
func replicaKey(r api.Replica) string { return r.ResourceKey() + "/" + r.ID }

// known says whether a node (node != "") or a resource is known to the
// region: a not-found error if not.
func (s *replicas) known(tenant, resource, node string) error {
	if node != "" {
		if _, ok := s.caches.Nodes.Get(node); !ok {
			return api.NotFound("node", node)
		}
		return nil
	}
	if _, ok := s.caches.Placements.Get(tenant + "/" + resource); !ok {
		return api.NotFound("resource", tenant+"/"+resource)
	}
	return nil
}

// replica joins an assignment with its status.
func (s *replicas) replica(a *api.Assignment) api.Replica {
	r := api.Replica{Assignment: *a, Region: s.region}
	if st, ok := s.caches.Statuses.Get(a.ID); ok {
		status := *st.Value
		r.Status = &status
	}
	r.Phase = state.ReplicaPhase(a, r.Status)
	return r
}

// findReplica returns the assignment a logs request names: the replica
// given, or the resource's first replica placed on a node.
func (s *replicas) findReplica(tenant, resource, id string) (*api.Assignment, error) {
	if id != "" {
		it, ok := s.caches.Assignments.Get(id)
		if !ok || tenant != "" && it.Value.Tenant != tenant || resource != "" && it.Value.Resource != resource {
			return nil, api.NotFound("replica", id)
		}
		return it.Value, nil
	}
	if tenant == "" || resource == "" {
		return nil, api.Invalid("replica", "give a replica, or a tenant and resource")
	}
	for _, it := range s.caches.Assignments.List() { // sorted by id
		a := it.Value
		if a.Tenant == tenant && a.Resource == resource && a.Node != "" && a.Desired == api.DesiredRunning {
			return a, nil
		}
	}
	return nil, api.NotFound("running replica of resource", tenant+"/"+resource)
}

// logs streams a replica's logs from the agent of its node until either
// side ends.
func (s *replicas) logs(ctx context.Context, req *resourcev1.LogsRequest, send func(*resourcev1.LogChunk) error) error {
	a, err := s.findReplica(req.GetTenant(), req.GetResource(), req.GetReplica())
	if err != nil {
		return err
	}
	if a.Node == "" {
		return fmt.Errorf("replica %s is not placed on a node: %w", a.ID, api.ErrConflict)
	}
	node, ok := s.caches.Nodes.Get(a.Node)
	if !ok {
		return fmt.Errorf("node %s of replica %s is not registered: %w", a.Node, a.ID, api.ErrUnavailable)
	}
	if node.Value.Address == "" {
		return fmt.Errorf("node %s has no address to fetch logs from: %w", a.Node, api.ErrUnavailable)
	}
	cc, release, err := s.agents.Get(a.Node, node.Value.Address)
	if err != nil {
		return err
	}
	err = streamLogs(ctx, cc, a, req, send)
	// An unreachable agent may have restarted: the next request dials
	// again instead of waiting out the connection's backoff.
	release(errors.Is(err, api.ErrUnavailable))
	return err
}

func streamLogs(ctx context.Context, cc grpc.ClientConnInterface, a *api.Assignment, req *resourcev1.LogsRequest, send func(*resourcev1.LogChunk) error) error {
	stream, err := agentv1.NewNodeServiceClient(cc).Logs(ctx, &agentv1.NodeLogsRequest{
		AssignmentId: a.ID,
		Follow:       req.GetFollow(),
		TailLines:    req.GetTailLines(),
		Container:    req.GetContainer(),
	})
	if err != nil {
		return fmt.Errorf("logs of replica %s from node %s: %w", a.ID, a.Node, err)
	}
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("logs of replica %s from node %s: %w", a.ID, a.Node, err)
		}
		if err := send(chunk); err != nil {
			return err
		}
	}
}
