package libvirt

import (
	"fmt"
	"sync"

	"github.com/stratahq/strata/internal/api"
)

// watcher is one Watch: kicks name the replicas to look at now; rescan
// asks for a rescan at once, when kicks were lost to a full buffer.
type watcher struct {
	kicks  chan string
	rescan chan struct{}
}

// hub owns the watches: the watchers that lifecycle events and Applies
// kick, and the goroutines of the watches, which close waits for.
type hub struct {
	mu       sync.Mutex
	closed   bool
	closing  chan struct{} // closed by close: watches end
	watchers map[*watcher]struct{}
	running  sync.WaitGroup
}

func newHub() *hub {
	return &hub{closing: make(chan struct{}), watchers: map[*watcher]struct{}{}}
}

// join adds w, whose watch then runs until leave; it fails once the hub
// is closed.
func (h *hub) join(w *watcher) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return fmt.Errorf("provider closed: %w", api.ErrUnavailable)
	}
	h.watchers[w] = struct{}{}
	// Counted under mu, which close takes: no watch starts once close
	// has ended them.
	h.running.Add(1)
	return nil
}

// leave removes w when its watch ends.
func (h *hub) leave(w *watcher) {
	h.mu.Lock()
	delete(h.watchers, w)
	h.mu.Unlock()
	h.running.Done()
}

// close ends every watch and refuses new ones; wait waits for them.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		h.closed = true
		close(h.closing)
	}
}

func (h *hub) wait() { h.running.Wait() }

// kick tells every watcher to look at replica id now; it never blocks (it
// runs on libvirt's event loop). A watcher whose kicks are full rescans
// instead.
func (h *hub) kick(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.watchers {
		select {
		case w.kicks <- id:
		default:
			select {
			case w.rescan <- struct{}{}:
			default: // a rescan is pending already
			}
		}
	}
}
