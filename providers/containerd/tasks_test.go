package containerd

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	tasktypes "github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/core/containers"

	"github.com/stratahq/strata/internal/api"
)

// TestTaskStatus checks how the task service turns a container's labels
// and its task into a replica's status, without containerd.
func TestTaskStatus(t *testing.T) {
	tk := newTaskService(Config{Namespace: "strata-test"}, "node-1", slog.New(slog.DiscardHandler), nil, newKeyedLocks(), nil)
	started := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ctr := func(extra map[string]string) containers.Container {
		l := map[string]string{
			LabelAssignment: "r1", LabelGeneration: "3", labelRestarts: "2",
			labelAddress: "10.0.0.5", labelStarted: started.Format(time.RFC3339Nano),
		}
		for k, v := range extra {
			l[k] = v
		}
		return containers.Container{ID: "r1", Labels: l}
	}
	tests := []struct {
		name       string
		c          containers.Container
		t          *taskInfo
		wantPhase  api.Phase
		wantReason string
	}{
		{"running", ctr(nil), &taskInfo{pid: 7, status: tasktypes.Status_RUNNING}, api.PhaseReady, ""},
		{"failed to be created", ctr(map[string]string{labelError: "image: not found"}), nil, api.PhaseError, "image: not found"},
		{"exited, will restart", ctr(nil), &taskInfo{status: tasktypes.Status_STOPPED, exitStatus: 1}, api.PhaseProvision, "restarting: exited with code 1"},
		{"exited, policy never", ctr(map[string]string{labelRestart: string(api.RestartNever)}), &taskInfo{status: tasktypes.Status_STOPPED, exitStatus: 1}, api.PhaseError, "exited with code 1"},
		{"succeeded, on failure", ctr(map[string]string{labelRestart: string(api.RestartOnFailure)}), &taskInfo{status: tasktypes.Status_STOPPED}, api.PhaseError, "exited with code 0"},
		{"no task", ctr(nil), nil, api.PhaseProvision, "no task (containerd restarted?); restarting"},
		{"no task, policy never", ctr(map[string]string{labelRestart: string(api.RestartNever)}), nil, api.PhaseError, "no task (containerd or the node restarted); restart policy never"},
		{"created", ctr(nil), &taskInfo{status: tasktypes.Status_CREATED}, api.PhaseProvision, "starting"},
		{"paused", ctr(nil), &taskInfo{status: tasktypes.Status_PAUSED}, api.PhaseError, "paused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := tk.status(tt.c, tt.t)
			if st.Phase != tt.wantPhase || st.Reason != tt.wantReason {
				t.Errorf("status: got %s %q; want %s %q", st.Phase, st.Reason, tt.wantPhase, tt.wantReason)
			}
			if st.ID != "r1" || st.Node != "node-1" || st.ObservedGeneration != 3 || st.Restarts != 2 || st.Address != "10.0.0.5" || st.ProviderID != "strata-test/r1" {
				t.Errorf("status: got %+v; want r1 on node-1, generation 3, 2 restarts, 10.0.0.5, strata-test/r1", st)
			}
		})
	}

	// A replica being applied has no task yet: starting, not missing.
	unlock, err := tk.replicas.lock(context.Background(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if st := tk.status(ctr(nil), nil); st.Phase != api.PhaseProvision || !strings.HasPrefix(st.Reason, "starting") {
		t.Errorf("status while locked: got %s %q; want provision starting", st.Phase, st.Reason)
	}
}

// fixedSchedule is a restart pending with a back-off, due at next.
type fixedSchedule struct {
	delay time.Duration
	next  time.Time
}

func (f fixedSchedule) pendingRestart(string) (time.Duration, time.Time, bool) {
	return f.delay, f.next, true
}

// TestCrashLoopBackOffStatus checks the main container's status while it
// waits out its back-off, and once restarted after a liveness failure.
func TestCrashLoopBackOffStatus(t *testing.T) {
	tk := newTaskService(Config{Namespace: "strata-test"}, "node-1", slog.New(slog.DiscardHandler), nil, newKeyedLocks(), nil)
	next := time.Now().Add(40 * time.Second)
	tk.backoff = fixedSchedule{delay: 40 * time.Second, next: next}
	c := containers.Container{ID: "r1", Labels: map[string]string{LabelAssignment: "r1", labelRestarts: "3", labelUnhealthy: "liveness probe failed: boom"}}
	st := tk.status(c, &taskInfo{status: tasktypes.Status_STOPPED, exitStatus: 137})
	if len(st.Containers) != 1 {
		t.Fatalf("containers: got %+v; want the main one", st.Containers)
	}
	m := st.Containers[0]
	want := "back-off 40s restarting failed container main (liveness probe failed: boom)"
	if m.Name != api.MainContainer || m.State != api.ContainerWaiting || m.Reason != api.ReasonCrashLoopBackOff || m.Message != want || m.Restarts != 3 || m.ExitCode == nil || *m.ExitCode != 137 {
		t.Errorf("waiting: got %+v (message %q); want main waiting, CrashLoopBackOff, %q, 3 restarts, exit 137", m, m.Message, want)
	}
	if d := m.NextStartAt.Sub(next); d < -time.Millisecond || d > time.Millisecond {
		t.Errorf("nextStartAt %v; want the back-off's next start %v", m.NextStartAt, next)
	}
	wantReason := "CrashLoopBackOff: back-off 40s restarting failed container main, next start at " + next.UTC().Format("15:04:05Z")
	if st.Phase != api.PhaseProvision || !strings.Contains(st.Reason, wantReason) {
		t.Errorf("replica: got %s %q; want provision with %q", st.Phase, st.Reason, wantReason)
	}
	c.Labels = map[string]string{LabelAssignment: "r1", labelRestarts: "4", labelLastReason: api.ReasonUnhealthy, labelLastCode: "137", labelLastExit: "liveness probe failed: boom"}
	m = tk.status(c, &taskInfo{pid: 9, status: tasktypes.Status_RUNNING}).Containers[0]
	if m.State != api.ContainerRunning || !m.Ready || m.Reason != api.ReasonUnhealthy || m.Restarts != 4 || m.ExitCode == nil || *m.ExitCode != 137 {
		t.Errorf("restarted: got %+v; want running, ready, last reason Unhealthy, 4 restarts, last exit 137", m)
	}
}
