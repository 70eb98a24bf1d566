package containerd

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	apievents "github.com/containerd/containerd/api/events"
	tasktypes "github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/core/events"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/typeurl/v2"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/backoff"
	"github.com/stratahq/strata/providers/provider"
)

// supervisor owns what happens to tasks between calls: it follows
// containerd's task events (and sweeps for what they missed), restarts
// exited tasks as their restart policy says with a back-off per replica,
// records OOM kills, and fans every change out to watchers. Its state
// (pending restarts, whether events are followed, closed) is under mu;
// wg counts its goroutines and scheduled restarts, which close waits
// for.
type supervisor struct {
	cfg      Config
	log      *slog.Logger
	client   *client.Client
	tasks    *taskService
	replicas *keyedLocks

	stop context.CancelFunc
	wg   sync.WaitGroup

	watchers *provider.Watchers

	mu      sync.Mutex
	closed  bool
	crashes map[string]*crashState
	// eventsUp says the supervisor is subscribed to containerd's events;
	// while it is not, exits are noticed by polls and the next sweep.
	eventsUp bool
}

func newSupervisor(cfg Config, log *slog.Logger, c *client.Client, tasks *taskService, replicas *keyedLocks) *supervisor {
	return &supervisor{
		cfg: cfg, log: log, client: c, tasks: tasks, replicas: replicas,
		watchers: provider.NewWatchers(provider.DefaultWatchBuffer),
		crashes:  map[string]*crashState{},
	}
}

// start runs the supervisor until close; ctx carries no deadline.
func (sv *supervisor) start(ctx context.Context) {
	sctx, stop := context.WithCancel(ctx)
	sv.stop = stop
	sv.wg.Add(1)
	go sv.run(sctx)
}

// close stops the supervisor, its pending restarts and its watchers; it
// reports false when it was closed already.
func (sv *supervisor) close() bool {
	sv.mu.Lock()
	if sv.closed {
		sv.mu.Unlock()
		return false
	}
	sv.closed = true
	for _, cs := range sv.crashes {
		if cs.timer != nil && cs.timer.Stop() {
			// The restart it would have run is the next provider's
			// to do: its sweep finds the stopped task.
			sv.wg.Done()
		}
		cs.timer = nil
	}
	sv.mu.Unlock()
	sv.stop()
	sv.wg.Wait()
	sv.watchers.Close()
	return true
}

// notify sends st to every watcher without blocking (see
// provider.Watchers).
func (sv *supervisor) notify(st api.AssignmentStatus) { sv.watchers.Send(st) }

// watch is Provider.Watch.
func (sv *supervisor) watch(ctx context.Context) (<-chan api.AssignmentStatus, error) {
	// Under sv.mu, which setEventsUp holds too: a watch never starts
	// between the stream breaking and its watchers being closed.
	sv.mu.Lock()
	defer sv.mu.Unlock()
	switch {
	case sv.closed:
		return nil, fmt.Errorf("containerd: watch: provider closed: %w", api.ErrUnavailable)
	case !sv.eventsUp:
		return nil, fmt.Errorf("containerd: watch: not following containerd's task events (yet): %w", api.ErrUnavailable)
	}
	return sv.watchers.Watch(ctx)
}

// restartNow replaces id's stopped (or missing) task at once, instead of
// any restart pending. The caller holds the replica's lock.
func (sv *supervisor) restartNow(ctx context.Context, id, why string) error {
	sv.cancelRestart(id)
	return sv.tasks.replaceTask(ctx, id, why)
}

// sweepInterval is how often the supervisor looks for tasks to restart
// that no event told it about.
const sweepInterval = 10 * time.Second

// crashState is the restart back-off of one replica.
type crashState struct {
	// quick counts consecutive exits after short runs.
	quick int
	// timer is the pending restart, nil when none; delay is its
	// back-off and next when it runs.
	timer *time.Timer
	delay time.Duration
	next  time.Time
}

// pendingRestart is the back-off of id's pending restart and when it
// runs; ok is false when none is pending.
func (sv *supervisor) pendingRestart(id string) (time.Duration, time.Time, bool) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	cs, ok := sv.crashes[id]
	if !ok || cs.timer == nil {
		return 0, time.Time{}, false
	}
	return cs.delay, cs.next, true
}

// run follows containerd's task events for the namespace until ctx
// ends: exits restart tasks according to their restart policy, OOM kills
// are recorded, and both are pushed to watchers. Every (re)subscription
// starts with a sweep that handles exits missed meanwhile (the agent was
// down, containerd restarted).
func (sv *supervisor) run(ctx context.Context) {
	defer sv.wg.Done()
	b := backoff.Backoff{Min: 200 * time.Millisecond, Max: 10 * time.Second}
	for ctx.Err() == nil {
		if sv.followEvents(ctx) {
			b.Reset()
		}
		sv.setEventsUp(false)
		if backoff.Sleep(ctx, b.Next()) != nil {
			return
		}
	}
}

// followEvents subscribes and handles events until the stream fails. It
// reports whether the subscription worked for a while.
func (sv *supervisor) followEvents(ctx context.Context) bool {
	sctx, cancel := context.WithCancel(namespaces.WithNamespace(ctx, sv.cfg.Namespace))
	defer cancel()
	ns := sv.cfg.Namespace
	evs, errs := sv.client.Subscribe(sctx,
		fmt.Sprintf(`namespace==%q,topic=="/tasks/exit"`, ns),
		fmt.Sprintf(`namespace==%q,topic=="/tasks/oom"`, ns),
	)
	if err := sv.sweep(sctx); err != nil {
		if ctx.Err() == nil {
			sv.log.Debug("supervisor sweep failed; retrying", "err", err)
		}
		return false
	}
	sv.setEventsUp(true)
	// Exits between the sweep and the stream's start, or lost with a
	// stream that failed silently, would otherwise never restart.
	resweep := time.NewTicker(sweepInterval)
	defer resweep.Stop()
	for {
		select {
		case <-ctx.Done():
			return true
		case <-resweep.C:
			if err := sv.sweep(sctx); err != nil && ctx.Err() == nil {
				sv.log.Debug("supervisor sweep failed", "err", err)
			}
		case err := <-errs:
			if ctx.Err() == nil {
				sv.log.Warn("containerd event stream ended; resubscribing", "err", err)
			}
			return true
		case env, ok := <-evs:
			if !ok {
				return true
			}
			sv.handleEvent(ctx, env)
		}
	}
}

// handleEvent handles a task's exit (not an exec'd process's) or OOM
// kill, in a goroutine of its own.
func (sv *supervisor) handleEvent(ctx context.Context, env *events.Envelope) {
	if env.Event == nil {
		return
	}
	ev, err := typeurl.UnmarshalAny(env.Event)
	if err != nil {
		sv.log.Debug("undecodable event", "topic", env.Topic, "err", err)
		return
	}
	switch e := ev.(type) {
	case *apievents.TaskExit:
		if e.ID != e.ContainerID {
			return // an exec'd process, not the task
		}
		sv.spawn(func() { sv.handleStopped(ctx, e.ContainerID, e.Pid) })
	case *apievents.TaskOOM:
		at := env.Timestamp
		sv.spawn(func() { sv.handleOOM(ctx, e.ContainerID, at) })
	}
}

// spawn runs fn in a goroutine that Close waits for.
func (sv *supervisor) spawn(fn func()) {
	sv.wg.Add(1)
	go func() {
		defer sv.wg.Done()
		fn()
	}()
}

// setEventsUp records whether the supervisor follows containerd's task
// events. When it stops, watchers may miss exits: they are closed (see
// Watch).
func (sv *supervisor) setEventsUp(up bool) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if sv.eventsUp && !up {
		sv.watchers.Reset()
	}
	sv.eventsUp = up
}

// sweep handles every replica whose task the restart policy wants
// restarted but is stopped or missing, as if its exit had just been
// seen.
func (sv *supervisor) sweep(ctx context.Context) error {
	// Replicas' containers, and their pods' other containers.
	cs, err := sv.client.ContainerService().List(ctx, fmt.Sprintf("labels.%q", LabelAssignment), fmt.Sprintf("labels.%q", labelPod))
	if err != nil {
		return err
	}
	ts, err := sv.tasks.all(ctx)
	if err != nil {
		return err
	}
	for _, c := range cs {
		t := ts[c.ID]
		replica, name := ownerOf(c)
		if t != nil && t.status == tasktypes.Status_RUNNING && sv.tasks.probes != nil {
			// Probes of a replica found running (the agent restarted)
			// start; those running already go on.
			sv.tasks.probes.track(c, replica, name)
		}
		if !sv.wantsHandling(ctx, c, t, replica) {
			continue
		}
		id := c.ID
		sv.spawn(func() { sv.handleStopped(ctx, id, 0) })
	}
	return nil
}

// wantsHandling reports whether the sweep hands container c of replica,
// whose task is t (nil: none), to handleStopped: its task is stopped or
// missing and its restart policy restarts it, or it is an init
// container whose exit 0 was missed.
func (sv *supervisor) wantsHandling(ctx context.Context, c containers.Container, t *taskInfo, replica string) bool {
	policy := api.RestartPolicy(c.Labels[labelRestart])
	switch {
	case c.Labels[labelError] != "" || sv.replicas.held(replica) || sv.restartPending(c.ID):
		return false
	case !sv.tasks.mayRun(ctx, c):
		return false
	case initIndex(c) >= 0 && t != nil && t.status == tasktypes.Status_STOPPED && t.exitStatus == 0:
		return true
	case t == nil && policy == api.RestartNever:
		return false
	case t != nil && (t.status != tasktypes.Status_STOPPED || !willRestart(policy, t.exitStatus)):
		return false
	}
	return true
}

// stoppedTask is the record of container id and its task (nil: none)
// when the task is pid's (0: any) and stopped or missing, and the
// container is one the supervisor handles now; ok is false otherwise.
func (sv *supervisor) stoppedTask(ctx context.Context, id string, pid uint32) (c *containers.Container, t *taskInfo, ok bool) {
	c, err := sv.tasks.container(ctx, id)
	if err != nil || !supervised(c) || c.Labels[labelError] != "" {
		return nil, nil, false
	}
	t, err = sv.tasks.task(ctx, id)
	if err != nil {
		return nil, nil, false
	}
	if t != nil && (t.status != tasktypes.Status_STOPPED || (pid != 0 && t.pid != pid)) {
		return nil, nil, false // restarted already, or a stale event
	}
	// One that waits for the pod's init containers, or a done one, is
	// left alone.
	return c, t, sv.tasks.mayRun(ctx, *c)
}

// handleStopped reacts to the exit of id's task pid (0: whichever task
// is stopped or missing): it pushes the new status and schedules the
// restart the policy asks for.
func (sv *supervisor) handleStopped(ctx context.Context, id string, pid uint32) {
	unlock, replica, err := sv.lockOwner(ctx, id)
	if err != nil {
		return
	}
	defer unlock()
	c, t, ok := sv.stoppedTask(ctx, id, pid)
	if !ok {
		return
	}
	if sv.tasks.probes != nil {
		sv.tasks.probes.untrack(ownerOf(*c))
	}
	// The status is pushed once the restart is scheduled: it says when.
	defer sv.pushOwner(ctx, *c, t)
	if initIndex(*c) >= 0 && t != nil && t.exitStatus == 0 {
		if err := sv.tasks.initExited(ctx, *c, replica); err != nil && ctx.Err() == nil {
			sv.log.Warn("start after init container", "id", id, "err", err)
		}
		return
	}
	policy := api.RestartPolicy(c.Labels[labelRestart])
	if t == nil {
		if policy == api.RestartNever {
			return
		}
		sv.log.Info("task missing; starting it", "id", id)
		sv.scheduleRestart(ctx, id, 0)
		return
	}
	reason := exitReason(t.exitStatus, sv.tasks.oomKilled(*c, t), labelInt(c.Labels, labelMemoryMiB))
	if !willRestart(policy, t.exitStatus) {
		sv.log.Info("task exited", "id", id, "reason", reason)
		return
	}
	delay := sv.nextDelay(id, t.exitedAt.Sub(labelTime(c.Labels, labelStarted, c.CreatedAt)))
	sv.log.Info("task exited; restarting", "id", id, "reason", reason, "in", delay)
	sv.scheduleRestart(ctx, id, delay)
}

// nextDelay is the back-off before restarting id's task, which ran for
// ran: RestartBackoff doubling to RestartBackoffMax while it keeps
// exiting, starting over once a run lasted RestartBackoffReset.
func (sv *supervisor) nextDelay(id string, ran time.Duration) time.Duration {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	cs := sv.crashState(id)
	if ran >= sv.cfg.RestartBackoffReset {
		cs.quick = 0
	}
	cs.quick++
	return backoff.Backoff{Min: sv.cfg.RestartBackoff, Max: sv.cfg.RestartBackoffMax}.Delay(cs.quick)
}

// crashState returns id's back-off state; sv.mu is held.
func (sv *supervisor) crashState(id string) *crashState {
	cs, ok := sv.crashes[id]
	if !ok {
		cs = &crashState{}
		sv.crashes[id] = cs
	}
	return cs
}

// scheduleRestart restarts id's task after delay, unless a restart is
// pending already or the provider is closed.
func (sv *supervisor) scheduleRestart(ctx context.Context, id string, delay time.Duration) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	cs := sv.crashState(id)
	if sv.closed || cs.timer != nil {
		return
	}
	sv.wg.Add(1)
	var timer *time.Timer
	timer = time.AfterFunc(delay, func() {
		defer sv.wg.Done()
		sv.mu.Lock()
		if cs.timer == timer {
			cs.timer = nil
		}
		sv.mu.Unlock()
		sv.restartStopped(ctx, id)
	})
	cs.timer, cs.delay, cs.next = timer, delay, time.Now().Add(delay)
}

// restartPending reports whether a restart of id is scheduled.
func (sv *supervisor) restartPending(id string) bool {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	cs, ok := sv.crashes[id]
	return ok && cs.timer != nil
}

// cancelRestart stops id's pending restart (the replica is being
// deleted or replaced).
func (sv *supervisor) cancelRestart(id string) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if cs, ok := sv.crashes[id]; ok && cs.timer != nil {
		if cs.timer.Stop() {
			sv.wg.Done()
		}
		cs.timer = nil
	}
}

func (sv *supervisor) forget(id string) {
	sv.cancelRestart(id)
	sv.mu.Lock()
	defer sv.mu.Unlock()
	delete(sv.crashes, id)
}

// restartStopped restarts id's task if it is still stopped and its
// policy still says so.
func (sv *supervisor) restartStopped(ctx context.Context, id string) {
	unlock, replica, err := sv.lockOwner(ctx, id)
	if err != nil {
		return
	}
	defer unlock()
	c, err := sv.tasks.container(ctx, id)
	if err != nil || c == nil || c.Labels[labelError] != "" || !sv.tasks.mayRun(ctx, *c) {
		return
	}
	t, err := sv.tasks.task(ctx, id)
	if err != nil {
		return
	}
	policy := api.RestartPolicy(c.Labels[labelRestart])
	switch {
	case t == nil && policy == api.RestartNever:
		return
	case t != nil && (t.status != tasktypes.Status_STOPPED || !willRestart(policy, t.exitStatus)):
		return
	}
	if err := sv.restartNow(ctx, id, "restart policy "+string(policy)); err != nil {
		if ctx.Err() == nil {
			sv.log.Warn("restart failed", "id", id, "err", err)
		}
	}
	if st, err := sv.tasks.statusOf(ctx, replica); err == nil {
		sv.notify(st)
	}
}

// handleOOM records that the kernel OOM-killed in id's current task, so
// that its exit reads as an OOM kill even once the cgroup is gone. It
// records, logs and pushes a task's first OOM kill only.
func (sv *supervisor) handleOOM(ctx context.Context, id string, at time.Time) {
	unlock, replica, err := sv.lockOwner(ctx, id)
	if err != nil {
		return
	}
	defer unlock()
	c, err := sv.tasks.container(ctx, id)
	if err != nil || !supervised(c) {
		return
	}
	if started := labelTime(c.Labels, labelStarted, time.Time{}); started.After(at) {
		return // about a task replaced since
	}
	t, err := sv.tasks.task(ctx, id)
	if err != nil || t == nil {
		return
	}
	pid := strconv.FormatUint(uint64(t.pid), 10)
	if c.Labels[labelOOM] == pid {
		// Recorded already: the kernel reports every OOM in the
		// cgroup, hundreds a second while a task fights its limit.
		return
	}
	if err := sv.tasks.setLabels(ctx, id, map[string]string{labelOOM: pid}); err != nil {
		sv.log.Debug("record OOM kill", "id", id, "err", err)
		return
	}
	sv.log.Info("task OOM-killed", "id", id, "memory MiB", c.Labels[labelMemoryMiB])
	if st, err := sv.tasks.statusOf(ctx, replica); err == nil {
		sv.notify(st)
	}
}

// condition is the provider's own condition, provider/<name>: whether
// the supervisor follows containerd's events.
func (sv *supervisor) condition(name string) api.Condition {
	sv.mu.Lock()
	up := sv.eventsUp
	sv.mu.Unlock()
	c := api.Condition{Type: provider.ConditionType(name), Status: api.ConditionReady, Reason: "Supervising",
		Message: "following containerd task events in namespace " + sv.cfg.Namespace}
	if !up {
		c.Status, c.Reason = api.ConditionWarning, "EventsDown"
		c.Message = "not subscribed to containerd events: exits are seen by polls only, restarts wait for the subscription"
	}
	return c
}
