package libvirt

import "bytes"

// readiness owns the answer to "is the guest of a running domain up?",
// which makes a running replica ready. Today the only sign is the
// image's ready marker on the serial console after the domain's latest
// start; probes of the guest's address (TCP, HTTP, gRPC) belong here
// too, beside it.
type readiness struct {
	console *console
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
