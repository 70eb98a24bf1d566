package libvirt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/stratahq/strata/providers/provider"
)

// followInterval is how often a following Logs looks for new output.
const followInterval = 200 * time.Millisecond

// Logs implements provider.Logger: the replica's serial console. Following
// keeps up with virtlogd's rotation and ends when ctx is done or the
// replica is deleted.
func (p *Provider) Logs(ctx context.Context, id string, opts provider.LogOptions, w io.Writer) error {
	if _, err := p.Status(ctx, id); err != nil {
		return err
	}
	if err := provider.SingleContainerLogs(id, opts); err != nil {
		return err
	}
	gone := func(ctx context.Context) bool {
		_, err := p.Status(ctx, id)
		return errors.Is(err, provider.ErrNotFound)
	}
	if err := provider.FileLogs(ctx, p.console.path(id), opts, w, followInterval, gone); err != nil {
		return fmt.Errorf("libvirt: logs %s: %w", id, err)
	}
	return nil
}
