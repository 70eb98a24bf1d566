package api

import (
	"fmt"
	"net/netip"
	"strings"
)

// The validation of a region's network plan.

// Validate checks a network.
func (n *Network) Validate() error {
	if err := ValidateName("name", n.Name); err != nil {
		return err
	}
	pfx, err := netip.ParsePrefix(n.Subnet)
	if err != nil || !pfx.Addr().Is4() {
		return Invalid("subnet", "%q is not an IPv4 CIDR", n.Subnet)
	}
	if pfx.Bits() > 30 {
		return Invalid("subnet", "%q is too small (at most /30)", n.Subnet)
	}
	if pfx.Masked() != pfx {
		return Invalid("subnet", "%q has host bits set (did you mean %s?)", n.Subnet, pfx.Masked())
	}
	gw, err := netip.ParseAddr(n.Gateway)
	if err != nil || !pfx.Contains(gw) {
		return Invalid("gateway", "%q is not an address in %s", n.Gateway, n.Subnet)
	}
	for i, r := range n.Reserved {
		if _, _, err := ParseRange(r); err != nil {
			return Invalid(fmt.Sprintf("reserved[%d]", i), "%v", err)
		}
	}
	if n.Bridge == "" || len(n.Bridge) > 15 {
		return Invalid("bridge", "is required, at most 15 characters (a Linux interface name)")
	}
	return n.validPlan(pfx)
}

// validPlan checks the network's plan across hosts: its node blocks and
// the backend between them.
func (n *Network) validPlan(pfx netip.Prefix) error {
	if n.NodeMask < pfx.Bits() || n.NodeMask > 30 {
		return Invalid("nodeMask", "/%d is not a block of %s (from /%d to /30)", n.NodeMask, n.Subnet, pfx.Bits())
	}
	if err := oneOf("backend", n.Backend, NetworkBackends...); err != nil {
		return err
	}
	if n.Backend == BackendVXLAN && (n.VNI < 1 || n.VNI > 1<<24-1) {
		return Invalid("vni", "%d is not a VXLAN network identifier (1-16777215)", n.VNI)
	}
	return nil
}

// ParseRange parses "a.b.c.d" or "a.b.c.d-e.f.g.h".
func ParseRange(s string) (netip.Addr, netip.Addr, error) {
	lo, hi, found := strings.Cut(s, "-")
	a, err := netip.ParseAddr(strings.TrimSpace(lo))
	if err != nil {
		return netip.Addr{}, netip.Addr{}, fmt.Errorf("%q is not an address or a range", s)
	}
	if !found {
		return a, a, nil
	}
	b, err := netip.ParseAddr(strings.TrimSpace(hi))
	if err != nil || b.Less(a) {
		return netip.Addr{}, netip.Addr{}, fmt.Errorf("%q is not a range low-high", s)
	}
	return a, b, nil
}
