package libvirt

import (
	"log/slog"
	"os"
	"testing"
	"time"
)

func TestReadinessReadyMarker(t *testing.T) {
	cs := &console{dir: t.TempDir(), log: slog.New(slog.DiscardHandler)}
	r := &readiness{console: cs}
	started := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	meta := replicaMeta{ID: "r1", Generation: 1, Started: started, ReadyMarker: "GUEST-UP"}
	if !r.up(replicaMeta{ID: "r1"}) {
		t.Errorf("no ready marker: got not up; want up")
	}
	if r.up(meta) {
		t.Errorf("no console log yet: got up; want not up")
	}
	spec := domainSpec{ID: "r1", Type: "qemu", Console: cs.path("r1")}
	// The marker of an earlier boot does not count.
	earlier := meta
	earlier.Started = started.Add(-time.Hour)
	cs.mark(spec, earlier)
	appendFile(t, spec.Console, "GUEST-UP\n")
	cs.mark(spec, meta)
	if r.up(meta) {
		t.Errorf("marker only before the latest start: got up; want not up")
	}
	appendFile(t, spec.Console, "booting\nGUEST-UP\n")
	if !r.up(meta) {
		t.Errorf("marker after the latest start: got not up; want up")
	}
	if err := cs.remove("r1"); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if r.up(meta) {
		t.Errorf("console removed: got up; want not up")
	}
}

func appendFile(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}
