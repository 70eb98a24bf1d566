package libvirt

import (
	"errors"
	"testing"

	"github.com/stratahq/strata/internal/api"
)

func TestHubKick(t *testing.T) {
	h := newHub()
	w := &watcher{kicks: make(chan string, 1), rescan: make(chan struct{}, 1)}
	if err := h.join(w); err != nil {
		t.Fatalf("join: %v", err)
	}
	h.kick("a")
	if got := <-w.kicks; got != "a" {
		t.Errorf("kick: got %q; want a", got)
	}
	// A full buffer turns kicks into one pending rescan; kick never blocks.
	h.kick("b")
	h.kick("c")
	h.kick("d")
	if got := <-w.kicks; got != "b" {
		t.Errorf("kick: got %q; want b", got)
	}
	select {
	case <-w.rescan:
	default:
		t.Errorf("kicks beyond the buffer: got no rescan; want one")
	}
	h.leave(w)
	h.kick("e")
	if len(w.kicks) != 0 {
		t.Errorf("a watcher that left was kicked")
	}
}

func TestHubClose(t *testing.T) {
	h := newHub()
	w := &watcher{kicks: make(chan string, 1), rescan: make(chan struct{}, 1)}
	if err := h.join(w); err != nil {
		t.Fatalf("join: %v", err)
	}
	h.close()
	h.close() // twice is fine
	select {
	case <-h.closing:
	default:
		t.Fatalf("closing is open after close")
	}
	if err := h.join(&watcher{}); !errors.Is(err, api.ErrUnavailable) {
		t.Errorf("join after close: got %v; want ErrUnavailable", err)
	}
	h.leave(w)
	h.wait() // returns: every watch that joined has left
}
