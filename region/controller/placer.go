package controller

import (
	"fmt"
	"strings"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/events"
	"github.com/stratahq/strata/region/ipam"
	"github.com/stratahq/strata/region/scheduler"
)

// placer owns placing replicas on nodes: the scheduler's requests (with
// the volumes a replica mounts), the batches, and the address each
// compute replica takes on its node's block.
type placer struct {
	o     *Options
	index *index
	w     *assignmentWriter
}

// schedule places every unplaced replica of the resource in one batch.
// New replicas are created (placed or not); existing ones are updated
// when they get a node or their reason changes. It returns the reason of
// the replicas that stay unplaced ("" when all are placed).
func (sc *placer) schedule(v *view, p *plan, key string, pl *api.Placement, live []*replica) string {
	var pending []*replica
	for _, r := range live {
		if r.a.Node == "" {
			pending = append(pending, r)
		}
	}
	if len(pending) == 0 {
		return ""
	}
	snap := v.snapshot()
	reqs := make([]scheduler.Request, 0, len(pending))
	ready := make([]*replica, 0, len(pending))
	unplacedReason := ""
	for _, r := range pending {
		a := *r.a
		r.a = &a
		req, why := sc.request(v, key, pl, r)
		if why != "" {
			sc.w.leaveUnplaced(v, p, key, r, why)
			unplacedReason = why
			continue
		}
		reqs = append(reqs, req)
		ready = append(ready, r)
	}
	// A node's block may turn out full (addresses held by replicas of
	// another node, which the snapshot's count does not see): its
	// replicas are placed again without it, until every one is placed or
	// no node is left to rule out.
	for len(reqs) > 0 {
		var why string
		reqs, ready, why = sc.placeBatch(v, p, snap, key, reqs, ready)
		if why != "" {
			unplacedReason = why
		}
	}
	return unplacedReason
}

// placeBatch places one batch of replicas and returns those to place
// again (their node's block turned out full), and the reason of those
// left unplaced ("" when none is).
func (sc *placer) placeBatch(v *view, p *plan, snap *scheduler.Snapshot, key string, reqs []scheduler.Request, ready []*replica) ([]scheduler.Request, []*replica, string) {
	placeStart := time.Now()
	decisions := snap.Place(reqs)
	placed := 0
	for _, d := range decisions {
		if d.Node != "" {
			placed++
		}
	}
	sc.o.SchedulerMetrics.Batch(placeStart, placed, len(decisions)-placed)
	var againReqs []scheduler.Request
	var again []*replica
	unplacedReason := ""
	for i, d := range decisions {
		why := "unschedulable: " + d.Reason
		if d.Node != "" {
			var retry bool
			why, retry = sc.place(v, p, snap, key, ready[i], reqs[i], d.Node)
			if retry {
				againReqs, again = append(againReqs, reqs[i]), append(again, ready[i])
				continue
			}
		}
		if why != "" {
			sc.w.leaveUnplaced(v, p, key, ready[i], why)
			unplacedReason = why
		}
	}
	return againReqs, again, unplacedReason
}

// place puts replica r on node, with an address of the node's block for
// a compute replica that has none, or says why it cannot (no address
// left). retry is true when the node's block turned out full: the node
// is ruled out and the replica placed again.
func (sc *placer) place(v *view, p *plan, snap *scheduler.Snapshot, key string, r *replica, req scheduler.Request, node string) (why string, retry bool) {
	a := *r.a
	var port *api.Port
	if req.Address {
		att, pt, err := sc.address(v, &a, node)
		if err != nil {
			snap.Release(node, key, req.Need)
			if ipam.IsExhausted(err) && snap.NoAddresses(node) {
				return "", true
			}
			return "no address: " + err.Error(), false
		}
		a.Network, port = att, pt
	}
	a.Node = node
	a.ScheduledAt = v.now
	v.changesAt(key, justAfter(v.now.Add(sc.o.ProvisionTimeout)))
	if a.Replaces == "" {
		a.Reason = ""
	}
	if r.modRev != 0 {
		a.Generation++
	}
	// The address and the assignment naming it apply together.
	p.placeReplica(key, &a, r.modRev, port)
	r.a = &a
	p.event(key, sc.w.event(events.TypeNormal, "Scheduled", "replica/"+a.ID, "placed on "+node))
	return "", false
}

// needsAddress reports whether a replica takes an address when it is
// placed: a compute replica without one, in a region with a network.
func (v *view) needsAddress(a *api.Assignment) bool {
	if a.Kind != api.KindCompute || a.Network != nil {
		return false
	}
	name := ""
	if a.Spec.Compute != nil {
		name = a.Spec.Compute.Network
	}
	nw, err := v.network(name)
	// A network that does not exist is an error address reports.
	return err != nil || nw != nil
}

// request builds the scheduler request of a replica, or says why it cannot
// be placed yet.
func (sc *placer) request(v *view, key string, pl *api.Placement, r *replica) (scheduler.Request, string) {
	req := scheduler.Request{
		Resource: key,
		Provider: r.a.Provider,
		Need:     r.a.Flavor.Capacity(),
		Rule:     pl.Resource.Schedule,
		Address:  v.needsAddress(r.a),
	}
	if r.a.Replaces != "" {
		if it, ok := sc.o.Caches.Assignments.Get(r.a.Replaces); ok {
			req.Avoid = it.Value.Node
		}
	}
	if c := r.a.Spec.Compute; c != nil && len(c.Volumes) > 0 {
		atts, node, why := sc.volumes(key, c.Volumes)
		if why != "" {
			return req, why
		}
		r.a.Volumes = atts
		req.Pin = node
	}
	return req, ""
}

// volumes resolves a replica's volume mounts to the Volume resources'
// replicas in this region, and the node they all live on.
func (sc *placer) volumes(key string, mounts []api.VolumeMount) ([]api.VolumeAttachment, string, string) {
	tenant, _, _ := strings.Cut(key, "/")
	var out []api.VolumeAttachment
	node := ""
	for _, m := range mounts {
		vkey := tenant + "/" + m.Volume
		pl, ok := sc.o.Caches.Placements.Get(vkey)
		if !ok || pl.Value.Resource.Kind != api.KindVolume || pl.Value.Resource.Deleting() {
			return nil, "", fmt.Sprintf("waiting for volume %q in this region", m.Volume)
		}
		var vol *api.Assignment
		for _, id := range sc.index.ofResource(vkey) {
			if it, ok := sc.o.Caches.Assignments.Get(id); ok && it.Value.Desired == api.DesiredRunning && it.Value.Node != "" {
				vol = it.Value
				break
			}
		}
		if vol == nil {
			return nil, "", fmt.Sprintf("waiting for volume %q to be placed", m.Volume)
		}
		if node != "" && vol.Node != node {
			return nil, "", fmt.Sprintf("volumes %q and others live on different nodes (%s, %s)", m.Volume, vol.Node, node)
		}
		node = vol.Node
		spec := pl.Value.Resource.Spec.Volume
		out = append(out, api.VolumeAttachment{
			Name: m.Volume, VolumeID: vol.ID, Path: m.Path, ReadOnly: m.ReadOnly,
			Format: spec.Format, SizeMiB: spec.SizeMiB,
		})
	}
	return out, node, ""
}

// address takes a replica's address on its network from the block of the
// node it goes to, with what that node's host uses (bridge, MTU).
func (sc *placer) address(v *view, a *api.Assignment, node string) (*api.NetworkAttachment, *api.Port, error) {
	name := ""
	if a.Spec.Compute != nil {
		name = a.Spec.Compute.Network
	}
	nw, err := v.network(name)
	if err != nil || nw == nil {
		return nil, nil, err
	}
	pool, err := v.pool(nw, node)
	if err != nil {
		return nil, nil, err
	}
	addr, err := pool.Allocate(a.ID)
	if err != nil {
		return nil, nil, err
	}
	att := pool.Attachment(addr)
	if nv, ok := v.node(node); ok && nv.node.Network != nil {
		if nv.node.Network.Bridge != "" {
			att.Bridge = nv.node.Network.Bridge
		}
		att.MTU = nw.ReplicaMTU(nv.node.Network.MTU)
	}
	return att, &api.Port{Network: att.Network, Address: att.Address, Assignment: a.ID, CreatedAt: v.now}, nil
}
