package containerd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"

	"github.com/stratahq/strata/internal/api"
)

// Delete implements provider.Provider: the container (stopped with
// SIGTERM, then SIGKILL after grace), its snapshot, network namespace,
// CNI attachment, hosts and log files; for a Volume replica, the volume.
// A Compute replica's volumes are never touched. With only an id, the
// replica is whatever holds that id.
func (p *Provider) Delete(ctx context.Context, a *api.Assignment, grace time.Duration) error {
	if a == nil || a.ID == "" {
		return api.Invalid("id", "is required")
	}
	if err := validIdentifier(a.ID); err != nil {
		// No replica can have this id.
		return nil
	}
	ctx = p.nsCtx(ctx)
	unlock, err := p.replicaLocks.lock(ctx, a.ID)
	if err != nil {
		return fmt.Errorf("containerd: delete %s: %w", a.ID, err)
	}
	defer unlock()
	p.cancelRestart(a.ID)

	ctr, c, err := p.loadContainer(ctx, a.ID)
	if err != nil {
		return fmt.Errorf("containerd: delete %s: %w", a.ID, err)
	}
	if c == nil || a.Kind == api.KindVolume {
		if done, err := p.deleteVolumeOf(a); done || err != nil {
			return err
		}
	}
	// Without a container, this still clears what a crashed Apply may
	// have left: snapshot, network namespace, CNI attachment.
	if grace <= 0 {
		var labels map[string]string
		if c != nil {
			labels = c.Labels
		}
		grace = graceOf(a, labels)
	}
	if err := p.removeLoaded(ctx, a.ID, ctr, grace); err != nil {
		return fmt.Errorf("containerd: delete %s: %w", a.ID, err)
	}
	p.forgetCrashes(a.ID)
	if err := removeFiles(p.logPath(a.ID)); err != nil {
		return fmt.Errorf("containerd: delete %s: %w", a.ID, err)
	}
	if c != nil {
		now := time.Now()
		p.notify(api.AssignmentStatus{
			ID: a.ID, Node: p.node, ObservedGeneration: labelInt(c.Labels, LabelGeneration),
			Phase: api.PhaseDestroyed, ProviderID: p.providerID(a.ID), Since: now, UpdatedAt: now,
		})
		p.log.Info("container deleted", "id", a.ID)
	}
	return nil
}

// deleteVolumeOf deletes the volume a names, if there is one (done).
func (p *Provider) deleteVolumeOf(a *api.Assignment) (done bool, err error) {
	v, err := p.readVolume(a.ID)
	if err != nil {
		return false, fmt.Errorf("containerd: delete %s: %w", a.ID, err)
	}
	if v != nil {
		if err := p.deleteVolume(v); err != nil {
			return false, fmt.Errorf("containerd: delete: %w", err)
		}
		p.log.Info("volume deleted", "id", a.ID)
		return true, nil
	}
	if a.Kind != api.KindVolume {
		return false, nil
	}
	// A directory whose record was never written.
	if err := os.RemoveAll(p.volumeDir(a.ID)); err != nil {
		return false, fmt.Errorf("containerd: delete volume %s: %w", a.ID, err)
	}
	return true, nil
}

// loadContainer returns container id and its record; nils without
// error when there is none.
func (p *Provider) loadContainer(ctx context.Context, id string) (client.Container, *containers.Container, error) {
	c, err := p.client.LoadContainer(ctx, id)
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

// removeCompute stops and removes everything of a Compute replica but
// its log file and volumes: task, container, snapshot, network, hosts
// file. The caller holds the replica's lock. Absent parts are fine, so
// that it also finishes what a crashed Apply or Delete left.
func (p *Provider) removeCompute(ctx context.Context, id string, grace time.Duration) error {
	c, _, err := p.loadContainer(ctx, id)
	if err != nil {
		return err
	}
	return p.removeLoaded(ctx, id, c, grace)
}

// removeLoaded is removeCompute of the container c loaded already (nil:
// there is none).
func (p *Provider) removeLoaded(ctx context.Context, id string, c client.Container, grace time.Duration) error {
	var errs []error
	snapshotGone := false
	if c != nil {
		var err error
		if snapshotGone, err = p.removeContainer(ctx, c, grace); err != nil {
			return err
		}
	}
	if !snapshotGone {
		// A container that failed to be created may have left its
		// snapshot.
		p.removeSnapshot(ctx, id)
	}
	if err := p.teardownNetwork(ctx, id); err != nil {
		errs = append(errs, fmt.Errorf("network: %w", err))
	}
	if err := removeFiles(p.hostsPath(id)); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(p.configsDir(id)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// removeContainer stops c's task, if any, and deletes it and c with its
// snapshot; snapshotGone says the container's deletion removed the
// snapshot (it had one, and was there to delete).
func (p *Provider) removeContainer(ctx context.Context, c client.Container, grace time.Duration) (snapshotGone bool, err error) {
	t, err := c.Task(ctx, nil)
	switch {
	case isNotFound(err):
	case err != nil:
		return false, fmt.Errorf("task: %w", err)
	default:
		stopped, err := p.stopTask(ctx, t, grace)
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
func (p *Provider) stopTask(ctx context.Context, t client.Task, grace time.Duration) (stopped bool, err error) {
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
	return true, p.signalStop(ctx, t, grace)
}

// signalStop stops the running task t: SIGTERM, SIGKILL after grace.
func (p *Provider) signalStop(ctx context.Context, t client.Task, grace time.Duration) error {
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
	p.log.Info("task ignored SIGTERM; killing it", "id", t.ID(), "grace", grace)
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
func (p *Provider) removeSnapshot(ctx context.Context, id string) {
	err := p.client.SnapshotService(p.cfg.Snapshotter).Remove(ctx, id)
	if err != nil && !isNotFound(err) {
		p.log.Warn("remove snapshot", "id", id, "err", err)
	}
}

func removeFiles(paths ...string) error {
	var errs []error
	for _, path := range paths {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
