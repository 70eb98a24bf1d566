package netplane

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/stratahq/strata/internal/api"
)

// Endpoint is a replica on the region network, as the region streams it
// to the hosts that need it: the replicas of the tenants that have
// replicas on this node.
type Endpoint struct {
	ID       string
	Addr     netip.Addr
	Tenant   string
	Resource string
	Labels   map[string]string
	Node     string
}

// Ruleset is what the destination host enforces for tenant isolation and
// network policies, compiled from the node list, the endpoints and the
// policies (CompilePolicy). Its size grows with tenants and policy rules,
// not with replicas: replicas are elements of sets, looked up by address.
//
// Packets forwarded to a replica of this node (routed from another
// host, or bridged from a neighbour: the bridge passes them to the IP
// hooks) go through, in the table's forward chain:
//
//	ct state established,related accept      replies, admitted flows
//	ip saddr @gateways accept                hosts (load balancers)
//	ip daddr vmap @local                     the replica's chain
//
// A replica's chain is its tenant's while no policy selects it: it drops
// what comes from the cluster but not from the tenant's replicas, and
// accepts the rest. A selected replica's chain is the one of the set of
// policies that select it: the same tenant guard, then an accept per
// policy rule, peer and port, then drop.
type Ruleset struct {
	// Table is the nftables table (ip family) that holds it all.
	Table string
	// Subnet is the cluster CIDR.
	Subnet netip.Prefix
	// Sets are the address sets, by name.
	Sets []AddrSet
	// Local maps each local replica's address to its chain.
	Local []LocalReplica
	// Chains are the replicas' chains.
	Chains []PolicyChain
}

// AddrSet is a named set of addresses; Interval sets hold ranges
// (CIDRs), the others single addresses (Lo == Hi).
type AddrSet struct {
	Name     string
	Interval bool
	Ranges   []AddrRange
}

// AddrRange is the addresses Lo to Hi, both included.
type AddrRange struct{ Lo, Hi netip.Addr }

// LocalReplica sends the traffic to Addr to Chain.
type LocalReplica struct {
	Addr  netip.Addr
	Chain string
}

// PolicyChain is a regular chain of the table.
type PolicyChain struct {
	Name  string
	Rules []PolicyRule
}

// PolicyRule matches, all of what is set, and then applies Verdict
// ("accept" or "drop").
type PolicyRule struct {
	// ForeignTenant matches sources inside the cluster CIDR that are not
	// in the set it names (the tenant's replicas).
	ForeignTenant string `json:",omitempty"`
	// SrcSet matches sources in the set it names.
	SrcSet string `json:",omitempty"`
	// OutsideCluster matches sources outside the cluster CIDR.
	OutsideCluster bool `json:",omitempty"`
	// Proto ("tcp", "udp") with the destination ports Lo to Hi.
	Proto          string `json:",omitempty"`
	PortLo, PortHi int    `json:",omitempty"`
	Verdict        string
	// Comment says where the rule comes from (`nft list ruleset`).
	Comment string
}

// Digest identifies the ruleset's content: the table records it, and a
// table that holds the same digest is left alone.
func (rs *Ruleset) Digest() string {
	b, _ := json.Marshal(rs)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}

// Rule counts the ruleset's rules (the base chain's included), for logs
// and the benchmark.
func (rs *Ruleset) Rules() int {
	n := len(baseRules)
	for _, c := range rs.Chains {
		n += len(c.Rules)
	}
	return n
}

// Elements counts the ruleset's set elements.
func (rs *Ruleset) Elements() int {
	n := len(rs.Local)
	for _, s := range rs.Sets {
		n += len(s.Ranges)
	}
	return n
}

// baseRules describes the forward chain's rules, in order.
var baseRules = []string{"accept established,related", "accept from the hosts' gateways", "replicas of this node to their chain"}

// Names of the ruleset's fixed sets and chains.
const (
	SetGateways  = "gateways"
	SetLocal     = "local"
	ChainForward = "forward"
	VerdictAcc   = "accept"
	VerdictDrop  = "drop"
)

// PolicyTable is the table of the ruleset of bridge under the data
// plane's table name.
func PolicyTable(table, bridge string) string { return table + "-policy-" + bridge }

// PolicyInput is what CompilePolicy needs.
type PolicyInput struct {
	Table  string
	Subnet netip.Prefix
	// Node is this node; its endpoints are the local replicas.
	Node string
	// Blocks are the nodes' blocks (this one's included): their
	// gateways are the hosts.
	Blocks    []netip.Prefix
	Endpoints []Endpoint
	Policies  []api.NetworkPolicy
}

// compiler builds a Ruleset, naming each distinct set once.
type compiler struct {
	in      PolicyInput
	rs      Ruleset
	setByID map[string]string // content key -> set name
	tenant  map[string]string // tenant -> its replicas' set
	chains  map[string]string // chain key -> chain name
	// byLabel indexes the endpoints (with addresses) by tenant and
	// label, and byTenant by tenant, so that a peer's selector costs
	// its matches, not every replica.
	byLabel  map[string][]Endpoint
	byTenant map[string][]Endpoint
}

// index fills byLabel and byTenant from eps.
func (c *compiler) index(eps []Endpoint) {
	c.byLabel, c.byTenant = map[string][]Endpoint{}, map[string][]Endpoint{}
	for _, e := range eps {
		if !e.Addr.IsValid() {
			continue
		}
		c.byTenant[e.Tenant] = append(c.byTenant[e.Tenant], e)
		for k, v := range e.Labels {
			key := labelKey(e.Tenant, k, v)
			c.byLabel[key] = append(c.byLabel[key], e)
		}
	}
}

func labelKey(tenant, k, v string) string { return tenant + "\x00" + k + "=" + v }

// matching returns the tenant's endpoints whose labels hold every one of
// match: the fewest candidates of one label, checked for the others.
func (c *compiler) matching(tenant string, match map[string]string) []Endpoint {
	cands := c.byTenant[tenant]
	for k, v := range match {
		if l := c.byLabel[labelKey(tenant, k, v)]; len(l) < len(cands) {
			cands = l
		}
	}
	var out []Endpoint
	for _, e := range cands {
		ok := true
		for k, v := range match {
			if got, has := e.Labels[k]; !has || got != v {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, e)
		}
	}
	return out
}

// CompilePolicy compiles in into a Ruleset. The result depends only on
// in's content, not its order.
func CompilePolicy(in PolicyInput) *Ruleset {
	c := &compiler{in: in, setByID: map[string]string{}, tenant: map[string]string{}, chains: map[string]string{}}
	c.rs = Ruleset{Table: in.Table, Subnet: in.Subnet.Masked()}
	eps := slices.Clone(in.Endpoints)
	slices.SortFunc(eps, func(a, b Endpoint) int { return cmp.Or(a.Addr.Compare(b.Addr), strings.Compare(a.ID, b.ID)) })
	c.index(eps)
	pols := slices.Clone(in.Policies)
	slices.SortFunc(pols, func(a, b api.NetworkPolicy) int { return strings.Compare(a.Key(), b.Key()) })

	var gws []netip.Addr
	for _, b := range in.Blocks {
		gws = append(gws, b.Masked().Addr().Next())
	}
	c.rs.Sets = append(c.rs.Sets, AddrSet{Name: SetGateways, Ranges: singles(gws)})
	seen := map[netip.Addr]bool{}
	for _, e := range eps {
		if e.Node != in.Node || !e.Addr.IsValid() || seen[e.Addr] {
			continue
		}
		seen[e.Addr] = true
		c.rs.Local = append(c.rs.Local, LocalReplica{Addr: e.Addr, Chain: c.chainOf(e, pols)})
	}
	return &c.rs
}

// chainOf returns the chain of local replica e: its tenant's, or the one
// of the policies that select it, built on first use.
func (c *compiler) chainOf(e Endpoint, pols []api.NetworkPolicy) string {
	var sel []*api.NetworkPolicy
	var names []string
	for i := range pols {
		if pols[i].Selects(e.Tenant, e.Labels) {
			sel = append(sel, &pols[i])
			names = append(names, pols[i].Name)
		}
	}
	key := "tenant " + e.Tenant
	if len(sel) > 0 {
		key = "policies " + e.Tenant + "/" + strings.Join(names, ",")
	}
	if name, ok := c.chains[key]; ok {
		return name
	}
	tenantSet := c.tenantSet(e.Tenant)
	guard := PolicyRule{ForeignTenant: tenantSet, Verdict: VerdictDrop, Comment: "drop other tenants than " + e.Tenant}
	ch := PolicyChain{Rules: []PolicyRule{guard}}
	if len(sel) == 0 {
		ch.Name = fmt.Sprintf("tenant-%d", len(c.chains))
		ch.Rules = append(ch.Rules, PolicyRule{Verdict: VerdictAcc, Comment: "tenant " + e.Tenant + ": no policy selects these replicas"})
	} else {
		ch.Name = fmt.Sprintf("select-%d", len(c.chains))
		for _, p := range sel {
			ch.Rules = append(ch.Rules, c.policyRules(p, tenantSet)...)
		}
		by := e.Tenant + "/" + names[0]
		if len(names) > 1 {
			by += fmt.Sprintf(" and %d more", len(names)-1)
		}
		ch.Rules = append(ch.Rules, PolicyRule{Verdict: VerdictDrop, Comment: "selected by " + by + ": nothing else"})
	}
	c.chains[key] = ch.Name
	c.rs.Chains = append(c.rs.Chains, ch)
	return ch.Name
}

// tenantSet names the set of tenant's replicas, built on first use.
func (c *compiler) tenantSet(tenant string) string {
	if name, ok := c.tenant[tenant]; ok {
		return name
	}
	var addrs []netip.Addr
	for _, e := range c.byTenant[tenant] {
		addrs = append(addrs, e.Addr)
	}
	name := fmt.Sprintf("tenant-%d", len(c.tenant))
	c.tenant[tenant] = name
	c.rs.Sets = append(c.rs.Sets, AddrSet{Name: name, Ranges: singles(addrs)})
	return name
}

// policyRules are the accept rules of p: for each ingress rule, each of
// its peers (all sources of the tenant and outside the cluster without
// any) times each of its ports (every port without any).
func (c *compiler) policyRules(p *api.NetworkPolicy, tenantSet string) []PolicyRule {
	var out []PolicyRule
	for i, r := range p.Ingress {
		where := fmt.Sprintf("%s/%s ingress[%d]", p.Tenant, p.Name, i)
		var srcs []PolicyRule
		if len(r.From) == 0 {
			srcs = []PolicyRule{{SrcSet: tenantSet}, {OutsideCluster: true}}
		}
		for _, peer := range r.From {
			srcs = append(srcs, PolicyRule{SrcSet: c.peerSet(p.Tenant, peer)})
		}
		ports := r.Ports
		if len(ports) == 0 {
			ports = []api.PolicyPort{{}}
		}
		for _, src := range srcs {
			for _, pp := range ports {
				rule := src
				rule.Verdict, rule.Comment = VerdictAcc, where
				if len(r.Ports) > 0 {
					rule.Proto, rule.PortLo, rule.PortHi = pp.Range()
				}
				out = append(out, rule)
			}
		}
	}
	return out
}

// peerSet names the set of a peer's addresses: the tenant's replicas
// its selector matches, or its IP block less the exceptions.
func (c *compiler) peerSet(tenant string, peer api.PolicyPeer) string {
	var key string
	var set AddrSet
	if peer.Resources != nil {
		key = "resources " + tenant + " " + api.SelectorFromMap(peer.Resources.MatchLabels).String()
		var addrs []netip.Addr
		for _, e := range c.matching(tenant, peer.Resources.MatchLabels) {
			addrs = append(addrs, e.Addr)
		}
		set.Ranges = singles(addrs)
	} else {
		cidr, except := peer.IPBlock.Prefixes()
		key = "block " + cidr.String() + " except " + fmt.Sprint(except)
		set.Interval, set.Ranges = true, blockRanges(cidr, except)
	}
	if name, ok := c.setByID[key]; ok {
		return name
	}
	set.Name = fmt.Sprintf("peer-%d", len(c.setByID))
	c.setByID[key] = set.Name
	c.rs.Sets = append(c.rs.Sets, set)
	return set.Name
}

// singles are sorted, distinct addresses as ranges of one.
func singles(addrs []netip.Addr) []AddrRange {
	slices.SortFunc(addrs, netip.Addr.Compare)
	addrs = slices.Compact(addrs)
	out := make([]AddrRange, len(addrs))
	for i, a := range addrs {
		out[i] = AddrRange{a, a}
	}
	return out
}

// blockRanges is cidr less except, as sorted, disjoint ranges.
func blockRanges(cidr netip.Prefix, except []netip.Prefix) []AddrRange {
	out := []AddrRange{{cidr.Masked().Addr(), lastAddr(cidr)}}
	for _, ex := range except {
		lo, hi := ex.Masked().Addr(), lastAddr(ex)
		var next []AddrRange
		for _, r := range out {
			if hi.Less(r.Lo) || r.Hi.Less(lo) {
				next = append(next, r)
				continue
			}
			if r.Lo.Less(lo) {
				next = append(next, AddrRange{r.Lo, lo.Prev()})
			}
			if hi.Less(r.Hi) {
				next = append(next, AddrRange{hi.Next(), r.Hi})
			}
		}
		out = next
	}
	return out
}

// lastAddr is the last address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	if p.Bits() == 0 {
		host = ^uint32(0)
	}
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v |= host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// PolicyKernel is the optional part of a Kernel that enforces policies.
type PolicyKernel interface {
	// PolicyDigest returns the digest of the ruleset table holds; ok is
	// false when there is none.
	PolicyDigest(table string) (digest string, ok bool, err error)
	// SetPolicy replaces table with rs, in one nftables transaction:
	// no packet sees a half-made table, and conntrack keeps its flows.
	SetPolicy(rs *Ruleset) error
	// BridgeFilter reports whether bridged IPv4 traffic passes the IP
	// hooks (net.bridge.bridge-nf-call-iptables); EnableBridgeFilter
	// turns it on.
	BridgeFilter() (bool, error)
	EnableBridgeFilter() error
}

// ErrNoPolicyKernel is returned by ApplyPolicy on a kernel that cannot
// enforce policies.
var ErrNoPolicyKernel = errors.New("the data plane's kernel does not enforce network policies")

// ApplyPolicy converges the host's policy table to network nw, nodes
// peers, endpoints eps and policies pols. It reports whether it changed
// the table; a table that already holds the same ruleset is left alone,
// so a restarted agent disturbs nothing.
func (p *Plane) ApplyPolicy(ctx context.Context, nw Network, peers []Peer, eps []Endpoint, pols []api.NetworkPolicy) (bool, *Ruleset, error) {
	k, ok := p.k.(PolicyKernel)
	if !ok {
		return false, nil, ErrNoPolicyKernel
	}
	bridge := p.host.Bridge
	if bridge == "" {
		bridge = nw.Bridge
	}
	in := PolicyInput{Table: PolicyTable(p.host.Table, bridge), Subnet: nw.Subnet, Node: p.host.Node, Endpoints: eps, Policies: pols}
	for _, peer := range peers {
		if peer.Block.IsValid() {
			in.Blocks = append(in.Blocks, peer.Block)
		}
	}
	rs := CompilePolicy(in)
	if on, err := k.BridgeFilter(); err != nil {
		return false, rs, fmt.Errorf("bridge filter: %w", err)
	} else if !on {
		if err := k.EnableBridgeFilter(); err != nil {
			return false, rs, fmt.Errorf("bridge filter: %w", err)
		}
	}
	if ctx.Err() != nil {
		return false, rs, ctx.Err()
	}
	have, ok, err := k.PolicyDigest(rs.Table)
	if err != nil {
		return false, rs, fmt.Errorf("nftables table %s: %w", rs.Table, err)
	}
	if ok && have == rs.Digest() {
		return false, rs, nil
	}
	if err := k.SetPolicy(rs); err != nil {
		return false, rs, fmt.Errorf("nftables table %s: %w", rs.Table, err)
	}
	return true, rs, nil
}
