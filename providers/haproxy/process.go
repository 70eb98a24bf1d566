package haproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/stratahq/strata/internal/backoff"
)

const (
	// startTimeout bounds how long haproxy may take to bind and answer on
	// its sockets after a start or a reload.
	startTimeout = 15 * time.Second
	// pollEvery is how often a start, reload or stop looks at the process.
	pollEvery = 20 * time.Millisecond
	// killWait is how long a stop waits after SIGTERM before SIGKILL.
	killWait = 2 * time.Second
	// maxLogSize is the size past which haproxy.log is rotated (see rotateLog).
	maxLogSize = 1 << 20
)

// process is a running haproxy master. It is not necessarily a child of
// this process (an agent restart adopts it), so its death is found by
// looking at /proc, not by waiting on it.
type process struct {
	pid int
	// os is the handle used to signal it.
	os *os.Process
}

// loadError is haproxy refusing a configuration, at start or reload,
// with the alerts it printed and the load balancers they are about.
type loadError struct {
	Op     string // start or reload
	Alerts []string
	// ByLB are the alerts attributed to a load balancer (by the line of
	// the configuration or the frontend they name).
	ByLB map[string]string
	// Exit describes how the process ended, for a start.
	Exit string
}

func (e *loadError) Error() string {
	msg := "haproxy " + e.Op + " failed"
	if e.Exit != "" {
		msg += " (" + e.Exit + ")"
	}
	if len(e.Alerts) > 0 {
		msg += ": " + strings.Join(e.Alerts, "; ")
	}
	return msg
}

// parseAlerts reads haproxy's output since a start or reload and returns
// its alerts, attributing each to a load balancer when it names one of
// its configuration lines or frontends.
func parseAlerts(out string, cfgPath string, r rendered) (alerts []string, byLB map[string]string) {
	byLB = map[string]string{}
	// An alert is "[ALERT]    (pid) : message"; the message names the
	// line of the configuration or the proxy it is about.
	alertRe := regexp.MustCompile(`^\[ALERT\]\s+\(\d+\)\s*:\s*(.*)$`)
	frontendRe := regexp.MustCompile(`for (?:frontend|proxy|backend) '?([^':\s]+)'?`)
	lineRe := regexp.MustCompile(`\s*\[` + regexp.QuoteMeta(cfgPath) + `:(\d+)\]`)
	for line := range strings.SplitSeq(out, "\n") {
		m := alertRe.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		msg := m[1]
		// The generic last words add nothing to the alert before them.
		if strings.Contains(msg, "Some protocols failed to start") || strings.Contains(msg, "Fatal errors found in configuration") {
			continue
		}
		lb := ""
		if lm := lineRe.FindStringSubmatch(msg); lm != nil {
			n, _ := strconv.Atoi(lm[1])
			lb = r.lines[n]
		}
		if fm := frontendRe.FindStringSubmatch(msg); fm != nil && lb == "" {
			lb = r.frontends[fm[1]]
		}
		clean := "haproxy: " + strings.TrimSpace(lineRe.ReplaceAllString(msg, ""))
		alerts = append(alerts, clean)
		if lb != "" {
			if prev, ok := byLB[lb]; ok {
				clean = prev + "; " + clean
			}
			byLB[lb] = clean
		}
	}
	return alerts, byLB
}

// logOffset returns the size of haproxy.log, where the output of the
// next start or reload begins.
func logOffset(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// rotateLog keeps haproxy.log under maxLogSize: a larger one is copied
// to haproxy.log.1 and truncated in place. It is not renamed because a
// running master keeps writing to the file it opened (in append mode,
// so after a truncation it writes at the new end).
func rotateLog(path string) {
	fi, err := os.Stat(path)
	if err != nil || fi.Size() <= maxLogSize {
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	if os.WriteFile(path+".1", b, 0o640) == nil {
		_ = os.Truncate(path, 0)
	}
}

// readLogSince reads haproxy.log from off (at most 64 KiB).
func readLogSince(path string, off int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(f, 64<<10))
	return string(b)
}

// procAlive reports whether pid is a live process (a zombie is dead)
// running our configuration (a reused pid is not ours). A master
// re-executes itself after forking its first worker and on every reload;
// while it does, its command line reads empty, which counts as ours.
func procAlive(pid int, cfgPath string) bool {
	if pid <= 0 {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses, which may
	// itself contain spaces or parentheses.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	if s := stat[i+2]; s == 'Z' || s == 'X' {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	return len(b) == 0 || runsConfig(b, cfgPath)
}

// runsConfig reports whether a command line (of /proc/<pid>/cmdline) is
// haproxy's with -f cfgPath.
func runsConfig(cmdline []byte, cfgPath string) bool {
	args := strings.Split(string(cmdline), "\x00")
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "-f" && args[i+1] == cfgPath {
			return true
		}
	}
	return false
}

// ownedProcs lists the live processes running our configuration: the
// master and its workers, including old workers still draining.
func ownedProcs(cfgPath string) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		// Strictly by command line: a kernel thread's is empty too.
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err == nil && runsConfig(b, cfgPath) && procAlive(pid, cfgPath) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// readPIDFile returns the pid in haproxy's pid file, or 0.
func readPIDFile(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return pid
}

// startArgs is haproxy's command line: master-worker mode in the
// foreground (the master keeps writing its alerts to haproxy.log, which a
// daemonized master would send to /dev/null), with the master CLI.
func startArgs(p paths) []string {
	return []string{"-W", "-S", p.Master + ",mode,600", "-f", p.Config, "-p", p.PID}
}

// startProcess starts a master on the configuration already written and
// waits until its worker answers on the admin socket.
func startProcess(ctx context.Context, binary string, p paths, r rendered) (*process, error) {
	for _, stray := range []string{p.Master, p.Admin, p.PID} {
		_ = os.Remove(stray)
	}
	// A start never inherits server states saved for a reload: they
	// may be from a long gone worker.
	_ = os.Remove(p.ServerState)
	rotateLog(p.Log)
	logf, err := os.OpenFile(p.Log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("haproxy log: %w", err)
	}
	defer logf.Close()
	off := logOffset(p.Log)
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, fmt.Errorf("haproxy start: %w", err)
	}
	defer devnull.Close()
	fmt.Fprintf(logf, "--- strata: starting haproxy at %s\n", time.Now().UTC().Format(time.RFC3339))
	// Its own session: the master outlives the agent (an agent restart
	// must not drop traffic) and its process group is killable as one.
	proc, err := os.StartProcess(binary, append([]string{binary}, startArgs(p)...), &os.ProcAttr{
		Dir:   p.Dir,
		Files: []*os.File{devnull, logf, logf},
		Sys:   &syscall.SysProcAttr{Setsid: true},
	})
	if err != nil {
		return nil, fmt.Errorf("haproxy start: %w", err)
	}
	pr := &process{pid: proc.Pid, os: proc}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for {
		if !procAlive(pr.pid, p.Config) {
			exit := reap(pr)
			alerts, byLB := parseAlerts(readLogSince(p.Log, off), p.Config, r)
			return nil, &loadError{Op: "start", Alerts: alerts, ByLB: byLB, Exit: exit}
		}
		if ready(ctx, p) == nil {
			return pr, nil
		}
		if err := backoff.Sleep(ctx, pollEvery); err != nil {
			// Half started is of no use: the master and its workers go
			// (its process group), and the next start begins afresh.
			_ = syscall.Kill(-pr.pid, syscall.SIGKILL)
			waitUntil(context.WithoutCancel(ctx), killWait, func() bool { return !procAlive(pr.pid, p.Config) })
			reap(pr)
			return nil, fmt.Errorf("haproxy start: not answering on %s: %w", p.Admin, err)
		}
	}
}

// ready checks that the master knows a worker and that this worker
// answers on the admin socket.
func ready(ctx context.Context, p paths) error {
	out, err := cli(ctx, p.Master, "show proc")
	if err != nil {
		return err
	}
	pi, err := parseShowProc(out)
	if err != nil {
		return err
	}
	if pi.Worker == 0 || pi.WorkerReloads != 0 {
		return errors.New("haproxy: no worker of the current configuration yet")
	}
	info, err := cli(ctx, p.Admin, "show info")
	if err != nil {
		return err
	}
	if got := parseInfoPID(info); got != pi.Worker {
		return fmt.Errorf("haproxy: admin socket answered by pid %d; want the new worker %d", got, pi.Worker)
	}
	return nil
}

// reloadProcess makes the master load the configuration already written,
// seamlessly: the new worker takes over the listening sockets and the
// old one finishes its connections. The servers' check states are saved
// first so that the new worker starts from them.
func reloadProcess(ctx context.Context, p paths, r rendered) error {
	before, err := cli(ctx, p.Master, "show proc")
	if err != nil {
		return fmt.Errorf("haproxy reload: %w", err)
	}
	pi, err := parseShowProc(before)
	if err != nil {
		return fmt.Errorf("haproxy reload: %w", err)
	}
	if state, err := cli(ctx, p.Admin, "show servers state"); err == nil {
		if err := writeFileAtomic(p.ServerState, []byte(state), 0o600); err != nil {
			return fmt.Errorf("haproxy reload: %w", err)
		}
	}
	rotateLog(p.Log)
	off := logOffset(p.Log)
	// The master closes the connection as it re-executes itself: no
	// answer is expected.
	_, _ = cli(ctx, p.Master, "reload")

	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for {
		if !procAlive(pi.MasterPID, p.Config) {
			return fmt.Errorf("haproxy reload: the master (pid %d) exited", pi.MasterPID)
		}
		out, err := cli(ctx, p.Master, "show proc")
		if err == nil {
			now, perr := parseShowProc(out)
			switch {
			case perr != nil || now.Reloads <= pi.Reloads:
				// Not re-executed yet.
			case now.Failed > pi.Failed:
				alerts, byLB := parseAlerts(readLogSince(p.Log, off), p.Config, r)
				return &loadError{Op: "reload", Alerts: alerts, ByLB: byLB}
			case ready(ctx, p) == nil:
				return nil
			}
		}
		if err := backoff.Sleep(ctx, pollEvery); err != nil {
			return fmt.Errorf("haproxy reload: no new worker: %w", err)
		}
	}
}

// stopProcess stops the master and every worker: a soft stop (workers
// finish their connections) bounded by grace, then SIGTERM, then SIGKILL
// of the process group. It returns once no process runs our config.
func stopProcess(ctx context.Context, pr *process, cfgPath string, grace time.Duration) error {
	steps := []struct {
		sig  syscall.Signal
		wait time.Duration
	}{
		{syscall.SIGUSR1, grace},
		{syscall.SIGTERM, killWait},
		{syscall.SIGKILL, killWait},
	}
	for _, s := range steps {
		if !procAlive(pr.pid, cfgPath) {
			break
		}
		if s.sig == syscall.SIGKILL {
			// The master's process group holds its workers.
			_ = syscall.Kill(-pr.pid, syscall.SIGKILL)
		}
		_ = pr.os.Signal(s.sig)
		waitUntil(ctx, s.wait, func() bool { return !procAlive(pr.pid, cfgPath) })
	}
	reap(pr)
	// Workers leave with their master; one that does not (an old worker
	// still draining) is killed.
	waitUntil(ctx, killWait, func() bool { return len(ownedProcs(cfgPath)) == 0 })
	for _, pid := range ownedProcs(cfgPath) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	waitUntil(ctx, killWait, func() bool { return len(ownedProcs(cfgPath)) == 0 })
	if left := ownedProcs(cfgPath); len(left) > 0 {
		return fmt.Errorf("haproxy stop: processes %v still run %s", left, cfgPath)
	}
	return ctx.Err()
}

// waitUntil polls cond until it holds, d passes or ctx is done.
func waitUntil(ctx context.Context, d time.Duration, cond func() bool) {
	deadline := time.Now().Add(d)
	for !cond() && time.Now().Before(deadline) {
		if backoff.Sleep(ctx, pollEvery) != nil {
			return
		}
	}
}

// reap collects a dead child's exit status, so that it does not stay a
// zombie, and releases the handle. For an adopted process (not our
// child) there is nothing to collect. It never blocks, and describes how
// the process ended when it knows.
func reap(pr *process) string {
	if pr == nil {
		return ""
	}
	var ws syscall.WaitStatus
	pid, err := syscall.Wait4(pr.pid, &ws, syscall.WNOHANG, nil)
	if pr.os != nil {
		_ = pr.os.Release()
	}
	switch {
	case err != nil || pid != pr.pid:
		return ""
	case ws.Signaled():
		return "signal " + ws.Signal().String()
	default:
		return "exit status " + strconv.Itoa(ws.ExitStatus())
	}
}

// writeFileAtomic writes a file through a rename, so that a reader (or a
// crash) never sees half of it.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
