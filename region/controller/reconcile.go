package controller

import (
	"crypto/rand"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/backoff"
	"github.com/stratahq/strata/internal/events"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/region/ipam"
	"github.com/stratahq/strata/region/scheduler"
	"github.com/stratahq/strata/region/state"
)

// reconcile brings one resource's replicas towards its placement. It reads
// the view, and records writes and events in the plan.
func (c *Controller) reconcile(v *view, p *plan, key string) {
	pl, havePlacement := c.o.Caches.Placements.Get(key)
	var live []*replica
	// dying are replicas asked to go that their agent has not confirmed
	// gone; stopping the ones on reachable nodes still run there.
	dying, stopping := 0, 0
	for _, r := range v.replicas(key) {
		if r.a.Desired == api.DesiredDestroyed {
			if !c.finishDestroy(v, p, key, r) {
				dying++
				if lost, _ := v.lost(r.a.Node); !lost {
					stopping++
				}
			}
			continue
		}
		live = append(live, r)
	}
	if !havePlacement || pl.Value.Resource.Deleting() {
		var placed *store.Item[api.Placement]
		if havePlacement {
			placed = &pl
		}
		c.tearDown(v, p, key, placed, live, dying)
		return
	}

	pr := &pl.Value.Resource
	// Replicas of an earlier incarnation (deleted and re-created under
	// the same name) are not this resource's.
	live = c.keep(live, func(r *replica) bool {
		if r.a.ResourceUID == pr.UID {
			return true
		}
		c.destroy(v, p, key, r, "belongs to an earlier incarnation of the resource")
		return false
	})
	if pr.Kind == api.KindImage {
		c.writeShare(v, p, key, pl.Value, nil, api.PhaseReady, "")
		return
	}
	if pr.Kind == api.KindJob {
		c.reconcileJob(v, p, key, pl.Value, live)
		return
	}
	live = c.keep(live, func(r *replica) bool { return c.healthy(v, p, key, r) })
	live = c.moveOffDrainingNodes(v, p, key, pl.Value, live)
	live = c.rollout(v, p, key, pl.Value, live, stopping)
	c.updateEndpoints(p, key, pl.Value, live)
	unplaced := c.schedule(v, p, key, pl.Value, live)
	c.writeShare(v, p, key, pl.Value, live, "", unplaced)
}

// tearDown destroys the live replicas of a resource the region no longer
// runs: removed from the region (pl nil) or deleted. Once none is left,
// its placement and share go; until then its share says how many are.
func (c *Controller) tearDown(v *view, p *plan, key string, pl *store.Item[api.Placement], live []*replica, dying int) {
	why := "resource removed from the region"
	if pl != nil {
		why = "resource deleted"
	}
	for _, r := range live {
		c.destroy(v, p, key, r, why)
	}
	remaining := dying + len(live)
	switch {
	case remaining > 0 && pl != nil:
		c.writeShare(v, p, key, pl.Value, nil, api.PhaseDestroy, fmt.Sprintf("%d replicas left to destroy", remaining))
	case remaining > 0:
	default:
		if pl != nil {
			p.deletePlacement(key, pl.ModRevision)
			p.event(key, c.event(events.TypeNormal, "ResourceDestroyed", "resource/"+key, "every replica is gone"))
		}
		if _, ok := c.o.Caches.Shares.Get(key); ok {
			p.deleteShare(key)
		}
	}
}

// healthy reports whether replica r is kept; one that is lost, failed
// (when a retry is allowed) or stuck past its deadline is destroyed, to
// be replaced.
func (c *Controller) healthy(v *view, p *plan, key string, r *replica) bool {
	if lost, why := v.lost(r.a.Node); lost {
		c.destroy(v, p, key, r, why)
		p.event(key, c.event(events.TypeWarning, "ReplicaLost", "replica/"+r.a.ID, why+"; replacing it"))
		return false
	}
	if r.phase == api.PhaseError {
		if !c.allowRetry(key, v.now) {
			v.changesAt(key, c.backoff[key].next)
			return true
		}
		why := "failed: " + reasonOf(r)
		c.destroy(v, p, key, r, why)
		p.event(key, c.event(events.TypeWarning, "ReplicaReplaced", "replica/"+r.a.ID, why))
		return false
	}
	if late, why := c.overdue(v, r); late {
		c.allowRetry(key, v.now)
		c.destroy(v, p, key, r, why)
		p.event(key, c.event(events.TypeWarning, "DeadlineExceeded", "replica/"+r.a.ID, why+"; replacing it"))
		return false
	}
	return true
}

// finishDestroy removes the records of a replica being destroyed once the
// agent confirms, its node is gone, or its deadline has passed. It reports
// whether the records go.
func (c *Controller) finishDestroy(v *view, p *plan, key string, r *replica) bool {
	_, nodeExists := v.node(r.a.Node)
	since := r.a.DestroyRequestedAt
	switch {
	case r.phase == api.PhaseDestroyed, r.a.Node == "", !nodeExists:
	case !since.IsZero() && v.now.Sub(since) > c.o.DestroyTimeout:
		p.deleteAssignment(key, r.a, r.modRev, r.st != nil)
		p.event(key, c.event(events.TypeWarning, "DestroyTimedOut", "replica/"+r.a.ID,
			fmt.Sprintf("node %s did not confirm within %s; forgetting the replica (its agent removes it when it returns)", r.a.Node, c.o.DestroyTimeout)))
		return true
	default:
		if !since.IsZero() {
			v.changesAt(key, justAfter(since.Add(c.o.DestroyTimeout)))
		}
		return false
	}
	p.deleteAssignment(key, r.a, r.modRev, r.st != nil)
	return true
}

// destroy asks the agent to remove a replica; a replica never placed is
// simply forgotten.
func (c *Controller) destroy(v *view, p *plan, key string, r *replica, why string) {
	if r.a.Node == "" {
		if r.modRev != 0 {
			p.deleteAssignment(key, r.a, r.modRev, r.st != nil)
		}
		a := *r.a
		a.Desired = api.DesiredDestroyed
		r.a = &a
		return
	}
	a := *r.a
	a.Desired = api.DesiredDestroyed
	a.DestroyRequestedAt = v.now
	a.Reason = why
	a.Generation++
	p.updateAssignment(key, &a, r.modRev)
	r.a = &a
	v.changesAt(key, justAfter(v.now.Add(c.o.DestroyTimeout)))
	p.event(key, c.event(events.TypeNormal, "Destroying", "replica/"+a.ID, fmt.Sprintf("on %s: %s", a.Node, why)))
}

// overdue reports a replica stuck in created (placed, not started) or
// provision past the provision deadline. One not late yet has its
// resource looked at again once the deadline passes.
func (c *Controller) overdue(v *view, r *replica) (bool, string) {
	var since time.Time
	switch r.phase {
	case api.PhaseCreated:
		if r.a.Node == "" {
			return false, ""
		}
		since = r.a.ScheduledAt
	case api.PhaseProvision:
		if r.st != nil {
			since = r.st.Since
		}
	default:
		return false, ""
	}
	if since.IsZero() {
		return false, ""
	}
	if v.now.Sub(since) <= c.o.ProvisionTimeout {
		v.changesAt(r.a.ResourceKey(), justAfter(since.Add(c.o.ProvisionTimeout)))
		return false, ""
	}
	return true, fmt.Sprintf("not ready on %s within the provision deadline (%s, phase %s)", r.a.Node, c.o.ProvisionTimeout, r.phase)
}

func (c *Controller) allowRetry(key string, now time.Time) bool {
	r := c.backoff[key]
	if r != nil && !r.readySince.IsZero() && now.Sub(r.readySince) >= c.o.MaxBackoff {
		// Ready for long enough since the last failure: start afresh.
		r = nil
	}
	if r == nil {
		r = &retry{}
		c.backoff[key] = r
	} else {
		r.readySince = time.Time{}
		if now.Before(r.next) {
			return false
		}
	}
	r.failures++
	r.next = now.Add(backoff.Backoff{Min: c.o.RetryBackoff, Max: c.o.MaxBackoff}.Delay(r.failures))
	return true
}

// readyAgain notes that key's resource is ready. Its back-off is
// forgotten only once it has stayed ready for MaxBackoff: a replacement
// becomes ready for a moment before it fails the same way (an OOM kill or
// a crash soon after start), and forgetting the back-off then would
// replace it again at once, in a tight loop, and hide the error. The
// resource is looked at again then, so that the record goes.
func (c *Controller) readyAgain(v *view, key string) {
	r := c.backoff[key]
	switch {
	case r == nil:
		return
	case r.readySince.IsZero():
		r.readySince = v.now
	case v.now.Sub(r.readySince) >= c.o.MaxBackoff:
		delete(c.backoff, key)
		return
	}
	v.changesAt(key, r.readySince.Add(c.o.MaxBackoff))
}

// rollout creates and destroys replicas so that the resource converges to
// its replica count at its current revision, replacing replicas of older
// revisions make-before-break: at most MaxSurge extra replicas exist, and
// the ready ones never drop below Replicas - MaxUnavailable. A replica
// asked to go exists until its agent confirms it gone (stopping of them,
// on nodes not lost): a replacement started before would run beside it,
// more than asked (found by e2e/chaos, TestChaosRegressionRolloutSurge).
func (c *Controller) rollout(v *view, p *plan, key string, pl *api.Placement, live []*replica, stopping int) []*replica {
	pr := &pl.Resource
	slots := slotsOf(live)
	cur, old := c.byRevision(p, key, pl, slots)
	if len(old) > 0 && !pr.Rollout.Paused {
		return c.replace(v, p, key, pl, live, slots, cur, old, stopping)
	}
	n, total := pr.Replicas, len(slots)
	for total+stopping < n {
		r := c.create(v, p, key, pl, "")
		live = append(live, r)
		total++
	}
	if total > n {
		extra := slotsOf(alive(live))
		sortForRemoval(v, extra)
		for _, r := range extra[:total-n] {
			c.destroy(v, p, key, r, fmt.Sprintf("scaled down to %d", n))
		}
	}
	return alive(live)
}

// byRevision splits slots into the replicas of the current revision and
// the old ones. An old replica whose spec is the current one's (a
// rollback, a revert) is relabelled in place instead of replaced: its
// generation stays, the agent has nothing to do.
func (c *Controller) byRevision(p *plan, key string, pl *api.Placement, slots []*replica) (cur, old []*replica) {
	pr := &pl.Resource
	for _, r := range slots {
		if r.a.Revision != pr.Revision && r.modRev != 0 && sameWorkload(r.a, pl) {
			a := *r.a
			a.Revision = pr.Revision
			a.Labels = pr.Labels
			p.updateAssignment(key, &a, r.modRev)
			r.a = &a
		}
		if r.a.Revision == pr.Revision {
			cur = append(cur, r)
		} else {
			old = append(old, r)
		}
	}
	return cur, old
}

// replace makes before it breaks: replicas of the current revision are
// created while at most maxSurge extra exist, and old ones destroyed only
// while the ready count stays at or above max(replicas - maxUnavailable,
// minHealthy). Stopping replicas still run (see rollout): they count
// against the surge.
func (c *Controller) replace(v *view, p *plan, key string, pl *api.Placement, live, slots, cur, old []*replica, stopping int) []*replica {
	pr := &pl.Resource
	n := pr.Replicas
	surge, unavailable := pr.Rollout.MaxSurge, pr.Rollout.MaxUnavailable
	if surge == 0 && unavailable == 0 {
		surge = 1
	}
	total := len(slots)
	for len(cur) < n && total+stopping < n+surge {
		r := c.create(v, p, key, pl, "")
		live, cur = append(live, r), append(cur, r)
		total++
	}
	ready := 0
	for _, r := range slots {
		if r.phase == api.PhaseReady {
			ready++
		}
	}
	minReady := max(n-unavailable, pr.Rollout.MinHealthy, 0)
	// Old replicas that are not ready hold nothing up: go first.
	sortForRemoval(v, old)
	for _, r := range old {
		if r.phase == api.PhaseReady && ready-1 < minReady {
			continue
		}
		c.destroy(v, p, key, r, fmt.Sprintf("replaced by revision %d", pr.Revision))
		if r.phase == api.PhaseReady {
			ready--
		}
	}
	return alive(live)
}

// sameWorkload reports whether replica a runs exactly what pl asks for.
func sameWorkload(a *api.Assignment, pl *api.Placement) bool {
	var flavor api.FlavorSpec
	if pl.Flavor != nil {
		flavor = pl.Flavor.Spec
	}
	return a.Flavor == flavor && reflect.DeepEqual(a.Spec, pl.Resource.Spec) && reflect.DeepEqual(a.Image, pl.Image)
}

// slotsOf returns the replicas that count towards the replica count: a
// replacement whose original is still running shares its original's slot.
func slotsOf(live []*replica) []*replica {
	running := map[string]bool{}
	for _, r := range live {
		running[r.a.ID] = true
	}
	out := make([]*replica, 0, len(live))
	for _, r := range live {
		if r.a.Replaces != "" && running[r.a.Replaces] {
			continue
		}
		out = append(out, r)
	}
	return out
}

// alive drops replicas this pass has asked to destroy.
func alive(rs []*replica) []*replica {
	out := rs[:0]
	for _, r := range rs {
		if r.a.Desired == api.DesiredRunning {
			out = append(out, r)
		}
	}
	return out
}

// sortForRemoval orders replicas by how little removing them costs:
// unplaced, then not ready, then on cordoned nodes, then newest first.
func sortForRemoval(v *view, rs []*replica) {
	rank := func(r *replica) int {
		switch {
		case r.a.Node == "":
			return 0
		case r.phase != api.PhaseReady:
			return 1
		}
		if nv, ok := v.node(r.a.Node); ok && !nv.node.Schedulable {
			return 2
		}
		return 3
	}
	sort.SliceStable(rs, func(i, j int) bool {
		ri, rj := rank(rs[i]), rank(rs[j])
		if ri != rj {
			return ri < rj
		}
		return rs[i].a.CreatedAt.After(rs[j].a.CreatedAt)
	})
}

// create makes a new replica of the placement's current revision; the
// scheduler places it later in the pass.
func (c *Controller) create(v *view, p *plan, key string, pl *api.Placement, replaces string) *replica {
	pr := &pl.Resource
	a := &api.Assignment{
		ID:          newID(pr.Name),
		Tenant:      pr.Tenant,
		Resource:    pr.Name,
		ResourceUID: pr.UID,
		Kind:        pr.Kind,
		Provider:    providerOf(pl),
		Revision:    pr.Revision,
		Labels:      pr.Labels,
		Desired:     api.DesiredRunning,
		Spec:        pr.Spec,
		Image:       pl.Image,
		Generation:  1,
		CreatedAt:   v.now,
		Replaces:    replaces,
	}
	if pl.Flavor != nil {
		a.Flavor = pl.Flavor.Spec
	}
	if replaces != "" {
		a.Reason = "replaces " + replaces
	}
	return &replica{a: a, phase: api.PhaseCreated}
}

// schedule places every unplaced replica of the resource in one batch.
// New replicas are created (placed or not); existing ones are updated
// when they get a node or their reason changes. It returns the reason of
// the replicas that stay unplaced ("" when all are placed).
func (c *Controller) schedule(v *view, p *plan, key string, pl *api.Placement, live []*replica) string {
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
		req, why := c.request(v, key, pl, r)
		if why != "" {
			c.leaveUnplaced(v, p, key, r, why)
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
		reqs, ready, why = c.placeBatch(v, p, snap, key, reqs, ready)
		if why != "" {
			unplacedReason = why
		}
	}
	return unplacedReason
}

// placeBatch places one batch of replicas and returns those to place
// again (their node's block turned out full), and the reason of those
// left unplaced ("" when none is).
func (c *Controller) placeBatch(v *view, p *plan, snap *scheduler.Snapshot, key string, reqs []scheduler.Request, ready []*replica) ([]scheduler.Request, []*replica, string) {
	placeStart := time.Now()
	decisions := snap.Place(reqs)
	placed := 0
	for _, d := range decisions {
		if d.Node != "" {
			placed++
		}
	}
	c.o.SchedulerMetrics.Batch(placeStart, placed, len(decisions)-placed)
	var againReqs []scheduler.Request
	var again []*replica
	unplacedReason := ""
	for i, d := range decisions {
		why := "unschedulable: " + d.Reason
		if d.Node != "" {
			var retry bool
			why, retry = c.place(v, p, snap, key, ready[i], reqs[i], d.Node)
			if retry {
				againReqs, again = append(againReqs, reqs[i]), append(again, ready[i])
				continue
			}
		}
		if why != "" {
			c.leaveUnplaced(v, p, key, ready[i], why)
			unplacedReason = why
		}
	}
	return againReqs, again, unplacedReason
}

// place puts replica r on node, with an address of the node's block for
// a compute replica that has none, or says why it cannot (no address
// left). retry is true when the node's block turned out full: the node
// is ruled out and the replica placed again.
func (c *Controller) place(v *view, p *plan, snap *scheduler.Snapshot, key string, r *replica, req scheduler.Request, node string) (why string, retry bool) {
	a := *r.a
	var port *api.Port
	if req.Address {
		att, pt, err := c.address(v, &a, node)
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
	v.changesAt(key, justAfter(v.now.Add(c.o.ProvisionTimeout)))
	if a.Replaces == "" {
		a.Reason = ""
	}
	if r.modRev != 0 {
		a.Generation++
	}
	// The address and the assignment naming it apply together.
	p.placeReplica(key, &a, r.modRev, port)
	r.a = &a
	p.event(key, c.event(events.TypeNormal, "Scheduled", "replica/"+a.ID, "placed on "+node))
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

// address takes a replica's address on its network from the block of the
// node it goes to, with what that node's host uses (bridge, MTU).
func (c *Controller) address(v *view, a *api.Assignment, node string) (*api.NetworkAttachment, *api.Port, error) {
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

// request builds the scheduler request of a replica, or says why it cannot
// be placed yet.
func (c *Controller) request(v *view, key string, pl *api.Placement, r *replica) (scheduler.Request, string) {
	req := scheduler.Request{
		Resource: key,
		Provider: r.a.Provider,
		Need:     r.a.Flavor.Capacity(),
		Rule:     pl.Resource.Schedule,
		Address:  v.needsAddress(r.a),
	}
	if r.a.Replaces != "" {
		if it, ok := c.o.Caches.Assignments.Get(r.a.Replaces); ok {
			req.Avoid = it.Value.Node
		}
	}
	if c := r.a.Spec.Compute; c != nil && len(c.Volumes) > 0 {
		atts, node, why := v.c.volumes(key, c.Volumes)
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
func (c *Controller) volumes(key string, mounts []api.VolumeMount) ([]api.VolumeAttachment, string, string) {
	tenant, _, _ := strings.Cut(key, "/")
	var out []api.VolumeAttachment
	node := ""
	for _, m := range mounts {
		vkey := tenant + "/" + m.Volume
		pl, ok := c.o.Caches.Placements.Get(vkey)
		if !ok || pl.Value.Resource.Kind != api.KindVolume || pl.Value.Resource.Deleting() {
			return nil, "", fmt.Sprintf("waiting for volume %q in this region", m.Volume)
		}
		var vol *api.Assignment
		for _, id := range c.index.ofResource(vkey) {
			if it, ok := c.o.Caches.Assignments.Get(id); ok && it.Value.Desired == api.DesiredRunning && it.Value.Node != "" {
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

// leaveUnplaced records why a replica is not placed; the write happens
// only when the reason changes, so an unschedulable resource costs no
// writes per pass.
func (c *Controller) leaveUnplaced(v *view, p *plan, key string, r *replica, why string) {
	if r.modRev != 0 && r.a.Reason == why {
		return
	}
	a := *r.a
	a.Reason = why
	if r.modRev == 0 {
		p.createAssignment(key, &a)
	} else {
		p.updateAssignment(key, &a, r.modRev)
	}
	r.a = &a
	p.event(key, c.event(events.TypeWarning, "FailedScheduling", "replica/"+a.ID, why))
}

// writeShare computes the resource's status in this region and writes it
// when it changed. phase and reason, when set, override the computed ones.
func (c *Controller) writeShare(v *view, p *plan, key string, pl *api.Placement, live []*replica, phase api.Phase, reason string) {
	pr := &pl.Resource
	s := &state.Share{Tenant: pr.Tenant, Name: pr.Name, UID: pr.UID}
	s.Replicas = pr.Replicas
	s.Revision = pr.Revision
	s.ObservedGeneration = pr.Generation
	s.FailoverFrom = pl.FailoverFrom
	if pr.Kind == api.KindImage {
		s.Replicas = 0
	}
	firstErr := countReplicas(s, live)
	switch {
	case phase != "":
		s.Phase, s.Reason = phase, reason
	case s.Ready == s.Replicas && s.Updated == s.Replicas && len(slotsOf(live)) == s.Replicas:
		s.Phase = api.PhaseReady
		c.readyAgain(v, key)
	case firstErr != nil:
		s.Phase = api.PhaseError
		s.Reason = fmt.Sprintf("replica %s on %s: %s", firstErr.a.ID, firstErr.a.Node, reasonOf(firstErr))
	case reason != "":
		s.Phase, s.Reason = api.PhaseCreated, reason
	default:
		s.Phase = api.PhaseProvision
		s.Reason = fmt.Sprintf("%d/%d ready", s.Ready, s.Replicas)
	}
	if cur, ok := c.o.Caches.Shares.Get(key); ok {
		old := *cur.Value
		old.UpdatedAt = time.Time{}
		if reflect.DeepEqual(&old, s) {
			return
		}
	}
	s.UpdatedAt = v.now
	p.putShare(key, s)
}

// countReplicas counts into s the ready and updated replicas of live and
// gathers their backends; it returns the first replica in error, if any.
func countReplicas(s *state.Share, live []*replica) (firstErr *replica) {
	for _, r := range slotsOf(live) {
		if r.phase == api.PhaseReady {
			s.Ready++
		}
		if r.a.Revision == s.Revision {
			s.Updated++
		}
		if r.phase == api.PhaseError && firstErr == nil {
			firstErr = r
		}
	}
	for _, r := range live {
		if r.st != nil {
			s.Backends = append(s.Backends, r.st.Backends...)
		}
	}
	return firstErr
}

func (c *Controller) keep(rs []*replica, fn func(*replica) bool) []*replica {
	out := rs[:0]
	for _, r := range rs {
		if fn(r) {
			out = append(out, r)
		}
	}
	return out
}

func (c *Controller) event(typ, reason, object, msg string) events.Event {
	return events.Event{Type: typ, Reason: reason, Object: object, Region: c.o.Region, Message: msg}
}

func reasonOf(r *replica) string {
	if r.st != nil && r.st.Reason != "" {
		return r.st.Reason
	}
	return string(r.phase)
}

// providerOf says which provider kind serves a placement's replicas.
func providerOf(pl *api.Placement) api.ProviderKind {
	switch pl.Resource.Kind {
	case api.KindVolume:
		if v := pl.Resource.Spec.Volume; v != nil && v.Provider != "" {
			return v.Provider
		}
		return api.ProviderContainer
	case api.KindLoadbalancer:
		return api.ProviderLoadbalancer
	}
	if pl.Flavor != nil {
		return pl.Flavor.Kind
	}
	return api.ProviderContainer
}

// newID names a replica: its resource's name and a random suffix, short
// enough for container, domain and interface names.
func newID(name string) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	var b [8]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	if len(name) > 40 {
		name = name[:40]
	}
	return name + "-" + string(b[:])
}
