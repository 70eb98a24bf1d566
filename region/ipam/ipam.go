// Package ipam hands out a region network's IPv4 addresses to replicas.
//
// A Pool is the allocator's view of one network for one pass of the
// controller: which addresses are taken (the network's Port records) and
// which are reserved. The controller writes each allocation as a Port
// record created only if absent, in the same fenced transaction as the
// replica it belongs to, so that an address is never handed out twice,
// even across a leader change: a racing or deposed leader's create fails.
package ipam

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/stratahq/strata/internal/api"
)

// ErrExhausted wraps api.ErrExhausted: no free address is left.
var ErrExhausted = fmt.Errorf("no free address: %w", api.ErrExhausted)

// Pool allocates addresses of one network.
type Pool struct {
	net      api.Network
	prefix   netip.Prefix
	gateway  netip.Addr
	reserved [][2]netip.Addr
	used     map[netip.Addr]string
	// next is where the search for a free address starts: allocation
	// walks the network round-robin, so that a freed address is reused
	// as late as possible (a replica on an unreachable node may still
	// hold it).
	next netip.Addr
}

// NewPool builds a pool from a network and its ports. start, when valid,
// is where the round-robin search resumes.
func NewPool(n api.Network, ports []api.Port, start netip.Addr) (*Pool, error) {
	prefix, err := netip.ParsePrefix(n.Subnet)
	if err != nil || !prefix.Addr().Is4() {
		return nil, fmt.Errorf("network %s: subnet %q is not an IPv4 CIDR", n.Name, n.Subnet)
	}
	gw, err := netip.ParseAddr(n.Gateway)
	if err != nil {
		return nil, fmt.Errorf("network %s: gateway %q: %w", n.Name, n.Gateway, err)
	}
	p := &Pool{net: n, prefix: prefix.Masked(), gateway: gw, used: map[netip.Addr]string{}}
	for _, r := range n.Reserved {
		lo, hi, err := api.ParseRange(r)
		if err != nil {
			return nil, fmt.Errorf("network %s: %w", n.Name, err)
		}
		p.reserved = append(p.reserved, [2]netip.Addr{lo, hi})
	}
	for _, port := range ports {
		if a, err := netip.ParseAddr(port.Address); err == nil {
			p.used[a] = port.Assignment
		}
	}
	p.next = p.first()
	if start.IsValid() && p.usable(start) {
		p.next = start
	}
	return p, nil
}

// first is the network's first host address.
func (p *Pool) first() netip.Addr { return p.prefix.Addr().Next() }

// usable reports whether a may ever be handed out: inside the subnet, not
// the network or broadcast address, not the gateway, not reserved.
func (p *Pool) usable(a netip.Addr) bool {
	if !p.prefix.Contains(a) || a == p.prefix.Addr() || a == p.gateway || a == broadcast(p.prefix) {
		return false
	}
	for _, r := range p.reserved {
		if !a.Less(r[0]) && !r[1].Less(a) {
			return false
		}
	}
	return true
}

// Allocate takes the next free address for assignment.
func (p *Pool) Allocate(assignment string) (netip.Addr, error) {
	size := 1 << (32 - p.prefix.Bits())
	a := p.next
	for range size {
		if !p.prefix.Contains(a) {
			a = p.first()
		}
		if _, taken := p.used[a]; !taken && p.usable(a) {
			p.used[a] = assignment
			p.next = a.Next()
			return a, nil
		}
		a = a.Next()
	}
	return netip.Addr{}, fmt.Errorf("network %s (%s): %w", p.net.Name, p.net.Subnet, ErrExhausted)
}

// Release frees an address (a replica destroyed in the same pass).
func (p *Pool) Release(a netip.Addr) { delete(p.used, a) }

// Next is where the next search starts; the controller keeps it between
// passes.
func (p *Pool) Next() netip.Addr { return p.next }

// Attachment describes address a on the pool's network for a replica.
func (p *Pool) Attachment(a netip.Addr) *api.NetworkAttachment {
	return &api.NetworkAttachment{
		Network: p.net.Name,
		Bridge:  p.net.Bridge,
		Subnet:  p.prefix.String(),
		Gateway: p.gateway.String(),
		Address: a.String(),
	}
}

// IsExhausted reports whether err is an exhaustion.
func IsExhausted(err error) bool { return errors.Is(err, api.ErrExhausted) }

func broadcast(p netip.Prefix) netip.Addr {
	a := p.Addr().As4()
	host := 32 - p.Bits()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v |= (1 << host) - 1
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}
