package libvirt

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// The guest of the probe tests serves a port from its command (busybox
// httpd, after a pause, in the initramfs of deploy/dev/vm-image.sh): the
// line listenLine on the console says it is about to listen.
const (
	probePort  = 8080
	listenLine = "STRATA-PROBE-LISTENING"
)

// listenAfter makes a's guest serve probePort from delay after its
// marker on, saying so on its console first.
func listenAfter(a *api.Assignment, delay time.Duration) {
	a.Spec.Compute.Command = []string{"sh", "-c", fmt.Sprintf("sleep %d; mkdir -p /tmp/www; echo ok >/tmp/www/index.html; echo %s; exec httpd -f -p %d -h /tmp/www",
		int(delay.Seconds()), listenLine, probePort)}
}

func probeEvery(p api.Probe, period, failures int) *api.Probe {
	p.PeriodSeconds, p.FailureThreshold = &period, &failures
	return &p
}

// testProbes runs VMs whose probes dial the guest's address from the
// node.
func (e *qemuEnv) testProbes(t *testing.T) {
	t.Run("TCPReadiness", e.testTCPReadiness)
	t.Run("PortNeverOpens", e.testPortNeverOpens)
	t.Run("LivenessRestarts", e.testLivenessRestarts)
	t.Run("GuestAgent", e.testGuestAgent)
}

// testTCPReadiness: a VM with a TCP readiness probe on its guest address
// is provisioning, running, until its guest listens, then ready; the
// ready comes through the watch, pushed by the probe's result (the
// env's rescans are an hour apart), and never before the guest said it
// listens.
func (e *qemuEnv) testTCPReadiness(t *testing.T) {
	ch, err := e.p.Watch(t.Context())
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	a := e.vm(t, "tcpready")
	listenAfter(a, 5*time.Second)
	a.Spec.Compute.ReadinessProbe = probeEvery(api.Probe{TCPSocket: &api.TCPSocketAction{Port: probePort}}, 1, 1)
	t.Cleanup(func() { _ = e.p.Delete(context.WithoutCancel(t.Context()), &api.Assignment{ID: a.ID}, 0) })
	start := time.Now()
	st, err := e.p.Apply(t.Context(), a)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if st.Phase != api.PhaseProvision || !strings.Contains(st.Reason, "readiness probe") {
		t.Fatalf("Apply: got phase %s (%s); want provision, waiting for the readiness probe", st.Phase, st.Reason)
	}
	deadline := time.After(4 * time.Minute)
	var failing time.Duration
	seen := false
	for st.Phase != api.PhaseReady {
		select {
		case st = <-ch:
		case <-deadline:
			log, _ := os.ReadFile(e.p.console.path(a.ID))
			t.Fatalf("no ready through the watch within 4 minutes; last %s (%s); console:\n%s", st.Phase, st.Reason, log)
		}
		if st.ID != a.ID {
			continue
		}
		switch {
		case st.Phase == api.PhaseProvision || st.Phase == api.PhaseReady:
			seen = true
		case !seen && st.Phase == api.PhaseError && st.Reason == "shut off":
			// The domain's definition, looked at by a watch before
			// its start (libvirt's defined event).
		default:
			log, _ := os.ReadFile(e.p.console.path(a.ID))
			t.Fatalf("watch: got phase %s (%s); want provision, then ready; console:\n%s", st.Phase, st.Reason, log)
		}
		if failing == 0 && strings.Contains(st.Reason, "readiness probe failed") {
			failing = time.Since(start)
		}
	}
	ready := time.Since(start)
	log, _ := os.ReadFile(e.p.console.path(a.ID))
	if !strings.Contains(string(log), listenLine) {
		t.Fatalf("ready before the guest listened; console:\n%s", log)
	}
	t.Logf("Apply to the probe's first failure (guest booting) %v; to ready, through the watch, %v", failing.Round(time.Millisecond), ready.Round(time.Millisecond))
	if st, err := e.p.Status(t.Context(), a.ID); err != nil || st.Phase != api.PhaseReady || st.Restarts != 0 {
		t.Errorf("Status: got %+v, %v; want ready, no restart", st, err)
	}
	if err := e.p.Delete(t.Context(), a, 0); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if e.p.domains.ready.probes.Started(a.ID, mainContainer) {
		t.Errorf("after Delete: the replica is still probed")
	}
}

// testPortNeverOpens: a guest that is up (its marker printed) but never
// listens on its readiness probe's port stays provisioning, with the
// probe's failure as the reason, for a bounded wait of 15 periods.
func (e *qemuEnv) testPortNeverOpens(t *testing.T) {
	a := e.vm(t, "noport")
	a.Image.ReadyMarker = markerPrefix
	a.Spec.Compute.ReadinessProbe = probeEvery(api.Probe{TCPSocket: &api.TCPSocketAction{Port: probePort}}, 1, 1)
	t.Cleanup(func() { _ = e.p.Delete(context.WithoutCancel(t.Context()), &api.Assignment{ID: a.ID}, 0) })
	if _, err := e.p.Apply(t.Context(), a); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	e.waitMarker(t, a.ID, 3*time.Minute)
	eventually(t, 30*time.Second, "the readiness probe to fail", func() (bool, string) {
		st, err := e.p.Status(t.Context(), a.ID)
		if err != nil {
			return false, err.Error()
		}
		return st.Phase == api.PhaseProvision && strings.Contains(st.Reason, "readiness probe failed"), string(st.Phase) + ": " + st.Reason
	})
	until := time.Now().Add(15 * time.Second)
	var st api.AssignmentStatus
	for n := 0; time.Now().Before(until); n++ {
		var err error
		if st, err = e.p.Status(t.Context(), a.ID); err != nil {
			t.Fatalf("Status: %v", err)
		}
		if st.Phase != api.PhaseProvision || st.Restarts != 0 {
			t.Fatalf("after the guest is up, nothing listening: got phase %s (%s), %d restarts; want provision, no restart", st.Phase, st.Reason, st.Restarts)
		}
		select {
		case <-t.Context().Done():
			t.Fatal("test ended")
		case <-time.After(500 * time.Millisecond):
		}
	}
	t.Logf("still %s after 15 s: %s", st.Phase, st.Reason)
}

// testLivenessRestarts: a liveness probe that fails restarts the domain
// (a restart counted, the reason Unhealthy with the probe's message)
// without any Apply, pushed through the watch.
func (e *qemuEnv) testLivenessRestarts(t *testing.T) {
	ch, err := e.p.Watch(t.Context())
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	a := e.vm(t, "live")
	a.Spec.Compute.LivenessProbe = probeEvery(api.Probe{TCPSocket: &api.TCPSocketAction{Port: probePort}}, 1, 3)
	t.Cleanup(func() { _ = e.p.Delete(context.WithoutCancel(t.Context()), &api.Assignment{ID: a.ID}, 0) })
	start := time.Now()
	if _, err := e.p.Apply(t.Context(), a); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	deadline := time.After(time.Minute)
	for {
		var st api.AssignmentStatus
		select {
		case st = <-ch:
		case <-deadline:
			t.Fatal("no restart through the watch within a minute")
		}
		if st.ID != a.ID || st.Restarts == 0 {
			continue
		}
		if !strings.HasPrefix(st.Reason, "Unhealthy: liveness probe failed") {
			t.Fatalf("restarted: got phase %s (%s); want the reason Unhealthy with the probe's message", st.Phase, st.Reason)
		}
		t.Logf("restarted after %v: %s (%s), %d restart(s)", time.Since(start).Round(time.Millisecond), st.Phase, st.Reason, st.Restarts)
		break
	}
	b, _ := os.ReadFile(e.p.console.path(a.ID))
	if n := strings.Count(string(b), "starting domain"); n < 2 {
		t.Errorf("console: got %d start lines; want the restart's too", n)
	}
}

// agentStoppedLine is what the guest of testGuestAgent prints once it
// stopped its qemu-ga.
const agentStoppedLine = "STRATA-QGA-STOPPED"

// testGuestAgent: a VM whose readiness probe pings its QEMU guest agent
// gets the agent's channel, is ready once qemu-ga answers (started by
// the image's init on the channel), and unready again once the guest
// stops its agent, with the ping's failure as the reason.
func (e *qemuEnv) testGuestAgent(t *testing.T) {
	a := e.vm(t, "qga")
	a.Spec.Compute.Command = []string{"sh", "-c", "sleep 8; kill $(cat /run/qemu-ga.pid); echo " + agentStoppedLine + "; exec sleep 3600"}
	a.Spec.Compute.ReadinessProbe = probeEvery(api.Probe{GuestAgent: &api.GuestAgentAction{}}, 1, 1)
	t.Cleanup(func() { _ = e.p.Delete(context.WithoutCancel(t.Context()), &api.Assignment{ID: a.ID}, 0) })
	if _, err := e.p.Apply(t.Context(), a); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	console := func() string { b, _ := os.ReadFile(e.p.console.path(a.ID)); return string(b) }
	eventually(t, 3*time.Minute, "ready through the guest agent", func() (bool, string) {
		st, err := e.p.Status(t.Context(), a.ID)
		if err != nil {
			return false, err.Error()
		}
		return st.Phase == api.PhaseReady, string(st.Phase) + ": " + st.Reason
	})
	log := console()
	if !strings.Contains(log, "strata-vm: qemu guest agent on /dev/vport") {
		t.Fatalf("ready, but the guest did not say it started qemu-ga; console:\n%s", log)
	}
	if strings.Contains(log, agentStoppedLine) {
		t.Logf("the guest stopped its agent before ready was seen (a slow machine); the ready above came before it")
	}
	c, err := e.p.conn.connect()
	if err != nil {
		t.Fatal(err)
	}
	dom, err := c.LookupDomainByName(domainName(a.ID))
	if err != nil {
		t.Fatal(err)
	}
	defer dom.Free()
	if x, err := dom.GetXMLDesc(0); err != nil || !strings.Contains(x, "name='"+guestAgentChannel+"'") && !strings.Contains(x, `name="`+guestAgentChannel+`"`) {
		t.Errorf("domain XML without the guest agent's channel (%v):\n%s", err, x)
	}
	eventually(t, time.Minute, "unready once the guest stopped its agent", func() (bool, string) {
		st, err := e.p.Status(t.Context(), a.ID)
		if err != nil {
			return false, err.Error()
		}
		return st.Phase == api.PhaseProvision && strings.Contains(st.Reason, "guest agent"), string(st.Phase) + ": " + st.Reason
	})
	if !strings.Contains(console(), agentStoppedLine) {
		t.Fatalf("unready before the guest stopped its agent; console:\n%s", console())
	}
}
