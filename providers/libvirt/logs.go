package libvirt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/stratahq/strata/providers/provider"
)

// followInterval is how often a following Logs looks for new output.
const followInterval = 200 * time.Millisecond

// consolePath is the file the domain's serial console is logged to.
func (p *Provider) consolePath(id string) string {
	return filepath.Join(p.cfg.LogDir, domainName(id)+".log")
}

// consoleMark writes a line to the console log before each start, so that
// the log says where each boot begins (libvirt appends the guest's output
// after it).
func (p *Provider) consoleMark(spec domainSpec, meta replicaMeta) {
	f, err := os.OpenFile(spec.Console, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		p.log.Warn("console log", "id", meta.ID, "err", err)
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "[strata] %s starting domain %s: generation %d, type %s, restarts %d\n",
		meta.Started.Format(time.RFC3339), domainName(meta.ID), meta.Generation, spec.Type, meta.Restarts)
}

// guestUp reports whether the guest of a running domain is up: its image
// names no ready marker, or the marker appears on the console after the
// domain's latest start (consoleMark's line). Only the end of the log is
// read: a boot's output follows its start line closely.
func (p *Provider) guestUp(meta replicaMeta) bool {
	if meta.ReadyMarker == "" {
		return true
	}
	f, err := os.Open(p.consolePath(meta.ID))
	if err != nil {
		return false
	}
	defer f.Close()
	const window = 1 << 20
	if fi, err := f.Stat(); err == nil && fi.Size() > window {
		if _, err := f.Seek(fi.Size()-window, io.SeekStart); err != nil {
			return false
		}
	}
	b, err := io.ReadAll(io.LimitReader(f, window))
	if err != nil {
		return false
	}
	start := []byte(fmt.Sprintf("[strata] %s starting domain %s:", meta.Started.Format(time.RFC3339), domainName(meta.ID)))
	i := bytes.LastIndex(b, start)
	if i < 0 {
		return false
	}
	return bytes.Contains(b[i:], []byte(meta.ReadyMarker))
}

// Logs implements provider.Logger: the replica's serial console. Following
// keeps up with virtlogd's rotation and ends when ctx is done or the
// replica is deleted.
func (p *Provider) Logs(ctx context.Context, id string, opts provider.LogOptions, w io.Writer) error {
	if _, err := p.Status(ctx, id); err != nil {
		return err
	}
	gone := func(ctx context.Context) bool {
		_, err := p.Status(ctx, id)
		return errors.Is(err, provider.ErrNotFound)
	}
	if err := provider.FileLogs(ctx, p.consolePath(id), opts, w, followInterval, gone); err != nil {
		return fmt.Errorf("libvirt: logs %s: %w", id, err)
	}
	return nil
}
