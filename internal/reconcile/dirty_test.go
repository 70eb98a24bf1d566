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

func TestDirtyMarkAt(t *testing.T) {
	d := NewDirty()
	now := time.Now()
	if _, ok := d.Next(); ok {
		t.Fatal("Next of an empty set: got a moment")
	}
	d.MarkAt(now.Add(time.Hour), "later")
	select {
	case <-d.Wake():
	default:
		t.Fatal("the first MarkAt did not wake the loop (it must arm its timer)")
	}
	d.MarkAt(now.Add(2*time.Hour), "later") // later than asked: kept
	if at, _ := d.Next(); !at.Equal(now.Add(time.Hour)) {
		t.Fatalf("Next after a later MarkAt: got %s; want the earliest, %s", at, now.Add(time.Hour))
	}
	select {
	case <-d.Wake():
		t.Fatal("a MarkAt that brings nothing closer woke the loop")
	default:
	}
	d.MarkAt(now.Add(30*time.Minute), "later") // earlier: replaces
	if at, _ := d.Next(); !at.Equal(now.Add(30 * time.Minute)) {
		t.Fatalf("Next after an earlier MarkAt: got %s; want %s", at, now.Add(30*time.Minute))
	}
	<-d.Wake()
	if got := d.Take(nil); len(got) != 0 {
		t.Fatalf("Take before the moment: got %v; want nothing", got)
	}
	d.MarkAt(now.Add(-time.Second), "due", "due2")
	d.Mark("now")
	got := d.Take(nil)
	slices.Sort(got)
	if !slices.Equal(got, []string{"due", "due2", "now"}) {
		t.Fatalf("Take: got %v; want [due due2 now]", got)
	}
	if got := d.Take(nil); len(got) != 0 {
		t.Fatalf("a second Take: got %v; want the due keys taken once", got)
	}
	if at, _ := d.Next(); !at.Equal(now.Add(30 * time.Minute)) {
		t.Fatalf("Next: got %s; want the key still waiting, %s", at, now.Add(30*time.Minute))
	}
	// A key taken can be marked for later again, even for a moment a
	// stale timer of it still holds.
	d.MarkAt(now.Add(-time.Second), "later")
	if got := d.Take(nil); !slices.Equal(got, []string{"later"}) {
		t.Fatalf("Take of a key moved earlier: got %v; want [later]", got)
	}
	d.MarkAt(now.Add(time.Hour), "later")
	if at, ok := d.Next(); !ok || !at.Equal(now.Add(time.Hour)) {
		t.Fatalf("Next of a key marked again: got %s %v; want %s", at, ok, now.Add(time.Hour))
	}
}
