package haproxy_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/user"
	"strconv"
	"strings"
	"testing"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/hostpolicy"
	"github.com/stratahq/strata/providers/haproxy"
	"github.com/stratahq/strata/testkit/testenv/ports"
)

// TestSecurityLoadbalancer replays the load balancer attacks of a
// review: a listener on every address of the node (0.0.0.0) although
// the operator bound load balancers to one, on a host service's port, on
// the agent's own port, on a privileged port; and checks that haproxy's
// workers do not run as root.
func TestSecurityLoadbalancer(t *testing.T) {
	requireHAProxy(t)
	// A host service, which a listener on its port would take over if
	// it bound with SO_REUSEPORT as the same user.
	hostSvc, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hostSvc.Close()
	svcPort := hostSvc.Addr().(*net.TCPAddr).Port
	agentPort := ports.Get(t)
	allowed := ports.Get(t)

	cfg := testConfig(t.TempDir())
	// Everything but the host service's port; the privileged ports are
	// listed, but not allowed.
	cfg.Ports = fmt.Sprintf("1-%d,%d-65535", svcPort-1, svcPort+1)
	p, err := haproxy.New(t.Context(), cfg, haproxy.WithLogger(testLogger(t)), haproxy.WithNode("node-1"),
		haproxy.WithReservedPorts(hostpolicy.MustParsePorts(strconv.Itoa(agentPort))))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { shutdown(t, p) })

	b := newBackend(t, "web-1")
	tests := []struct {
		name     string
		listener api.Listener
		want     string
	}{
		{"every address", api.Listener{Port: allowed, Address: "0.0.0.0"}, "listeners[0].address: 0.0.0.0 is not an address this node binds load balancers to (127.0.0.1)"},
		{"another address", api.Listener{Port: allowed, Address: "127.0.0.2"}, "listeners[0].address: 127.0.0.2 is not an address"},
		{"a host service's port", api.Listener{Port: svcPort}, fmt.Sprintf("listeners[0].port: port %d is outside this node's allowed ports", svcPort)},
		{"the agent's port", api.Listener{Port: agentPort}, fmt.Sprintf("listeners[0].port: port %d is reserved for this node's own services", agentPort)},
		{"a privileged port", api.Listener{Port: 80}, "listeners[0].port: port 80 is privileged"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := lbAssignment(fmt.Sprintf("lb-attack-%d", i), 1, []api.Listener{tt.listener}, endpoints(b))
			st := apply(t, p, a)
			if st.Phase != api.PhaseError || !strings.Contains(st.Reason, tt.want) {
				t.Errorf("Apply: got %s (%s); want error with %q", st.Phase, st.Reason, tt.want)
			}
		})
	}
	// The host service keeps its port: a connection reaches it.
	go func() {
		if c, err := hostSvc.Accept(); err == nil {
			c.Write([]byte("host service"))
			c.Close()
		}
	}()
	c, err := net.Dial("tcp", hostSvc.Addr().String())
	if err != nil {
		t.Fatalf("dial the host service: %v", err)
	}
	got, _ := io.ReadAll(c)
	c.Close()
	if string(got) != "host service" {
		t.Errorf("the host service's port answered %q; want the host service", got)
	}

	// An allowed listener works, served by workers that are not root.
	a := lbAssignment("lb-ok", 1, httpListener(allowed), endpoints(b))
	apply(t, p, a)
	waitReady(t, p, a, "web-1")
	u, err := user.Lookup(haproxy.DefaultUser)
	if err != nil {
		t.Fatalf("user %s: %v", haproxy.DefaultUser, err)
	}
	workers := 0
	for _, pid := range haproxyProcs(t, p.StateDir()+"/haproxy.cfg") {
		if pid == p.MasterPID() {
			continue // the master keeps root, to bind and reload
		}
		uid := procUID(t, pid)
		workers++
		if uid != u.Uid {
			t.Errorf("worker %d runs as uid %s; want %s (%s)", pid, uid, u.Uid, u.Username)
		}
	}
	if workers == 0 {
		t.Errorf("no haproxy worker found besides the master %d", p.MasterPID())
	}
}

// haproxyProcs lists the pids whose command line runs cfg.
func haproxyProcs(t *testing.T, cfg string) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(b, []byte("\x00-f\x00"+cfg+"\x00")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// procUID is the real uid of pid.
func procUID(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
			return f[1]
		}
	}
	t.Fatalf("no Uid in /proc/%d/status", pid)
	return ""
}
