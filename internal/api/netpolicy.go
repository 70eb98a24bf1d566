package api

import (
	"fmt"
	"net/netip"
	"time"
)

// NetworkPolicy opens ingress to a tenant's replicas, with the semantics
// of a Kubernetes NetworkPolicy: the replicas of the tenant's resources
// whose labels match Selector are selected; a selected replica admits
// only what one of the policies selecting it allows (the union of their
// Ingress rules); a replica no policy selects admits everything from its
// own tenant. Replicas of other tenants are refused whatever the
// policies: tenants are isolated from each other by default, and a
// policy's peers are resources of its own tenant or CIDRs. Replies to
// an admitted connection always pass.
type NetworkPolicy struct {
	Name   string `json:"name"`
	Tenant string `json:"tenant,omitempty"`
	UID    string `json:"uid,omitempty"`
	// Generation counts the changes of the policy's content.
	Generation int64 `json:"generation,omitempty"`
	// Selector selects the tenant's replicas by their resource's labels;
	// empty selects them all.
	Selector map[string]string `json:"selector,omitempty"`
	// Ingress is what selected replicas admit; none admits nothing (the
	// selected replicas are closed to everything but replies).
	Ingress   []IngressRule `json:"ingress,omitempty"`
	CreatedAt time.Time     `json:"createdAt,omitzero"`
	UpdatedAt time.Time     `json:"updatedAt,omitzero"`
	// ResourceVersion is the store's modification revision; send it back
	// on update to make the write conditional.
	ResourceVersion int64 `json:"resourceVersion,omitempty"`
	// Status says where the policy is enforced; the server sets it.
	Status *NetworkPolicyStatus `json:"status,omitempty"`
}

// IngressRule admits traffic from any of From to any of Ports: no From
// admits every source, no Ports every port and protocol.
type IngressRule struct {
	From  []PolicyPeer `json:"from,omitempty"`
	Ports []PolicyPort `json:"ports,omitempty"`
}

// PolicyPeer is a source: the replicas of the tenant's resources whose
// labels match Resources, or the addresses of IPBlock; exactly one is set.
type PolicyPeer struct {
	Resources *PeerSelector `json:"resources,omitempty"`
	IPBlock   *IPBlock      `json:"ipBlock,omitempty"`
}

// PeerSelector selects resources of the policy's tenant by label; empty
// MatchLabels selects all of them.
type PeerSelector struct {
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
}

// IPBlock is a CIDR, less the CIDRs of Except (each inside it).
type IPBlock struct {
	CIDR   string   `json:"cidr"`
	Except []string `json:"except,omitempty"`
}

// PolicyPort is a destination port range of one protocol. Port 0 is every
// port of Protocol; EndPort, when set, ends a range starting at Port.
type PolicyPort struct {
	Protocol string `json:"protocol,omitempty"`
	Port     int    `json:"port,omitempty"`
	EndPort  int    `json:"endPort,omitempty"`
}

// Policy protocols.
const (
	ProtocolTCP = "tcp"
	ProtocolUDP = "udp"
)

// NetworkPolicyStatus says where a policy is enforced.
type NetworkPolicyStatus struct {
	// Regions are the regions that answered, with what each enforces.
	Regions []PolicyRegionStatus `json:"regions,omitempty"`
	// Unreachable names the regions that did not answer.
	Unreachable []string `json:"unreachable,omitempty"`
}

// PolicyRegionStatus is one region's enforcement of a policy.
type PolicyRegionStatus struct {
	Region string `json:"region"`
	// ObservedGeneration is the policy generation the region holds (0:
	// not received yet).
	ObservedGeneration int64 `json:"observedGeneration"`
	// Replicas counts the replicas the policy selects there, and Nodes
	// the nodes they run on, whose hosts enforce it.
	Replicas int `json:"replicas"`
	Nodes    int `json:"nodes"`
}

// Policy limits. MaxPoliciesPerTenant bounds what one tenant makes every
// host running its replicas enforce (checked against the API's cache: a
// burst of concurrent creates may pass it by a few).
const (
	MaxPoliciesPerTenant = 2000

	MaxPolicyRules  = 64
	MaxPolicyPeers  = 64
	MaxPolicyPorts  = 64
	MaxPolicyExcept = 64
)

// Key is tenant/name.
func (p *NetworkPolicy) Key() string { return p.Tenant + "/" + p.Name }

// Selects reports whether the policy selects a replica of its tenant
// with labels.
func (p *NetworkPolicy) Selects(tenant string, labels map[string]string) bool {
	return tenant == p.Tenant && SelectorFromMap(p.Selector).Matches(labels)
}

// Validate checks a policy; the tenant and the server's fields are the
// server's.
func (p *NetworkPolicy) Validate() error {
	var pr problems
	pr.add(ValidateName("name", p.Name))
	pr.add(ValidateLabels("selector", p.Selector))
	if len(p.Ingress) > MaxPolicyRules {
		pr.add(Invalid("ingress", "has %d rules; at most %d", len(p.Ingress), MaxPolicyRules))
	}
	for i := range p.Ingress {
		pr.in(fmt.Sprintf("ingress[%d]", i), p.Ingress[i].validate())
	}
	return pr.err()
}

func (r *IngressRule) validate() error {
	var pr problems
	if len(r.From) > MaxPolicyPeers {
		pr.add(Invalid("from", "has %d peers; at most %d", len(r.From), MaxPolicyPeers))
	}
	for i := range r.From {
		pr.in(fmt.Sprintf("from[%d]", i), r.From[i].validate())
	}
	if len(r.Ports) > MaxPolicyPorts {
		pr.add(Invalid("ports", "has %d ports; at most %d", len(r.Ports), MaxPolicyPorts))
	}
	for i := range r.Ports {
		pr.in(fmt.Sprintf("ports[%d]", i), r.Ports[i].validate())
	}
	return pr.err()
}

func (p *PolicyPeer) validate() error {
	switch {
	case p.Resources == nil && p.IPBlock == nil:
		return Invalid("", "names neither resources nor ipBlock")
	case p.Resources != nil && p.IPBlock != nil:
		return Invalid("", "names both resources and ipBlock; use one peer for each")
	case p.Resources != nil:
		return ValidateLabels("resources.matchLabels", p.Resources.MatchLabels)
	}
	return within("ipBlock", p.IPBlock.validate())
}

func (b *IPBlock) validate() error {
	cidr, err := parsePolicyCIDR(b.CIDR)
	if err != nil {
		return Invalid("cidr", "%v", err)
	}
	if len(b.Except) > MaxPolicyExcept {
		return Invalid("except", "has %d CIDRs; at most %d", len(b.Except), MaxPolicyExcept)
	}
	var pr problems
	for i, e := range b.Except {
		field := fmt.Sprintf("except[%d]", i)
		ex, err := parsePolicyCIDR(e)
		switch {
		case err != nil:
			pr.add(Invalid(field, "%v", err))
		case ex.Bits() < cidr.Bits() || !cidr.Contains(ex.Addr()):
			pr.add(Invalid(field, "%s is not inside the block's cidr %s", ex, cidr))
		}
	}
	return pr.err()
}

// parsePolicyCIDR parses an IPv4 CIDR whose host bits are zero.
func parsePolicyCIDR(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	switch {
	case err != nil:
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR (like 10.0.0.0/8)", s)
	case !p.Addr().Is4():
		return netip.Prefix{}, fmt.Errorf("%q is not an IPv4 CIDR", s)
	case p.Masked() != p:
		return netip.Prefix{}, fmt.Errorf("%q has host bits set; did you mean %s?", s, p.Masked())
	}
	return p, nil
}

// Prefixes returns the block's CIDR and exceptions, parsed (Validate
// checked them).
func (b *IPBlock) Prefixes() (netip.Prefix, []netip.Prefix) {
	cidr, _ := netip.ParsePrefix(b.CIDR)
	var except []netip.Prefix
	for _, e := range b.Except {
		if p, err := netip.ParsePrefix(e); err == nil {
			except = append(except, p)
		}
	}
	return cidr, except
}

func (pp *PolicyPort) validate() error {
	var pr problems
	if pp.Protocol != "" {
		pr.add(oneOf("protocol", pp.Protocol, ProtocolTCP, ProtocolUDP))
	}
	switch {
	case pp.Port < 0 || pp.Port > 65535:
		pr.add(Invalid("port", "%d is not a port (1-65535, or 0 for all)", pp.Port))
	case pp.EndPort != 0 && pp.Port == 0:
		pr.add(Invalid("endPort", "needs port, the start of the range"))
	case pp.EndPort != 0 && (pp.EndPort < pp.Port || pp.EndPort > 65535):
		pr.add(Invalid("endPort", "%d must be between port (%d) and 65535", pp.EndPort, pp.Port))
	}
	return pr.err()
}

// Range returns the port's protocol (default tcp) and range; 0-65535
// when Port is 0.
func (pp PolicyPort) Range() (proto string, lo, hi int) {
	proto = pp.Protocol
	if proto == "" {
		proto = ProtocolTCP
	}
	switch {
	case pp.Port == 0:
		return proto, 0, 65535
	case pp.EndPort == 0:
		return proto, pp.Port, pp.Port
	}
	return proto, pp.Port, pp.EndPort
}

// GetResourceVersion is the version the REST edge sends as the ETag.
func (p NetworkPolicy) GetResourceVersion() int64 { return p.ResourceVersion }
