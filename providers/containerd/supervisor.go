package containerd

import (
	"context"
	"fmt"
	"strconv"
	"time"

	apievents "github.com/containerd/containerd/api/events"
	tasktypes "github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/core/events"
	"github.com/containerd/typeurl/v2"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/backoff"
)

// sweepInterval is how often the supervisor looks for tasks to restart
// that no event told it about.
const sweepInterval = 10 * time.Second

// stableRun is how long a task must run for its next exit to restart it
// without back-off.
const stableRun = 10 * time.Second

// crashState is the restart back-off of one replica.
type crashState struct {
	// quick counts consecutive exits after short runs.
	quick int
	// timer is the pending restart, nil when none.
	timer *time.Timer
}

// supervise follows containerd's task events for the namespace until ctx
// ends: exits restart tasks according to their restart policy, OOM kills
// are recorded, and both are pushed to watchers. Every (re)subscription
// starts with a sweep that handles exits missed meanwhile (the agent was
// down, containerd restarted).
func (p *Provider) supervise(ctx context.Context) {
	defer p.wg.Done()
	b := backoff.Backoff{Min: 200 * time.Millisecond, Max: 10 * time.Second}
	for ctx.Err() == nil {
		if p.followEvents(ctx) {
			b.Reset()
		}
		p.setEventsUp(false)
		if backoff.Sleep(ctx, b.Next()) != nil {
			return
		}
	}
}

// followEvents subscribes and handles events until the stream fails. It
// reports whether the subscription worked for a while.
func (p *Provider) followEvents(ctx context.Context) bool {
	sctx, cancel := context.WithCancel(p.nsCtx(ctx))
	defer cancel()
	ns := p.cfg.Namespace
	evs, errs := p.client.Subscribe(sctx,
		fmt.Sprintf(`namespace==%q,topic=="/tasks/exit"`, ns),
		fmt.Sprintf(`namespace==%q,topic=="/tasks/oom"`, ns),
	)
	if err := p.sweep(sctx); err != nil {
		if ctx.Err() == nil {
			p.log.Debug("supervisor sweep failed; retrying", "err", err)
		}
		return false
	}
	p.setEventsUp(true)
	// Exits between the sweep and the stream's start, or lost with a
	// stream that failed silently, would otherwise never restart.
	resweep := time.NewTicker(sweepInterval)
	defer resweep.Stop()
	for {
		select {
		case <-ctx.Done():
			return true
		case <-resweep.C:
			if err := p.sweep(sctx); err != nil && ctx.Err() == nil {
				p.log.Debug("supervisor sweep failed", "err", err)
			}
		case err := <-errs:
			if ctx.Err() == nil {
				p.log.Warn("containerd event stream ended; resubscribing", "err", err)
			}
			return true
		case env, ok := <-evs:
			if !ok {
				return true
			}
			p.handleEvent(ctx, env)
		}
	}
}

// handleEvent handles a task's exit (not an exec'd process's) or OOM
// kill, in a goroutine of its own.
func (p *Provider) handleEvent(ctx context.Context, env *events.Envelope) {
	if env.Event == nil {
		return
	}
	ev, err := typeurl.UnmarshalAny(env.Event)
	if err != nil {
		p.log.Debug("undecodable event", "topic", env.Topic, "err", err)
		return
	}
	switch e := ev.(type) {
	case *apievents.TaskExit:
		if e.ID != e.ContainerID {
			return // an exec'd process, not the task
		}
		p.spawn(func() { p.handleStopped(ctx, e.ContainerID, e.Pid) })
	case *apievents.TaskOOM:
		at := env.Timestamp
		p.spawn(func() { p.handleOOM(ctx, e.ContainerID, at) })
	}
}

// spawn runs fn in a goroutine that Close waits for.
func (p *Provider) spawn(fn func()) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		fn()
	}()
}

// setEventsUp records whether the supervisor follows containerd's task
// events. When it stops, watchers may miss exits: they are closed (see
// Watch).
func (p *Provider) setEventsUp(up bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.eventsUp && !up {
		p.watchers.Reset()
	}
	p.eventsUp = up
}

// sweep handles every replica whose task the restart policy wants
// restarted but is stopped or missing, as if its exit had just been
// seen.
func (p *Provider) sweep(ctx context.Context) error {
	cs, err := p.client.ContainerService().List(ctx, fmt.Sprintf("labels.%q", LabelAssignment))
	if err != nil {
		return err
	}
	ts, err := p.tasks(ctx)
	if err != nil {
		return err
	}
	for _, c := range cs {
		t := ts[c.ID]
		policy := api.RestartPolicy(c.Labels[labelRestart])
		switch {
		case c.Labels[labelError] != "" || p.replicaLocks.held(c.ID) || p.restartPending(c.ID):
			continue
		case t == nil && policy == api.RestartNever:
			continue
		case t != nil && (t.status != tasktypes.Status_STOPPED || !willRestart(policy, t.exitStatus)):
			continue
		}
		id := c.ID
		p.spawn(func() { p.handleStopped(ctx, id, 0) })
	}
	return nil
}

// handleStopped reacts to the exit of id's task pid (0: whichever task
// is stopped or missing): it pushes the new status and schedules the
// restart the policy asks for.
func (p *Provider) handleStopped(ctx context.Context, id string, pid uint32) {
	unlock, err := p.replicaLocks.lock(ctx, id)
	if err != nil {
		return
	}
	defer unlock()
	c, err := p.container(ctx, id)
	if err != nil || c == nil || c.Labels[LabelAssignment] == "" || c.Labels[labelError] != "" {
		return
	}
	t, err := p.task(ctx, id)
	if err != nil {
		return
	}
	if t != nil && (t.status != tasktypes.Status_STOPPED || (pid != 0 && t.pid != pid)) {
		return // restarted already, or a stale event
	}
	st := p.computeStatus(*c, t)
	p.notify(st)
	policy := api.RestartPolicy(c.Labels[labelRestart])
	if t == nil {
		if policy == api.RestartNever {
			return
		}
		p.log.Info("task missing; starting it", "id", id)
		p.scheduleRestart(ctx, id, 0)
		return
	}
	if !willRestart(policy, t.exitStatus) {
		p.log.Info("task exited", "id", id, "reason", st.Reason)
		return
	}
	ran := t.exitedAt.Sub(labelTime(c.Labels, labelStarted, c.CreatedAt))
	p.mu.Lock()
	cs := p.crashState(id)
	if ran >= stableRun {
		cs.quick = 0
	}
	cs.quick++
	delay := backoff.Backoff{Min: p.cfg.RestartBackoff, Max: p.cfg.RestartBackoffMax}.Delay(cs.quick)
	p.mu.Unlock()
	p.log.Info("task exited; restarting", "id", id, "reason", st.Reason, "in", delay)
	p.scheduleRestart(ctx, id, delay)
}

// crashState returns id's back-off state; p.mu is held.
func (p *Provider) crashState(id string) *crashState {
	cs, ok := p.crashes[id]
	if !ok {
		cs = &crashState{}
		p.crashes[id] = cs
	}
	return cs
}

// scheduleRestart restarts id's task after delay, unless a restart is
// pending already or the provider is closed.
func (p *Provider) scheduleRestart(ctx context.Context, id string, delay time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cs := p.crashState(id)
	if p.closed || cs.timer != nil {
		return
	}
	p.wg.Add(1)
	var timer *time.Timer
	timer = time.AfterFunc(delay, func() {
		defer p.wg.Done()
		p.mu.Lock()
		if cs.timer == timer {
			cs.timer = nil
		}
		p.mu.Unlock()
		p.restartStopped(ctx, id)
	})
	cs.timer = timer
}

// restartPending reports whether a restart of id is scheduled.
func (p *Provider) restartPending(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	cs, ok := p.crashes[id]
	return ok && cs.timer != nil
}

// cancelRestart stops id's pending restart (the replica is being
// deleted or replaced).
func (p *Provider) cancelRestart(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cs, ok := p.crashes[id]; ok && cs.timer != nil {
		if cs.timer.Stop() {
			p.wg.Done()
		}
		cs.timer = nil
	}
}

func (p *Provider) forgetCrashes(id string) {
	p.cancelRestart(id)
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.crashes, id)
}

// restartStopped restarts id's task if it is still stopped and its
// policy still says so.
func (p *Provider) restartStopped(ctx context.Context, id string) {
	unlock, err := p.replicaLocks.lock(ctx, id)
	if err != nil {
		return
	}
	defer unlock()
	c, err := p.container(ctx, id)
	if err != nil || c == nil || c.Labels[labelError] != "" {
		return
	}
	t, err := p.task(ctx, id)
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
	if err := p.restartTask(ctx, id, "restart policy "+string(policy)); err != nil {
		if ctx.Err() == nil {
			p.log.Warn("restart failed", "id", id, "err", err)
		}
	}
	if st, err := p.Status(ctx, id); err == nil {
		p.notify(st)
	}
}

// restartTask replaces id's stopped (or missing) task with a new one and
// counts the restart. The caller holds the replica's lock.
func (p *Provider) restartTask(ctx context.Context, id, why string) error {
	c, err := p.container(ctx, id)
	if err != nil || c == nil {
		return err
	}
	t, err := p.task(ctx, id)
	if err != nil {
		return err
	}
	labels := map[string]string{labelOOM: ""}
	if t != nil {
		if t.status == tasktypes.Status_RUNNING {
			return nil
		}
		labels[labelLastExit] = exitReason(t.exitStatus, p.oomKilled(*c, t), labelInt(c.Labels, labelMemoryMiB))
		if err := p.deleteStoppedTask(ctx, id); err != nil {
			return err
		}
	}
	p.cancelRestart(id)
	err = p.restoreNetwork(ctx, id, usernsOfLabels(c.Labels))
	if err == nil {
		err = p.startTask(ctx, id)
	}
	labels[labelRestarts] = strconv.FormatInt(labelInt(c.Labels, labelRestarts)+1, 10)
	labels[labelStarted] = time.Now().UTC().Format(time.RFC3339Nano)
	if err != nil {
		if ctx.Err() != nil || isUnavailable(err) {
			return err
		}
		labels[labelError] = truncate("restart: " + err.Error())
	}
	if lerr := p.setLabels(ctx, id, labels); lerr != nil {
		return lerr
	}
	p.log.Info("task restarted", "id", id, "why", why, "restarts", labels[labelRestarts])
	return err
}

// deleteStoppedTask deletes the stopped task of container id, if it has
// one, so that a new one can start.
func (p *Provider) deleteStoppedTask(ctx context.Context, id string) error {
	ct, err := p.client.LoadContainer(ctx, id)
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

// handleOOM records that the kernel OOM-killed in id's current task, so
// that its exit reads as an OOM kill even once the cgroup is gone. It
// records, logs and pushes a task's first OOM kill only.
func (p *Provider) handleOOM(ctx context.Context, id string, at time.Time) {
	unlock, err := p.replicaLocks.lock(ctx, id)
	if err != nil {
		return
	}
	defer unlock()
	c, err := p.container(ctx, id)
	if err != nil || c == nil || c.Labels[LabelAssignment] == "" {
		return
	}
	if started := labelTime(c.Labels, labelStarted, time.Time{}); started.After(at) {
		return // about a task replaced since
	}
	t, err := p.task(ctx, id)
	if err != nil || t == nil {
		return
	}
	pid := strconv.FormatUint(uint64(t.pid), 10)
	if c.Labels[labelOOM] == pid {
		// Recorded already: the kernel reports every OOM in the
		// cgroup, hundreds a second while a task fights its limit.
		return
	}
	if err := p.setLabels(ctx, id, map[string]string{labelOOM: pid}); err != nil {
		p.log.Debug("record OOM kill", "id", id, "err", err)
		return
	}
	p.log.Info("task OOM-killed", "id", id, "memory MiB", c.Labels[labelMemoryMiB])
	if st, err := p.Status(ctx, id); err == nil {
		p.notify(st)
	}
}
