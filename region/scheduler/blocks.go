package scheduler

import "math"

// blockSize is how many cands of one zone a block holds: a booking
// rescans its node's block, then the best of its zone's blocks.
const blockSize = 64

// The cands of a run are grouped by zone (see staticRun), and each
// zone's in blocks of blockSize, each block and each zone knowing its
// best cand: the nodes of a zone share its penalty, so the best node is
// the best of a zone, and a replica reads one cand per zone rather than
// every node.

// buildBlocks takes every cand's filter and score from ft and finds
// every block's and every zone's best cand.
func (ru *run) buildBlocks(ft *fitTable) {
	st := ru.st
	blocks := int(st.zoneBlocks[len(st.zoneBlocks)-1])
	if cap(ru.blockWin) < blocks {
		ru.blockWin = make([]int32, blocks)
	}
	ru.blockWin = ru.blockWin[:blocks]
	for z := range len(st.zoneCands) - 1 {
		for lo, b := int(st.zoneCands[z]), st.zoneBlocks[z]; b < st.zoneBlocks[z+1]; lo, b = lo+blockSize, b+1 {
			hi := min(lo+blockSize, int(st.zoneCands[z+1]))
			win, top := lo, math.Inf(-1)
			for j, i := range st.node[lo:hi] {
				w, score := ft.why[i], ft.score[i]
				ru.why[lo+j], ru.score[lo+j] = w, score
				if score > top {
					win, top = lo+j, score
				}
			}
			ru.blockWin[b] = int32(win)
		}
		ru.rezoneWin(z)
	}
}

// blockOf returns the zone and the block of cand j.
func (ru *run) blockOf(j int) (z, b int) {
	z = int(ru.st.zone[j])
	return z, int(ru.st.zoneBlocks[z]) + (j-int(ru.st.zoneCands[z]))/blockSize
}

// rescan finds the best cand of block b of zone z.
func (ru *run) rescan(z, b int) {
	lo := int(ru.st.zoneCands[z]) + (b-int(ru.st.zoneBlocks[z]))*blockSize
	hi := min(lo+blockSize, int(ru.st.zoneCands[z+1]))
	win, top := lo, ru.score[lo]
	for j := lo + 1; j < hi; j++ {
		if ru.score[j] > top {
			win, top = j, ru.score[j]
		}
	}
	ru.blockWin[b] = int32(win)
}

// rezoneWin finds the best cand of zone z from its blocks' best: the
// first block's among equals, which holds the lower index.
func (ru *run) rezoneWin(z int) {
	win := int32(-1)
	for _, w := range ru.blockWin[ru.st.zoneBlocks[z]:ru.st.zoneBlocks[z+1]] {
		if win < 0 || ru.score[w] > ru.score[win] {
			win = w
		}
	}
	ru.zoneWin[z] = win
}

// update brings cand j's block and zone up to date with its score.
func (ru *run) update(j int) {
	z, b := ru.blockOf(j)
	ru.rescan(z, b)
	ru.rezoneWin(z)
}

// best returns the cand with the highest score less its zone's penalty,
// the first by name among equals, or -1 when none fits: the scores of
// the nodes that do not fit are -Inf, and so never better. It takes the
// highest of the zones' best, and of the zones reaching it the first
// cand reaching it: that is the cand a scan of every node in order would
// take, rounding included.
func (ru *run) best() int {
	top, best := math.Inf(-1), -1
	for z, w := range ru.zoneWin {
		if w < 0 {
			continue
		}
		switch v := ru.score[w] - ru.zonePenalty[z]; {
		case v > top:
			top, best = v, ru.first(z, v)
		case v == top && !math.IsInf(v, -1):
			if j := ru.first(z, v); ru.st.node[j] < ru.st.node[best] {
				best = j
			}
		}
	}
	return best
}

// first returns the first cand of zone z whose score less the zone's
// penalty reaches top, or -1. Subtracting the penalty keeps the order of
// scores but may round two of them to one value: the first of those
// counts, not the highest.
func (ru *run) first(z int, top float64) int {
	pen := ru.zonePenalty[z]
	for b := ru.st.zoneBlocks[z]; b < ru.st.zoneBlocks[z+1]; b++ {
		if ru.score[ru.blockWin[b]]-pen < top {
			continue
		}
		lo := int(ru.st.zoneCands[z]) + int(b-ru.st.zoneBlocks[z])*blockSize
		for j := lo; ; j++ {
			if ru.score[j]-pen >= top {
				return j
			}
		}
	}
	return -1
}

// bestBut returns best as if cand j were not there (the node a replica
// leaves).
func (ru *run) bestBut(j int) int {
	saved := ru.score[j]
	ru.score[j] = math.Inf(-1)
	ru.update(j)
	best := ru.best()
	ru.score[j] = saved
	ru.update(j)
	return best
}
