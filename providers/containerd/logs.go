package containerd

import (
	"context"
	"fmt"
	"io"

	"github.com/stratahq/strata/providers/provider"
)

// Logs implements provider.Logger from the replica's log file, which
// holds the output of all its tasks (restarts append). Following ends
// when ctx is done or the replica is deleted. Volumes keep no output.
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
	// Every few seconds, end the output of a deleted replica.
	gone := func(ctx context.Context) bool {
		c, err := p.tasks.container(ctx, id)
		return err == nil && c == nil
	}
	if err := provider.FileLogs(ctx, p.tasks.logPath(id), opts, w, followPoll, gone); err != nil {
		return fmt.Errorf("containerd: logs %s: %w", id, err)
	}
	return nil
}
