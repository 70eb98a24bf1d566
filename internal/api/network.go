package api

import (
	"fmt"
	"time"
)

// Network (NetworkV4 in the seeds) is a region IPv4 network that replicas
// get addresses on. Its subnet is the cluster CIDR: each node gets a block
// of it (NodeMask) when it registers, and each replica an address of its
// node's block, so that hosts route blocks to each other (Backend).
type Network struct {
	Name   string `json:"name"`
	Subnet string `json:"subnet"`
	// Gateway was the one gateway of the whole subnet when every node
	// shared a host. Each node's gateway is now the first address of its
	// block; this address is still never handed out, so that replicas
	// created before node blocks keep theirs.
	Gateway string `json:"gateway"`
	// Reserved are addresses or ranges ("10.0.0.1-10.0.0.9") never handed
	// out.
	Reserved []string `json:"reserved,omitempty"`
	// Bridge is the Linux bridge a node attaches replicas to, unless the
	// node names its own (NodeNetwork.Bridge).
	Bridge string `json:"bridge"`
	// NodeMask is the prefix length of a node's block (24: a /24 each).
	NodeMask int `json:"nodeMask,omitempty"`
	// Backend is how hosts carry traffic between blocks (NetworkBackends).
	Backend string `json:"backend,omitempty"`
	// VNI is the VXLAN network identifier of the vxlan backend.
	VNI       int       `json:"vni,omitempty"`
	Default   bool      `json:"default,omitempty"`
	CreatedAt time.Time `json:"createdAt,omitzero"`
}

// Network backends: how the hosts of a region carry traffic between
// node blocks.
const (
	// BackendVXLAN encapsulates traffic between hosts in VXLAN (UDP
	// 4789): hosts need only reach each other's underlay address.
	BackendVXLAN = "vxlan"
	// BackendHostGW routes each block via its node's underlay address:
	// hosts must share one L2 segment.
	BackendHostGW = "host-gw"
	// BackendNone programs no routes between hosts: every node runs on
	// one host (strata dev, tests), or the network routes the blocks.
	BackendNone = "none"
)

// NetworkBackends are the valid Network.Backend values.
var NetworkBackends = []string{BackendVXLAN, BackendHostGW, BackendNone}

// Defaults of a network's node blocks and VXLAN.
const (
	DefaultNodeMask = 24
	DefaultVNI      = 1
	// VXLANPort is the UDP port of the vxlan backend (IANA's).
	VXLANPort = 4789
	// VXLANOverhead is what VXLAN encapsulation adds to a packet over
	// IPv4: outer IP (20), UDP (8), VXLAN (8) and inner Ethernet (14).
	VXLANOverhead = 50
)

// BridgeAlias marks a bridge that the agent's data plane owns (its
// interface alias): it holds the node's gateway and routes, so providers
// leave it in place when their last replica leaves it.
const BridgeAlias = "strata-netplane"

// ReplicaMTU is the MTU of replica interfaces on a host whose underlay
// interface has MTU underlay: what is left once the backend's
// encapsulation fits. Zero when the underlay MTU is unknown.
func (n *Network) ReplicaMTU(underlay int) int {
	if underlay <= 0 {
		return 0
	}
	if n.Backend == BackendVXLAN {
		return underlay - VXLANOverhead
	}
	return underlay
}

// NodeNetwork is a node's place on its region's network: its block,
// which the region assigns, and what its agent reports of the host.
type NodeNetwork struct {
	// Block is the node's share of the network's subnet (CIDR); its
	// first address is the node's gateway. The region sets it.
	Block string `json:"block,omitempty"`
	// UnderlayIP is the host address other hosts reach this one at:
	// the VXLAN tunnel endpoint, or the host-gw next hop.
	UnderlayIP string `json:"underlayIP,omitempty"`
	// VTEPMAC is the MAC address of the host's VXLAN device.
	VTEPMAC string `json:"vtepMAC,omitempty"`
	// Bridge is the host's bridge for replicas (default: the network's).
	Bridge string `json:"bridge,omitempty"`
	// MTU is the underlay interface's MTU (0: unknown).
	MTU int `json:"mtu,omitempty"`
}

// Block is the record that makes a block of a network one node's alone:
// it is created only if absent, with the node's record, so that two nodes
// never get the same block, whichever API replica registers them.
type Block struct {
	Network   string    `json:"network"`
	Block     string    `json:"block"`
	Node      string    `json:"node"`
	CreatedAt time.Time `json:"createdAt,omitzero"`
}

// Port (NetworkV4Port in the seeds) is an address held by one replica.
type Port struct {
	Network    string    `json:"network"`
	Address    string    `json:"address"`
	Assignment string    `json:"assignment"`
	CreatedAt  time.Time `json:"createdAt"`
}

// Tenant owns resources and is bounded by quotas. A tenant without a
// record has no quota; tokens and resources name tenants freely.
type Tenant struct {
	Name string `json:"name"`
	// Quota bounds the tenant over every region.
	Quota Quota `json:"quota,omitzero"`
	// RegionQuotas bound the tenant in one region each (keyed by region).
	RegionQuotas map[string]Quota `json:"regionQuotas,omitempty"`
	CreatedAt    time.Time        `json:"createdAt,omitzero"`
	UpdatedAt    time.Time        `json:"updatedAt,omitzero"`
	// ResourceVersion is the store's modification revision; send it back
	// on update to make the write conditional.
	ResourceVersion int64 `json:"resourceVersion,omitempty"`
}

// Limited reports whether any quota of t bounds anything.
func (t *Tenant) Limited() bool {
	if t == nil {
		return false
	}
	if !t.Quota.IsZero() {
		return true
	}
	for _, q := range t.RegionQuotas {
		if !q.IsZero() {
			return true
		}
	}
	return false
}

// Quota is an amount of each thing a tenant holds. As a limit, a zero
// field is unlimited; as usage, it is what the tenant holds.
type Quota struct {
	// Resources counts resources of every kind.
	Resources int `json:"resources,omitempty"`
	// Replicas counts the replicas of every kind.
	Replicas int `json:"replicas,omitempty"`
	// VCPUs and MemoryMiB are the flavors' sizes times the replicas.
	VCPUs     float64 `json:"vcpus,omitempty"`
	MemoryMiB int64   `json:"memoryMiB,omitempty"`
	// VolumeGiB is the size of the Volume resources' replicas, in GiB
	// (rounded up per volume).
	VolumeGiB int64 `json:"volumeGiB,omitempty"`
	// Loadbalancers counts Loadbalancer resources.
	Loadbalancers int `json:"loadbalancers,omitempty"`
}

// IsZero reports whether q bounds (or holds) nothing.
func (q Quota) IsZero() bool { return q == Quota{} }

// Add returns q plus o.
func (q Quota) Add(o Quota) Quota {
	return Quota{
		Resources: q.Resources + o.Resources, Replicas: q.Replicas + o.Replicas,
		VCPUs: q.VCPUs + o.VCPUs, MemoryMiB: q.MemoryMiB + o.MemoryMiB,
		VolumeGiB: q.VolumeGiB + o.VolumeGiB, Loadbalancers: q.Loadbalancers + o.Loadbalancers,
	}
}

// Exceeded names the first amount of use over the limit q (zero fields
// unlimited) that grew from before, as "replicas 12 of 10"; "" when none
// did. A quota lowered below what a tenant holds refuses growth, never
// what the tenant already has or a change that shrinks it.
func (q Quota) Exceeded(before, use Quota) string {
	ints := []struct {
		name              string
		limit, was, after int64
	}{
		{"resources", int64(q.Resources), int64(before.Resources), int64(use.Resources)},
		{"replicas", int64(q.Replicas), int64(before.Replicas), int64(use.Replicas)},
		{"memoryMiB", q.MemoryMiB, before.MemoryMiB, use.MemoryMiB},
		{"volumeGiB", q.VolumeGiB, before.VolumeGiB, use.VolumeGiB},
		{"loadbalancers", int64(q.Loadbalancers), int64(before.Loadbalancers), int64(use.Loadbalancers)},
	}
	// vCPUs are compared in thousandths, as flavors are scheduled.
	if milli := func(v float64) int64 { return int64(v*1000 + 0.5) }; q.VCPUs > 0 && milli(use.VCPUs) > milli(q.VCPUs) && milli(use.VCPUs) > milli(before.VCPUs) {
		return fmt.Sprintf("vcpus %g of %g", use.VCPUs, q.VCPUs)
	}
	for _, c := range ints {
		if c.limit > 0 && c.after > c.limit && c.after > c.was {
			return fmt.Sprintf("%s %d of %d", c.name, c.after, c.limit)
		}
	}
	return ""
}

// Validate checks that no limit is negative, naming every one that is.
func (q Quota) Validate() error {
	var p problems
	for _, f := range []struct {
		name     string
		negative bool
	}{
		{"resources", q.Resources < 0}, {"replicas", q.Replicas < 0}, {"vcpus", q.VCPUs < 0},
		{"memoryMiB", q.MemoryMiB < 0}, {"volumeGiB", q.VolumeGiB < 0}, {"loadbalancers", q.Loadbalancers < 0},
	} {
		if f.negative {
			p.add(Invalid(f.name, "must not be negative"))
		}
	}
	return p.err()
}

// Validate checks a tenant as a client writes it, reporting every field
// at fault at once (region quotas by region name). Whether the regions
// are registered is the API's to check (it knows them).
func (t *Tenant) Validate() error {
	var p problems
	p.add(ValidateName("name", t.Name))
	p.in("quota", t.Quota.Validate())
	for _, region := range sortedKeys(t.RegionQuotas) {
		if err := ValidateName("regionQuotas", region); err != nil {
			p.add(err)
			continue
		}
		p.in("regionQuotas."+region, t.RegionQuotas[region].Validate())
	}
	return p.err()
}

// Role is what a token may do.
type Role string

const (
	RoleAdmin    Role = "admin"
	RoleOperator Role = "operator"
	RoleMember   Role = "member"
	RoleViewer   Role = "viewer"
	// RoleInfra operates the infrastructure: nodes (cordon, drain,
	// delete), regions' events and endpoints. It holds no tenant's
	// resources.
	RoleInfra Role = "infra"
	// RoleTenantAdmin administers one tenant: its resources, configs and
	// secrets, and its tokens (of its own tenant, tenant-admin at most);
	// never another tenant, nor what tenants share. RoleAdmin is the
	// system tenant's only.
	RoleTenantAdmin Role = "tenant-admin"
)

// Roles are every role, most powerful first.
var Roles = []Role{RoleAdmin, RoleInfra, RoleTenantAdmin, RoleOperator, RoleMember, RoleViewer}

// Token is a bearer token; only its hash is stored.
type Token struct {
	ID        string    `json:"id"`
	Name      string    `json:"name,omitempty"`
	Hash      string    `json:"hash"`
	Tenant    string    `json:"tenant"`
	Role      Role      `json:"role"`
	CreatedAt time.Time `json:"createdAt"`
	// ExpiresAt, when set, is when the token stops working.
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
	// LastUsedAt is when the token last authenticated a request, to the
	// minute (it is written at most once a minute).
	LastUsedAt time.Time `json:"lastUsedAt,omitzero"`
}
