package containerd

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/containerd/containerd/v2/pkg/cio"
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
func (tk *taskService) taskIO(id string) cio.Creator {
	if tk.cfg.LogDriver == LogDriverFile {
		return cio.LogFile(tk.logPath(id))
	}
	return cio.BinaryIO(tk.cfg.logScriptPath(), map[string]string{"file": tk.logPath(id)})
}

// followPoll is how often a following Logs looks for new output; the
// files are written by containerd's shim, which tells nobody.
const followPoll = 250 * time.Millisecond

func (tk *taskService) logPath(id string) string { return filepath.Join(tk.cfg.LogRoot, id+".log") }
