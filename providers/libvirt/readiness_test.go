package libvirt

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider/probe"
)

func TestReadinessReadyMarker(t *testing.T) {
	cs := &console{dir: t.TempDir(), log: slog.New(slog.DiscardHandler)}
	r := &readiness{console: cs}
	started := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	meta := replicaMeta{ID: "r1", Generation: 1, Started: started, ReadyMarker: "GUEST-UP"}
	if !r.up(replicaMeta{ID: "r1"}) {
		t.Errorf("no ready marker: got not up; want up")
	}
	if r.up(meta) {
		t.Errorf("no console log yet: got up; want not up")
	}
	spec := domainSpec{ID: "r1", Type: "qemu", Console: cs.path("r1")}
	// The marker of an earlier boot does not count.
	earlier := meta
	earlier.Started = started.Add(-time.Hour)
	cs.mark(spec, earlier)
	appendFile(t, spec.Console, "GUEST-UP\n")
	cs.mark(spec, meta)
	if r.up(meta) {
		t.Errorf("marker only before the latest start: got up; want not up")
	}
	appendFile(t, spec.Console, "booting\nGUEST-UP\n")
	if !r.up(meta) {
		t.Errorf("marker after the latest start: got not up; want up")
	}
	if err := cs.remove("r1"); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if r.up(meta) {
		t.Errorf("console removed: got up; want not up")
	}
}

func appendFile(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}

// TestSecurityGuestDialer: a VM's probes dial its guest address and
// nothing else, whatever a spec names (the host's loopback, another
// guest, a name to resolve, another network).
func TestSecurityGuestDialer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	dial := guestDialer(netip.MustParseAddr("127.0.0.1"))
	c, err := dial(t.Context(), "tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatalf("dial the guest's address: %v", err)
	}
	c.Close()
	other := guestDialer(netip.MustParseAddr("10.213.7.20"))
	for _, tc := range []struct{ network, addr string }{
		{"tcp", fmt.Sprintf("127.0.0.1:%d", port)}, // the host's service
		{"tcp", "10.213.7.21:80"},                  // another guest
		{"tcp", fmt.Sprintf("localhost:%d", port)}, // a name
		{"tcp", "[::1]:80"},
		{"udp", "10.213.7.20:53"},
		{"unix", "/run/libvirt/libvirt-sock"},
		{"tcp", "10.213.7.20:0"},
	} {
		if c, err := other(t.Context(), tc.network, tc.addr); err == nil {
			c.Close()
			t.Errorf("dial %s %s from guest 10.213.7.20's probe: got a connection; want it refused", tc.network, tc.addr)
		} else if !strings.Contains(err.Error(), "refused to dial") {
			t.Errorf("dial %s %s: got %v; want refused before dialing", tc.network, tc.addr, err)
		}
	}
}

// TestReadinessProbes: a running guest with a TCP readiness probe is
// ready only while its port accepts connections; an httpGet probe
// naming another host (which the API refuses for VMs) fails rather than
// reaching it; probes stop with the replica.
func TestReadinessProbes(t *testing.T) {
	kicks := make(chan string, 64)
	r := newReadiness(&console{dir: t.TempDir(), log: slog.New(slog.DiscardHandler)},
		probe.NewManager(probe.WithTimeUnit(20*time.Millisecond)), func(id string) {
			select {
			case kicks <- id:
			default:
			}
		})
	restarts := make(chan unhealthy, 4)
	done := make(chan struct{})
	go func() { defer close(done); r.relay(func(u unhealthy) { restarts <- u }) }()
	defer func() { r.probes.Close(); <-done }()

	// A port that is free now, listened on later.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()

	one := 1
	ps := api.Probes{ReadinessProbe: &api.Probe{TCPSocket: &api.TCPSocketAction{Port: port}, PeriodSeconds: &one, FailureThreshold: &one}}
	a := &api.Assignment{ID: "r1", Spec: api.ResourceSpec{Compute: &api.ComputeSpec{Probes: ps}}}
	probes, err := probesOf(a)
	if err != nil {
		t.Fatal(err)
	}
	meta := replicaMeta{ID: "r1", Address: "127.0.0.1/24", Started: time.Now().UTC(), Probes: probes}
	waitProbed := func(want bool) string {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			ok, why := r.probed(meta)
			if ok == want {
				return why
			}
			select {
			case <-kicks:
			case <-deadline:
				t.Fatalf("probed: got %v (%s); want %v", ok, why, want)
			}
		}
	}
	waitProbed(false)
	// Bounded: still not ready after 20 periods.
	time.Sleep(400 * time.Millisecond)
	if ok, why := r.probed(meta); ok {
		t.Fatalf("nothing listens: got ready; want not ready")
	} else {
		t.Logf("not ready: %s", why)
	}
	ln, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	waitProbed(true)
	ln.Close()
	if why := waitProbed(false); !strings.Contains(why, "readiness probe failed") {
		t.Errorf("port closed: got reason %q; want the readiness probe's failure", why)
	}

	// Another host named by a spec that got past the API: refused, so
	// a liveness failure, never a check of the host's service.
	host := api.Probes{LivenessProbe: &api.Probe{HTTPGet: &api.HTTPGetAction{Port: port, Host: "127.0.0.2"}, PeriodSeconds: &one, FailureThreshold: &one}}
	a.Spec.Compute.Probes = host
	if meta.Probes, err = probesOf(a); err != nil {
		t.Fatal(err)
	}
	meta.Address = "127.0.0.1"
	r.probed(meta)
	select {
	case u := <-restarts:
		if u.id != "r1" || !u.started.Equal(meta.Started) || !strings.Contains(u.why, "refused to dial") || !strings.HasPrefix(u.why, "Unhealthy: liveness probe failed") {
			t.Errorf("restart: got %+v; want r1's run, unhealthy, the dial refused", u)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no restart for the failed liveness probe")
	}
	r.stop("r1")
	if r.probes.Started("r1", mainContainer) {
		t.Errorf("after stop: still probed")
	}
}
