package scheduler

import (
	"cmp"
	"encoding/binary"
	"slices"
	"strings"
)

// sortByName sorts nodes by name, as every pass hands them over in a
// map's order. Names mostly share a prefix ("node-0"), so each is keyed
// by the 8 bytes after the prefix they all share, and only names whose
// keys are equal are compared whole: the sort then compares integers
// held next to each other rather than strings two pointers away.
func sortByName(nodes []*NodeInfo) {
	if len(nodes) < 2 {
		return
	}
	shared := nodes[0].Node.Name
	for _, n := range nodes[1:] {
		shared = shared[:commonPrefix(shared, n.Node.Name)]
	}
	keyed := make([]keyedNode, len(nodes))
	for i, n := range nodes {
		keyed[i] = keyedNode{key: nameKey(n.Node.Name[len(shared):]), name: n.Node.Name, n: n}
	}
	slices.SortFunc(keyed, func(a, b keyedNode) int {
		if c := cmp.Compare(a.key, b.key); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	for i := range keyed {
		nodes[i] = keyed[i].n
	}
}

type keyedNode struct {
	key  uint64
	name string
	n    *NodeInfo
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
