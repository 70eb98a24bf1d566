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

// blockKey names a node block of a network (an IPAM pool).
type blockKey struct {
	network string
	block   netip.Prefix
}
