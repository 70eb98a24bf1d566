// Package ipam hands out a region network's IPv4 addresses: a block of
// the network to each node, an address of its node's block to each
// replica.
//
// Blocks. A node gets its block when it registers (PickBlock); the block
// is recorded twice in one transaction: on the node, and as a Block record
// created only if absent, so that two nodes never get the same block even
// when two API replicas register them at once. A block's first address is
// the node's gateway. Replicas keep their address until they are
// rescheduled, so a block may hold addresses of another node (one that
// held it before, or the whole-subnet plan that preceded blocks): a new
// owner skips them.
//
// Addresses. A Pool is the allocator's view of one node's block for one
// pass of the controller: which addresses are taken (the network's Port
// records) and which are reserved. The controller writes each allocation
// as a Port record created only if absent, in the same fenced transaction
// as the replica it belongs to, so that an address is never handed out
// twice, even across a leader change: a racing or deposed leader's create
// fails.
package ipam

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"

	"github.com/stratahq/strata/internal/api"
)

// ErrExhausted wraps api.ErrExhausted: no free address (or block) is left.
var ErrExhausted = fmt.Errorf("no free address: %w", api.ErrExhausted)

// ErrNoBlock wraps api.ErrExhausted: the node has no block to take an
// address from.
var ErrNoBlock = fmt.Errorf("node has no address block: %w", api.ErrExhausted)

// network is what pools and blocks read of an api.Network, parsed once.
type network struct {
	n        api.Network
	subnet   netip.Prefix
	gateway  netip.Addr // the network's own (pre-block) gateway
	reserved [][2]netip.Addr
}

func parseNetwork(n api.Network) (*network, error) {
	prefix, err := netip.ParsePrefix(n.Subnet)
	if err != nil || !prefix.Addr().Is4() {
		return nil, fmt.Errorf("network %s: subnet %q is not an IPv4 CIDR", n.Name, n.Subnet)
	}
	gw, err := netip.ParseAddr(n.Gateway)
	if err != nil {
		return nil, fmt.Errorf("network %s: gateway %q: %w", n.Name, n.Gateway, err)
	}
	nw := &network{n: n, subnet: prefix.Masked(), gateway: gw}
	for _, r := range n.Reserved {
		lo, hi, err := api.ParseRange(r)
		if err != nil {
			return nil, fmt.Errorf("network %s: %w", n.Name, err)
		}
		nw.reserved = append(nw.reserved, [2]netip.Addr{lo, hi})
	}
	return nw, nil
}

// nodeBits is the prefix length of the network's blocks: the network's
// NodeMask, the whole subnet for a network recorded before node blocks
// that has none.
func (nw *network) nodeBits() int {
	if m := nw.n.NodeMask; m >= nw.subnet.Bits() && m <= 32 {
		return m
	}
	return nw.subnet.Bits()
}

// reservedAddr reports whether a is never handed out on the network.
func (nw *network) reservedAddr(a netip.Addr) bool {
	if a == nw.gateway || a == nw.subnet.Addr() || a == broadcast(nw.subnet) {
		return true
	}
	for _, r := range nw.reserved {
		if !a.Less(r[0]) && !r[1].Less(a) {
			return true
		}
	}
	return false
}

// usable reports whether a may be handed out in block: inside it, not its
// network, gateway or broadcast address, not reserved on the network.
func (nw *network) usable(block netip.Prefix, a netip.Addr) bool {
	if !block.Contains(a) || a == block.Addr() || a == BlockGateway(block) || a == broadcast(block) {
		return false
	}
	return !nw.reservedAddr(a)
}

// BlockGateway is the gateway of a node's block: its first host address.
func BlockGateway(block netip.Prefix) netip.Addr { return block.Masked().Addr().Next() }

// Capacity is how many addresses of block can be handed out on network n
// (addresses in use not deducted).
func Capacity(n api.Network, block netip.Prefix) (int, error) {
	nw, err := parseNetwork(n)
	if err != nil {
		return 0, err
	}
	block = block.Masked()
	count := 0
	a := block.Addr()
	for range 1 << (32 - block.Bits()) {
		if nw.usable(block, a) {
			count++
		}
		a = a.Next()
	}
	return count, nil
}

// AddressUse is an address held by a replica on a node.
type AddressUse struct {
	Addr netip.Addr
	Node string
}

// PickBlock chooses the block of network n for node, among the blocks
// taken does not report (nil: none is taken). taken is asked block by
// block, from near the node's starting point, so that a region with
// thousands of nodes looks a few blocks up in its cache rather than
// gathering every block record at each registration. In order of
// preference:
//
//   - the free block holding the most addresses of node's own replicas and
//     none of another node's: a node whose replicas got addresses before
//     node blocks (the whole-subnet plan) keeps them in its block;
//   - a free block holding no other node's address, searched from a
//     point that depends on the node's name, so that nodes registering at
//     once rarely race for one block, and a node deleted and registered
//     again tends to get its block back;
//   - any free block: its addresses in use are skipped until their
//     replicas go.
func PickBlock(n api.Network, node string, taken func(netip.Prefix) bool, used []AddressUse) (netip.Prefix, error) {
	nw, err := parseNetwork(n)
	if err != nil {
		return netip.Prefix{}, err
	}
	if taken == nil {
		taken = func(netip.Prefix) bool { return false }
	}
	g := blockGrid{nw: nw, bits: nw.nodeBits()}
	own, foreign := g.count(node, used)
	if i, ok := g.mostOwn(own, foreign, taken); ok {
		return g.at(i), nil
	}
	h := fnv.New32a()
	h.Write([]byte(node))
	count := g.blocks()
	start := int(h.Sum32() % uint32(count))
	fallback := -1
	for k := range count {
		i := (start + k) % count
		b := g.at(i)
		if taken(b) || !nw.hasUsable(b) {
			continue
		}
		if foreign[i] == 0 {
			return b, nil
		}
		if fallback < 0 {
			fallback = i
		}
	}
	if fallback >= 0 {
		return g.at(fallback), nil
	}
	return netip.Prefix{}, fmt.Errorf("network %s (%s): every /%d block is taken: %w", n.Name, n.Subnet, g.bits, api.ErrExhausted)
}

// blockGrid numbers the /bits blocks of a network from 0.
type blockGrid struct {
	nw   *network
	bits int
}

// blocks is the number of blocks.
func (g blockGrid) blocks() int { return 1 << (g.bits - g.nw.subnet.Bits()) }

// at is block i.
func (g blockGrid) at(i int) netip.Prefix {
	return netip.PrefixFrom(uintToAddr(addrToUint(g.nw.subnet.Addr())+uint32(i)<<(32-g.bits)), g.bits)
}

// count counts, per block, the addresses in use by node's replicas (own)
// and by other nodes' (foreign).
func (g blockGrid) count(node string, used []AddressUse) (own, foreign map[int]int) {
	own, foreign = map[int]int{}, map[int]int{}
	base := addrToUint(g.nw.subnet.Addr())
	for _, u := range used {
		if !g.nw.subnet.Contains(u.Addr) {
			continue
		}
		i := int((addrToUint(u.Addr) - base) >> (32 - g.bits))
		if u.Node == node {
			own[i]++
		} else {
			foreign[i]++
		}
	}
	return own, foreign
}

// mostOwn is the free block holding the most of the node's own addresses
// and none of another node's (the lowest of equals).
func (g blockGrid) mostOwn(own, foreign map[int]int, taken func(netip.Prefix) bool) (int, bool) {
	best, bestOwn := -1, 0
	for i, c := range own {
		if taken(g.at(i)) || foreign[i] > 0 {
			continue
		}
		if c > bestOwn || (c == bestOwn && i < best) {
			best, bestOwn = i, c
		}
	}
	return best, best >= 0
}

// hasUsable reports whether block has an address that may be handed out.
func (nw *network) hasUsable(block netip.Prefix) bool {
	a := block.Addr()
	for range 1 << (32 - block.Bits()) {
		if nw.usable(block, a) {
			return true
		}
		a = a.Next()
	}
	return false
}

// Pool allocates the addresses of one node's block.
type Pool struct {
	nw    *network
	block netip.Prefix
	used  map[netip.Addr]string
	// next is where the search for a free address starts: allocation
	// walks the block round-robin, so that a freed address is reused as
	// late as possible (a replica on an unreachable node may still hold
	// it).
	next netip.Addr
	// subnet and gateway are the block's, as every attachment names them
	// (one string each for all the block's replicas).
	subnet, gateway string
}

// NewPool builds the pool of block on network n from the network's ports
// (those outside the block are ignored). start, when valid, is where the
// round-robin search resumes.
func NewPool(n api.Network, block netip.Prefix, ports []*api.Port, start netip.Addr) (*Pool, error) {
	nw, err := parseNetwork(n)
	if err != nil {
		return nil, err
	}
	block = block.Masked()
	if !block.Addr().Is4() || !nw.subnet.Contains(block.Addr()) || block.Bits() < nw.subnet.Bits() {
		return nil, fmt.Errorf("network %s: block %s is not inside %s", n.Name, block, nw.subnet)
	}
	p := &Pool{nw: nw, block: block, used: map[netip.Addr]string{}, subnet: block.String(), gateway: BlockGateway(block).String()}
	for _, port := range ports {
		if a, err := netip.ParseAddr(port.Address); err == nil && block.Contains(a) {
			p.used[a] = port.Assignment
		}
	}
	p.next = p.first()
	if start.IsValid() && nw.usable(block, start) {
		p.next = start
	}
	return p, nil
}

// first is the block's first host address.
func (p *Pool) first() netip.Addr { return p.block.Addr().Next() }

// Allocate takes the next free address for assignment.
func (p *Pool) Allocate(assignment string) (netip.Addr, error) {
	size := 1 << (32 - p.block.Bits())
	a := p.next
	for range size {
		if !p.block.Contains(a) {
			a = p.first()
		}
		if _, taken := p.used[a]; !taken && p.nw.usable(p.block, a) {
			p.used[a] = assignment
			p.next = a.Next()
			return a, nil
		}
		a = a.Next()
	}
	return netip.Addr{}, fmt.Errorf("network %s, block %s: %w", p.nw.n.Name, p.block, ErrExhausted)
}

// Release frees an address (a replica destroyed in the same pass).
func (p *Pool) Release(a netip.Addr) { delete(p.used, a) }

// Next is where the next search starts; the controller keeps it between
// passes.
func (p *Pool) Next() netip.Addr { return p.next }

// Attachment describes address a of the pool's block for a replica; the
// caller adds what the node's host uses (bridge, MTU).
func (p *Pool) Attachment(a netip.Addr) *api.NetworkAttachment {
	return &api.NetworkAttachment{
		Network: p.nw.n.Name,
		Bridge:  p.nw.n.Bridge,
		Subnet:  p.subnet,
		Gateway: p.gateway,
		Address: a.String(),
	}
}

// IsExhausted reports whether err is an exhaustion.
func IsExhausted(err error) bool { return errors.Is(err, api.ErrExhausted) }

func broadcast(p netip.Prefix) netip.Addr {
	v := addrToUint(p.Masked().Addr())
	v |= (1 << (32 - p.Bits())) - 1
	return uintToAddr(v)
}

func addrToUint(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func uintToAddr(v uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}
