package reconcile

import (
	"slices"
	"sync"
	"testing"
	"time"
)

func TestDirty(t *testing.T) {
	d := NewDirty()
	d.Mark("a", "b")
	d.Mark("a")
	select {
	case <-d.Wake():
	default:
		t.Fatal("Mark did not wake the loop")
	}
	got := d.Take(func() []string { t.Fatal("every() called without MarkAll"); return nil })
	slices.Sort(got)
	if !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("Take: got %v; want [a b]", got)
	}
	if got := d.Take(nil); len(got) != 0 {
		t.Fatalf("second Take: got %v; want nothing", got)
	}
	d.Mark("c")
	d.MarkAll()
	got = d.Take(func() []string { return []string{"a", "c"} })
	slices.Sort(got)
	if !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("Take after MarkAll: got %v; want [a c]", got)
	}
	if got := d.Take(func() []string { t.Fatal("MarkAll not cleared"); return nil }); len(got) != 0 {
		t.Fatalf("Take after a full take: got %v", got)
	}
}

// TestDirtyTakeDoesNotHoldTheSetWhileListing replays the lock-order
// inversion that wedged the global master: every() takes a lock of its
// own (a region link's, to list the keys the region reports) while the
// holder of that lock marks a key (the link acknowledging removals). With
// every() called under the set's lock, each waited for the other for
// good: the master stopped, and so did the watch cache whose changes it
// marks, whose replica then answered its lists with 503s.
func TestDirtyTakeDoesNotHoldTheSetWhileListing(t *testing.T) {
	d := NewDirty()
	d.MarkAll()
	var link sync.Mutex
	link.Lock()
	listing := make(chan struct{})
	marked := make(chan struct{})
	go func() {
		// The link: it holds its lock and marks a key once Take lists.
		<-listing
		d.Mark("acked")
		link.Unlock()
		close(marked)
	}()
	took := make(chan []string)
	go func() {
		took <- d.Take(func() []string {
			close(listing)
			link.Lock()
			defer link.Unlock()
			return []string{"a"}
		})
	}()
	select {
	case got := <-took:
		<-marked
		got = append(got, d.Take(nil)...)
		slices.Sort(got)
		if !slices.Equal(got, []string{"a", "acked"}) {
			t.Errorf("two Takes: got %v; want [a acked]", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Take and Mark deadlocked: Take holds the set while every() waits for a lock whose holder marks")
	}
}
