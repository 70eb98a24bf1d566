package scheduler

import (
	"encoding/binary"
	"slices"
	"strings"
)

// sortByName sorts nodes by name, as every pass hands them over in a
// map's order. Names mostly share a prefix ("node-0"), so each is keyed
// by the 8 bytes after the prefix they all share, the keys are sorted
// by a radix sort on the bytes that differ, and only the names whose
// keys are equal are compared whole.
func sortByName(nodes []*NodeInfo) {
	if len(nodes) < 2 {
		return
	}
	shared := nodes[0].Node.Name
	for _, n := range nodes[1:] {
		shared = shared[:commonPrefix(shared, n.Node.Name)]
	}
	keys := make([]keyedNode, len(nodes))
	var differ uint64 // the bits that differ between keys
	for i, n := range nodes {
		keys[i] = keyedNode{key: nameKey(n.Node.Name[len(shared):]), n: n}
		differ |= keys[i].key ^ keys[0].key
	}
	keys = radixSort(keys, differ)
	for lo := 0; lo < len(keys); {
		hi := lo + 1
		for hi < len(keys) && keys[hi].key == keys[lo].key {
			hi++
		}
		if hi-lo > 1 {
			slices.SortFunc(keys[lo:hi], func(a, b keyedNode) int { return strings.Compare(a.n.Node.Name, b.n.Node.Name) })
		}
		lo = hi
	}
	for i := range keys {
		nodes[i] = keys[i].n
	}
}

type keyedNode struct {
	key uint64
	n   *NodeInfo
}

// radixSort sorts keys by key, a byte at a time from the lowest, skipping
// the bytes in which no two keys differ; it returns the sorted slice,
// which may be keys or a copy.
func radixSort(keys []keyedNode, differ uint64) []keyedNode {
	tmp := make([]keyedNode, len(keys))
	for shift := 0; shift < 64; shift += 8 {
		if (differ>>shift)&0xff == 0 {
			continue
		}
		var at [257]int
		for _, k := range keys {
			at[(k.key>>shift)&0xff+1]++
		}
		for b := 1; b < len(at); b++ {
			at[b] += at[b-1]
		}
		for _, k := range keys {
			d := (k.key >> shift) & 0xff
			tmp[at[d]] = k
			at[d]++
		}
		keys, tmp = tmp, keys
	}
	return keys
}

// nameKey is the first 8 bytes of s, big-endian, zeros past its end: a
// lower key is a lower name, an equal key says nothing.
func nameKey(s string) uint64 {
	var b [8]byte
	copy(b[:], s)
	return binary.BigEndian.Uint64(b[:])
}

func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
