package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"

	"google.golang.org/grpc"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/audit"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/proto/apiproto"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
)

// Replicas are the resources' replicas and their output, which live in
// the regions: the global tier asks the regions each time.
type Replicas struct {
	fan       *regionFan
	resources resourceReader
}

// resourceReader reads a resource with its status (Resources).
type resourceReader interface {
	read(ctx context.Context, tenant, name string) (store.Item[api.Resource], *api.ResourceStatus, error)
}

// ReplicaList is the replicas of a resource in every region it runs in.
type ReplicaList struct {
	Items       []api.Replica `json:"items"`
	Unreachable []string      `json:"unreachable,omitempty"`
}

// List asks every region the resource runs in, or is scheduled to, for
// its replicas. A resource spread over any region (no regions in its
// schedule) that has no status yet is looked for everywhere.
func (p *Replicas) List(ctx context.Context, tenant, name string) (ReplicaList, error) {
	tenant, err := resourceScope(ctx, readResources, tenant, name)
	if err != nil {
		return ReplicaList{}, err
	}
	it, st, err := p.resources.read(ctx, tenant, name)
	if err != nil {
		return ReplicaList{}, err
	}
	return p.list(ctx, tenant, it.Value, st)
}

// list is List for a resource already read in tenant (the caller checked
// the scope): the one fan-out of replica reads, which resolve shares.
func (p *Replicas) list(ctx context.Context, tenant string, r *api.Resource, st *api.ResourceStatus) (ReplicaList, error) {
	names, err := p.regionsOf(ctx, r, st)
	if err != nil {
		return ReplicaList{}, err
	}
	list := ReplicaList{Items: []api.Replica{}}
	var mu sync.Mutex
	list.Unreachable = p.fan.each(ctx, names, func(ctx context.Context, region string, c regionv1.RegionServiceClient) error {
		resp, err := c.ListReplicas(ctx, &regionv1.ListReplicasRequest{Tenant: tenant, Resource: r.Name})
		if errors.Is(err, api.ErrNotFound) {
			return nil // the region answered: it holds none of it (failed over, removed)
		}
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		list.Items = append(list.Items, replicasOf(r, region, resp.GetItems())...)
		return nil
	})
	slices.SortFunc(list.Items, func(a, b api.Replica) int {
		return cmp.Or(cmp.Compare(a.Region, b.Region), cmp.Compare(a.ID, b.ID))
	})
	return list, nil
}

// regionsOf are the regions r may have replicas in: the ones its
// schedule names and its status reports, else every region.
func (p *Replicas) regionsOf(ctx context.Context, r *api.Resource, st *api.ResourceStatus) ([]string, error) {
	var names []string
	for _, t := range r.Schedule.Regions {
		names = append(names, t.Name)
	}
	if st != nil {
		names = append(names, sortedKeys(st.Regions)...)
	}
	if len(names) == 0 {
		return p.fan.dir.names(ctx)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// replicasOf are r's replicas among what region answered: a replica of a
// deleted namesake is not r's.
func replicasOf(r *api.Resource, region string, ps []*resourcev1.Replica) []api.Replica {
	var out []api.Replica
	for _, p := range ps {
		rep := apiproto.ReplicaFromPB(p)
		if rep.ResourceUID != "" && rep.ResourceUID != r.UID {
			continue
		}
		if rep.Region == "" {
			rep.Region = region
		}
		out = append(out, rep)
	}
	return out
}

// LogOptions select a replica's output.
type LogOptions struct {
	// Replica is an assignment id; empty picks the resource's first
	// ready replica.
	Replica   string
	Follow    bool
	TailLines int
	// Container is the pod container whose output to read; empty is
	// the main one.
	Container string
}

// Logs streams a replica's output to w: global → the replica's region →
// its node's agent → the provider. It returns when the output ends or,
// when following, when ctx is done.
func (p *Replicas) Logs(ctx context.Context, tenant, name string, o LogOptions, w io.Writer) error {
	noteRead(ctx, audit.ReadLogs)
	reps, err := p.List(ctx, tenant, name)
	if err != nil {
		return err
	}
	pick, err := pickReplica(name, reps.Items, o.Replica)
	if err != nil {
		return err
	}
	c, err := p.fan.client(ctx, pick.Region)
	if err != nil {
		return err
	}
	if tenant == "" {
		tenant = pick.Tenant
	}
	stream, err := c.Logs(ctx, &resourcev1.LogsRequest{
		Tenant: tenant, Resource: name, Replica: pick.ID, Follow: o.Follow, TailLines: int32(o.TailLines),
		Container: o.Container,
	})
	if err != nil {
		return err
	}
	if s, ok := w.(interface{ Start() }); ok && o.Follow {
		// The stream is open: a client following an idle log hears so now,
		// not at the first line, whenever that comes.
		s.Start()
	}
	return copyLogs(ctx, stream, w)
}

// pickReplica is the replica called id, or with id "" the first ready
// one (the first one when none is ready).
func pickReplica(resource string, reps []api.Replica, id string) (*api.Replica, error) {
	if len(reps) == 0 {
		return nil, fmt.Errorf("resource %q has no replicas to read logs from: %w", resource, api.ErrNotFound)
	}
	i := slices.IndexFunc(reps, func(r api.Replica) bool {
		if id != "" {
			return r.ID == id
		}
		return r.Phase == api.PhaseReady
	})
	switch {
	case i >= 0:
		return &reps[i], nil
	case id != "":
		return nil, fmt.Errorf("resource %q has no replica %q: %w", resource, id, api.ErrNotFound)
	}
	return &reps[0], nil
}

// copyLogs copies a log stream to w, flushing each chunk. A client that
// goes away or a cancelled follow ends it without an error.
func copyLogs(ctx context.Context, stream grpc.ServerStreamingClient[resourcev1.LogChunk], w io.Writer) error {
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if _, err := w.Write(chunk.GetData()); err != nil {
			return nil // the client went away
		}
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
}
