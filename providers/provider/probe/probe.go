// Package probe runs a container's startup, readiness and liveness probes
// (api.Probes) on the node and reports their results, with the kubelet
// prober's semantics (pkg/kubelet/prober): one worker per replica,
// container and kind of probe; each waits the probe's initial delay, then
// checks every period with a timeout, counts consecutive successes and
// failures against the thresholds, and reports on one channel only when
// the probe's result changes. Until the startup probe passes, readiness
// and liveness do not run; a liveness or startup failure is reported
// once, and its worker holds until the caller restarts the container and
// calls Reset.
//
// Providers compose it: network checks dial through the Dialer they give
// for each target (inside a container's network namespace, or from the
// host to a VM's guest address), exec checks run through their Execer.
package probe

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// Result is what a probe says of its container.
type Result uint8

const (
	// Unknown is a probe that has not reached a threshold yet (or whose
	// container was just restarted).
	Unknown Result = iota
	Success
	Failure
)

func (r Result) String() string {
	switch r {
	case Success:
		return "success"
	case Failure:
		return "failure"
	}
	return "unknown"
}

// Update is a change of one probe's result.
type Update struct {
	Replica   string
	Container string
	Kind      api.ProbeKind
	Result    Result
	// Message says why: the last check's failure ("HTTP probe failed
	// with statuscode: 500"), or what reset the probe.
	Message string
	Time    time.Time
}

// Dialer opens a connection to a probe's target, as net.Dialer's
// DialContext does. A provider gives one per target: the containerd
// provider dials inside the replica's network namespace, the libvirt
// provider dials the guest's address from the host.
type Dialer func(ctx context.Context, network, addr string) (net.Conn, error)

// Execer runs a command inside a running container and returns its exit
// status and output (containerd: a task exec). err is for a command that
// could not be run at all; a command that ran and failed is a non-zero
// exitCode.
type Execer interface {
	Exec(ctx context.Context, replica, container string, cmd []string) (exitCode int, output []byte, err error)
}

// GuestAgent pings the guest agent of a VM (libvirt: guest-ping to
// qemu-ga over the domain's channel). err is for an agent that did not
// answer, or a VM that has none.
type GuestAgent interface {
	PingGuestAgent(ctx context.Context, replica string) error
}

// Target is where a container's network probes go.
type Target struct {
	// Host is the address a probe connects to when it names none: the
	// replica's address (a VM's guest address; for a container dialed
	// inside its namespace, 127.0.0.1 will do).
	Host string
	// Dial opens the connections; nil dials from the agent's own network
	// namespace.
	Dial Dialer
}

// ErrClosed is an Add to a closed Manager.
var ErrClosed = errors.New("probe manager closed")

// maxOutput bounds how much of a check's output (an HTTP body read, an
// exec's output in a message) is kept.
const (
	maxBody    = 10 << 10
	maxMessage = 1 << 10
)

// prober runs one check. Unknown is a check that could not be made (no
// verdict on the container): it is logged and does not count.
type prober interface {
	probe(ctx context.Context) (Result, string)
}

// clip bounds a message taken from a check's output.
func clip(b []byte) string {
	if len(b) > maxMessage {
		return string(b[:maxMessage]) + "…"
	}
	return string(b)
}
