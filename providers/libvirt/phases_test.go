package libvirt

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/stratahq/strata/internal/api"
)

func TestPhasesKeepSince(t *testing.T) {
	ph := newPhases("n1", slog.New(slog.DiscardHandler))
	st := api.AssignmentStatus{ID: "r1"}
	first := ph.observe(st, api.PhaseProvision, "booting")
	if again := ph.observe(st, api.PhaseProvision, "booting"); !again.Since.Equal(first.Since) {
		t.Errorf("same phase and reason: Since got %v; want %v kept", again.Since, first.Since)
	}
	other := ph.observe(st, api.PhaseError, "crashed")
	if other.Phase != api.PhaseError || other.Reason != "crashed" || other.Since.Before(first.Since) {
		t.Errorf("new phase: got %+v; want error crashed since %v or later", other, first.Since)
	}
	if got := ph.since["r1"]; got.phase != api.PhaseError || got.reason != "crashed" || !got.since.Equal(other.Since) {
		t.Errorf("recorded: got %+v; want error crashed since %v", got, other.Since)
	}
	ph.forget("r1")
	if _, ok := ph.since["r1"]; ok {
		t.Errorf("after forget: r1 still recorded")
	}
	ready := api.AssignmentStatus{ID: "r2", Since: first.Since}
	if got := ph.observe(ready, api.PhaseReady, ""); !got.Since.Equal(first.Since) {
		t.Errorf("ready with its start time: Since got %v; want %v", got.Since, first.Since)
	}
}

func TestPhasesRejected(t *testing.T) {
	ph := newPhases("n1", slog.New(slog.DiscardHandler))
	st := ph.rejected(&api.Assignment{ID: "r1", Generation: 3}, errors.New("no kernel"))
	if st.ID != "r1" || st.Node != "n1" || st.ObservedGeneration != 3 || st.Phase != api.PhaseError || st.Reason != "no kernel" || st.Since.IsZero() {
		t.Errorf("rejected: got %+v; want r1 on n1, generation 3, error \"no kernel\" with a Since", st)
	}
}
