package containerd

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	tasktypes "github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/core/containers"
	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
)

// taskInfo is what Status needs of a container's task.
type taskInfo struct {
	pid        uint32
	status     tasktypes.Status
	exitStatus uint32
	exitedAt   time.Time
}

func taskInfoOf(pr *tasktypes.Process) *taskInfo {
	t := &taskInfo{pid: pr.GetPid(), status: pr.GetStatus(), exitStatus: pr.GetExitStatus()}
	if ts := pr.GetExitedAt(); ts != nil {
		t.exitedAt = ts.AsTime()
	}
	return t
}

// status turns a container and its task (nil: none) into a
// status. An exit the restart policy will restart is provision, not
// error: the region replaces replicas in error, and this one is about
// to come back by itself.
func (tk *taskService) status(c containers.Container, t *taskInfo) api.AssignmentStatus {
	l := c.Labels
	st := api.AssignmentStatus{
		ID:                 c.ID,
		Node:               tk.node,
		ObservedGeneration: labelInt(l, LabelGeneration),
		ProviderID:         tk.providerID(c.ID),
		Address:            l[labelAddress],
		Restarts:           int(labelInt(l, labelRestarts)),
		UpdatedAt:          time.Now(),
	}
	if reason := l[labelError]; reason != "" {
		st.Phase, st.Reason, st.Since = api.PhaseError, reason, c.UpdatedAt
		return st
	}
	policy := api.RestartPolicy(l[labelRestart])
	switch {
	case t == nil && tk.replicas.held(c.ID):
		st.Phase, st.Reason, st.Since = api.PhaseProvision, "starting", c.UpdatedAt
	case t == nil && policy != api.RestartNever:
		// containerd or the node restarted: the supervisor's sweep
		// starts it again.
		st.Phase, st.Reason, st.Since = api.PhaseProvision, "no task (containerd restarted?); restarting", c.UpdatedAt
	case t == nil:
		st.Phase, st.Reason, st.Since = api.PhaseError, "no task (containerd or the node restarted); restart policy never", c.UpdatedAt
	case t.status == tasktypes.Status_RUNNING:
		st.Phase = api.PhaseReady
		st.Since = labelTime(l, labelStarted, c.CreatedAt)
	case t.status == tasktypes.Status_CREATED:
		st.Phase, st.Reason, st.Since = api.PhaseProvision, "starting", c.UpdatedAt
	case t.status == tasktypes.Status_PAUSED || t.status == tasktypes.Status_PAUSING:
		st.Phase, st.Reason, st.Since = api.PhaseError, "paused", c.UpdatedAt
	case t.status == tasktypes.Status_STOPPED:
		code := int32(t.exitStatus)
		st.ExitCode = &code
		st.Since = t.exitedAt
		reason := exitReason(t.exitStatus, tk.oomKilled(c, t), labelInt(l, labelMemoryMiB))
		if willRestart(policy, t.exitStatus) {
			st.Phase, st.Reason = api.PhaseProvision, "restarting: "+reason
		} else {
			st.Phase, st.Reason = api.PhaseError, reason
		}
	default:
		st.Phase, st.Reason, st.Since = api.PhaseProvision, "task state "+strings.ToLower(t.status.String()), c.UpdatedAt
	}
	tk.containerStatuses(&st, c, t)
	return st
}

// containerStatuses fills in st's container statuses (the main
// container's) and gates the phase on readiness: a running container
// whose probes do not pass (yet) is provision, "running, not ready",
// until they do; a stopped one waiting out its back-off says so.
func (tk *taskService) containerStatuses(st *api.AssignmentStatus, c containers.Container, t *taskInfo) {
	if c.Labels[labelError] != "" {
		return
	}
	st.Containers = []api.ContainerStatus{tk.containerStatus(st, c, t, c.ID, api.MainContainer)}
}

// containerStatus is the status of container name of replica, whose
// record is c and task t (nil: none); st is the status whose phase it
// gates (the container's own, for a pod member).
func (tk *taskService) containerStatus(st *api.AssignmentStatus, c containers.Container, t *taskInfo, replica, name string) api.ContainerStatus {
	l := c.Labels
	cs := api.ContainerStatus{Name: name, State: api.ContainerWaiting, Restarts: st.Restarts,
		Reason: l[labelLastReason], Message: l[labelLastExit]}
	if code, err := strconv.ParseInt(l[labelLastCode], 10, 32); err == nil {
		c32 := int32(code)
		cs.ExitCode = &c32
	}
	switch {
	case t == nil || t.status == tasktypes.Status_CREATED:
	case t.status == tasktypes.Status_RUNNING:
		tk.runningStatus(st, &cs, c, replica)
	case t.status == tasktypes.Status_STOPPED:
		tk.stoppedStatus(st, &cs, c, t)
	}
	return cs
}

// runningStatus is a running container's: ready unless its probes say
// otherwise.
func (tk *taskService) runningStatus(st *api.AssignmentStatus, cs *api.ContainerStatus, c containers.Container, replica string) {
	cs.State, cs.Ready = api.ContainerRunning, true
	cs.StartedAt = labelTime(c.Labels, labelStarted, c.CreatedAt)
	if c.Labels[labelProbes] == "" || tk.probes == nil {
		return
	}
	ready, msg := tk.probes.ready(replica, cs.Name)
	if msg != "" {
		cs.Message = msg
	}
	if ready {
		return
	}
	cs.Ready = false
	st.Phase, st.Reason = api.PhaseProvision, "running, not ready"
	if msg != "" {
		st.Reason += ": " + msg
	}
}

// stoppedStatus is an exited container's: terminated for good, or
// waiting out its crash-loop back-off.
func (tk *taskService) stoppedStatus(st *api.AssignmentStatus, cs *api.ContainerStatus, c containers.Container, t *taskInfo) {
	code := int32(t.exitStatus)
	cs.ExitCode = &code
	cs.Reason, cs.Message = exitCause(t.exitStatus, tk.oomKilled(c, t), c.Labels[labelUnhealthy]), exitReason(t.exitStatus, tk.oomKilled(c, t), labelInt(c.Labels, labelMemoryMiB))
	if u := c.Labels[labelUnhealthy]; u != "" {
		cs.Message = u
	}
	if !willRestart(api.RestartPolicy(c.Labels[labelRestart]), t.exitStatus) {
		cs.State = api.ContainerTerminated
		return
	}
	if tk.backoff == nil {
		return
	}
	delay, next, ok := tk.backoff.pendingRestart(c.ID)
	if !ok {
		return
	}
	// The next start as a moment (NextStartAt; the replica's reason says
	// it in UTC), never a countdown, which a status read later would
	// still show from the moment it was made.
	msg := fmt.Sprintf("back-off %s restarting failed container %s", delay, cs.Name)
	cs.Reason, cs.Message, cs.NextStartAt = api.ReasonCrashLoopBackOff, msg+" ("+cs.Message+")", next.UTC().Truncate(time.Millisecond)
	st.Reason += "; " + api.ReasonCrashLoopBackOff + ": " + msg + ", next start at " + next.UTC().Format("15:04:05Z")
}

// exitCause is a container status's reason for a task's end.
func exitCause(code uint32, oom bool, unhealthy string) string {
	switch {
	case unhealthy != "":
		return api.ReasonUnhealthy
	case oom:
		return api.ReasonOOMKilled
	case code == 0:
		return api.ReasonCompleted
	}
	return api.ReasonError
}

// willRestart says whether policy restarts a task that exited with code.
// An empty policy is always, as the API defaults it.
func willRestart(policy api.RestartPolicy, code uint32) bool {
	switch policy {
	case api.RestartNever:
		return false
	case api.RestartOnFailure:
		return code != 0
	default:
		return true
	}
}

// exitReason says why a task ended.
func exitReason(code uint32, oom bool, memoryMiB int64) string {
	switch {
	case oom && memoryMiB > 0:
		return fmt.Sprintf("OOM-killed (memory limit %d MiB)", memoryMiB)
	case oom:
		return "OOM-killed"
	case code > 128 && code < 128+65:
		if name := unix.SignalName(unix.Signal(code - 128)); name != "" {
			return fmt.Sprintf("exited with code %d (%s)", code, name)
		}
	}
	return fmt.Sprintf("exited with code %d", code)
}

// oomKilled reports whether the kernel OOM-killed the stopped task t:
// containerd's TaskOOM event recorded its pid, or its cgroup (which
// lives until the task is deleted) counted an OOM kill. The cgroup covers
// an event missed while no supervisor listened.
func (tk *taskService) oomKilled(c containers.Container, t *taskInfo) bool {
	if v := c.Labels[labelOOM]; v != "" && v == strconv.FormatUint(uint64(t.pid), 10) {
		return true
	}
	if t.exitStatus != 128+uint32(unix.SIGKILL) {
		return false
	}
	return cgroupOOMKills(cgroupPath(tk.cfg.Namespace, c.ID)) > 0
}

// cgroupPath is the cgroup containerd's default spec gives a container.
func cgroupPath(namespace, id string) string { return "/" + namespace + "/" + id }

// cgroupOOMKills reads the oom_kill counter of a cgroup (v2
// memory.events, else v1 memory.oom_control); 0 when unreadable.
func cgroupOOMKills(path string) int64 {
	for _, f := range []string{
		filepath.Join(cgroupRoot, path, "memory.events"),
		filepath.Join(cgroupRoot, "memory", path, "memory.oom_control"),
	} {
		if n, ok := readCounter(f, "oom_kill"); ok {
			return n
		}
	}
	return 0
}

// readCounter reads "key value" from a cgroup file of such lines.
func readCounter(path, key string) (int64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), " ")
		if ok && k == key {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

func labelInt(l map[string]string, key string) int64 {
	n, _ := strconv.ParseInt(l[key], 10, 64)
	return n
}

func labelTime(l map[string]string, key string, def time.Time) time.Time {
	t, err := time.Parse(time.RFC3339Nano, l[key])
	if err != nil {
		return def
	}
	return t
}

// statusOf is the status of Compute replica id, read from containerd;
// provider.ErrNotFound when it has no container.
func (tk *taskService) statusOf(ctx context.Context, id string) (api.AssignmentStatus, error) {
	c, err := tk.container(ctx, id)
	if err != nil {
		return api.AssignmentStatus{}, err
	}
	if c == nil {
		return api.AssignmentStatus{}, fmt.Errorf("containerd: replica %q: %w", id, provider.ErrNotFound)
	}
	t, err := tk.task(ctx, id)
	if err != nil {
		return api.AssignmentStatus{}, err
	}
	st := tk.status(*c, t)
	tk.withMembers(ctx, &st, *c)
	return st, nil
}
