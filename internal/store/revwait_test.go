package store

import "testing"

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// A waiter goes once its revision is reached, not on earlier ones; the
// waiters of one revision share a channel.
func TestRevWaitersReleaseOnlyReachedRevisions(t *testing.T) {
	var w revWaiters
	a, b, c := w.wait(10), w.wait(5), w.wait(20)
	if again := w.wait(10); again != a {
		t.Fatal("two waiters of revision 10 got two channels; want one shared")
	}
	w.release(7)
	if !closed(b) || closed(a) || closed(c) {
		t.Fatalf("after 7: 5 released %v, 10 %v, 20 %v; want only 5", closed(b), closed(a), closed(c))
	}
	w.release(7) // nothing new: no double close
	w.release(20)
	if !closed(a) || !closed(c) {
		t.Fatalf("after 20: 10 released %v, 20 %v; want both", closed(a), closed(c))
	}
	if len(w.chans) != 0 || len(w.revs) != 0 {
		t.Fatalf("left %d channels, %d revisions; want none", len(w.chans), len(w.revs))
	}
	if d := w.wait(3); closed(d) {
		t.Fatal("a new waiter is released before any release")
	}
}
