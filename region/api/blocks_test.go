package api

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
	"github.com/stratahq/strata/region/ipam"
	"github.com/stratahq/strata/region/state"
	"github.com/stratahq/strata/testkit/storetest"
)

func blockOf(n *resourcev1.Node) string { return n.GetNetwork().GetBlock() }

// storedBlocks returns the block records, block → node.
func (e *testEnv) storedBlocks() map[string]string {
	e.t.Helper()
	items, _, err := e.st.Blocks.ListPrefix(e.ctx(), "default/")
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]string{}
	for _, it := range items {
		out[it.Value.Block] = it.Value.Node
	}
	return out
}

// TestRegisterGivesEachNodeItsOwnBlock registers nodes at once through
// two API replicas on one etcd, for exactly as many blocks as there are:
// every node gets a block of its own, recorded on the node and as a block
// record, and a node beyond them registers without one.
func TestRegisterGivesEachNodeItsOwnBlock(t *testing.T) {
	e := newEnv(t)
	e.putNetwork("10.9.0.0/20", 24) // 16 blocks
	clients := []agentv1.AgentServiceClient{e.agent, e.replica()}
	const nodes = 16
	got := make([]*resourcev1.Node, nodes)
	var wg sync.WaitGroup
	errs := make(chan error, nodes)
	for i := range nodes {
		wg.Go(func() {
			resp, err := clients[i%2].Register(e.ctx(), &agentv1.RegisterRequest{Node: testNode(fmt.Sprintf("n%02d", i))})
			if err != nil {
				errs <- err
				return
			}
			got[i] = resp.GetNode()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("register: %v", err)
	}
	seen := map[string]string{}
	for _, n := range got {
		b := blockOf(n)
		if b == "" {
			t.Fatalf("node %s: no block; want one of the 16", n.GetName())
		}
		if other, dup := seen[b]; dup {
			t.Fatalf("block %s given to %s and %s", b, other, n.GetName())
		}
		seen[b] = n.GetName()
	}
	if stored := e.storedBlocks(); !mapsEqual(stored, seen) {
		t.Fatalf("block records: got %v; want %v", stored, seen)
	}

	// One node too many: registered, but without a block, and said so.
	extra := e.register(testNode("n16"))
	if b := blockOf(extra); b != "" {
		t.Fatalf("17th node: got block %s; want none (all 16 taken)", b)
	}
	ev := e.waitEvent("NoAddressBlock", "node/n16")
	if !strings.Contains(ev.Message, "exhausted") {
		t.Errorf("event: got %q; want it to say blocks are exhausted", ev.Message)
	}

	// Registering again keeps the block, whatever the agent claims.
	claim := testNode("n03")
	claim.Network = &resourcev1.NodeNetwork{Block: "10.9.15.0/24", UnderlayIp: "192.0.2.3", Mtu: 1500}
	again := e.register(claim)
	if blockOf(again) != blockOf(got[3]) || again.GetNetwork().GetUnderlayIp() != "192.0.2.3" {
		t.Fatalf("re-registration: got block %q underlay %q; want the node's block %s and the new underlay address",
			blockOf(again), again.GetNetwork().GetUnderlayIp(), blockOf(got[3]))
	}

	// Deleting a node frees its block; the blockless node takes it at
	// its next registration.
	freed := blockOf(got[5])
	if _, err := e.region.DeleteNode(e.ctx(), &regionv1.NodeRef{Name: "n05"}); err != nil {
		t.Fatal(err)
	}
	if owner, ok := e.storedBlocks()[freed]; ok {
		t.Fatalf("block %s still recorded for %s after its node was deleted", freed, owner)
	}
	if b := blockOf(e.register(testNode("n16"))); b != freed {
		t.Fatalf("n16 registering again: got block %q; want the freed %s", b, freed)
	}
}

// TestRegisterTakesTheBlockRecordedForIt: a block record names the node
// but the node's record does not (its write was lost after): the node
// gets that block at its next registration, and no second one.
func TestRegisterTakesTheBlockRecordedForIt(t *testing.T) {
	e := newEnv(t)
	e.putNetwork("10.9.0.0/20", 24)
	rev, err := e.st.Blocks.Create(e.ctx(), state.BlockName("default", "10.9.7.0/24"),
		&api.Block{Network: "default", Block: "10.9.7.0/24", Node: "n1", CreatedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.caches.Blocks.WaitForRev(e.ctx(), rev); err != nil {
		t.Fatal(err)
	}
	if b := blockOf(e.register(testNode("n1"))); b != "10.9.7.0/24" {
		t.Fatalf("n1: got block %q; want 10.9.7.0/24, recorded for it", b)
	}
	if got, want := e.storedBlocks(), map[string]string{"10.9.7.0/24": "n1"}; !mapsEqual(got, want) {
		t.Fatalf("block records: got %v; want %v", got, want)
	}
}

// TestRegisterRetriesPastABlockItsCacheMissed: blocks are picked from the
// region's cache, which may not show yet a block another replica just
// took. The conditional write of the block record fails, and the
// registration tries again with another block instead of the same one.
func TestRegisterRetriesPastABlockItsCacheMissed(t *testing.T) {
	e := newEnv(t)
	nw := e.putNetwork("10.9.0.0/20", 24)

	// A replica whose block cache listed the (empty) blocks once and
	// then stopped: every block taken since is news to it.
	lag := state.NewCaches(e.st)
	storetest.Go(t, lag.Run)
	if err := lag.WaitSynced(e.ctx()); err != nil {
		t.Fatal(err)
	}
	frozen := state.NewCaches(e.st)
	stop := storetest.Go(t, frozen.Run)
	if err := frozen.WaitSynced(e.ctx()); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	lag.Blocks = frozen.Blocks
	client := e.replica(func(o *Options) { o.Caches = lag })

	// Another replica took the block n1 would pick first.
	first, err := ipam.PickBlock(*nw, "n1", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Blocks.Create(e.ctx(), state.BlockName("default", first.String()),
		&api.Block{Network: "default", Block: first.String(), Node: "other", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}

	resp, err := client.Register(e.ctx(), &agentv1.RegisterRequest{Node: testNode("n1")})
	if err != nil {
		t.Fatalf("register n1 on the lagging replica: %v", err)
	}
	got := blockOf(resp.GetNode())
	if got == "" || got == first.String() {
		t.Fatalf("n1: got block %q; want one other than %s, which another node holds", got, first)
	}
	if stored, want := e.storedBlocks(), map[string]string{first.String(): "other", got: "n1"}; !mapsEqual(stored, want) {
		t.Fatalf("block records: got %v; want %v", stored, want)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestRegisterAfterWholeSubnetPlan is the upgrade from one host: replicas
// got addresses anywhere in the subnet, before blocks. A node gets the
// block holding its own replicas' addresses, and no node gets a block
// holding another node's while a free one is left.
func TestRegisterAfterWholeSubnetPlan(t *testing.T) {
	e := newEnv(t)
	e.putNetwork("10.9.0.0/22", 24)
	a1, a2, a3 := testAssignment("r1", "acme", "web", "old"), testAssignment("r2", "acme", "web", "old"), testAssignment("r3", "acme", "db", "other")
	e.putAssignments(a1, a2, a3)
	txn := e.st.Store.Txn()
	for addr, id := range map[string]string{"10.9.2.7": "r1", "10.9.2.8": "r2", "10.9.1.9": "r3"} {
		e.st.Ports.TxnCreate(txn, state.PortName("default", addr), &api.Port{Network: "default", Address: addr, Assignment: id, CreatedAt: time.Now()})
	}
	rev, err := txn.Commit(e.ctx())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.caches.Ports.WaitForRev(e.ctx(), rev); err != nil {
		t.Fatal(err)
	}
	if b := blockOf(e.register(testNode("old"))); b != "10.9.2.0/24" {
		t.Errorf("node whose replicas hold 10.9.2.7-8: got block %q; want 10.9.2.0/24", b)
	}
	for _, name := range []string{"new1", "new2"} {
		if b := blockOf(e.register(testNode(name))); b == "10.9.1.0/24" || b == "10.9.2.0/24" || b == "" {
			t.Errorf("node %s: got block %q; want a free one holding no other node's address", name, b)
		}
	}
}

// TestWatchNetwork follows the network stream: a snapshot with the
// network and every node, then the nodes whose place changed, and
// nothing for changes that do not touch it.
func TestWatchNetwork(t *testing.T) {
	e := newEnv(t)
	e.putNetwork("10.9.0.0/22", 24)
	withNet := func(name, underlay string) *resourcev1.Node {
		n := testNode(name)
		n.Network = &resourcev1.NodeNetwork{UnderlayIp: underlay, VtepMac: "02:00:00:00:00:01", Mtu: 1500}
		return n
	}
	n1 := e.register(withNet("n1", "192.0.2.1"))
	stream, err := e.agent.WatchNetwork(e.ctx(), &agentv1.WatchNetworkRequest{Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	recv := func() *agentv1.NetworkBatch {
		t.Helper()
		b, err := stream.Recv()
		if err != nil {
			t.Fatalf("Recv: %v", err)
		}
		return b
	}
	snap := recv()
	if !snap.GetSnapshot() || snap.GetNetwork().GetSubnet() != "10.9.0.0/22" || snap.GetNetwork().GetNodeMask() != 24 ||
		snap.GetNetwork().GetBackend() != api.BackendVXLAN || networkSummary(snap) != "n1@192.0.2.1/"+blockOf(n1) {
		t.Fatalf("snapshot: got %v; want the network and n1", snap)
	}

	n2 := e.register(withNet("n2", "192.0.2.2"))
	if got, want := networkSummary(recv()), "n2@192.0.2.2/"+blockOf(n2); got != want {
		t.Fatalf("a node registers: got %q; want %q", got, want)
	}
	// A cordon, and a registration that changes nothing of the node's
	// network, send nothing: the next message is the re-addressing.
	if _, err := e.region.CordonNode(e.ctx(), &regionv1.CordonNodeRequest{Name: "n2", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	e.register(withNet("n2", "192.0.2.2"))
	e.register(withNet("n2", "192.0.2.22"))
	if got, want := networkSummary(recv()), "n2@192.0.2.22/"+blockOf(n2); got != want {
		t.Fatalf("a node re-addressed: got %q; want %q (and nothing before it)", got, want)
	}
	if _, err := e.region.DeleteNode(e.ctx(), &regionv1.NodeRef{Name: "n2"}); err != nil {
		t.Fatal(err)
	}
	if got := networkSummary(recv()); got != "-n2" {
		t.Fatalf("a node deleted: got %q; want -n2", got)
	}
}

// networkSummary renders a batch's peers as "node@underlay/block" and
// removals as "-node", sorted.
func networkSummary(b *agentv1.NetworkBatch) string {
	var parts []string
	for _, p := range b.GetUpserts() {
		parts = append(parts, p.GetNode()+"@"+p.GetNetwork().GetUnderlayIp()+"/"+p.GetNetwork().GetBlock())
	}
	for _, r := range b.GetRemoved() {
		parts = append(parts, "-"+r)
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// TestRegisterWaitsForTheNetwork: a region serves before it has recorded
// its network; a node registering then would go without a block, so it is
// told to come back.
func TestRegisterWaitsForTheNetwork(t *testing.T) {
	e := newEnv(t)
	rev, err := e.st.Networks.Delete(e.ctx(), "default", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.caches.Networks.WaitForRev(e.ctx(), rev); err != nil {
		t.Fatal(err)
	}
	_, err = e.registerErr(testNode("n1"))
	wantErr(t, "register before the network", err, api.ErrUnavailable, "network is not recorded yet")
	e.putNetwork("10.9.0.0/22", 24)
	if b := blockOf(e.register(testNode("n1"))); b == "" {
		t.Fatal("register once the network is recorded: no block")
	}
}
