package containerd

import (
	"context"
	"fmt"
	"io"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
)

// Logs implements provider.Logger from the log file of the replica's
// container opts.Container (empty: the main one), which holds the
// output of all its tasks (restarts append); each container of a pod
// has its own, named by its container id. Following ends when ctx is
// done or the replica is deleted. Volumes keep no output.
func (p *Provider) Logs(ctx context.Context, id string, opts provider.LogOptions, w io.Writer) error {
	ctx = p.nsCtx(ctx)
	c, err := p.tasks.container(ctx, id)
	if err != nil {
		return fmt.Errorf("containerd: logs %s: %w", id, err)
	}
	if c == nil {
		v, err := p.volumes.read(id)
		if err != nil {
			return fmt.Errorf("containerd: logs %s: %w", id, err)
		}
		if v != nil {
			return fmt.Errorf("containerd: logs of volume %s: %w", id, provider.ErrUnsupported)
		}
		return fmt.Errorf("containerd: replica %q: %w", id, provider.ErrNotFound)
	}
	logID, err := p.logContainer(ctx, id, opts.Container)
	if err != nil {
		return err
	}
	// Every few seconds, end the output of a deleted replica.
	gone := func(ctx context.Context) bool {
		c, err := p.tasks.container(ctx, id)
		return err == nil && c == nil
	}
	if err := provider.FileLogs(ctx, p.tasks.logPath(logID), opts, w, followPoll, gone); err != nil {
		return fmt.Errorf("containerd: logs %s: %w", id, err)
	}
	return nil
}

// logContainer is the containerd id of the container of replica id
// named name: the replica's own for the main one, <id>.<name> for the
// others, <id>.init-<name> for an init container.
func (p *Provider) logContainer(ctx context.Context, id, name string) (string, error) {
	if name == "" || name == api.MainContainer {
		return id, nil
	}
	for _, cid := range []string{sidecarID(id, name), initID(id, name)} {
		c, err := p.tasks.container(ctx, cid)
		if err != nil {
			return "", fmt.Errorf("containerd: logs %s: %w", id, err)
		}
		if c != nil {
			return cid, nil
		}
	}
	return "", fmt.Errorf("containerd: replica %q has no container %q: %w", id, name, provider.ErrNotFound)
}
