package netplane

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/testkit/simhost"
)

func ep(id, addr, tenant, node string, labels map[string]string) Endpoint {
	return Endpoint{ID: id, Addr: netip.MustParseAddr(addr), Tenant: tenant, Resource: id, Labels: labels, Node: node}
}

func setOf(rs *Ruleset, name string) AddrSet {
	for _, s := range rs.Sets {
		if s.Name == name {
			return s
		}
	}
	return AddrSet{}
}

func chainOfRuleset(rs *Ruleset, name string) PolicyChain {
	for _, c := range rs.Chains {
		if c.Name == name {
			return c
		}
	}
	return PolicyChain{}
}

func localChain(rs *Ruleset, addr string) string {
	for _, l := range rs.Local {
		if l.Addr == netip.MustParseAddr(addr) {
			return l.Chain
		}
	}
	return ""
}

func addrsOf(s AddrSet) []string {
	var out []string
	for _, r := range s.Ranges {
		if r.Lo == r.Hi {
			out = append(out, r.Lo.String())
		} else {
			out = append(out, r.Lo.String()+"-"+r.Hi.String())
		}
	}
	return out
}

// TestCompilePolicy checks the compiled ruleset: an unselected replica
// gets its tenant's chain (other tenants dropped, the rest accepted), a
// selected one the chain of its policies (an accept per peer and port,
// then drop); peers resolve to the tenant's matching replicas or to an
// IP block less its exceptions; replicas of other nodes get no chain.
func TestCompilePolicy(t *testing.T) {
	web := map[string]string{"app": "web"}
	client := map[string]string{"app": "client"}
	in := PolicyInput{
		Table: "t", Subnet: netip.MustParsePrefix("10.9.0.0/16"), Node: "n1",
		Blocks: []netip.Prefix{netip.MustParsePrefix("10.9.1.0/24"), netip.MustParsePrefix("10.9.2.0/24")},
		Endpoints: []Endpoint{
			ep("w1", "10.9.1.2", "a", "n1", web),
			ep("o1", "10.9.1.3", "a", "n1", nil),
			ep("c1", "10.9.2.2", "a", "n2", client),
			ep("x1", "10.9.2.3", "a", "n2", map[string]string{"app": "other"}),
			ep("b1", "10.9.1.4", "b", "n1", web),
			ep("b2", "10.9.2.4", "b", "n2", client),
		},
		Policies: []api.NetworkPolicy{{
			Name: "web", Tenant: "a", Selector: web,
			Ingress: []api.IngressRule{{
				From: []api.PolicyPeer{
					{Resources: &api.PeerSelector{MatchLabels: client}},
					{IPBlock: &api.IPBlock{CIDR: "192.168.0.0/16", Except: []string{"192.168.1.0/24"}}},
				},
				Ports: []api.PolicyPort{{Port: 80}, {Protocol: "udp", Port: 5000, EndPort: 5010}},
			}},
		}},
	}
	rs := CompilePolicy(in)
	if got := addrsOf(setOf(rs, SetGateways)); !slices.Equal(got, []string{"10.9.1.1", "10.9.2.1"}) {
		t.Errorf("gateways: got %v; want the blocks' first addresses", got)
	}
	if len(rs.Local) != 3 {
		t.Fatalf("local replicas: got %v; want the 3 of node n1", rs.Local)
	}
	wc, oc, bc := localChain(rs, "10.9.1.2"), localChain(rs, "10.9.1.3"), localChain(rs, "10.9.1.4")
	if wc == oc || oc == bc || wc == bc {
		t.Fatalf("chains: web %s, other %s, tenant b %s; want three different ones", wc, oc, bc)
	}
	// The unselected replica of a: drop other tenants, accept.
	other := chainOfRuleset(rs, oc)
	if len(other.Rules) != 2 || other.Rules[0].ForeignTenant == "" || other.Rules[0].Verdict != VerdictDrop || other.Rules[1].Verdict != VerdictAcc {
		t.Errorf("unselected chain: got %+v; want the tenant guard then accept", other.Rules)
	}
	if got := addrsOf(setOf(rs, other.Rules[0].ForeignTenant)); !slices.Equal(got, []string{"10.9.1.2", "10.9.1.3", "10.9.2.2", "10.9.2.3"}) {
		t.Errorf("tenant a's set: got %v; want its four replicas on every node", got)
	}
	// The selected one: guard, 2 peers x 2 ports, drop.
	sel := chainOfRuleset(rs, wc)
	if len(sel.Rules) != 6 || sel.Rules[5].Verdict != VerdictDrop {
		t.Fatalf("selected chain: got %d rules %+v; want guard, 4 accepts, drop", len(sel.Rules), sel.Rules)
	}
	r1, r4 := sel.Rules[1], sel.Rules[4]
	if r1.Proto != "tcp" || r1.PortLo != 80 || r1.PortHi != 80 || r4.Proto != "udp" || r4.PortLo != 5000 || r4.PortHi != 5010 {
		t.Errorf("ports: got %+v and %+v; want tcp 80 and udp 5000-5010", r1, r4)
	}
	if got := addrsOf(setOf(rs, r1.SrcSet)); !slices.Equal(got, []string{"10.9.2.2"}) {
		t.Errorf("peer app=client: got %v; want tenant a's client only (not tenant b's)", got)
	}
	block := setOf(rs, r4.SrcSet)
	if got := addrsOf(block); !block.Interval || !slices.Equal(got, []string{"192.168.0.0-192.168.0.255", "192.168.2.0-192.168.255.255"}) {
		t.Errorf("ip block: got interval %v %v; want 192.168/16 less 192.168.1/24", block.Interval, got)
	}

	// Order does not matter; content does.
	shuffled := in
	shuffled.Endpoints = slices.Clone(in.Endpoints)
	slices.Reverse(shuffled.Endpoints)
	if CompilePolicy(shuffled).Digest() != rs.Digest() {
		t.Error("the digest changed with the endpoints' order")
	}
	moved := in
	moved.Endpoints = append(slices.Clone(in.Endpoints), ep("c2", "10.9.3.2", "a", "n3", client))
	if CompilePolicy(moved).Digest() == rs.Digest() {
		t.Error("the digest did not change with a new allowed client")
	}
}

// TestCompilePolicyScales: rules grow with tenants and policies, not
// with replicas; replicas are set elements.
func TestCompilePolicyScales(t *testing.T) {
	build := func(replicas int) *Ruleset {
		in := PolicyInput{Table: "t", Subnet: netip.MustParsePrefix("10.0.0.0/8"), Node: "n1"}
		for i := range replicas {
			node := "n2"
			if i%10 == 0 {
				node = "n1"
			}
			app := []string{"web", "client"}[i%2]
			in.Endpoints = append(in.Endpoints, ep(fmt.Sprint(i), netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}).String(), "a", node, map[string]string{"app": app}))
		}
		in.Policies = []api.NetworkPolicy{{Name: "p", Tenant: "a", Selector: map[string]string{"app": "web"},
			Ingress: []api.IngressRule{{From: []api.PolicyPeer{{Resources: &api.PeerSelector{MatchLabels: map[string]string{"app": "client"}}}}}}}}
		return CompilePolicy(in)
	}
	small, large := build(100), build(10000)
	if small.Rules() != large.Rules() {
		t.Errorf("rules: %d with 100 replicas, %d with 10,000; want the same", small.Rules(), large.Rules())
	}
	if large.Elements() < 10000 {
		t.Errorf("elements with 10,000 replicas: %d; want them all in sets", large.Elements())
	}
}

func TestBlockRanges(t *testing.T) {
	for _, c := range []struct {
		cidr   string
		except []string
		want   []string
	}{
		{"10.0.0.0/8", nil, []string{"10.0.0.0-10.255.255.255"}},
		{"10.0.0.0/24", []string{"10.0.0.0/25"}, []string{"10.0.0.128-10.0.0.255"}},
		{"10.0.0.0/24", []string{"10.0.0.16/28", "10.0.0.64/26"}, []string{"10.0.0.0-10.0.0.15", "10.0.0.32-10.0.0.63", "10.0.0.128-10.0.0.255"}},
		{"0.0.0.0/0", []string{"10.0.0.0/8"}, []string{"0.0.0.0-9.255.255.255", "11.0.0.0-255.255.255.255"}},
		{"10.1.2.3/32", nil, []string{"10.1.2.3"}},
	} {
		var ex []netip.Prefix
		for _, e := range c.except {
			ex = append(ex, netip.MustParsePrefix(e))
		}
		got := addrsOf(AddrSet{Ranges: blockRanges(netip.MustParsePrefix(c.cidr), ex)})
		if !slices.Equal(got, c.want) {
			t.Errorf("%s except %v: got %v; want %v", c.cidr, c.except, got, c.want)
		}
	}
}

// canDial reports whether from reaches addr within a short while.
func canDial(from *simhost.NS, addr string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	c, err := from.Dial(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	defer c.Close()
	return echo(c, bufio.NewReader(c), "hi") == nil
}

// TestKernelPolicy enforces a ruleset on two simulated hosts over the
// real kernel (nftables, VXLAN, the bridge): tenant b cannot reach
// tenant a, on another host or on the same bridge; a policy selecting
// a's web replica admits a's client and refuses a's other replica; a's
// unselected replica is reachable by a; an established connection
// survives the ruleset being replaced and a new Plane (agent restart)
// changes nothing.
func TestKernelPolicy(t *testing.T) {
	_, hosts := newKernelHosts(t, 2)
	nw := Network{Subnet: netip.MustParsePrefix("10.97.0.0/16"), Backend: api.BackendVXLAN, VNI: 43}
	peers := peersOf(hosts)
	applyAll(t, nw, hosts, peers)
	add := func(h *kernelHost, name, addr string) *simhost.NS {
		block := h.peer.Block
		ns, err := h.AddReplica(h.Name+"-"+name, "strata0", netip.PrefixFrom(netip.MustParseAddr(addr), block.Bits()), block.Addr().Next(), 1450)
		if err != nil {
			t.Fatal(err)
		}
		return ns
	}
	// Host 2 serves: a's web (selected), a's db (unselected).
	web, db := add(hosts[1], "web", "10.97.2.2"), add(hosts[1], "db", "10.97.2.3")
	bLocal := add(hosts[1], "bl", "10.97.2.4") // tenant b, same bridge
	client, other, bRemote := add(hosts[0], "cl", "10.97.1.2"), add(hosts[0], "ot", "10.97.1.3"), add(hosts[0], "br", "10.97.1.4")
	echoServer(t, web, "10.97.2.2:80")
	echoServer(t, db, "10.97.2.3:5432")
	eps := []Endpoint{
		ep("web", "10.97.2.2", "a", "n2", map[string]string{"app": "web"}),
		ep("db", "10.97.2.3", "a", "n2", map[string]string{"app": "db"}),
		ep("bl", "10.97.2.4", "b", "n2", nil),
		ep("cl", "10.97.1.2", "a", "n1", map[string]string{"app": "client"}),
		ep("ot", "10.97.1.3", "a", "n1", map[string]string{"app": "other"}),
		ep("br", "10.97.1.4", "b", "n1", nil),
	}
	pols := []api.NetworkPolicy{{Name: "web", Tenant: "a", Selector: map[string]string{"app": "web"},
		Ingress: []api.IngressRule{{From: []api.PolicyPeer{{Resources: &api.PeerSelector{MatchLabels: map[string]string{"app": "client"}}}}, Ports: []api.PolicyPort{{Port: 80}}}}}}
	ctx := context.Background()
	// Both hosts enforce: host 1 for its own replicas.
	if _, _, err := hosts[0].plane.ApplyPolicy(ctx, nw, peers, eps, pols); err != nil {
		t.Fatalf("apply policy on host 1: %v", err)
	}
	changed, rs, err := hosts[1].plane.ApplyPolicy(ctx, nw, peers, eps, pols)
	if err != nil || !changed {
		t.Fatalf("apply policy: changed %v, %v", changed, err)
	}
	t.Logf("ruleset: %d rules, %d elements", rs.Rules(), rs.Elements())
	for _, c := range []struct {
		name string
		from *simhost.NS
		addr string
		want bool
	}{
		{"a's client → a's web (admitted)", client, "10.97.2.2:80", true},
		{"a's other → a's web (not admitted)", other, "10.97.2.2:80", false},
		{"b on another host → a's web", bRemote, "10.97.2.2:80", false},
		{"a's other → a's db (unselected)", other, "10.97.2.3:5432", true},
		{"b on another host → a's db (tenants isolated)", bRemote, "10.97.2.3:5432", false},
		{"b on the same bridge → a's db (tenants isolated)", bLocal, "10.97.2.3:5432", false},
		{"host 2 → a's web (hosts: load balancers)", hosts[1].NS, "10.97.2.2:80", true},
	} {
		if got := canDial(c.from, c.addr); got != c.want {
			t.Errorf("%s: reached %v; want %v", c.name, got, c.want)
		}
	}

	// An established connection survives the ruleset changing (a new
	// replica of a) and a restarted agent's new Plane.
	conn, err := client.Dial(ctx, "tcp", "10.97.2.2:80")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rd := bufio.NewReader(conn)
	if err := echo(conn, rd, "before"); err != nil {
		t.Fatal(err)
	}
	eps2 := append(slices.Clone(eps), ep("cl2", "10.97.1.9", "a", "n1", map[string]string{"app": "client"}))
	if changed, _, err := hosts[1].plane.ApplyPolicy(ctx, nw, peers, eps2, pols); err != nil || !changed {
		t.Fatalf("apply a new endpoint: changed %v, %v", changed, err)
	}
	restarted := New(hosts[1].k, hosts[1].plane.Host(), nil)
	if changed, _, err := restarted.ApplyPolicy(ctx, nw, peers, eps2, pols); err != nil || changed {
		t.Fatalf("apply from a new Plane: changed %v, %v; want nothing to change", changed, err)
	}
	if err := echo(conn, rd, "after"); err != nil {
		t.Fatalf("the established connection after the ruleset changed: %v", err)
	}
	// The policy gone, a's other reaches a's web again.
	if _, _, err := hosts[1].plane.ApplyPolicy(ctx, nw, peers, eps2, nil); err != nil {
		t.Fatal(err)
	}
	if !canDial(other, "10.97.2.2:80") {
		t.Error("a's other → a's web once no policy selects it: refused; want reached")
	}
	if canDial(bRemote, "10.97.2.2:80") {
		t.Error("b → a's web once no policy selects it: reached; want refused (tenants isolated)")
	}
}

// TestKernelPolicyLarge programs 1,000 policies selecting one replica,
// each admitting 10 addresses, in one transaction (larger than a
// netlink socket's default buffer; the selected replica's drop rule
// names the policies in a comment the kernel bounds), and applies it
// again from a new Plane: nothing to change.
func TestKernelPolicyLarge(t *testing.T) {
	_, hosts := newKernelHosts(t, 1)
	nw := Network{Subnet: netip.MustParsePrefix("10.0.0.0/8"), Backend: api.BackendVXLAN, VNI: 44}
	peers := peersOf(hosts)
	applyAll(t, nw, hosts, peers)
	eps := []Endpoint{ep("s", "10.97.1.2", "t", "n1", map[string]string{"role": "server"})}
	var pols []api.NetworkPolicy
	n := 0
	for i := range 1000 {
		peer := fmt.Sprint(i)
		for range 10 {
			n++
			eps = append(eps, Endpoint{ID: fmt.Sprint("r", n), Addr: netip.AddrFrom4([4]byte{10, byte(100 + n>>16), byte(n >> 8), byte(n)}), Tenant: "t", Node: "x", Labels: map[string]string{"peer": peer}})
		}
		pols = append(pols, api.NetworkPolicy{Name: "p" + peer, Tenant: "t", Selector: map[string]string{"role": "server"},
			Ingress: []api.IngressRule{{From: []api.PolicyPeer{{Resources: &api.PeerSelector{MatchLabels: map[string]string{"peer": peer}}}}, Ports: []api.PolicyPort{{Port: 5001}}}}})
	}
	ctx := context.Background()
	changed, rs, err := hosts[0].plane.ApplyPolicy(ctx, nw, peers, eps, pols)
	if err != nil || !changed {
		t.Fatalf("apply 1,000 policies: changed %v, %v", changed, err)
	}
	if rs.Elements() < 20000 || rs.Rules() < 1000 {
		t.Fatalf("ruleset: %d rules, %d elements; want the 1,000 policies' rules and their addresses", rs.Rules(), rs.Elements())
	}
	if changed, _, err := New(hosts[0].k, hosts[0].plane.Host(), nil).ApplyPolicy(ctx, nw, peers, eps, pols); err != nil || changed {
		t.Fatalf("apply again from a new Plane: changed %v, %v; want nothing to change", changed, err)
	}
}

func TestClipComment(t *testing.T) {
	long := strings.Repeat("é", 200)
	got := clipComment(long)
	if len(got) > maxComment || !utf8.ValidString(got) || !strings.HasSuffix(got, "...") {
		t.Errorf("clipComment of %d bytes: %d bytes, valid %v; want at most %d, valid UTF-8, ending ...", len(long), len(got), utf8.ValidString(got), maxComment)
	}
	if clipComment("short") != "short" {
		t.Error("a short comment changed")
	}
}
