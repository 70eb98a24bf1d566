package controller

import (
	"log/slog"
	"net/netip"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/region/ipam"
)

// addresses owns what the passes learn of the node blocks' addresses:
// where each block's round-robin allocation resumes, and what each
// block holds (ipam.Capacity), kept across passes.
type addresses struct {
	log  *slog.Logger
	next map[blockKey]netip.Addr
	caps map[blockKey]int
}

// resumeAt is where the allocation in a block resumes.
func (ad *addresses) resumeAt(key blockKey) netip.Addr { return ad.next[key] }

// keep records where the allocation of each pool of a pass resumes.
func (ad *addresses) keep(pools map[blockKey]*ipam.Pool) {
	for key, pool := range pools {
		ad.next[key] = pool.Next()
	}
}

// capacity is how many replicas' addresses a block of nw holds; 0
// for no block.
func (ad *addresses) capacity(nw *api.Network, block netip.Prefix) int {
	if !block.IsValid() {
		return 0
	}
	key := blockKey{network: nw.Name, block: block}
	if n, ok := ad.caps[key]; ok {
		return n
	}
	n, err := ipam.Capacity(*nw, block)
	if err != nil {
		ad.log.Warn("address capacity of a node block", "block", block, "err", err)
	}
	ad.caps[key] = n
	return n
}

// address takes a replica's address on its network from the block of the
// node it goes to, with what that node's host uses (bridge, MTU).
func (ad *addresses) address(v *view, a *api.Assignment, node string) (*api.NetworkAttachment, *api.Port, error) {
	name := ""
	if a.Spec.Compute != nil {
		name = a.Spec.Compute.Network
	}
	nw, err := v.network(name)
	if err != nil || nw == nil {
		return nil, nil, err
	}
	pool, err := v.pool(nw, node)
	if err != nil {
		return nil, nil, err
	}
	addr, err := pool.Allocate(a.ID)
	if err != nil {
		return nil, nil, err
	}
	att := pool.Attachment(addr)
	if nv, ok := v.node(node); ok && nv.node.Network != nil {
		if nv.node.Network.Bridge != "" {
			att.Bridge = nv.node.Network.Bridge
		}
		att.MTU = nw.ReplicaMTU(nv.node.Network.MTU)
	}
	return att, &api.Port{Network: att.Network, Address: att.Address, Assignment: a.ID, CreatedAt: v.now}, nil
}
