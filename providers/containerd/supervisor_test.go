package containerd

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// newTestSupervisor is a supervisor that follows no containerd: its
// watchers, pending restarts and closing work alone.
func newTestSupervisor(t *testing.T) *supervisor {
	t.Helper()
	sv := newSupervisor(Config{Namespace: "strata-test"}, slog.New(slog.DiscardHandler), nil, nil, newKeyedLocks())
	sv.stop = func() {}
	return sv
}

// TestSupervisorWatch checks that a watch is refused while events are
// not followed, delivers while they are, ends when they stop, and is
// refused once closed.
func TestSupervisorWatch(t *testing.T) {
	sv := newTestSupervisor(t)
	if _, err := sv.watch(t.Context()); !errors.Is(err, api.ErrUnavailable) {
		t.Fatalf("watch before events: got %v; want ErrUnavailable", err)
	}
	if c := sv.condition("containerd"); c.Status != api.ConditionWarning || c.Reason != "EventsDown" {
		t.Errorf("condition before events: got %s %s; want Warning EventsDown", c.Status, c.Reason)
	}
	sv.setEventsUp(true)
	if c := sv.condition("containerd"); c.Status != api.ConditionReady || c.Type != "provider/containerd" {
		t.Errorf("condition with events: got %s %s; want provider/containerd Ready", c.Type, c.Status)
	}
	ch, err := sv.watch(t.Context())
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	sv.notify(api.AssignmentStatus{ID: "r1", Phase: api.PhaseReady})
	select {
	case st := <-ch:
		if st.ID != "r1" {
			t.Errorf("watched: got %s; want r1", st.ID)
		}
	case <-time.After(waitFor):
		t.Fatal("no status watched")
	}
	// The stream breaking ends every watch: they might miss exits.
	sv.setEventsUp(false)
	select {
	case _, ok := <-ch:
		if ok {
			t.Error("watch after the events stopped: got a status; want the channel closed")
		}
	case <-time.After(waitFor):
		t.Fatal("watch not closed when the events stopped")
	}
	sv.setEventsUp(true)
	if !sv.close() {
		t.Fatal("close: got false the first time")
	}
	if sv.close() {
		t.Error("close: got true the second time")
	}
	if _, err := sv.watch(t.Context()); !errors.Is(err, api.ErrUnavailable) {
		t.Errorf("watch after close: got %v; want ErrUnavailable", err)
	}
}

// TestSupervisorPendingRestarts checks the bookkeeping of scheduled
// restarts: one at a time per replica, cancelled by a Delete, dropped by
// close (which must not wait for it).
func TestSupervisorPendingRestarts(t *testing.T) {
	sv := newTestSupervisor(t)
	sv.scheduleRestart(t.Context(), "r1", time.Hour)
	if !sv.restartPending("r1") {
		t.Fatal("restart of r1 not pending")
	}
	first := sv.crashes["r1"].timer
	sv.scheduleRestart(t.Context(), "r1", time.Hour)
	if sv.crashes["r1"].timer != first {
		t.Error("a second restart was scheduled while one is pending")
	}
	sv.cancelRestart("r1")
	if sv.restartPending("r1") {
		t.Error("restart of r1 pending after cancel")
	}
	sv.scheduleRestart(t.Context(), "r2", time.Hour)
	sv.forget("r1")
	if _, ok := sv.crashes["r1"]; ok {
		t.Error("r1's back-off kept after forget")
	}
	done := make(chan bool)
	go func() { done <- sv.close() }()
	select {
	case <-done:
	case <-time.After(waitFor):
		t.Fatal("close waits for a restart it should drop")
	}
	if sv.restartPending("r2") {
		t.Error("restart of r2 pending after close")
	}
	// Closed: nothing more is scheduled.
	sv.scheduleRestart(t.Context(), "r3", time.Millisecond)
	if sv.restartPending("r3") {
		t.Error("restart scheduled after close")
	}
}
