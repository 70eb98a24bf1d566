package libvirt

import (
	"fmt"
	"strconv"
	"time"

	"libvirt.org/go/libvirt"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
)

// status maps the domain's state to a phase: running is ready;
// shut off and crashed are errors whose reason is libvirt's reason.
//
// A domain undefined after dom was looked up (a Delete racing a Status or
// a watcher's look) is ErrNotFound, not a replica in error: reporting it
// as "domain state: Domain not found" would tell a watcher that a replica
// being deleted failed, just before telling it that it is gone.
func (d *domains) status(dom *libvirt.Domain, meta replicaMeta) (api.AssignmentStatus, error) {
	st := api.AssignmentStatus{
		ID:                 meta.ID,
		Node:               d.node,
		ObservedGeneration: meta.Generation,
		Address:            meta.Address,
		Restarts:           meta.Restarts,
		UpdatedAt:          time.Now(),
	}
	if uuid, err := dom.GetUUIDString(); err == nil {
		st.ProviderID = uuid
	}
	state, reason, err := dom.GetState()
	if hasCode(err, libvirt.ERR_NO_DOMAIN) {
		return api.AssignmentStatus{}, fmt.Errorf("replica %q: domain undefined: %w", meta.ID, provider.ErrNotFound)
	}
	if err != nil {
		return d.phases.observe(st, api.PhaseError, "domain state: "+message(err)), nil
	}
	if state != libvirt.DOMAIN_RUNNING && state != libvirt.DOMAIN_BLOCKED {
		d.ready.stop(meta.ID)
	}
	switch state {
	case libvirt.DOMAIN_RUNNING, libvirt.DOMAIN_BLOCKED:
		return d.running(st, meta), nil
	case libvirt.DOMAIN_PAUSED:
		if libvirt.DomainPausedReason(reason) == libvirt.DOMAIN_PAUSED_STARTING_UP {
			return d.provision(st, meta, "starting"), nil
		}
		return d.phases.observe(st, api.PhaseError, "paused: "+pausedReason(libvirt.DomainPausedReason(reason))), nil
	case libvirt.DOMAIN_SHUTDOWN:
		return d.shuttingDown(st, meta), nil
	case libvirt.DOMAIN_SHUTOFF:
		return d.shutOff(st, meta, libvirt.DomainShutoffReason(reason)), nil
	case libvirt.DOMAIN_CRASHED:
		return d.phases.observe(st, api.PhaseError, "crashed"), nil
	case libvirt.DOMAIN_PMSUSPENDED:
		return d.phases.observe(st, api.PhaseError, "suspended by the guest"), nil
	default:
		return d.phases.observe(st, api.PhaseProvision, "no state yet"), nil
	}
}

// running is the status of a running domain: ready once its guest is
// up (its ready marker, if any, printed after the latest start) and its
// probes let it be (readiness.probed); until then it is provisioning,
// which is the phase of a replica started but not ready.
func (d *domains) running(st api.AssignmentStatus, meta replicaMeta) api.AssignmentStatus {
	why := ""
	if !d.ready.up(meta) {
		why = "booting: waiting for the guest to print " + strconv.Quote(meta.ReadyMarker)
	} else if ok, probeWhy := d.ready.probed(meta); !ok {
		why = probeWhy
	}
	if why == "" {
		st.Phase, st.Since = api.PhaseReady, meta.Started
		d.phases.forget(meta.ID)
		return st
	}
	return d.provision(st, meta, why)
}

// provision is the status of a domain started but not ready, for why.
// After a restart for a failed liveness probe, the reason says so until
// the domain is ready.
func (d *domains) provision(st api.AssignmentStatus, meta replicaMeta, why string) api.AssignmentStatus {
	if meta.Unhealthy != "" {
		why = meta.Unhealthy + "; restarted, " + why
	}
	return d.phases.observe(st, api.PhaseProvision, why)
}

// restartWindow is how long a domain destroyed for a failed probe
// counts as being restarted (domains.restart starts it again at once).
const restartWindow = time.Minute

// restarting reports whether a shut-off domain is between the destroy
// and the start of a restart for a failed probe: a watch looking then
// sees it starting, not failed.
func restarting(meta replicaMeta, r libvirt.DomainShutoffReason) bool {
	return r == libvirt.DOMAIN_SHUTOFF_DESTROYED && meta.Unhealthy != "" && meta.Error == "" && time.Since(meta.Started) < restartWindow
}

// shuttingDown is the status of a domain shutting down. A guest that
// runs to completion powers off after writing its exit code: that is
// the exit, reported at once (the domain is off a moment later); before
// the code is written, it is not a failure yet.
func (d *domains) shuttingDown(st api.AssignmentStatus, meta replicaMeta) api.AssignmentStatus {
	if !meta.RunsToEnd {
		return d.phases.observe(st, api.PhaseError, "shutting down")
	}
	if code, ok := d.drives.exited(meta); ok {
		st.ExitCode = &code
		return d.phases.observe(st, api.PhaseError, fmt.Sprintf("exited with code %d", code))
	}
	return d.phases.observe(st, api.PhaseProvision, "powering off")
}

func shutoffReason(r libvirt.DomainShutoffReason) string {
	switch r {
	case libvirt.DOMAIN_SHUTOFF_SHUTDOWN:
		return "shut down by the guest"
	case libvirt.DOMAIN_SHUTOFF_DESTROYED:
		return "destroyed"
	case libvirt.DOMAIN_SHUTOFF_CRASHED:
		return "crashed"
	case libvirt.DOMAIN_SHUTOFF_MIGRATED:
		return "migrated away"
	case libvirt.DOMAIN_SHUTOFF_SAVED:
		return "saved"
	case libvirt.DOMAIN_SHUTOFF_FAILED:
		return "failed to start"
	case libvirt.DOMAIN_SHUTOFF_FROM_SNAPSHOT:
		return "reverted to a snapshot"
	case libvirt.DOMAIN_SHUTOFF_DAEMON:
		return "stopped while libvirtd was down"
	default:
		return "shut off"
	}
}

func pausedReason(r libvirt.DomainPausedReason) string {
	switch r {
	case libvirt.DOMAIN_PAUSED_USER:
		return "by a user"
	case libvirt.DOMAIN_PAUSED_IOERROR:
		return "disk I/O error"
	case libvirt.DOMAIN_PAUSED_CRASHED:
		return "crashed"
	case libvirt.DOMAIN_PAUSED_WATCHDOG:
		return "watchdog fired"
	case libvirt.DOMAIN_PAUSED_SHUTTING_DOWN:
		return "shutting down"
	default:
		return fmt.Sprintf("reason %d", r)
	}
}

// shutOff is the status of a domain that is shut off: starting again
// (a probe's restart between its destroy and its start), or failed, with
// its exit code when the guest wrote one.
func (d *domains) shutOff(st api.AssignmentStatus, meta replicaMeta, reason libvirt.DomainShutoffReason) api.AssignmentStatus {
	if restarting(meta, reason) {
		return d.provision(st, meta, "starting")
	}
	why := shutoffReason(reason)
	if meta.Error != "" {
		why = meta.Error
	}
	if code, ok := d.drives.exited(meta); ok {
		st.ExitCode = &code
		why = fmt.Sprintf("exited with code %d", code)
	}
	return d.phases.observe(st, api.PhaseError, why)
}
