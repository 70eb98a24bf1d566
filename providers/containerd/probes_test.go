package containerd

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
)

func intp(n int) *int { return &n }

// mainOf is the main container's status in st (zero when none).
func mainOf(st api.AssignmentStatus) api.ContainerStatus {
	for _, c := range st.Containers {
		if c.Name == api.MainContainer {
			return c
		}
	}
	return api.ContainerStatus{}
}

// nextStatus reads id's statuses off ch until ok holds for one, which it
// returns; it fails the test at the deadline.
func nextStatus(t *testing.T, ch <-chan api.AssignmentStatus, id, what string, ok func(api.AssignmentStatus) bool) api.AssignmentStatus {
	t.Helper()
	deadline := time.NewTimer(waitFor)
	defer deadline.Stop()
	var last api.AssignmentStatus
	for {
		select {
		case st, open := <-ch:
			if !open {
				t.Fatalf("%s: watch closed; last status %+v", what, last)
			}
			if st.ID != id {
				continue
			}
			last = st
			if ok(st) {
				return st
			}
		case <-deadline.C:
			t.Fatalf("%s: not seen through Watch after %v; last status: phase %s (%s), containers %+v", what, waitFor, last.Phase, last.Reason, last.Containers)
		}
	}
}

// TestReadinessProbe: an httpGet readiness probe, dialed inside the
// replica's network namespace, gates the phase: unready until the server
// answers 200, ready then, ready again once an agent restart found it,
// unready again when it answers 500; each change arrives through Watch.
func TestReadinessProbe(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(e.ctx(t))
	defer cancel()
	ch := e.watch(t, ctx)
	cgi := `#!/bin/sh
if [ -f /tmp/ok ]; then echo "Status: 200 OK"; else echo "Status: 500 Internal Server Error"; fi
echo "Content-Type: text/plain"
echo
echo hi`
	a := e.assignment("ready-"+randomSuffix(t), "sh", "-c",
		`mkdir -p /www/cgi-bin && printf '%s\n' "$CGI" > /www/cgi-bin/ok && chmod +x /www/cgi-bin/ok && touch /tmp/ok && sleep 2 && exec httpd -f -p 8080 -h /www`)
	a.Spec.Compute.Env = map[string]string{"CGI": cgi}
	a.Spec.Compute.ReadinessProbe = &api.Probe{
		HTTPGet:       &api.HTTPGetAction{Path: "/cgi-bin/ok", Port: 8080},
		PeriodSeconds: intp(1), FailureThreshold: intp(1),
	}
	st := e.apply(t, a)
	if st.Phase == api.PhaseReady {
		t.Fatalf("Apply: got phase ready before the readiness probe passed: %+v", st)
	}
	if c := mainOf(st); c.State != api.ContainerRunning || c.Ready {
		t.Errorf("Apply: main container %+v; want running, not ready", c)
	}
	st = nextStatus(t, ch, a.ID, "ready once httpd answers 200", func(st api.AssignmentStatus) bool { return st.Phase == api.PhaseReady })
	if c := mainOf(st); !c.Ready || c.State != api.ContainerRunning {
		t.Errorf("ready: main container %+v; want running and ready", c)
	}
	// An agent restarting finds the replica and probes it again: ready
	// once its probe passes anew.
	e.reopen(t, e.p.cfg)
	e.waitStatus(t, a.ID, "ready again after the agent restarted", func(st api.AssignmentStatus) bool {
		return st.Phase == api.PhaseReady && mainOf(st).Ready
	})
	ch = e.watch(t, ctx)
	code, out, err := e.p.probes.Exec(ctx, a.ID, api.MainContainer, []string{"rm", "/tmp/ok"})
	if err != nil || code != 0 {
		t.Fatalf("exec rm /tmp/ok: %d %q %v", code, out, err)
	}
	st = nextStatus(t, ch, a.ID, "unready once httpd answers 500", func(st api.AssignmentStatus) bool { return st.Phase == api.PhaseProvision })
	if c := mainOf(st); c.Ready || !strings.Contains(st.Reason, "500") {
		t.Errorf("unready: got %q, main container %+v; want not ready, the reason naming the 500", st.Reason, c)
	}
	if st, err := e.p.Status(ctx, a.ID); err != nil || st.Phase != api.PhaseProvision || st.Restarts != 0 {
		t.Errorf("Status once unready: %s %q, %d restarts, %v; want provision, no restart (readiness restarts nothing)", st.Phase, st.Reason, st.Restarts, err)
	}
}

// TestLivenessProbeRestartsWithBackoff: an exec liveness probe that
// starts failing kills and restarts the container, each restart waiting
// longer than the one before; the status says why and counts them.
func TestLivenessProbeRestartsWithBackoff(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.RestartBackoff, c.RestartBackoffMax = time.Second, 8*time.Second })
	ctx, cancel := context.WithCancel(e.ctx(t))
	defer cancel()
	ch := e.watch(t, ctx)
	a := e.assignment("live-"+randomSuffix(t), "sh", "-c", `touch /tmp/ok; sleep 1; rm /tmp/ok; exec sleep 1000`)
	a.Spec.Compute.LivenessProbe = &api.Probe{
		Exec:          &api.ExecAction{Command: []string{"test", "-f", "/tmp/ok"}},
		PeriodSeconds: intp(1), FailureThreshold: intp(1),
	}
	e.apply(t, a)
	var backoffs []string
	var waited []time.Duration
	for n := 1; n <= 2; n++ {
		st := nextStatus(t, ch, a.ID, "waiting out its back-off", func(st api.AssignmentStatus) bool {
			return mainOf(st).Reason == api.ReasonCrashLoopBackOff
		})
		c := mainOf(st)
		if c.State != api.ContainerWaiting || !strings.Contains(c.Message, "restarting failed container main") || !strings.Contains(c.Message, "liveness probe failed") || c.NextStartAt.IsZero() {
			t.Errorf("back-off %d: main container %+v; want waiting, the back-off and the probe's failure in the message, the next start's time", n, c)
		}
		backoffs = append(backoffs, c.Message[:max(strings.Index(c.Message, " restarting"), 0)])
		stopped := time.Now()
		st = nextStatus(t, ch, a.ID, "restarted", func(st api.AssignmentStatus) bool {
			return mainOf(st).State == api.ContainerRunning && mainOf(st).Restarts == n
		})
		waited = append(waited, time.Since(stopped))
		if c := mainOf(st); c.Reason != api.ReasonUnhealthy || st.Restarts != n {
			t.Errorf("restart %d: restarts %d, main container %+v; want reason Unhealthy, %d restarts", n, st.Restarts, c, n)
		}
	}
	if backoffs[0] != "back-off 1s" || backoffs[1] != "back-off 2s" {
		t.Errorf("back-offs: got %q; want back-off 1s then 2s", backoffs)
	}
	if waited[1] <= waited[0] {
		t.Errorf("restarts waited %v then %v; want the second longer", waited[0], waited[1])
	}
}
