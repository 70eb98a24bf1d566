package reconcile

import (
	"slices"
	"testing"
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
