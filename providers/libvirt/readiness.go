package libvirt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"libvirt.org/go/libvirt"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider/probe"
)

// readiness owns the answer to "is the guest of a running domain up, and
// is it well?", which makes a running replica ready. The first sign is
// the image's ready marker on the serial console after the domain's
// latest start; then the VM's probes (the ComputeSpec's startupProbe,
// readinessProbe and livenessProbe: httpGet, tcpSocket or grpc, which
// the probe engine runs from the node (the host network) to the guest's
// own address, or guestAgent, a guest-ping to the guest's qemu-ga), the one the region's IPAM gave it, as container "main".
// The probes start once the guest is up (its marker appeared) and start
// over with each start of the domain; a liveness or startup probe that
// fails has the domain restarted (unhealthy). Each result change kicks
// the watches, so that it is pushed, not found by a rescan.
type readiness struct {
	console *console
	probes  *probe.Manager
	// kick tells the watches to look at a replica.
	kick func(id string)

	mu   sync.Mutex
	runs map[string]probeRun
}

// probeRun is the domain run whose guest is being probed.
type probeRun struct {
	started time.Time
	// why is the last message of the startup or readiness probe.
	why string
}

// mainContainer is the name a VM's probes run under in the probe engine.
const mainContainer = "main"

func newReadiness(cs *console, m *probe.Manager, kick func(string)) *readiness {
	return &readiness{console: cs, probes: m, kick: kick, runs: map[string]probeRun{}}
}

// readyWindow is how much of the end of the console log is read: a
// boot's output follows its start line closely.
const readyWindow = 1 << 20

// up reports whether the guest of a running domain is up: its image
// names no ready marker, or the marker appears on the console after the
// domain's latest start (console.mark's line).
func (r *readiness) up(meta replicaMeta) bool {
	if meta.ReadyMarker == "" {
		return true
	}
	b, err := r.console.tail(meta.ID, readyWindow)
	if err != nil {
		return false
	}
	i := bytes.LastIndex(b, []byte(startLine(meta)))
	if i < 0 {
		return false
	}
	return bytes.Contains(b[i:], []byte(meta.ReadyMarker))
}

// probed makes sure the probes of a running domain whose guest is up
// run for its latest start, and reports whether they let it be ready
// (its startup probe passed, its readiness probe passes); why says what
// it waits for when not. A VM without probes is ready.
func (r *readiness) probed(meta replicaMeta) (ready bool, why string) {
	probes, err := meta.probes()
	if err != nil {
		return false, err.Error()
	}
	if probes.Empty() {
		r.stop(meta.ID)
		return true, ""
	}
	guest, err := parseAddr(meta.Address)
	if err != nil {
		return false, "probes: the VM has no guest address to probe"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	run, ok := r.runs[meta.ID]
	if ok && !run.started.Equal(meta.Started) {
		// A new start of the domain: its probes start over.
		r.probes.Remove(meta.ID, mainContainer)
		ok = false
	}
	if !ok {
		run = probeRun{started: meta.Started}
	}
	// An Add of the same probes changes nothing; new ones (a new
	// generation) start over.
	if err := r.probes.Add(meta.ID, mainContainer, probes, probe.Target{Host: guest.String(), Dial: guestDialer(guest)}); err != nil {
		delete(r.runs, meta.ID)
		return false, "probes: " + err.Error()
	}
	r.runs[meta.ID] = run
	switch {
	case r.probes.Ready(meta.ID, mainContainer):
		return true, ""
	case run.why != "":
		return false, run.why
	case !r.probes.Started(meta.ID, mainContainer):
		return false, "waiting for the startup probe"
	}
	return false, "waiting for the readiness probe"
}

// stop ends the probes of replica id: its domain is not running, or it
// is gone.
func (r *readiness) stop(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.runs[id]; ok {
		delete(r.runs, id)
		r.probes.Remove(id, mainContainer)
	}
}

// unhealthy is a liveness or startup probe that failed: the domain run
// started then is to be restarted.
type unhealthy struct {
	id      string
	started time.Time
	why     string
}

// relay reads the probe engine's result changes until it closes: each
// kicks the watches; a failed liveness or startup probe is handed to
// restart.
func (r *readiness) relay(restart func(unhealthy)) {
	for u := range r.probes.Updates() {
		if u.Container != mainContainer {
			continue
		}
		run, ok := r.note(u)
		if ok && u.Result == probe.Failure && u.Kind != api.ProbeReadiness {
			restart(unhealthy{id: u.Replica, started: run.started, why: fmt.Sprintf("Unhealthy: %s probe failed: %s", u.Kind, u.Message)})
		}
		r.kick(u.Replica)
	}
}

// note records the message of a startup or readiness result; ok is
// false when the replica is no longer probed.
func (r *readiness) note(u probe.Update) (probeRun, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	run, ok := r.runs[u.Replica]
	if !ok {
		return run, false
	}
	if u.Kind != api.ProbeLiveness {
		run.why = ""
		if u.Result == probe.Failure {
			run.why = fmt.Sprintf("%s probe failed: %s", u.Kind, u.Message)
		}
		r.runs[u.Replica] = run
	}
	return run, true
}

// guestDialer dials the guest's own address and nothing else: a probe
// runs in the node's network namespace, where a tenant's spec must not
// reach the host's services or other guests (the API refuses an
// httpGet.host for VMs; this holds even for a spec that got past it, or
// a redirect). Only TCP to an IP literal of the guest is dialed.
func guestDialer(guest netip.Addr) probe.Dialer {
	d := &net.Dialer{KeepAlive: -1}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		ap, err := netip.ParseAddrPort(addr)
		if err != nil || ap.Addr().Unmap() != guest.Unmap() || ap.Port() == 0 || (network != "tcp" && network != "tcp4" && network != "tcp6") {
			return nil, fmt.Errorf("refused to dial %s %q: a VM's probes dial its guest address %s only", network, addr, guest)
		}
		return d.DialContext(ctx, "tcp", ap.String())
	}
}

// probes are the VM's probes recorded in its metadata.
func (m replicaMeta) probes() (api.Probes, error) {
	var ps api.Probes
	if m.Probes == "" {
		return ps, nil
	}
	if err := json.Unmarshal([]byte(m.Probes), &ps); err != nil {
		return ps, fmt.Errorf("probes in the domain's metadata: %w", err)
	}
	return ps, nil
}

// probesOf is the metadata's record of a's probes (empty without any).
func probesOf(a *api.Assignment) (string, error) {
	if a.Spec.Compute == nil || a.Spec.Compute.Probes.Empty() {
		return "", nil
	}
	b, err := json.Marshal(a.Spec.Compute.Probes)
	if err != nil {
		return "", fmt.Errorf("probes: %w", err)
	}
	return string(b), nil
}

// PingGuestAgent implements probe.GuestAgent: a guest-ping to the
// domain's qemu-ga, through libvirt (which owns the channel's socket),
// bounded by ctx's deadline in whole seconds (the agent command's unit).
func (p *Provider) PingGuestAgent(ctx context.Context, id string) error {
	c, err := p.conn.connect()
	if err != nil {
		return err
	}
	dom, err := c.LookupDomainByName(domainName(id))
	if err != nil {
		return fmt.Errorf("look up domain: %s", message(err))
	}
	defer dom.Free()
	timeout := libvirt.DomainQemuAgentCommandTimeout(1)
	if dl, ok := ctx.Deadline(); ok {
		timeout = libvirt.DomainQemuAgentCommandTimeout(max(1, int(time.Until(dl).Round(time.Second).Seconds())))
	}
	if _, err := dom.QemuAgentCommand(`{"execute":"guest-ping"}`, timeout, 0); err != nil {
		return errors.New(message(err))
	}
	return nil
}
