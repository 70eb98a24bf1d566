package containerd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/containerd/containerd/v2/pkg/cio"

	"github.com/stratahq/strata/providers/provider"
)

// Log drivers (Config.LogDriver).
const (
	// LogDriverBinary appends a task's output to its log file through
	// a small script the shim runs (containerd's binary:// logging).
	LogDriverBinary = "binary"
	// LogDriverFile is containerd's own file:// logging (cio.LogFile).
	// Its shim closes the file as soon as stdout ends, so that what the
	// task wrote to stderr just before exiting can be lost (a crash's
	// last words); it is there for nodes where the script cannot run.
	LogDriverFile = "file"
)

// logScript is the logger the shim runs for every task under the binary
// driver, with the task's stdout on fd 3, stderr on fd 4 and a readiness
// pipe on fd 5 (closing it says ready), and no environment but the
// container's id and namespace. Both streams are appended to one file by
// separate copies, so that neither can cut the other short. The copies
// must not hold the readiness pipe, or the shim waits for them forever.
// The shim sends SIGTERM once the task is gone; the copies end with
// their pipes, so the script ignores it and waits for them (they, forked
// before the trap, do not ignore it).
const logScript = `#!/bin/sh
# Written by Strata's containerd provider: appends a task's stdout and
# stderr to the file named by the "file" argument.
PATH=/usr/bin:/bin
[ "$1" = file ] && [ -n "$2" ] || exit 2
cat <&3 >>"$2" 3<&- 4<&- 5>&- &
cat <&4 >>"$2" 3<&- 4<&- 5>&- &
exec 3<&- 4<&- 5>&-
trap '' TERM
wait
`

func (c Config) logScriptPath() string { return filepath.Join(c.StateDir, "bin", "strata-task-log") }

// installLogScript writes the logger script unless it is there already.
func installLogScript(c Config) error {
	if c.LogDriver != LogDriverBinary {
		return nil
	}
	path := c.logScriptPath()
	if b, err := os.ReadFile(path); err == nil && string(b) == logScript {
		return nil
	}
	if err := writeFileAtomic(path, []byte(logScript)); err != nil {
		return fmt.Errorf("log script: %w", err)
	}
	if err := os.Chmod(path, 0o755); err != nil {
		return fmt.Errorf("log script: %w", err)
	}
	return nil
}

// taskIO sends a task's output to the replica's log file, appending to
// what earlier tasks wrote.
func (p *Provider) taskIO(id string) cio.Creator {
	if p.cfg.LogDriver == LogDriverFile {
		return cio.LogFile(p.logPath(id))
	}
	return cio.BinaryIO(p.cfg.logScriptPath(), map[string]string{"file": p.logPath(id)})
}

// followPoll is how often a following Logs looks for new output; the
// files are written by containerd's shim, which tells nobody.
const followPoll = 250 * time.Millisecond

// Logs implements provider.Logger from the replica's log file, which
// holds the output of all its tasks (restarts append). Following ends
// when ctx is done or the replica is deleted. Volumes keep no output.
func (p *Provider) Logs(ctx context.Context, id string, opts provider.LogOptions, w io.Writer) error {
	ctx = p.nsCtx(ctx)
	c, err := p.container(ctx, id)
	if err != nil {
		return fmt.Errorf("containerd: logs %s: %w", id, err)
	}
	if c == nil {
		v, err := p.readVolume(id)
		if err != nil {
			return fmt.Errorf("containerd: logs %s: %w", id, err)
		}
		if v != nil {
			return fmt.Errorf("containerd: logs of volume %s: %w", id, provider.ErrUnsupported)
		}
		return fmt.Errorf("containerd: replica %q: %w", id, provider.ErrNotFound)
	}
	path := p.logPath(id)
	f, err := os.Open(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("containerd: logs %s: %w", id, err)
	}
	var offset int64
	if f != nil {
		offset, err = copyTail(f, opts.TailLines, w)
		f.Close()
		if err != nil {
			return fmt.Errorf("containerd: logs %s: %w", id, err)
		}
	}
	if !opts.Follow {
		return nil
	}
	return p.followLog(ctx, id, path, offset, w)
}

// followLog copies what is written to the log file at path after offset,
// until ctx ends or the replica is deleted.
func (p *Provider) followLog(ctx context.Context, id, path string, offset int64, w io.Writer) error {
	var err error
	tick := time.NewTicker(followPoll)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		offset, err = copyFrom(path, offset, w)
		if err != nil {
			return fmt.Errorf("containerd: logs %s: %w", id, err)
		}
		// Every few seconds, end the output of a deleted replica.
		if n%8 == 7 {
			if c, err := p.container(ctx, id); err == nil && c == nil {
				return nil
			}
		}
	}
}

// copyFrom copies path from offset to its end and returns the new end;
// a file that shrank (recreated) is read from its start.
func copyFrom(path string, offset int64, w io.Writer) (int64, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return offset, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return offset, err
	}
	if fi.Size() < offset {
		offset = 0
	}
	if fi.Size() == offset {
		return offset, nil
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return offset, err
	}
	n, err := io.Copy(w, f)
	return offset + n, err
}

// tailBlock is how much copyTail reads at a time, backwards from the end.
const tailBlock = 64 << 10

// copyTail writes the last lines of f (all of it when lines is 0) and
// returns the offset it stopped at, where following resumes. It reads
// backwards, so that a long log costs only its tail.
func copyTail(f *os.File, lines int, w io.Writer) (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	end := fi.Size()
	start := int64(0)
	if lines > 0 {
		start = tailStart(f, end, lines)
	}
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return 0, err
	}
	n, err := io.CopyN(w, f, end-start)
	return start + n, err
}

// tailStart finds where the last lines of f's first end bytes begin.
func tailStart(f *os.File, end int64, lines int) int64 {
	buf := make([]byte, tailBlock)
	pos := end
	// A final newline ends the last line; it does not start another.
	need := lines + 1
	if end > 0 {
		b := make([]byte, 1)
		if _, err := f.ReadAt(b, end-1); err == nil && b[0] != '\n' {
			need = lines
		}
	}
	for pos > 0 {
		n := min(int64(len(buf)), pos)
		pos -= n
		chunk := buf[:n]
		if _, err := f.ReadAt(chunk, pos); err != nil && !errors.Is(err, io.EOF) {
			return 0
		}
		for i := len(chunk) - 1; i >= 0; i-- {
			if chunk[i] != '\n' {
				continue
			}
			need--
			if need == 0 {
				return pos + int64(i) + 1
			}
		}
	}
	return 0
}
