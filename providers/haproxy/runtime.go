package haproxy

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stratahq/strata/internal/backoff"
)

// cliTimeout bounds one command on a CLI socket when ctx has no earlier
// deadline: haproxy answers in microseconds, so a silent socket means a
// stuck or dying process.
const cliTimeout = 5 * time.Second

// cli sends one command to an haproxy CLI socket (the worker's admin
// socket or the master socket) and returns the whole answer. The write
// side is closed after the command, as socat does: the master CLI only
// answers a client that is done talking.
func cli(ctx context.Context, socket, cmd string) (string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return "", fmt.Errorf("haproxy cli %s: %w", cmd, err)
	}
	defer conn.Close()
	deadline := time.Now().Add(cliTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := conn.SetDeadline(deadline); err != nil {
		return "", fmt.Errorf("haproxy cli %s: %w", cmd, err)
	}
	// A command cancelled mid-way unblocks at once.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := io.WriteString(conn, cmd+"\n"); err != nil {
		return "", fmt.Errorf("haproxy cli %s: %w", cmd, err)
	}
	if uc, ok := conn.(*net.UnixConn); ok {
		_ = uc.CloseWrite()
	}
	out, err := io.ReadAll(conn)
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return string(out), fmt.Errorf("haproxy cli %s: %w", cmd, err)
	}
	return string(out), nil
}

// errCommand is an answer of the runtime API that reports a failure.
type errCommand struct {
	Cmd    string
	Answer string
}

func (e *errCommand) Error() string {
	return fmt.Sprintf("haproxy: %s: %s", e.Cmd, strings.TrimSpace(e.Answer))
}

// runCommand runs a state-changing runtime command on the admin socket.
// haproxy answers such commands with nothing, or with a fixed sentence
// on success (want); anything else is its error message.
func runCommand(ctx context.Context, socket, cmd, want string) error {
	out, err := cli(ctx, socket, cmd)
	if err != nil {
		return err
	}
	got := strings.TrimSpace(out)
	if got == want || (want != "" && strings.HasPrefix(got, want)) {
		return nil
	}
	return &errCommand{Cmd: cmd, Answer: got}
}

// stats is a snapshot of "show stat": frontends by name, and servers by
// backend and name.
type stats struct {
	Frontends map[string]frontendStat
	Servers   map[string]map[string]serverStat
	At        time.Time
}

// anyPaused reports whether haproxy holds a frontend paused (a reload in
// progress, or one that failed and is being undone).
func (s stats) anyPaused() bool {
	for _, fe := range s.Frontends {
		if fe.Status == "PAUSED" {
			return true
		}
	}
	return false
}

// frontendStat is a frontend's line of "show stat". The counters are
// the worker's: they start from zero with each worker (a reload, a
// restart).
type frontendStat struct {
	Status string
	// Mode is tcp or http ("" from an haproxy without the column).
	Mode string
	// Sessions is scur: the connections open now.
	Sessions int
	// Connections is stot, the connections accepted; Requests is
	// req_tot, the HTTP requests served (http frontends only).
	Connections int
	Requests    int
}

// serverStat is a server's line of "show stat".
type serverStat struct {
	Status string
	// Sessions is scur: requests in flight (HTTP) or open connections
	// (TCP) on the server.
	Sessions int
}

// parseStat reads the CSV of "show stat".
func parseStat(out string) (stats, error) {
	s := stats{Frontends: map[string]frontendStat{}, Servers: map[string]map[string]serverStat{}}
	out = strings.TrimPrefix(strings.TrimLeft(out, "\n"), "# ")
	r := csv.NewReader(strings.NewReader(out))
	r.FieldsPerRecord = -1
	header, err := r.Read()
	if err != nil {
		return s, fmt.Errorf("show stat: no header: %w", err)
	}
	col := map[string]int{}
	for i, h := range header {
		col[h] = i
	}
	if _, ok := col["status"]; !ok || len(header) < 3 {
		return s, fmt.Errorf("show stat: unexpected header %q", strings.Join(header, ","))
	}
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return s, nil
		}
		if err != nil {
			return s, fmt.Errorf("show stat: %w", err)
		}
		s.add(col, rec)
	}
}

// add adds record rec of "show stat" (columns col) to s: a frontend's
// status and counters, or a server's status and sessions; backends' own
// lines say nothing more.
func (s *stats) add(col map[string]int, rec []string) {
	px, sv, st := col["pxname"], col["svname"], col["status"]
	if len(rec) <= st || len(rec) <= px || len(rec) <= sv {
		return
	}
	switch rec[sv] {
	case "FRONTEND":
		s.Frontends[rec[px]] = frontendStat{
			Status:      rec[st],
			Mode:        field(col, rec, "mode"),
			Sessions:    intField(col, rec, "scur"),
			Connections: intField(col, rec, "stot"),
			Requests:    intField(col, rec, "req_tot"),
		}
	case "BACKEND":
	default:
		if s.Servers[rec[px]] == nil {
			s.Servers[rec[px]] = map[string]serverStat{}
		}
		s.Servers[rec[px]][rec[sv]] = serverStat{Status: rec[st], Sessions: intField(col, rec, "scur")}
	}
}

// field is column name of record rec ("" when absent).
func field(col map[string]int, rec []string, name string) string {
	if i, ok := col[name]; ok && i < len(rec) {
		return rec[i]
	}
	return ""
}

// intField is column name of record rec as a number (0 when absent or
// empty, as haproxy leaves the columns that do not apply).
func intField(col map[string]int, rec []string, name string) int {
	n, _ := strconv.Atoi(field(col, rec, name))
	return n
}

// health maps a server status of "show stat" to a BackendStatus health.
// A server going down ("UP 1/2") still takes traffic, so it is up; one
// coming back ("DOWN 1/2") does not yet.
func health(status string) string {
	switch {
	case status == "no check", strings.HasPrefix(status, "UP"):
		return "up"
	case strings.HasPrefix(status, "MAINT"), strings.HasPrefix(status, "DRAIN"):
		return "maint"
	default:
		return "down"
	}
}

// runtimeServer is a server of "show servers state".
type runtimeServer struct {
	Backend string
	Name    string
	Addr    string
	Port    int
	Admin   int // srv_admin_state, a mask; 0x01 is forced maintenance
}

// adminForcedMaint is SRV_ADMF_FMAINT: put in maintenance by the CLI.
const adminForcedMaint = 0x01

// parseServersState reads "show servers state" (format version 1).
func parseServersState(out string) ([]runtimeServer, error) {
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	var col map[string]int
	var servers []runtimeServer
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line == "1":
			continue
		case strings.HasPrefix(line, "#"):
			fields := strings.Fields(strings.TrimPrefix(line, "#"))
			col = map[string]int{}
			for i, f := range fields {
				col[f] = i
			}
			continue
		}
		if col == nil {
			return nil, fmt.Errorf("show servers state: data before the header: %q", line)
		}
		f := strings.Fields(line)
		get := func(name string) string {
			i, ok := col[name]
			if !ok || i >= len(f) {
				return ""
			}
			return f[i]
		}
		port, _ := strconv.Atoi(get("srv_port"))
		admin, _ := strconv.Atoi(get("srv_admin_state"))
		servers = append(servers, runtimeServer{
			Backend: get("be_name"),
			Name:    get("srv_name"),
			Addr:    get("srv_addr"),
			Port:    port,
			Admin:   admin,
		})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("show servers state: %w", err)
	}
	return servers, nil
}

// procInfo is what "show proc" on the master socket says.
type procInfo struct {
	MasterPID int
	Reloads   int
	Failed    int
	// Worker is the newest worker, and WorkerReloads the reloads it
	// survived: 0 for the worker of the current configuration, more
	// while a reload has not forked its new worker yet.
	Worker        int
	WorkerReloads int
}

// parseShowProc reads the master CLI's "show proc":
//
//	#<PID>          <type>          <reloads>       <uptime>        <version>
//	1162            master          5 [failed: 0]   0d00h02m07s     2.6.12
//	# workers
//	1271            worker          0               0d00h00m00s     2.6.12
func parseShowProc(out string) (procInfo, error) {
	var pi procInfo
	newest := -1
	for line := range strings.SplitSeq(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || strings.HasPrefix(f[0], "#") {
			continue
		}
		pid, err := strconv.Atoi(f[0])
		if err != nil {
			continue
		}
		reloads, _ := strconv.Atoi(f[2])
		switch f[1] {
		case "master":
			pi.MasterPID, pi.Reloads = pid, reloads
			if len(f) >= 5 && f[3] == "[failed:" {
				pi.Failed, _ = strconv.Atoi(strings.TrimSuffix(f[4], "]"))
			}
		case "worker":
			if newest < 0 || reloads < newest {
				pi.Worker, pi.WorkerReloads, newest = pid, reloads, reloads
			}
		}
	}
	if pi.MasterPID == 0 {
		return pi, fmt.Errorf("show proc: no master in %q", strings.TrimSpace(out))
	}
	return pi, nil
}

// parseInfoPID returns the Pid line of "show info".
func parseInfoPID(out string) int {
	for line := range strings.SplitSeq(out, "\n") {
		if v, ok := strings.CutPrefix(line, "Pid: "); ok {
			pid, _ := strconv.Atoi(strings.TrimSpace(v))
			return pid
		}
	}
	return 0
}

// runtimeAPI is the client of the worker's admin socket (the runtime
// API): it owns the commands that read a running haproxy's statistics
// and change its servers without a reload. It holds no state of its
// own; what haproxy runs is the answer.
type runtimeAPI struct {
	socket string
	log    *slog.Logger
}

// stat asks for "show stat", parsed.
func (rt runtimeAPI) stat(ctx context.Context) (stats, error) {
	out, err := cli(ctx, rt.socket, "show stat")
	if err != nil {
		return stats{}, err
	}
	return parseStat(out)
}

// resumeWait bounds how long a converge waits for haproxy to resume the
// frontends a failed reload paused.
const resumeWait = 10 * time.Second

// waitResumed waits, within resumeWait, until no frontend is paused:
// while a reload that haproxy refused was tried, the running worker
// paused every listener, and it resumes them only once the new process
// has failed. The load balancers that were not refused are served again
// when the converge ends, not some time after.
func (rt runtimeAPI) waitResumed(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, resumeWait)
	defer cancel()
	for {
		// Asked afresh: a cached snapshot may be from before the reload.
		if snap, err := rt.stat(ctx); err == nil && !snap.anyPaused() {
			return
		}
		if backoff.Sleep(ctx, 50*time.Millisecond) != nil {
			rt.log.Warn("haproxy has not resumed its listeners after a refused reload", "within", resumeWait)
			return
		}
	}
}

// syncServers makes each backend's servers match its endpoints through
// the runtime API: no reload, so no connection is disturbed but those of
// removed servers.
func (rt runtimeAPI) syncServers(ctx context.Context, r rendered) error {
	out, err := cli(ctx, rt.socket, "show servers state")
	if err != nil {
		return fmt.Errorf("haproxy: %w", err)
	}
	servers, err := parseServersState(out)
	if err != nil {
		return fmt.Errorf("haproxy: %w", err)
	}
	have := map[string]map[string]runtimeServer{}
	for _, s := range servers {
		if have[s.Backend] == nil {
			have[s.Backend] = map[string]runtimeServer{}
		}
		have[s.Backend][s.Name] = s
	}
	var errs []error
	var gone []string
	for _, be := range r.Backends {
		want := map[string]bool{}
		for _, s := range be.Servers {
			want[s.Name] = true
		}
		for name := range have[be.Name] {
			if !want[name] {
				gone = append(gone, be.Name+"/"+name)
			}
		}
		for _, s := range be.Servers {
			cur, ok := have[be.Name][s.Name]
			switch {
			case !ok:
				errs = append(errs, rt.addServer(ctx, be, s))
			case cur.Admin&adminForcedMaint != 0:
				// Left in maintenance by a removal that did not finish,
				// and wanted again.
				errs = append(errs, runCommand(ctx, rt.socket, "set server "+be.Name+"/"+s.Name+" state ready", ""))
			}
		}
	}
	slices.Sort(gone)
	errs = append(errs, rt.delServers(ctx, gone))
	return errors.Join(errs...)
}

// addServer adds a dynamic server. haproxy creates it in maintenance with
// its checks off; both are turned on.
func (rt runtimeAPI) addServer(ctx context.Context, be backendSpec, s serverSpec) error {
	id := be.Name + "/" + s.Name
	cmds := []struct{ cmd, want string }{
		{fmt.Sprintf("add server %s %s %s", id, s.addrPort(), be.Check.serverArgs()), "New server registered."},
		{"enable health " + id, ""},
		{"enable server " + id, ""},
	}
	for _, c := range cmds {
		if err := runCommand(ctx, rt.socket, c.cmd, c.want); err != nil {
			return err
		}
	}
	rt.log.Debug("server added", "server", id, "addr", s.addrPort())
	return nil
}

// drainTimeout bounds how long removed servers may finish the requests
// they are serving before their sessions are shut.
const drainTimeout = 2 * time.Second

// delServers removes servers ("backend/server"). haproxy deletes only a
// server in maintenance without connections, so each is drained first
// (no new traffic; requests in flight finish, for up to drainTimeout, all
// servers at once), then put in maintenance (no checks) with its
// remaining sessions shut, then deleted. A deletion that still fails
// (idle connections not yet purged) leaves the server in maintenance,
// where it takes no traffic; the next converge retries.
func (rt runtimeAPI) delServers(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	var errs []error
	// run runs one command; a server already gone is done with.
	run := func(cmd, want string) bool {
		err := runCommand(ctx, rt.socket, cmd, want)
		var ce *errCommand
		if errors.As(err, &ce) && strings.Contains(ce.Answer, "No such server") {
			return false
		}
		if err != nil {
			errs = append(errs, err)
			return false
		}
		return true
	}
	var draining []string
	for _, id := range ids {
		if run("set server "+id+" state drain", "") {
			draining = append(draining, id)
		}
	}
	deadline := time.Now().Add(drainTimeout)
	for time.Now().Before(deadline) && rt.sessions(ctx, draining) > 0 {
		if backoff.Sleep(ctx, 50*time.Millisecond) != nil {
			break
		}
	}
	for _, id := range draining {
		if run("set server "+id+" state maint", "") &&
			run("shutdown sessions server "+id, "") &&
			run("del server "+id, "Server deleted.") {
			rt.log.Debug("server deleted", "server", id)
		}
	}
	return errors.Join(errs...)
}

// sessions counts the sessions of servers ("backend/server").
func (rt runtimeAPI) sessions(ctx context.Context, ids []string) int {
	s, err := rt.stat(ctx)
	if err != nil {
		return 0
	}
	n := 0
	for _, id := range ids {
		be, srv, _ := strings.Cut(id, "/")
		n += s.Servers[be][srv].Sessions
	}
	return n
}
