package provider

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"time"
)

// FileLogs is Logs for a provider that keeps a replica's output in a file
// at path (containerd's task logs, libvirt's serial consoles): it writes
// the file's last opts.TailLines lines (all of it for 0) and, with
// opts.Follow, what is appended after, looking every poll, until ctx is
// done or gone reports the replica deleted. A missing file is an empty
// log that may appear later; a file rotated or truncated is read again
// from its start.
func FileLogs(ctx context.Context, path string, opts LogOptions, w io.Writer, poll time.Duration, gone func(context.Context) bool) error {
	f, err := os.Open(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var offset int64
	var last os.FileInfo
	if f != nil {
		last, err = f.Stat()
		if err == nil {
			offset, err = tailFile(f, last.Size(), opts.TailLines, w)
		}
		f.Close()
		if err != nil {
			return err
		}
	}
	if !opts.Follow {
		return nil
	}
	return followFile(ctx, path, last, offset, w, poll, gone)
}

// followFile writes what is appended to the file at path after offset
// (last is what it was when read), looking every poll, until ctx is done
// or gone reports the replica deleted.
func followFile(ctx context.Context, path string, last os.FileInfo, offset int64, w io.Writer, poll time.Duration, gone func(context.Context) bool) error {
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		fi, err := os.Stat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if gone(ctx) {
				return nil // deleted: its output ends
			}
			continue
		case err != nil:
			return err
		}
		if last == nil || !os.SameFile(last, fi) || fi.Size() < offset {
			offset = 0 // rotated, recreated or truncated: the new file from its start
		}
		last = fi
		if fi.Size() > offset {
			copied, err := copyFrom(path, offset, w)
			offset += copied
			if err != nil {
				return err
			}
		}
		// Every few looks, end the output of a replica deleted whose
		// file stays.
		if n%8 == 7 && gone(ctx) {
			return nil
		}
	}
}

// copyFrom copies the file at path from offset to its end and returns how
// much it copied.
func copyFrom(path string, offset int64, w io.Writer) (int64, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return 0, err
	}
	return io.Copy(w, f)
}

// tailBlock is how much tailFile reads at a time, backwards from the end.
const tailBlock = 64 << 10

// tailFile writes the last lines of f's first end bytes (all of them when
// lines is 0) and returns the offset it stopped at, where following
// resumes. It reads backwards, so that a long log costs only its tail.
func tailFile(f *os.File, end int64, lines int, w io.Writer) (int64, error) {
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
