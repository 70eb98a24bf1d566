package api

import (
	"fmt"
	"net"
	"net/netip"
)

// The validation of a region's registration, its nodes, their network
// and a drain request.

// Validate checks a region registration.
func (r *Region) Validate() error {
	if err := ValidateName("name", r.Name); err != nil {
		return err
	}
	if r.Endpoint == "" {
		return Invalid("endpoint", "is required: the region's gRPC address (host:port)")
	}
	if _, _, err := splitHostPort(r.Endpoint); err != nil {
		return Invalid("endpoint", "%q is not host:port", r.Endpoint)
	}
	for i, z := range r.Zones {
		if err := ValidateName(fmt.Sprintf("zones[%d]", i), z); err != nil {
			return err
		}
	}
	return ValidateLabels("labels", r.Labels)
}

// Validate checks a node registration.
func (n *Node) Validate() error {
	if err := ValidateName("name", n.Name); err != nil {
		return err
	}
	if err := ValidateName("region", n.Region); err != nil {
		return err
	}
	if n.Zone != "" {
		if err := ValidateName("zone", n.Zone); err != nil {
			return err
		}
	}
	if err := ValidateLabels("labels", n.Labels); err != nil {
		return err
	}
	if n.Capacity.MilliCPU <= 0 || n.Capacity.MemoryMiB <= 0 {
		return Invalid("capacity", "milliCPU and memoryMiB must be greater than 0")
	}
	if err := validNodeProviders(n.Providers); err != nil {
		return err
	}
	if n.AutoCordonInterval.Duration < 0 || n.AutoDrainInterval.Duration < 0 {
		return Invalid("autoCordonInterval", "intervals must not be negative")
	}
	if n.Network != nil {
		return n.Network.Validate()
	}
	return nil
}

func validNodeProviders(ps []NodeProvider) error {
	if len(ps) == 0 {
		return Invalid("providers", "a node needs at least one provider")
	}
	for i, p := range ps {
		if p.Name == "" {
			return Invalid(fmt.Sprintf("providers[%d].name", i), "is required")
		}
		for _, k := range p.Kinds {
			if err := oneOf(fmt.Sprintf("providers[%d].kinds", i), k, ProviderKinds...); err != nil {
				return err
			}
		}
	}
	return nil
}

// Validate checks what an agent reports of its host's network (the block
// is the region's and checked where it is assigned).
func (n *NodeNetwork) Validate() error {
	if n.UnderlayIP != "" {
		if a, err := netip.ParseAddr(n.UnderlayIP); err != nil || !a.Is4() {
			return Invalid("network.underlayIP", "%q is not an IPv4 address", n.UnderlayIP)
		}
	}
	if n.VTEPMAC != "" {
		if hw, err := net.ParseMAC(n.VTEPMAC); err != nil || len(hw) != 6 {
			return Invalid("network.vtepMAC", "%q is not a MAC address", n.VTEPMAC)
		}
	}
	if len(n.Bridge) > 15 {
		return Invalid("network.bridge", "%q is longer than 15 characters (a Linux interface name)", n.Bridge)
	}
	if n.MTU != 0 && (n.MTU < 576 || n.MTU > 65535) {
		return Invalid("network.mtu", "%d is not an MTU (576-65535, or 0 for unknown)", n.MTU)
	}
	return nil
}

// Validate checks a drain request.
func (d *DrainRequest) Validate() error {
	if d.Deadline.Duration < 0 {
		return Invalid("deadline", "must not be negative")
	}
	if d.MaxParallel < 0 {
		return Invalid("maxParallel", "must not be negative")
	}
	return nil
}
