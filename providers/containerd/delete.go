package containerd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/containerd/containerd/v2/client"

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
	unlock, err := p.replicas.lock(ctx, a.ID)
	if err != nil {
		return fmt.Errorf("containerd: delete %s: %w", a.ID, err)
	}
	defer unlock()
	p.sup.cancelRestart(a.ID)

	ctr, c, err := p.tasks.loadContainer(ctx, a.ID)
	if err != nil {
		return fmt.Errorf("containerd: delete %s: %w", a.ID, err)
	}
	if c == nil || a.Kind == api.KindVolume {
		if done, err := p.volumes.deleteOf(a); done || err != nil {
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
	if err := p.removeWithLogs(ctx, a.ID, ctr, grace); err != nil {
		return fmt.Errorf("containerd: delete %s: %w", a.ID, err)
	}
	if c != nil {
		now := time.Now()
		p.sup.notify(api.AssignmentStatus{
			ID: a.ID, Node: p.node, ObservedGeneration: labelInt(c.Labels, LabelGeneration),
			Phase: api.PhaseDestroyed, ProviderID: p.tasks.providerID(a.ID), Since: now, UpdatedAt: now,
		})
		p.log.Info("container deleted", "id", a.ID)
	}
	return nil
}

// removeWithLogs is removeLoaded, then the replica's back-off is
// forgotten and the log files of its containers removed.
func (p *Provider) removeWithLogs(ctx context.Context, id string, c client.Container, grace time.Duration) error {
	members, err := p.tasks.members(ctx, id)
	if err != nil {
		return err
	}
	if err := p.removeLoaded(ctx, id, c, grace); err != nil {
		return err
	}
	p.sup.forget(id)
	logs := []string{p.tasks.logPath(id)}
	for _, m := range members {
		logs = append(logs, p.tasks.logPath(m.ID))
	}
	return removeFiles(logs...)
}

// removeCompute stops and removes everything of a Compute replica but
// its log file and volumes: task, container, snapshot, network, hosts
// file. The caller holds the replica's lock. Absent parts are fine, so
// that it also finishes what a crashed Apply or Delete left.
func (p *Provider) removeCompute(ctx context.Context, id string, grace time.Duration) error {
	c, _, err := p.tasks.loadContainer(ctx, id)
	if err != nil {
		return err
	}
	return p.removeLoaded(ctx, id, c, grace)
}

// removeLoaded is removeCompute of the container c loaded already (nil:
// there is none).
func (p *Provider) removeLoaded(ctx context.Context, id string, c client.Container, grace time.Duration) error {
	p.probes.forget(id)
	var errs []error
	// The pod's other containers first: they live in the main one's
	// network namespace.
	if err := p.removeMembers(ctx, id, grace); err != nil {
		return fmt.Errorf("pod: %w", err)
	}
	snapshotGone := false
	if c != nil {
		var err error
		if snapshotGone, err = p.tasks.removeContainer(ctx, c, grace); err != nil {
			return err
		}
	}
	if !snapshotGone {
		// A container that failed to be created may have left its
		// snapshot.
		p.tasks.removeSnapshot(ctx, id)
	}
	if err := p.network.teardown(ctx, id); err != nil {
		errs = append(errs, fmt.Errorf("network: %w", err))
	}
	if err := p.network.removeNetworkFiles(id); err != nil {
		errs = append(errs, err)
	}
	if err := p.configs.remove(id); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
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
