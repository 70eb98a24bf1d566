package store

import "container/heap"

// revWaiters lets each WaitForRev caller go once the revision it waits for
// is reached, rather than waking every caller on every revision: during a
// fleet's registrations hundreds of callers wait, each for its own write.
// Callers of one revision share a channel. It is guarded by its cache's
// lock.
type revWaiters struct {
	chans map[int64]chan struct{}
	revs  revHeap // the revisions of chans, lowest first
}

// wait returns a channel closed once release reaches rev.
func (w *revWaiters) wait(rev int64) <-chan struct{} {
	if w.chans == nil {
		w.chans = map[int64]chan struct{}{}
	}
	ch, ok := w.chans[rev]
	if !ok {
		ch = make(chan struct{})
		w.chans[rev] = ch
		heap.Push(&w.revs, rev)
	}
	return ch
}

// release lets the callers of every revision up to rev go. A caller that
// gave up (its context ended) leaves its channel until then: revisions
// only grow, so it goes with the next batches.
func (w *revWaiters) release(rev int64) {
	for len(w.revs) > 0 && w.revs[0] <= rev {
		r := heap.Pop(&w.revs).(int64)
		close(w.chans[r])
		delete(w.chans, r)
	}
}

// revHeap is a min-heap of revisions (container/heap).
type revHeap []int64

func (h revHeap) Len() int           { return len(h) }
func (h revHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h revHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *revHeap) Push(x any)        { *h = append(*h, x.(int64)) }
func (h *revHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
