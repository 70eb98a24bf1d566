package libvirt

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// console owns the files a domain's output lands in: its serial console
// log under Config.LogDir (written by virtlogd, which rotates it), with
// a line of the provider's before each start, and libvirtd's own log of
// the domain when the daemon is the local system one.
type console struct {
	dir string
	// systemDaemon says libvirtd is the local system one (qemu:///system),
	// whose per-domain logs are in systemQEMULogDir.
	systemDaemon bool
	log          *slog.Logger
}

// path is the file the domain's serial console is logged to.
func (cs *console) path(id string) string {
	return filepath.Join(cs.dir, domainName(id)+".log")
}

// startLine is the line mark writes before the start of meta.
func startLine(meta replicaMeta) string {
	return fmt.Sprintf("[strata] %s starting domain %s:", meta.Started.Format(time.RFC3339), domainName(meta.ID))
}

// mark writes a line to the console log before each start, so that
// the log says where each boot begins (libvirt appends the guest's output
// after it).
func (cs *console) mark(spec domainSpec, meta replicaMeta) {
	f, err := os.OpenFile(spec.Console, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		cs.log.Warn("console log", "id", meta.ID, "err", err)
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s generation %d, type %s, restarts %d\n", startLine(meta), meta.Generation, spec.Type, meta.Restarts)
}

// tail is at most the last window bytes of the replica's console log.
func (cs *console) tail(id string, window int64) ([]byte, error) {
	f, err := os.Open(cs.path(id))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > window {
		if _, err := f.Seek(fi.Size()-window, io.SeekStart); err != nil {
			return nil, err
		}
	}
	return io.ReadAll(io.LimitReader(f, window))
}

// remove removes the console log and virtlogd's rotations of it.
func (cs *console) remove(id string) error {
	path := cs.path(id)
	matches, _ := filepath.Glob(path + ".*")
	for _, f := range append([]string{path}, matches...) {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove console log: %w", err)
		}
	}
	return nil
}

// systemQEMULogDir is where the local system libvirtd logs each domain's
// QEMU command line and errors, in a file it never removes.
const systemQEMULogDir = "/var/log/libvirt/qemu"

// removeQEMULog removes libvirtd's log of a domain that is gone, which
// would otherwise stay forever, one per replica. Only the local system
// daemon's directory is known.
func (cs *console) removeQEMULog(name string) {
	if !cs.systemDaemon {
		return
	}
	path := filepath.Join(systemQEMULogDir, name+".log")
	matches, _ := filepath.Glob(path + ".*")
	for _, f := range append([]string{path}, matches...) {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			cs.log.Debug("remove libvirt's domain log", "path", f, "err", err)
		}
	}
}
