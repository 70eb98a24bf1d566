package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/flush"
	"github.com/stratahq/strata/internal/store"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	"github.com/stratahq/strata/proto/apiproto"
	"github.com/stratahq/strata/region/state"
)

// watchNetwork streams the region's default network and every node's
// place on it: a snapshot in one message (the agent removes what it
// lacks), then the nodes whose place changed (registered, deleted,
// re-addressed). Changes that do not touch a node's network (cordons,
// registrations that change nothing of it) are not sent.
//
// The same stream carries what node's host needs to isolate tenants and
// enforce network policies (policyView): the snapshot holds it whole,
// then its changes follow.
func (s *agentStreams) watchNetwork(ctx context.Context, node string, send func(*agentv1.NetworkBatch) error) error {
	for _, synced := range []<-chan struct{}{s.caches.Nodes.Synced(), s.caches.Networks.Synced(), s.caches.Assignments.Synced(), s.caches.Policies.Synced(), s.caches.Statuses.Synced()} {
		if err := waitSynced(ctx, synced); err != nil {
			return err
		}
	}
	nw, ok := s.caches.DefaultNetwork()
	if !ok {
		return fmt.Errorf("the region has no default network: %w", api.ErrUnavailable)
	}
	w := newWatch[api.Node](s.tune.watchBuffer)
	unsubscribe := s.caches.NodeFeed.Subscribe(func(changes []store.Change[api.Node]) {
		var moved []store.Change[api.Node]
		for _, c := range changes {
			if c.Old == nil || c.New == nil || !api.SameJSON(c.Old.Value.Network, c.New.Value.Network) {
				moved = append(moved, c)
			}
		}
		if len(moved) > 0 {
			w.offer(moved)
		}
	})
	defer unsubscribe()

	items := s.caches.Nodes.List()
	snap := &agentv1.NetworkBatch{Snapshot: true, Network: regionNetworkToPB(nw, s.region), Upserts: make([]*agentv1.NetworkPeer, 0, len(items))}
	for _, it := range items {
		snap.Upserts = append(snap.Upserts, networkPeer(it.Value))
	}
	view := s.policyViewOf(node)
	view.fill(snap)
	if err := send(snap); err != nil {
		return err
	}
	// Two loops share the stream: one sends at a time.
	var sendMu sync.Mutex
	locked := func(b *agentv1.NetworkBatch) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return send(b)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	policyErr := make(chan error, 1)
	go func() {
		policyErr <- s.followPolicies(ctx, node, view, s.tune.netWindow, locked)
		cancel()
	}()
	err := pump(ctx, w, s.tune.netWindow, s.tune.maxBatch, func(changes []store.Change[api.Node]) error {
		msg := &agentv1.NetworkBatch{}
		for _, c := range changes {
			if c.New != nil {
				msg.Upserts = append(msg.Upserts, networkPeer(c.New.Value))
			} else {
				msg.Removed = append(msg.Removed, c.Name)
			}
		}
		return locked(msg)
	})
	cancel()
	if perr := <-policyErr; perr != nil && !errors.Is(perr, context.Canceled) {
		return perr
	}
	return err
}

func networkPeer(n *api.Node) *agentv1.NetworkPeer {
	return &agentv1.NetworkPeer{Node: n.Name, Network: apiproto.NodeNetworkToPB(n.Network)}
}

// regionNetworkToPB is network n of the region named region.
func regionNetworkToPB(n *api.Network, region string) *agentv1.RegionNetwork {
	return &agentv1.RegionNetwork{Name: n.Name, Subnet: n.Subnet, NodeMask: int32(n.NodeMask), Backend: n.Backend, Vni: int32(n.VNI), Bridge: n.Bridge, Region: region}
}

// policyView is what one node's host needs to isolate tenants and
// enforce policies: the replicas of the tenants that have replicas on
// the node (with their readiness and ports), and those tenants' policies
// (JSON).
type policyView struct {
	tenants   map[string]bool
	endpoints map[string]*agentv1.NetworkEndpoint
	policies  map[string][]byte
}

// policyViewOf computes node's policyView from the caches.
func (s *agentStreams) policyViewOf(node string) policyView {
	v := policyView{tenants: map[string]bool{}, policies: map[string][]byte{}, endpoints: map[string]*agentv1.NetworkEndpoint{}}
	for _, it := range s.caches.Assignments.ByIndex(state.AssignmentsByNode, node, "", "", 0, nil) {
		if a := it.Value; hasAddress(a) {
			v.tenants[a.Tenant] = true
		}
	}
	for t := range v.tenants {
		maps.Copy(v.endpoints, endpointsOf(s.caches.Assignments.ByIndex(state.AssignmentsByTenant, t, "", "", 0, nil), v.tenants, s.caches.Statuses))
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
		a.GetNode() == b.GetNode() && maps.Equal(a.GetLabels(), b.GetLabels()) &&
		a.GetReady() == b.GetReady() && slices.EqualFunc(a.GetPorts(), b.GetPorts(), sameEndpointPort)
}

func sameEndpointPort(a, b *agentv1.EndpointPort) bool {
	return a.GetName() == b.GetName() && a.GetProtocol() == b.GetProtocol() && a.GetPort() == b.GetPort()
}

// followPolicies sends node's policy view as it changes, starting from
// sent (what the snapshot carried): on a change of an assignment, a
// policy or a replica's readiness that may concern the node, it computes
// the view again and sends
// the difference (at once when the last look ended window ago or more, else
// at the window's end, so that a burst of changes costs one look per
// window), until ctx is done or send fails.
func (s *agentStreams) followPolicies(ctx context.Context, node string, sent policyView, window time.Duration, send func(*agentv1.NetworkBatch) error) error {
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

// viewWatch signals (kick) the changes of assignments, policies and
// replicas' readiness that may change one node's policy view: those on
// the node, and those of the tenants it has replicas of.
type viewWatch struct {
	node string
	kick chan struct{}
	stop func()

	mu      sync.Mutex
	tenants map[string]bool
}

func (s *agentStreams) watchPolicyView(node string, tenants map[string]bool) *viewWatch {
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
	unsubS := s.caches.StatusFeed.Subscribe(func(changes []store.Change[api.AssignmentStatus]) {
		for _, c := range changes {
			if s.readinessMoved(c, w) {
				w.poke()
				return
			}
		}
	})
	w.stop = func() { unsubA(); unsubP(); unsubS() }
	return w
}

// readinessMoved reports whether status change c turned a replica that
// concerns w ready or not ready. A status is keyed by its assignment's
// id; a status whose assignment the cache lacks changes no view (the
// assignment's arrival pokes the watch, and the view then reads the
// status).
func (s *agentStreams) readinessMoved(c store.Change[api.AssignmentStatus], w *viewWatch) bool {
	it, ok := s.caches.Assignments.Get(c.Name)
	if !ok || !w.concerns(it.Value.Tenant, it.Value.Node) {
		return false
	}
	var old, cur *api.AssignmentStatus
	if c.Old != nil {
		old = c.Old.Value
	}
	if c.New != nil {
		cur = c.New.Value
	}
	return (state.ReplicaPhase(it.Value, old) == api.PhaseReady) != (state.ReplicaPhase(it.Value, cur) == api.PhaseReady)
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
