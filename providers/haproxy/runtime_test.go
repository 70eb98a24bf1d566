package haproxy

import (
	"bufio"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// fakeAdmin is an admin socket that answers the runtime API's commands
// from a table and records them in order.
type fakeAdmin struct {
	mu      sync.Mutex
	cmds    []string
	answers func(cmd string) string
}

// serve listens on a socket of its own (short: a unix socket path has a
// length limit a t.TempDir may exceed) until the test ends.
func (f *fakeAdmin) serve(t *testing.T) runtimeAPI {
	t.Helper()
	dir, err := os.MkdirTemp("", "ha-rt-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "admin.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			line, _ := bufio.NewReader(conn).ReadString('\n')
			cmd := strings.TrimSuffix(line, "\n")
			f.mu.Lock()
			f.cmds = append(f.cmds, cmd)
			f.mu.Unlock()
			_, _ = conn.Write([]byte(f.answers(cmd)))
			conn.Close()
		}
	}()
	return runtimeAPI{socket: socket, log: slog.New(slog.DiscardHandler)}
}

func (f *fakeAdmin) sent() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.cmds)
}

func TestRuntimeAPISyncServers(t *testing.T) {
	state := "1\n# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight srv_iweight srv_time_since_last_change srv_check_status srv_check_result srv_check_health srv_check_state srv_agent_state bk_f_forced_id srv_f_forced_id srv_fqdn srv_port srvrecord\n" +
		"3 be.lb1.80 1 keep 10.0.0.1 2 0 1 1 15 6 3 4 6 0 0 0 - 80 -\n" +
		"3 be.lb1.80 2 maint 10.0.0.2 2 1 1 1 15 6 3 4 6 0 0 0 - 80 -\n" +
		"3 be.lb1.80 3 old 10.0.0.3 2 0 1 1 15 6 3 4 6 0 0 0 - 80 -\n"
	f := &fakeAdmin{answers: func(cmd string) string {
		switch {
		case cmd == "show servers state":
			return state
		case cmd == "show stat":
			return "# pxname,svname,scur,status\nbe.lb1.80,old,0,UP\n"
		case strings.HasPrefix(cmd, "add server"):
			return "New server registered.\n"
		case strings.HasPrefix(cmd, "del server"):
			return "Server deleted.\n"
		}
		return "\n"
	}}
	rt := f.serve(t)
	check := checkSpec{Interval: 2 * time.Second, Rise: 2, Fall: 3}
	r := rendered{Backends: []backendSpec{{Name: "be.lb1.80", Check: check, Servers: []serverSpec{
		{Name: "keep", Addr: netip.MustParseAddr("10.0.0.1"), Port: 80},
		{Name: "maint", Addr: netip.MustParseAddr("10.0.0.2"), Port: 80},
		{Name: "new", Addr: netip.MustParseAddr("10.0.0.4"), Port: 80},
	}}}}
	if err := rt.syncServers(t.Context(), r); err != nil {
		t.Fatalf("syncServers: %v", err)
	}
	want := []string{
		"show servers state",
		"set server be.lb1.80/maint state ready",
		"add server be.lb1.80/new 10.0.0.4:80 " + check.serverArgs(),
		"enable health be.lb1.80/new",
		"enable server be.lb1.80/new",
		"set server be.lb1.80/old state drain",
		"show stat",
		"set server be.lb1.80/old state maint",
		"shutdown sessions server be.lb1.80/old",
		"del server be.lb1.80/old",
	}
	if got := f.sent(); !slices.Equal(got, want) {
		t.Errorf("commands:\ngot  %q\nwant %q", got, want)
	}
}

func TestRuntimeAPIDelServersGoneAlready(t *testing.T) {
	f := &fakeAdmin{answers: func(cmd string) string {
		if strings.HasPrefix(cmd, "set server be.x/gone") {
			return "No such server.\n"
		}
		return "\n"
	}}
	rt := f.serve(t)
	if err := rt.delServers(t.Context(), []string{"be.x/gone"}); err != nil {
		t.Errorf("delServers of a server gone already: got %v; want nil", err)
	}
	// Nothing left to drain, maintain or delete.
	if got := f.sent(); slices.ContainsFunc(got, func(c string) bool { return strings.HasPrefix(c, "del server") }) {
		t.Errorf("commands: got %q; want no deletion of a server gone already", got)
	}
}

func TestRuntimeAPIStat(t *testing.T) {
	f := &fakeAdmin{answers: func(string) string { return "Unknown command\n" }}
	rt := f.serve(t)
	if _, err := rt.stat(t.Context()); err == nil {
		t.Errorf("stat of an error answer: got nil; want an error")
	}
	if n := rt.sessions(t.Context(), []string{"be/x"}); n != 0 {
		t.Errorf("sessions without an answer: got %d; want 0", n)
	}
}

// showStat is a "show stat" of haproxy 2.6 captured with the two
// frontends of load balancer lb1: http on 18080, which had served 3
// requests and held a 4th connection with a request half sent, and tcp
// on 18081, which had accepted 3 connections and held one open.
func showStat(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "show_stat.csv"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseStatFrontendCounters(t *testing.T) {
	s, err := parseStat(showStat(t))
	if err != nil {
		t.Fatalf("parseStat: %v", err)
	}
	want := map[string]frontendStat{
		"fe.lb1.18080": {Status: "OPEN", Mode: "http", Sessions: 1, Connections: 4, Requests: 3},
		"fe.lb1.18081": {Status: "OPEN", Mode: "tcp", Sessions: 1, Connections: 3},
	}
	if len(s.Frontends) != len(want) {
		t.Errorf("frontends: got %+v; want %+v", s.Frontends, want)
	}
	for name, w := range want {
		if got := s.Frontends[name]; got != w {
			t.Errorf("frontend %s: got %+v; want %+v", name, got, w)
		}
	}
	if got := s.Servers["be.lb1.18081"]["web-1-abcd1234"]; got.Status != "UP" || got.Sessions != 1 {
		t.Errorf("server of be.lb1.18081: got %+v; want UP with the open connection", got)
	}
}

// TestUsageOfShowStat reads the captured "show stat" through a fake
// admin socket: the load balancer's requests are its http frontend's
// requests plus its tcp frontend's connections, its sessions those open
// on both; a load balancer haproxy does not run is left out.
func TestUsageOfShowStat(t *testing.T) {
	stat := showStat(t)
	f := &fakeAdmin{answers: func(cmd string) string {
		if cmd == "show stat" {
			return stat
		}
		return "Unknown command\n"
	}}
	listeners := []listenerSpec{{Port: 18080, Mode: "http"}, {Port: 18081, Mode: "tcp"}}
	p := &Provider{admin: f.serve(t), proc: &process{}, lbs: map[string]*lb{
		"lb1":     {state: lbState{ID: "lb1"}, res: resolved{ID: "lb1", Listeners: listeners}},
		"pending": {state: lbState{ID: "pending"}, res: resolved{ID: "pending", Listeners: listeners[:1]}},
		"invalid": {state: lbState{ID: "invalid", Error: "invalid load balancer: no listener"}},
	}}
	got, err := p.Usage(t.Context())
	if err != nil {
		t.Fatalf("Usage: %v", err)
	}
	want := map[string]api.Usage{"lb1": {Requests: 3 + 3, Sessions: 2}}
	if len(got) != len(want) || got["lb1"] != want["lb1"] {
		t.Errorf("Usage: got %+v; want %+v", got, want)
	}

	// An admin socket that does not answer with statistics fails the
	// call while haproxy runs, once no recent snapshot stands in;
	// without haproxy there is nothing to measure.
	p.admin = (&fakeAdmin{answers: func(string) string { return "Unknown command\n" }}).serve(t)
	if got, err := p.Usage(t.Context()); err != nil || got["lb1"] != want["lb1"] {
		t.Errorf("Usage from the recent snapshot: got %+v, %v; want %+v", got, err, want)
	}
	p.snapshot.At = time.Now().Add(-statsMaxAge)
	if got, err := p.Usage(t.Context()); err == nil {
		t.Errorf("Usage without statistics: got %+v; want an error", got)
	}
	p.proc = nil
	if got, err := p.Usage(t.Context()); err != nil || len(got) != 0 {
		t.Errorf("Usage without haproxy: got %+v, %v; want none, nil", got, err)
	}
}
