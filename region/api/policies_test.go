package api

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stratahq/strata/internal/api"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	"github.com/stratahq/strata/proto/apiproto"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
)

func policyJSON(t *testing.T, tenant, name string, gen int64, sel map[string]string) []byte {
	t.Helper()
	b, err := json.Marshal(api.NetworkPolicy{Name: name, Tenant: tenant, Generation: gen, Selector: sel})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// policySummary renders a batch's endpoints and policies, sorted:
// "id@address", "-id", "policy tenant/name", "-policy tenant/name".
func policySummary(t *testing.T, b *agentv1.NetworkBatch) string {
	t.Helper()
	var parts []string
	for _, e := range b.GetEndpoints() {
		parts = append(parts, e.GetId()+"@"+e.GetAddress())
	}
	for _, id := range b.GetEndpointsRemoved() {
		parts = append(parts, "-"+id)
	}
	for _, raw := range b.GetPolicies() {
		var p api.NetworkPolicy
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, "policy "+p.Key())
	}
	for _, k := range b.GetPoliciesRemoved() {
		parts = append(parts, "-policy "+k)
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// TestWatchNetworkPolicies: the network stream carries, for its node,
// the replicas of the tenants that have replicas there and their
// policies, in the snapshot and then as they change; another tenant's
// replicas and policies are not sent. SyncPolicies replaces the set
// and refuses an older master; PolicyStatus counts selected replicas
// and their nodes.
func TestWatchNetworkPolicies(t *testing.T) {
	e := newEnv(t)
	e.putNetwork("10.9.0.0/22", 24)
	put := func(id, tenant, node, addr string, labels map[string]string) {
		t.Helper()
		a := &api.Assignment{ID: id, Tenant: tenant, Resource: id, Labels: labels, Node: node, Desired: api.DesiredRunning,
			Network: &api.NetworkAttachment{Network: "default", Address: addr}}
		if _, err := e.st.Assignments.Put(e.ctx(), id, a); err != nil {
			t.Fatal(err)
		}
	}
	put("a1", "a", "n1", "10.9.0.2", map[string]string{"app": "web"})
	put("a2", "a", "n2", "10.9.1.2", map[string]string{"app": "client"})
	put("b1", "b", "n2", "10.9.1.3", nil)
	// The stream's snapshot is read from the region's cache, which
	// follows etcd; wait for it to hold the three replicas written above.
	if err := e.caches.Assignments.WaitForRev(e.ctx(), e.rev()); err != nil {
		t.Fatal(err)
	}
	sync := func(epoch int64, ps ...[]byte) error {
		_, err := e.region.SyncPolicies(e.ctx(), &regionv1.SyncPoliciesRequest{Policies: ps, Epoch: epoch})
		return err
	}
	if err := sync(5, policyJSON(t, "a", "web", 1, map[string]string{"app": "web"}), policyJSON(t, "b", "all", 1, nil)); err != nil {
		t.Fatal(err)
	}
	e.register(testNode("n1"))
	stream, err := e.agent.WatchNetwork(e.ctx(), &agentv1.WatchNetworkRequest{Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	recv := func() *agentv1.NetworkBatch {
		t.Helper()
		for {
			b, err := stream.Recv()
			if err != nil {
				t.Fatalf("Recv: %v", err)
			}
			if len(b.GetEndpoints())+len(b.GetEndpointsRemoved())+len(b.GetPolicies())+len(b.GetPoliciesRemoved()) > 0 || b.GetSnapshot() {
				return b
			}
		}
	}
	if got, want := policySummary(t, recv()), "a1@10.9.0.2 a2@10.9.1.2 policy a/web"; got != want {
		t.Fatalf("snapshot: got %q; want %q (tenant a's, none of b's)", got, want)
	}

	put("a3", "a", "n2", "10.9.1.4", nil)
	if got, want := policySummary(t, recv()), "a3@10.9.1.4"; got != want {
		t.Fatalf("a replica of a added: got %q; want %q", got, want)
	}
	if err := sync(5, policyJSON(t, "a", "web", 2, map[string]string{"app": "web"})); err != nil {
		t.Fatal(err)
	}
	if got, want := policySummary(t, recv()), "policy a/web"; got != want {
		t.Fatalf("a's policy changed (b's removed): got %q; want %q", got, want)
	}
	if err := sync(4); err == nil {
		t.Fatal("SyncPolicies from an older master: accepted; want refused")
	}
	if _, err := e.st.Assignments.Delete(e.ctx(), "a2", 0); err != nil {
		t.Fatal(err)
	}
	if got, want := policySummary(t, recv()), "-a2"; got != want {
		t.Fatalf("a replica of a deleted: got %q; want %q", got, want)
	}
	if err := sync(6); err != nil {
		t.Fatal(err)
	}
	if got, want := policySummary(t, recv()), "-policy a/web"; got != want {
		t.Fatalf("every policy removed: got %q; want %q", got, want)
	}

	if err := sync(6, policyJSON(t, "a", "web", 3, map[string]string{"app": "web"})); err != nil {
		t.Fatal(err)
	}
	st, err := e.region.PolicyStatus(e.ctx(), &regionv1.PolicyStatusRequest{Tenant: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.GetItems()) != 1 || st.GetItems()[0].GetObservedGeneration() != 3 || st.GetItems()[0].GetReplicas() != 1 || st.GetItems()[0].GetNodes() != 1 {
		t.Fatalf("policy status: got %v; want a/web at generation 3, 1 replica on 1 node", st.GetItems())
	}
}

// TestWatchNetworkReadiness: a replica's endpoint carries its readiness
// and its ports; it arrives not ready, and once its status turns ready
// on its node the stream sends it again, ready. The snapshot's network
// names the region.
func TestWatchNetworkReadiness(t *testing.T) {
	e := newEnv(t)
	e.putNetwork("10.9.0.0/22", 24)
	a := &api.Assignment{ID: "a1", Tenant: "a", Resource: "web", Node: "n1", Desired: api.DesiredRunning, Generation: 1,
		Network: &api.NetworkAttachment{Network: "default", Address: "10.9.0.2"},
		Spec: api.ResourceSpec{Compute: &api.ComputeSpec{Image: "busybox", Ports: []api.PortSpec{{Name: "http", ContainerPort: 8080}},
			Containers: []api.Container{{Name: "dns", Image: "busybox", Ports: []api.PortSpec{{Name: "dns", ContainerPort: 53, Protocol: "UDP"}}}}}}}
	if _, err := e.st.Assignments.Put(e.ctx(), a.ID, a); err != nil {
		t.Fatal(err)
	}
	if err := e.caches.Assignments.WaitForRev(e.ctx(), e.rev()); err != nil {
		t.Fatal(err)
	}
	e.register(testNode("n1"))
	stream, err := e.agent.WatchNetwork(e.ctx(), &agentv1.WatchNetworkRequest{Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	// endpoint receives batches (the stream's context bounds the wait)
	// until one carries a1.
	endpoint := func() (*agentv1.NetworkBatch, *agentv1.NetworkEndpoint) {
		t.Helper()
		for {
			b, err := stream.Recv()
			if err != nil {
				t.Fatalf("Recv: %v", err)
			}
			for _, ep := range b.GetEndpoints() {
				if ep.GetId() == "a1" {
					return b, ep
				}
			}
		}
	}
	const wantPorts = "http/tcp/8080 dns/udp/53"
	snap, ep := endpoint()
	if !snap.GetSnapshot() || snap.GetNetwork().GetRegion() != testRegion {
		t.Fatalf("first batch: snapshot %v, region %q; want the snapshot, region %q", snap.GetSnapshot(), snap.GetNetwork().GetRegion(), testRegion)
	}
	if ep.GetReady() || portSummary(ep) != wantPorts {
		t.Fatalf("snapshot's a1: ready %v, ports %q; want not ready, %q", ep.GetReady(), portSummary(ep), wantPorts)
	}

	report := func(node string, phase api.Phase) {
		t.Helper()
		st := &api.AssignmentStatus{ID: "a1", ObservedGeneration: 1, Phase: phase}
		if _, err := e.agent.ReportStatus(e.ctx(), &agentv1.ReportStatusRequest{Node: node, Statuses: []*resourcev1.AssignmentStatus{apiproto.AssignmentStatusToPB(st)}}); err != nil {
			t.Fatal(err)
		}
	}
	report("n1", api.PhaseReady)
	if _, ep := endpoint(); !ep.GetReady() || portSummary(ep) != wantPorts {
		t.Fatalf("a1 ready on n1: ready %v, ports %q; want ready, %q", ep.GetReady(), portSummary(ep), wantPorts)
	}
	report("n1", api.PhaseError)
	if _, ep := endpoint(); ep.GetReady() {
		t.Fatal("a1 in error on n1: still ready; want not ready")
	}
}

// portSummary renders an endpoint's ports as "name/protocol/port", in
// order.
func portSummary(ep *agentv1.NetworkEndpoint) string {
	var parts []string
	for _, p := range ep.GetPorts() {
		parts = append(parts, fmt.Sprintf("%s/%s/%d", p.GetName(), p.GetProtocol(), p.GetPort()))
	}
	return strings.Join(parts, " ")
}
