package scheduler

import "math"

// zoneTree is a tournament over the scores of one zone's cands, so that
// a replica finds the best node in a few steps per zone rather than by
// reading every node: the nodes of a zone share its penalty, so the best
// of a zone is its best own score. win holds a heap: win[1] is the root,
// the leaves are win[leaves:], and every slot holds the cand of its
// subtree with the highest score, the lower index (first by name) among
// equals; -1 for none.
type zoneTree struct {
	leaves int // a power of two
	win    []int32
}

// buildTrees builds every zone's tree over the run's scores.
func (ru *run) buildTrees(zones int) {
	if cap(ru.trees) < zones {
		ru.trees = append(ru.trees[:cap(ru.trees)], make([]zoneTree, zones-cap(ru.trees))...)
	}
	ru.trees = ru.trees[:zones]
	for z := range ru.trees {
		t, cands := &ru.trees[z], ru.st.zoneCands[z]
		t.leaves = 1
		for t.leaves < len(cands) {
			t.leaves *= 2
		}
		t.win = t.win[:0]
		for range t.leaves {
			t.win = append(t.win, -1)
		}
		t.win = append(t.win, cands...)
		for range t.leaves - len(cands) {
			t.win = append(t.win, -1)
		}
		for p := t.leaves - 1; p >= 1; p-- {
			t.win[p] = ru.better(t.win[2*p], t.win[2*p+1])
		}
	}
}

// better returns whichever of cands a and b (a before b, -1 for none)
// scores higher, a when equal.
func (ru *run) better(a, b int32) int32 {
	if a < 0 || (b >= 0 && ru.score[b] > ru.score[a]) {
		return b
	}
	return a
}

// update brings cand j's zone tree up to date with its score.
func (ru *run) update(j int) {
	t := &ru.trees[ru.st.zone[j]]
	for p := (t.leaves + int(ru.st.leaf[j])) / 2; p >= 1; p /= 2 {
		t.win[p] = ru.better(t.win[2*p], t.win[2*p+1])
	}
}

// best returns the cand with the highest score less its zone's penalty,
// the first by name among equals, or -1 when none fits: the scores of
// the nodes that do not fit are -Inf, and so never better. It takes the
// highest of the zones' best, then the first cand reaching it: that is
// the cand a scan of every cand in order would take, rounding included.
func (ru *run) best() int {
	top := math.Inf(-1)
	for z := range ru.trees {
		if w := ru.trees[z].win[1]; w >= 0 {
			top = max(top, ru.score[w]-ru.zonePenalty[z])
		}
	}
	if math.IsInf(top, -1) {
		return -1
	}
	best := int32(-1)
	for z := range ru.trees {
		t, pen := &ru.trees[z], ru.zonePenalty[z]
		if w := t.win[1]; w < 0 || ru.score[w]-pen < top {
			continue
		}
		if j := t.first(ru.score, pen, top); best < 0 || j < best {
			best = j
		}
	}
	return int(best)
}

// first returns the first cand of the tree whose score less pen reaches
// top, which the root's does. Subtracting pen keeps the order of scores
// but may round two of them to one value: the first of those counts,
// not the highest.
func (t *zoneTree) first(score []float64, pen, top float64) int32 {
	p := 1
	for p < t.leaves {
		if l := t.win[2*p]; l >= 0 && score[l]-pen >= top {
			p = 2 * p
		} else {
			p = 2*p + 1
		}
	}
	return t.win[p]
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
