package scheduler

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/stratahq/strata/internal/api"
)

// run places consecutive requests that share all but Pin and Avoid
// (replicas of one resource). Starting it takes the nodes the requests'
// static filters let through (the cands) and their resource fit from
// the snapshot's caches, and finds the best of each block and zone; placing
// a replica then compares the zones' best, and once a node is booked
// rescores that node alone: a booking changes nothing else of the other
// nodes but their zone's count, which the score reads from zonePenalty.
type run struct {
	key Request // Pin and Avoid cleared
	fit fitKey  // what of key the resource fit depends on
	st  *staticRun

	// Per cand: replicas of the run's resource on it, the first of the
	// filters that change with bookings it fails (hard anti-affinity,
	// cpu, memory, disk, address) or fits, and its own score when it
	// fits (its zone's penalty aside), else -Inf.
	placed []int32
	why    []why
	score  []float64
	// zoneCount counts the resource's replicas per zone, and zonePenalty
	// is what that count takes off the score of the zone's nodes.
	zoneCount   []int
	zonePenalty []float64
	zoneWin     []int32 // per zone, its cand with the highest score, the first among equals; -1 for none
	// blockWin is, per block of cands, the one with the highest score,
	// the first among equals.
	blockWin []int32
}

// sameRun reports whether r can be placed with the run started for key.
func sameRun(key, r *Request) bool {
	return key.Resource == r.Resource && key.Provider == r.Provider && key.Need == r.Need && key.Address == r.Address &&
		slices.Equal(key.Features, r.Features) &&
		key.Rule.AntiAffinity == r.Rule.AntiAffinity && key.Rule.Strategy == r.Rule.Strategy &&
		maps.Equal(key.Rule.NodeSelector, r.Rule.NodeSelector) && slices.Equal(key.Rule.Zones, r.Rule.Zones)
}

// startRun sets up the run of r and the replicas after it that share
// all but Pin and Avoid.
func (s *Snapshot) startRun(r *Request) {
	ru := &s.run
	ru.key = *r
	ru.key.Pin, ru.key.Avoid = "", ""
	ru.fit = fitKey{need: r.Need, binpack: r.Rule.Strategy == "binpack", address: r.Address}
	ru.st = s.staticRun(r)
	ft := s.fitTable(ru.fit)

	m, zones := len(ru.st.node), len(s.zoneNames)
	ru.placed = slices.Grow(ru.placed[:0], m)[:m]
	ru.why = slices.Grow(ru.why[:0], m)[:m]
	ru.score = slices.Grow(ru.score[:0], m)[:m]
	ru.zoneCount = slices.Grow(ru.zoneCount[:0], zones)[:zones]
	ru.zonePenalty = slices.Grow(ru.zonePenalty[:0], zones)[:zones]
	ru.zoneWin = slices.Grow(ru.zoneWin[:0], zones)[:zones]
	clear(ru.placed)
	clear(ru.zoneCount)
	ru.buildBlocks(ft)
	// Only the nodes holding replicas of the resource score otherwise.
	for _, i := range s.holders[r.Resource] {
		c := s.nodes[i].Placed[r.Resource]
		ru.zoneCount[s.zone[i]] += c
		if j := ru.st.at[i]; j >= 0 {
			ru.placed[j] = int32(c)
			s.rescore(int(j))
			ru.update(int(j))
		}
	}
	for z := range ru.zonePenalty {
		ru.rezone(z)
	}
}

// maxCached bounds the static runs and the fit tables a snapshot keeps:
// past it, the cache starts over.
const maxCached = 32

// staticRun is what a static filter (provider, node selector, zones)
// lets through of a snapshot's nodes: it does not change with bookings,
// so every run with the same filter shares it.
type staticRun struct {
	verdict []why   // per node: provider, state, selector or zone, or fits
	at      []int32 // per node: its index among the cands, or -1
	// Per cand, the nodes verdict lets through, by zone and in node
	// order within a zone: its node and its zone.
	node []int32
	zone []int32
	// zoneCands[z] is the first cand of zone z, zoneCands[z+1] past its
	// last; zoneBlocks the same of the blocks of cands (see blocks.go).
	zoneCands  []int32
	zoneBlocks []int32
}

// staticRun returns the static run of r's static filter, built on first
// use.
func (s *Snapshot) staticRun(r *Request) *staticRun {
	key := staticKey(r)
	if st, ok := s.statics[key]; ok {
		return st
	}
	f := s.staticFilter(r)
	zones := len(s.zoneNames)
	st := &staticRun{verdict: make([]why, len(s.nodes)), at: make([]int32, len(s.nodes)),
		zoneCands: make([]int32, zones+1), zoneBlocks: make([]int32, zones+1)}
	for i := range s.nodes {
		st.verdict[i] = f.verdict(s, i)
		if st.verdict[i] == fits {
			st.zoneCands[s.zone[i]+1]++
		}
	}
	for z := range zones {
		size := st.zoneCands[z+1]
		st.zoneCands[z+1] += st.zoneCands[z]
		st.zoneBlocks[z+1] = st.zoneBlocks[z] + (size+blockSize-1)/blockSize
	}
	m := st.zoneCands[zones]
	st.node, st.zone = make([]int32, m), make([]int32, m)
	next := slices.Clone(st.zoneCands[:zones])
	for i, w := range st.verdict {
		st.at[i] = -1
		if w != fits {
			continue
		}
		z := s.zone[i]
		j := next[z]
		next[z]++
		st.at[i], st.node[j], st.zone[j] = j, int32(i), z
	}
	if len(s.statics) >= maxCached {
		clear(s.statics)
	}
	s.statics[key] = st
	return st
}

// staticKey names r's static filter; every part is quoted, so that no two
// filters share a name.
func staticKey(r *Request) string {
	var b strings.Builder
	b.WriteString(strconv.Quote(string(r.Provider)))
	for _, f := range r.Features {
		b.WriteByte('+')
		b.WriteString(strconv.Quote(f))
	}
	for _, k := range slices.Sorted(maps.Keys(r.Rule.NodeSelector)) {
		b.WriteString(strconv.Quote(k))
		b.WriteByte('=')
		b.WriteString(strconv.Quote(r.Rule.NodeSelector[k]))
	}
	b.WriteByte('|')
	for _, z := range r.Rule.Zones {
		b.WriteString(strconv.Quote(z))
	}
	return b.String()
}

// staticFilter is what of a request filters nodes whatever is booked
// on them: the provider, the node selector, the zones.
type staticFilter struct {
	serves []bool // by node
	lacks  []why  // by node: the first feature its provider lacks; nil when none is needed

	zoneOK   []bool // by zone number; nil when any zone will do
	selector []labelWant
}

// labelWant is one label of a node selector.
type labelWant struct {
	values []labelValue // by node
	value  string
}

func (s *Snapshot) staticFilter(r *Request) staticFilter {
	f := staticFilter{serves: s.serving(r.Provider), selector: make([]labelWant, 0, len(r.Rule.NodeSelector))}
	if len(r.Rule.Zones) > 0 {
		f.zoneOK = make([]bool, len(s.zoneNames))
		for z, name := range s.zoneNames {
			f.zoneOK[z] = slices.Contains(r.Rule.Zones, name)
		}
	}
	for k, v := range r.Rule.NodeSelector {
		f.selector = append(f.selector, labelWant{s.label(k), v})
	}
	if len(r.Features) > 0 {
		f.lacks = make([]why, len(s.nodes))
		for i, n := range s.nodes {
			for _, feat := range r.Features {
				if f.serves[i] && !n.Node.ServesWith(r.Provider, feat) {
					f.lacks[i] = lacking(feat)
					break
				}
			}
		}
	}
	return f
}

// lacking is the filter a node fails when its provider lacks feature.
func lacking(feature string) why {
	switch feature {
	case api.FeatureProbes:
		return byNoProbes
	case api.FeatureInitContainers:
		return byNoInitContainers
	}
	return byNoPods
}

// verdict says whether node i passes f, or which filter it fails.
func (f *staticFilter) verdict(s *Snapshot, i int) why {
	switch {
	case !f.serves[i]:
		return byProvider
	case f.lacks != nil && f.lacks[i] != fits:
		return f.lacks[i]
	case s.state[i] != fits:
		return s.state[i]
	case !f.selects(i):
		return bySelector
	case f.zoneOK != nil && !f.zoneOK[s.zone[i]]:
		return byZone
	}
	return fits
}

func (f *staticFilter) selects(i int) bool {
	for _, w := range f.selector {
		// A label asked with an empty value must still be there, as
		// with api.Selector's "k=".
		if l := w.values[i]; !l.ok || l.value != w.value {
			return false
		}
	}
	return true
}

// fitKey is what of a request its resource fit on a node depends on.
type fitKey struct {
	need    api.Capacity
	binpack bool
	address bool // the request needs an address of the node's block
}

// fitTable is, per node, the resource fit of a fitKey: the first of the
// cpu, memory, disk and address filters it fails or fits, and its fit
// score when it fits, else -Inf. It reflects the nodes as of seen
// entries of the snapshot's changed.
type fitTable struct {
	why   []why
	score []float64
	seen  int
}

// fitTable returns the fit table of k, built on first use and brought
// up to date with the nodes changed since its last use.
func (s *Snapshot) fitTable(k fitKey) *fitTable {
	ft, ok := s.fits[k]
	if !ok {
		n := len(s.nodes)
		ft = &fitTable{why: make([]why, n), score: make([]float64, n), seen: len(s.changed)}
		for i := range n {
			ft.why[i], ft.score[i] = s.fitOf(k, i)
		}
		if len(s.fits) >= maxCached {
			clear(s.fits)
		}
		s.fits[k] = ft
		return ft
	}
	for _, i := range s.changed[ft.seen:] {
		ft.why[i], ft.score[i] = s.fitOf(k, int(i))
	}
	ft.seen = len(s.changed)
	return ft
}

// fitOf returns the first of the cpu, memory, disk and address filters
// node i fails for k, and, when it fits, its resource fit from 0 to 10:
// least allocated, or bin-packing.
func (s *Snapshot) fitOf(k fitKey, i int) (why, float64) {
	capa, alloc := s.capa[i], s.alloc[i]
	free := capa.Sub(alloc)
	switch {
	case k.need.MilliCPU > free.MilliCPU:
		return byCPU, math.Inf(-1)
	case k.need.MemoryMiB > free.MemoryMiB:
		return byMemory, math.Inf(-1)
	case k.need.DiskMiB > free.DiskMiB:
		return byDisk, math.Inf(-1)
	case k.address && s.addrs[i] <= 0:
		return byAddress, math.Inf(-1)
	}
	after := alloc.Add(k.need)
	util := (ratio(after.MilliCPU, capa.MilliCPU) + ratio(after.MemoryMiB, capa.MemoryMiB)) / 2
	fit := 1 - util // least allocated
	if k.binpack {
		fit = util
	}
	// Rounded here, as stored in a fitTable, whether or not the
	// compiler would fuse it with what the caller subtracts.
	return fits, float64(fit * 10)
}

func ratio(a, b int64) float64 {
	if b <= 0 {
		return 1
	}
	return float64(a) / float64(b)
}

// rescore runs the filters that change as replicas are booked on cand j,
// and scores it if it passes them.
//
// A node's score, higher is better, is its resource fit from 0 to 10
// (least allocated, or bin-packing), less 100 per replica of the resource
// it runs under anti-affinity, less 50 per replica of the resource in its
// zone: zone spread and soft anti-affinity dominate the resource fit,
// which breaks ties between equally spread nodes. rescore computes all
// but the zone's share, which rezone computes for all the zone's nodes.
func (s *Snapshot) rescore(j int) {
	ru := &s.run
	if ru.key.Rule.AntiAffinity == "hard" && ru.placed[j] > 0 {
		ru.why[j], ru.score[j] = byAntiAffinity, math.Inf(-1)
		return
	}
	w, score := s.fitOf(ru.fit, int(ru.st.node[j]))
	if w == fits && ru.key.Rule.AntiAffinity != "" {
		score -= 100 * float64(ru.placed[j])
	}
	ru.why[j], ru.score[j] = w, score
}

// rezone computes what zone z's replicas of the resource take off its
// nodes' scores: spread over zones prefers the zone with the fewest.
func (ru *run) rezone(z int) { ru.zonePenalty[z] = 50 * float64(ru.zoneCount[z]) }
