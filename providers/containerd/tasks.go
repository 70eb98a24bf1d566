package containerd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"syscall"
	"time"

	tasksapi "github.com/containerd/containerd/api/services/tasks/v1"
	tasktypes "github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/stratahq/strata/internal/api"
)

// taskService owns the containers of replicas and their tasks: it
// creates a container from its spec, starts, stops, kills and replaces
// its task (counting restarts in the container's labels), reads both
// back into a status, and removes them with their snapshot. It keeps no
// state of its own beyond its settings: containerd holds the records.
// What a task needs from the replica's network before it starts again
// (its namespace back after a reboot) it asks of net.
type taskService struct {
	cfg    Config
	node   string
	log    *slog.Logger
	client *client.Client
	// replicas are the provider's replica locks: a replica whose lock is
	// held is being changed (its status says starting, not missing).
	replicas *keyedLocks
	net      netRestorer
	// userns is the user namespace range of new containers (nil: none).
	userns *idRange
	// probes gate a running container's readiness and start probing a
	// restarted one; backoff says when a stopped one starts again. Both
	// are set once, by New (nil in tests of statuses alone).
	probes  *probeService
	backoff restartSchedule
}

// restartSchedule is what a status needs of the supervisor: the
// back-off of a pending restart and when it runs.
type restartSchedule interface {
	pendingRestart(id string) (delay time.Duration, next time.Time, ok bool)
}

// netRestorer brings back the network of a replica whose task is about
// to start again (see networkService.restore).
type netRestorer interface {
	restore(ctx context.Context, id string, userns *idRange) error
}

func newTaskService(cfg Config, node string, log *slog.Logger, c *client.Client, replicas *keyedLocks, net netRestorer) *taskService {
	return &taskService{cfg: cfg, node: node, log: log, client: c, replicas: replicas, net: net, userns: userRange(cfg)}
}

// providerID is what statuses report as the replica's id in containerd.
func (tk *taskService) providerID(id string) string { return tk.cfg.Namespace + "/" + id }

// containerSpec is what one container of a replica is made of, once its
// image, network and files are ready.
type containerSpec struct {
	a *api.Assignment
	// id is the container's id: a.ID when empty (the main container).
	id     string
	image  client.Image
	labels map[string]string
	// rootfs makes the container's snapshot from image.
	rootfs client.NewContainerOpts
	// netns is the path of the network namespace the container joins;
	// usernsPath that of the user namespace owning it (used with a user
	// namespace range only).
	netns      string
	usernsPath string
	mounts     []specs.Mount
	// filesDir holds the replica's Config and Secret files, given to the
	// user the process runs as.
	filesDir string
}

// create creates the container of spec with the OCI spec opts. A
// snapshot left by a failed creation is removed.
func (tk *taskService) create(ctx context.Context, cs containerSpec, opts []oci.SpecOpts) (client.Container, error) {
	id := cs.id
	if id == "" {
		id = cs.a.ID
	}
	ctr, err := tk.client.NewContainer(ctx, id,
		client.WithImage(cs.image),
		client.WithSnapshotter(tk.cfg.Snapshotter),
		cs.rootfs,
		client.WithRuntime(tk.cfg.Runtime, nil),
		client.WithContainerLabels(cs.labels),
		client.WithNewSpec(opts...),
	)
	if err != nil && !errdefs.IsAlreadyExists(err) {
		// The snapshot may exist without its container.
		tk.removeSnapshot(ctx, id)
	}
	return ctr, err
}

// recordFailure records a replica that could not be created as a
// container holding only its labels and the reason.
func (tk *taskService) recordFailure(ctx context.Context, id string, labels map[string]string, reason string) error {
	l := make(map[string]string, len(labels)+1)
	for k, v := range labels {
		l[k] = v
	}
	l[labelError] = truncate(reason)
	_, err := tk.client.NewContainer(ctx, id,
		client.WithRuntime(tk.cfg.Runtime, nil),
		client.WithContainerLabels(l),
		client.WithNewSpec(),
	)
	return err
}

// setLabels adds or changes labels of container id, leaving the others.
func (tk *taskService) setLabels(ctx context.Context, id string, labels map[string]string) error {
	c, err := tk.client.LoadContainer(ctx, id)
	if err != nil {
		return err
	}
	_, err = c.SetLabels(ctx, labels)
	return err
}

// startNew starts the task of a container just created and returns it;
// nil without error when it did not start. A command that cannot run is
// the replica's failure, not the call's: the container stays, with the
// reason.
func (tk *taskService) startNew(ctx context.Context, c client.Container) (client.Task, error) {
	t, err := tk.runTask(ctx, c)
	if err == nil {
		return t, nil
	}
	if ctx.Err() != nil || isUnavailable(err) {
		return nil, err
	}
	reason := "start: " + err.Error()
	if _, lerr := c.SetLabels(ctx, map[string]string{labelError: truncate(reason)}); lerr != nil {
		return nil, errors.Join(err, lerr)
	}
	return nil, nil
}

// startTask creates and starts the task of container id, its output
// appended to the replica's log file.
func (tk *taskService) startTask(ctx context.Context, id string) error {
	c, err := tk.client.LoadContainer(ctx, id)
	if err != nil {
		return err
	}
	_, err = tk.runTask(ctx, c)
	return err
}

// runTask creates and starts the task of container c.
func (tk *taskService) runTask(ctx context.Context, c client.Container) (client.Task, error) {
	id := c.ID()
	t, err := c.NewTask(ctx, tk.taskIO(id))
	if err != nil {
		return nil, fmt.Errorf("create task: %w", err)
	}
	if err := t.Start(ctx); err != nil {
		if _, derr := t.Delete(context.WithoutCancel(ctx), client.WithProcessKill); derr != nil && !isNotFound(derr) {
			tk.log.Warn("delete task that did not start", "id", id, "err", derr)
		}
		return nil, fmt.Errorf("start task: %w", err)
	}
	return t, nil
}

// kill sends SIGKILL to the task of container id.
func (tk *taskService) kill(ctx context.Context, id string) error {
	c, err := tk.client.LoadContainer(ctx, id)
	if err != nil {
		return err
	}
	t, err := c.Task(ctx, nil)
	if err != nil {
		return err
	}
	return t.Kill(ctx, syscall.SIGKILL, client.WithKillAll)
}

// startCreated starts a task left created (an Apply interrupted between
// creating and starting it).
func (tk *taskService) startCreated(ctx context.Context, id string) error {
	c, err := tk.client.LoadContainer(ctx, id)
	if err != nil {
		return err
	}
	t, err := c.Task(ctx, nil)
	if err != nil {
		return err
	}
	return t.Start(ctx)
}

// loadContainer returns container id and its record; nils without
// error when there is none.
func (tk *taskService) loadContainer(ctx context.Context, id string) (client.Container, *containers.Container, error) {
	c, err := tk.client.LoadContainer(ctx, id)
	if isNotFound(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("container %s: %w", id, err)
	}
	// The record LoadContainer read, without reading it again.
	rec, err := c.Info(ctx, client.WithoutRefreshedMetadata)
	if err != nil {
		return nil, nil, fmt.Errorf("container %s: %w", id, err)
	}
	return c, &rec, nil
}

// removeContainer stops c's task, if any, and deletes it and c with its
// snapshot; snapshotGone says the container's deletion removed the
// snapshot (it had one, and was there to delete).
func (tk *taskService) removeContainer(ctx context.Context, c client.Container, grace time.Duration) (snapshotGone bool, err error) {
	t, err := c.Task(ctx, nil)
	switch {
	case isNotFound(err):
	case err != nil:
		return false, fmt.Errorf("task: %w", err)
	default:
		stopped, err := tk.stopTask(ctx, t, grace)
		if err != nil {
			return false, err
		}
		var opts []client.ProcessDeleteOpts
		if !stopped {
			// Created, never started: killed on the way.
			opts = append(opts, client.WithProcessKill)
		}
		if _, err := t.Delete(ctx, opts...); err != nil && !isNotFound(err) {
			return false, fmt.Errorf("delete task: %w", err)
		}
	}
	err = c.Delete(ctx, client.WithSnapshotCleanup)
	if isNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("delete container: %w", err)
	}
	rec, _ := c.Info(ctx, client.WithoutRefreshedMetadata)
	return rec.SnapshotKey != "", nil
}

// stopTask sends SIGTERM and waits up to grace for the task to exit, then
// kills it; stopped says the task has exited (or is gone), not merely
// created.
func (tk *taskService) stopTask(ctx context.Context, t client.Task, grace time.Duration) (stopped bool, err error) {
	st, err := t.Status(ctx)
	if isNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("task status: %w", err)
	}
	if st.Status == client.Stopped {
		return true, nil
	}
	if st.Status != client.Running && st.Status != client.Paused && st.Status != client.Pausing {
		return false, nil
	}
	return true, tk.signalStop(ctx, t, grace)
}

// signalStop stops the running task t: SIGTERM, SIGKILL after grace.
func (tk *taskService) signalStop(ctx context.Context, t client.Task, grace time.Duration) error {
	// Wait before Kill: an exit between the two would be missed.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	exited, err := t.Wait(wctx)
	if err != nil {
		return fmt.Errorf("wait task: %w", err)
	}
	if err := t.Kill(ctx, syscall.SIGTERM); err != nil && !isNotFound(err) {
		return fmt.Errorf("stop task: %w", err)
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	if stopped, err := awaitExit(ctx, exited, timer.C); stopped || err != nil {
		return err
	}
	tk.log.Info("task ignored SIGTERM; killing it", "id", t.ID(), "grace", grace)
	if err := t.Kill(ctx, syscall.SIGKILL, client.WithKillAll); err != nil && !isNotFound(err) {
		return fmt.Errorf("kill task: %w", err)
	}
	_, err = awaitExit(ctx, exited, nil)
	return err
}

// awaitExit waits for a task's exit until timeout (nil: as long as ctx
// lasts); stopped says it exited.
func awaitExit(ctx context.Context, exited <-chan client.ExitStatus, timeout <-chan time.Time) (stopped bool, err error) {
	select {
	case <-exited:
		return true, nil
	case <-ctx.Done():
		return false, ctx.Err()
	case <-timeout:
		return false, nil
	}
}

// removeSnapshot removes the snapshot named id, if any.
func (tk *taskService) removeSnapshot(ctx context.Context, id string) {
	err := tk.client.SnapshotService(tk.cfg.Snapshotter).Remove(ctx, id)
	if err != nil && !isNotFound(err) {
		tk.log.Warn("remove snapshot", "id", id, "err", err)
	}
}

// task returns the task of container id, or nil without error when it
// has none.
func (tk *taskService) task(ctx context.Context, id string) (*taskInfo, error) {
	r, err := tk.client.TaskService().Get(ctx, &tasksapi.GetRequest{ContainerID: id})
	if grpcstatus.Code(err) == codes.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", id, err)
	}
	return taskInfoOf(r.GetProcess()), nil
}

// all returns every task of the namespace by container id.
func (tk *taskService) all(ctx context.Context) (map[string]*taskInfo, error) {
	r, err := tk.client.TaskService().List(ctx, &tasksapi.ListTasksRequest{})
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	out := make(map[string]*taskInfo, len(r.GetTasks()))
	for _, pr := range r.GetTasks() {
		out[pr.GetID()] = taskInfoOf(pr)
	}
	return out, nil
}

// container returns the record of container id, or nil without error
// when there is none.
func (tk *taskService) container(ctx context.Context, id string) (*containers.Container, error) {
	c, err := tk.client.ContainerService().Get(ctx, id)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("container %s: %w", id, err)
	}
	return &c, nil
}

// replaceTask replaces id's stopped (or missing) task with a new one,
// its network restored first, and counts the restart. The caller holds
// the replica's lock.
func (tk *taskService) replaceTask(ctx context.Context, id, why string) error {
	c, err := tk.container(ctx, id)
	if err != nil || c == nil {
		return err
	}
	t, err := tk.task(ctx, id)
	if err != nil {
		return err
	}
	labels := map[string]string{labelOOM: "", labelUnhealthy: ""}
	if t != nil {
		if t.status == tasktypes.Status_RUNNING {
			return nil
		}
		oom := tk.oomKilled(*c, t)
		labels[labelLastExit] = exitReason(t.exitStatus, oom, labelInt(c.Labels, labelMemoryMiB))
		if u := c.Labels[labelUnhealthy]; u != "" {
			labels[labelLastExit] = u
		}
		labels[labelLastReason] = exitCause(t.exitStatus, oom, c.Labels[labelUnhealthy])
		labels[labelLastCode] = strconv.FormatUint(uint64(t.exitStatus), 10)
		if err := tk.deleteStoppedTask(ctx, id); err != nil {
			return err
		}
	}
	replica, name := ownerOf(*c)
	err = tk.net.restore(ctx, replica, usernsOfLabels(c.Labels))
	if err == nil {
		err = tk.startTask(ctx, id)
	}
	labels[labelRestarts] = strconv.FormatInt(labelInt(c.Labels, labelRestarts)+1, 10)
	labels[labelStarted] = time.Now().UTC().Format(time.RFC3339Nano)
	if err != nil {
		if ctx.Err() != nil || isUnavailable(err) {
			return err
		}
		labels[labelError] = truncate("restart: " + err.Error())
	}
	if lerr := tk.setLabels(ctx, id, labels); lerr != nil {
		return lerr
	}
	tk.log.Info("task restarted", "id", id, "why", why, "restarts", labels[labelRestarts])
	if err == nil && tk.probes != nil {
		tk.probes.track(*c, replica, name)
	}
	return err
}

// deleteStoppedTask deletes the stopped task of container id, if it has
// one, so that a new one can start.
func (tk *taskService) deleteStoppedTask(ctx context.Context, id string) error {
	ct, err := tk.client.LoadContainer(ctx, id)
	if err != nil {
		return err
	}
	task, err := ct.Task(ctx, nil)
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := task.Delete(ctx); err != nil && !isNotFound(err) {
		return fmt.Errorf("delete stopped task: %w", err)
	}
	return nil
}
