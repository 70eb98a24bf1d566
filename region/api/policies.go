package api

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/flush"
	"github.com/stratahq/strata/internal/store"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
	"github.com/stratahq/strata/region/state"
)

// syncPolicies makes the region's policies the set ps, which the master
// sends whole: what differs is written, what is missing removed, fenced
// by meta/epoch like placements. It returns how many policies changed.
func (s *Server) syncPolicies(ctx context.Context, ps []api.NetworkPolicy, epoch int64) (int, error) {
	for attempt := 1; ; attempt++ {
		ep, err := s.readEpoch(ctx)
		if err != nil {
			return 0, err
		}
		if epoch < ep.Epoch.Epoch {
			return 0, fmt.Errorf("%s: %w", staleEpoch(epoch, ep.Epoch.Epoch), api.ErrConflict)
		}
		if err := waitSynced(ctx, s.caches.Policies.Synced()); err != nil {
			return 0, err
		}
		ep.Epoch.Epoch = epoch
		n, err := s.writePolicies(ctx, &ep, ps)
		if err != nil && retryable(err) && attempt < planAttempts {
			continue
		}
		return n, err
	}
}

// writePolicies writes the difference between ps and the cache in one
// batch, each transaction also moving meta/epoch (see writePlacements).
func (s *Server) writePolicies(ctx context.Context, ep *epochState, ps []api.NetworkPolicy) (int, error) {
	b := s.st.Store.Batch().Every(func(txn *store.Txn, prev int64) {
		if prev > 0 {
			ep.modRev = prev
		}
		if ep.modRev == 0 {
			_ = s.st.Meta.TxnCreate(txn, "epoch", &ep.Epoch)
		} else {
			_ = s.st.Meta.TxnUpdate(txn, "epoch", &ep.Epoch, ep.modRev)
		}
	})
	want := make(map[string]bool, len(ps))
	n := 0
	for i := range ps {
		p := &ps[i]
		key := p.Key()
		want[key] = true
		p.Status, p.ResourceVersion = nil, 0
		if cur, ok := s.caches.Policies.Get(key); ok && api.SameJSON(cur.Value, p) {
			continue
		}
		_ = s.st.Policies.TxnPut(b.Step(key), key, p)
		n++
	}
	for _, it := range s.caches.Policies.List() {
		if !want[it.Name] {
			s.st.Policies.TxnDelete(b.Step(it.Name), it.Name, 0)
			n++
		}
	}
	if n == 0 {
		return 0, nil
	}
	res, err := b.Commit(ctx)
	// meta/epoch moved (or may have): the next placement call reads it.
	s.epoch.forget()
	if err != nil {
		return 0, err
	}
	if res.Revision > 0 {
		ep.modRev = res.Revision
	}
	s.log.Info("network policies synced", "changed", n, "policies", len(ps))
	return n, s.caches.Policies.WaitForRev(ctx, res.Revision)
}

// policyStatus says, for each of tenant's policies, the generation the
// region holds, and how many replicas it selects on how many nodes (the
// nodes whose hosts enforce it).
func (s *Server) policyStatus(ctx context.Context, tenant string) ([]*regionv1.PolicyRegionStatus, error) {
	if err := api.ValidateName("tenant", tenant); err != nil {
		return nil, err
	}
	for _, synced := range []<-chan struct{}{s.caches.Policies.Synced(), s.caches.Assignments.Synced()} {
		if err := waitSynced(ctx, synced); err != nil {
			return nil, err
		}
	}
	pols := s.caches.Policies.ListPrefix(tenant + "/")
	if len(pols) == 0 {
		return nil, nil
	}
	eps := endpointsOf(s.caches.Assignments.ByIndex(state.AssignmentsByTenant, tenant, "", "", 0, nil), map[string]bool{tenant: true})
	out := make([]*regionv1.PolicyRegionStatus, 0, len(pols))
	for _, it := range pols {
		p := it.Value
		nodes := map[string]bool{}
		replicas := 0
		for _, e := range eps {
			if p.Selects(e.GetTenant(), e.GetLabels()) {
				replicas++
				nodes[e.GetNode()] = true
			}
		}
		out = append(out, &regionv1.PolicyRegionStatus{Name: p.Name, ObservedGeneration: p.Generation, Replicas: int32(replicas), Nodes: int32(len(nodes))})
	}
	return out, nil
}

// endpointsOf are the replicas of tenants that have an address: running
// (not being destroyed), placed, attached to a network.
func endpointsOf(as []store.Item[api.Assignment], tenants map[string]bool) map[string]*agentv1.NetworkEndpoint {
	out := map[string]*agentv1.NetworkEndpoint{}
	for _, it := range as {
		a := it.Value
		if !tenants[a.Tenant] || !hasAddress(a) {
			continue
		}
		out[a.ID] = &agentv1.NetworkEndpoint{Id: a.ID, Address: a.Network.Address, Tenant: a.Tenant, Resource: a.Resource, Labels: a.Labels, Node: a.Node}
	}
	return out
}

func hasAddress(a *api.Assignment) bool {
	return a.Desired == api.DesiredRunning && a.Node != "" && a.Network != nil && a.Network.Address != ""
}

// policyView is what one node's host needs to isolate tenants and
// enforce policies: the replicas of the tenants that have replicas on
// the node, and those tenants' policies (JSON).
type policyView struct {
	tenants   map[string]bool
	endpoints map[string]*agentv1.NetworkEndpoint
	policies  map[string][]byte
}

// policyViewOf computes node's policyView from the caches.
func (s *Server) policyViewOf(node string) policyView {
	v := policyView{tenants: map[string]bool{}, policies: map[string][]byte{}, endpoints: map[string]*agentv1.NetworkEndpoint{}}
	for _, it := range s.caches.Assignments.ByIndex(state.AssignmentsByNode, node, "", "", 0, nil) {
		if a := it.Value; hasAddress(a) {
			v.tenants[a.Tenant] = true
		}
	}
	for t := range v.tenants {
		maps.Copy(v.endpoints, endpointsOf(s.caches.Assignments.ByIndex(state.AssignmentsByTenant, t, "", "", 0, nil), v.tenants))
		for _, it := range s.caches.Policies.ListPrefix(t + "/") {
			b, err := json.Marshal(it.Value)
			if err == nil {
				v.policies[it.Name] = b
			}
		}
	}
	return v
}

// fill adds the whole view to a snapshot batch.
func (v policyView) fill(b *agentv1.NetworkBatch) {
	for _, e := range v.endpoints {
		b.Endpoints = append(b.Endpoints, e)
	}
	for _, p := range v.policies {
		b.Policies = append(b.Policies, p)
	}
}

// diff adds to b what changed from v (sent before) to next; it reports
// whether anything did.
func (v policyView) diff(next policyView, b *agentv1.NetworkBatch) bool {
	for id, e := range next.endpoints {
		if old, ok := v.endpoints[id]; !ok || !sameEndpoint(old, e) {
			b.Endpoints = append(b.Endpoints, e)
		}
	}
	for id := range v.endpoints {
		if _, ok := next.endpoints[id]; !ok {
			b.EndpointsRemoved = append(b.EndpointsRemoved, id)
		}
	}
	for k, p := range next.policies {
		if old, ok := v.policies[k]; !ok || string(old) != string(p) {
			b.Policies = append(b.Policies, p)
		}
	}
	for k := range v.policies {
		if _, ok := next.policies[k]; !ok {
			b.PoliciesRemoved = append(b.PoliciesRemoved, k)
		}
	}
	return len(b.Endpoints)+len(b.EndpointsRemoved)+len(b.Policies)+len(b.PoliciesRemoved) > 0
}

func sameEndpoint(a, b *agentv1.NetworkEndpoint) bool {
	return a.GetAddress() == b.GetAddress() && a.GetTenant() == b.GetTenant() && a.GetResource() == b.GetResource() &&
		a.GetNode() == b.GetNode() && maps.Equal(a.GetLabels(), b.GetLabels())
}

// followPolicies sends node's policy view as it changes, starting from
// sent (what the snapshot carried): on a change of an assignment or a
// policy that may concern the node, it computes the view again and sends
// the difference (at once when the last look ended window ago or more, else
// at the window's end, so that a burst of changes costs one look per
// window), until ctx is done or send fails.
func (s *Server) followPolicies(ctx context.Context, node string, sent policyView, window time.Duration, send func(*agentv1.NetworkBatch) error) error {
	w := s.watchPolicyView(node, sent.tenants)
	defer w.stop()
	// What changed between the snapshot and the subscriptions is found
	// by a first look.
	w.poke()
	win := flush.Window{D: window}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.kick:
		}
		if err := win.Hold(ctx, nil); err != nil {
			return err
		}
		next := s.policyViewOf(node)
		msg := &agentv1.NetworkBatch{}
		if sent.diff(next, msg) {
			if err := send(msg); err != nil {
				return err
			}
		}
		sent = next
		w.setTenants(next.tenants)
		win.Flushed(time.Now())
	}
}

// viewWatch signals (kick) the changes of assignments and policies that
// may change one node's policy view: those on the node, and those of the
// tenants it has replicas of.
type viewWatch struct {
	node string
	kick chan struct{}
	stop func()

	mu      sync.Mutex
	tenants map[string]bool
}

func (s *Server) watchPolicyView(node string, tenants map[string]bool) *viewWatch {
	w := &viewWatch{node: node, kick: make(chan struct{}, 1), tenants: tenants}
	unsubA := s.caches.AssignmentFeed.Subscribe(func(changes []store.Change[api.Assignment]) {
		for _, c := range changes {
			for _, it := range []*store.Item[api.Assignment]{c.Old, c.New} {
				if it != nil && w.concerns(it.Value.Tenant, it.Value.Node) {
					w.poke()
					return
				}
			}
		}
	})
	unsubP := s.caches.PolicyFeed.Subscribe(func(changes []store.Change[api.NetworkPolicy]) {
		for _, c := range changes {
			tenant, _, _ := strings.Cut(c.Name, "/")
			if w.concerns(tenant, "") {
				w.poke()
				return
			}
		}
	})
	w.stop = func() { unsubA(); unsubP() }
	return w
}

func (w *viewWatch) concerns(tenant, node string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return node == w.node || w.tenants[tenant]
}

func (w *viewWatch) setTenants(t map[string]bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tenants = t
}

func (w *viewWatch) poke() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}
