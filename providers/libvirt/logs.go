package libvirt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
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
	path := p.consolePath(id)
	f, err := os.Open(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("libvirt: logs %s: %w", id, err)
	}
	var offset int64
	if f != nil {
		offset, err = writeTail(f, opts.TailLines, w)
		f.Close()
		if err != nil {
			return fmt.Errorf("libvirt: logs %s: %w", id, err)
		}
	}
	if !opts.Follow {
		return nil
	}
	return p.follow(ctx, id, path, offset, w)
}

// writeTail writes the last n lines of f (all of it when n is 0) and
// returns the offset it read up to.
func writeTail(f *os.File, n int, w io.Writer) (int64, error) {
	// virtlogd rotates console logs at 2 MiB, so reading one whole is
	// bounded.
	b, err := io.ReadAll(f)
	if err != nil {
		return 0, err
	}
	out := b
	if n > 0 {
		end := len(b)
		if end > 0 && b[end-1] == '\n' {
			end--
		}
		start := end
		for lines := 0; start > 0; start-- {
			if b[start-1] == '\n' {
				if lines++; lines == n {
					break
				}
			}
		}
		out = b[start:]
	}
	_, err = w.Write(out)
	return int64(len(b)), err
}

// follow copies what is appended to path from offset on.
func (p *Provider) follow(ctx context.Context, id, path string, offset int64, w io.Writer) error {
	tick := time.NewTicker(followInterval)
	defer tick.Stop()
	var last os.FileInfo
	if fi, err := os.Stat(path); err == nil {
		last = fi
	}
	buf := make([]byte, 32<<10)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		fi, err := os.Stat(path)
		if errors.Is(err, fs.ErrNotExist) {
			if _, serr := p.Status(ctx, id); errors.Is(serr, provider.ErrNotFound) {
				return nil // deleted: its output ends
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("libvirt: logs %s: %w", id, err)
		}
		if last == nil || !os.SameFile(last, fi) || fi.Size() < offset {
			offset = 0 // rotated or truncated: the new file from its start
		}
		last = fi
		if fi.Size() == offset {
			continue
		}
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		n, err := copyFrom(f, offset, buf, w)
		f.Close()
		offset += n
		if err != nil {
			return fmt.Errorf("libvirt: logs %s: %w", id, err)
		}
	}
}

func copyFrom(f *os.File, offset int64, buf []byte, w io.Writer) (int64, error) {
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return 0, err
	}
	var total int64
	for {
		n, err := f.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return total, werr
			}
			total += int64(n)
		}
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}
