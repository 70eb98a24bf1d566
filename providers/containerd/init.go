package containerd

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	tasktypes "github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"

	"github.com/stratahq/strata/internal/api"
)

// Init containers: Apply creates every container of the pod (the main
// one, the init containers <id>.init-<name>, the sidecars) but starts
// only the first init container's task. The supervisor drives the rest:
// an init container's exit 0 is recorded on the main container
// (labelInitsDone, so that neither an agent restart nor a sidecar's
// restart reruns a done one) and starts the next, or, after the last,
// the main container's and the sidecars' tasks. A failing one is
// restarted with its own back-off (restart policy on-failure, the
// default) or fails the replica (never). Done init containers are kept,
// stopped with their exit status, until the pod is replaced (a new
// revision reruns them all) or deleted.
const (
	// labelInits, on the main container, lists the init containers in
	// the order they run; labelInitsDone counts those that exited 0.
	labelInits     = "strata.io/init-containers"
	labelInitsDone = "strata.io/init-done"
	// labelInitIndex, on an init container, is its place in that order.
	labelInitIndex = "strata.io/init-index"
)

// initsOf are the init containers of a's spec.
func initsOf(a *api.Assignment) []api.Container {
	if a.Spec.Compute == nil {
		return nil
	}
	return a.Spec.Compute.InitContainers
}

// initNames are the init containers main's labels list.
func initNames(main containers.Container) []string {
	v := main.Labels[labelInits]
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// initPending reports whether main's pod has init containers still to
// exit 0.
func initPending(main containers.Container) bool {
	return int(labelInt(main.Labels, labelInitsDone)) < len(initNames(main))
}

// initIndex is the place of init container c in its pod's order, -1
// when c is no init container.
func initIndex(c containers.Container) int {
	i, err := strconv.Atoi(c.Labels[labelInitIndex])
	if err != nil || c.Labels[labelPod] == "" {
		return -1
	}
	return i
}

// initTurn reports whether container c, whose pod's main container is
// main, may have a task now: an init container in its turn, any other
// once every init container is done.
func initTurn(c, main containers.Container) bool {
	done := int(labelInt(main.Labels, labelInitsDone))
	if i := initIndex(c); i >= 0 {
		return i == done
	}
	return done >= len(initNames(main))
}

// mayRun reports whether container c may have a task now (see
// initTurn); a container whose main one cannot be read may.
func (tk *taskService) mayRun(ctx context.Context, c containers.Container) bool {
	replica, _ := ownerOf(c)
	main := &c
	if replica != c.ID {
		m, err := tk.container(ctx, replica)
		if err != nil || m == nil {
			return true
		}
		main = m
	}
	if main.Labels[labelInits] == "" {
		return true
	}
	return initTurn(c, *main)
}

// initLabels are the labels of a's main container that order its init
// containers (none when it has none).
func initLabels(a *api.Assignment, labels map[string]string) {
	ic := initsOf(a)
	if len(ic) == 0 {
		return
	}
	names := make([]string, len(ic))
	for i, ct := range ic {
		names[i] = ct.Name
	}
	labels[labelInits] = strings.Join(names, ",")
	labels[labelInitsDone] = "0"
}

// initMember is init container i of a as a pod container: its restart
// policy defaults to on-failure, not the replica's, and it has no
// probes.
func initMember(ct api.Container) api.Container {
	if ct.RestartPolicy == "" {
		ct.RestartPolicy = api.RestartOnFailure
	}
	ct.Probes = api.Probes{}
	return ct
}

// initExited handles init container c of replica exiting 0: recorded on
// the main container, then the next init container's task starts, or,
// after the last one, the main container's and the sidecars'. The
// caller holds the replica's lock.
func (tk *taskService) initExited(ctx context.Context, c containers.Container, replica string) error {
	main, err := tk.container(ctx, replica)
	if err != nil || main == nil {
		return err
	}
	i := initIndex(c)
	if int(labelInt(main.Labels, labelInitsDone)) != i {
		return nil // recorded already, or not its turn
	}
	done := i + 1
	if err := tk.setLabels(ctx, replica, map[string]string{labelInitsDone: strconv.Itoa(done)}); err != nil {
		return err
	}
	names := initNames(*main)
	tk.log.Info("init container done", "id", replica, "container", c.Labels[labelContainer])
	if done < len(names) {
		return tk.startHeld(ctx, initID(replica, names[done]), replica, names[done])
	}
	if err := tk.startHeld(ctx, replica, replica, api.MainContainer); err != nil {
		return err
	}
	for _, n := range memberNames(*main) {
		if err := tk.startHeld(ctx, sidecarID(replica, n), replica, n); err != nil {
			return err
		}
	}
	return nil
}

// startHeld starts the first task of container id (container name of
// replica), created without one; a task that cannot start is the
// container's failure, labelled on it.
func (tk *taskService) startHeld(ctx context.Context, id, replica, name string) error {
	t, err := tk.task(ctx, id)
	if err != nil {
		return err
	}
	if t != nil && t.status == tasktypes.Status_RUNNING {
		return nil
	}
	if err := tk.deleteStoppedTask(ctx, id); err != nil {
		return err
	}
	labels := map[string]string{labelStarted: time.Now().UTC().Format(time.RFC3339Nano)}
	err = tk.startTask(ctx, id)
	if err != nil {
		if ctx.Err() != nil || isUnavailable(err) {
			return err
		}
		labels[labelError] = truncate("start: " + err.Error())
	}
	if lerr := tk.setLabels(ctx, id, labels); lerr != nil {
		return lerr
	}
	if err == nil && tk.probes != nil {
		if c, cerr := tk.container(ctx, id); cerr == nil && c != nil {
			tk.probes.track(*c, replica, name)
		}
	}
	return nil
}

// initFailed reports whether an init container of main's pod failed for
// good (restart policy never, or it could not be made or started).
func (tk *taskService) initFailed(ctx context.Context, main containers.Container) (bool, error) {
	if !initPending(main) {
		return false, nil
	}
	names := initNames(main)
	id := initID(main.ID, names[labelInt(main.Labels, labelInitsDone)])
	c, err := tk.container(ctx, id)
	if err != nil || c == nil {
		return c == nil && err == nil, err
	}
	if c.Labels[labelError] != "" {
		return true, nil
	}
	t, err := tk.task(ctx, id)
	if err != nil || t == nil {
		return false, err
	}
	return t.status == tasktypes.Status_STOPPED && !willRestart(api.RestartPolicy(c.Labels[labelRestart]), t.exitStatus), nil
}

// withInits puts the statuses of main's init containers first in st and,
// while some are not done, makes the replica provision with the reason
// of the one running (error when it failed for good); the main
// container and the sidecars wait.
func (tk *taskService) withInits(ctx context.Context, st *api.AssignmentStatus, main containers.Container) {
	names := initNames(main)
	if len(names) == 0 || main.Labels[labelError] != "" {
		return
	}
	done := int(labelInt(main.Labels, labelInitsDone))
	pending := done < len(names)
	var out []api.ContainerStatus
	if pending {
		st.Phase, st.Reason, st.ExitCode = api.PhaseProvision, "init container "+names[done]+": waiting", nil
		for i := range st.Containers {
			st.Containers[i] = api.ContainerStatus{Name: st.Containers[i].Name, State: api.ContainerWaiting, Reason: "PodInitializing"}
		}
	}
	for i, n := range names {
		code := int32(0)
		switch {
		case i < done:
			cs := api.ContainerStatus{Name: n, State: api.ContainerTerminated, Reason: api.ReasonCompleted, ExitCode: &code}
			if c, err := tk.container(ctx, initID(main.ID, n)); err == nil && c != nil {
				cs.Restarts = int(labelInt(c.Labels, labelRestarts))
			}
			out = append(out, cs)
		case i > done:
			out = append(out, api.ContainerStatus{Name: n, State: api.ContainerWaiting})
		default:
			out = append(out, tk.initStatus(ctx, st, main.ID, n))
		}
	}
	st.Containers = append(out, st.Containers...)
}

// initStatus is the status of init container name of replica, the one
// whose turn it is, with the replica's phase and reason set from it.
func (tk *taskService) initStatus(ctx context.Context, st *api.AssignmentStatus, replica, name string) api.ContainerStatus {
	id := initID(replica, name)
	c, err := tk.container(ctx, id)
	var t *taskInfo
	if err == nil && c != nil {
		t, err = tk.task(ctx, id)
	}
	switch {
	case err != nil:
		st.Reason = fmt.Sprintf("init container %s: %v", name, err)
		return api.ContainerStatus{Name: name, State: api.ContainerWaiting, Message: err.Error()}
	case c == nil:
		st.Phase, st.Reason = api.PhaseError, "init container "+name+" is missing"
		return api.ContainerStatus{Name: name, State: api.ContainerWaiting}
	}
	if t != nil && t.status == tasktypes.Status_STOPPED && t.exitStatus == 0 {
		// Done; the supervisor is about to record it.
		code := int32(0)
		st.Reason = "init container " + name + ": completed"
		return api.ContainerStatus{Name: name, State: api.ContainerTerminated, Reason: api.ReasonCompleted, ExitCode: &code,
			Restarts: int(labelInt(c.Labels, labelRestarts))}
	}
	own := api.AssignmentStatus{Phase: api.PhaseReady}
	cs := tk.memberStatus(&own, *c, t, replica, name)
	switch {
	case own.Phase == api.PhaseError:
		st.Phase = api.PhaseError
		st.Reason = "init container " + strings.TrimPrefix(own.Reason, "container ")
	case own.Phase == api.PhaseProvision:
		st.Reason = "init container " + strings.TrimPrefix(own.Reason, "container ")
	default:
		st.Reason = "init container " + name + ": running"
	}
	return cs
}

// startInitPod creates the containers of the pod of main, just created,
// which has init containers: each init container and sidecar is created,
// the first init container's task started; the supervisor starts the
// others in turn (see initExited). A container that cannot be made fails
// the replica, as in startPod.
func (p *Provider) startInitPod(ctx context.Context, main client.Container, cs containerSpec) (api.AssignmentStatus, error) {
	a := cs.a
	type member struct {
		ct    api.Container
		what  string
		index int
	}
	var ms []member
	for i, ct := range initsOf(a) {
		ms = append(ms, member{initMember(ct), "init container ", i})
	}
	for _, ct := range sidecarsOf(a) {
		ms = append(ms, member{ct, "container ", -1})
	}
	for _, m := range ms {
		err := p.createMember(ctx, cs, m.ct, m.index, m.index == 0)
		if err == nil {
			continue
		}
		if ctx.Err() != nil || isUnavailable(err) {
			return api.AssignmentStatus{}, err
		}
		reason := truncate(fmt.Sprintf("%s%s: %v", m.what, m.ct.Name, err))
		p.log.Warn("replica failed", "id", a.ID, "reason", reason)
		if err := p.tasks.setLabels(ctx, main.ID(), map[string]string{labelError: reason}); err != nil {
			return api.AssignmentStatus{}, err
		}
		break
	}
	p.log.Info("pod created, init containers first", "id", a.ID, "generation", a.Generation, "init containers", len(initsOf(a)))
	return p.Status(ctx, a.ID)
}
