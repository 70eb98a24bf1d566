// Package hostpolicy holds what an operator allows tenants to reach on a
// node: host ports (port ranges), host files (directories) and URLs (an
// allowlist, fetched through a dialer that refuses private addresses).
// Providers check every tenant-given port, path and URL against it before
// the host sees them; what is not allowed is refused, never defaulted.
package hostpolicy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// PortRange is the ports Lo to Hi, both included.
type PortRange struct{ Lo, Hi int }

// PortRanges is a set of ports, written "30000-32767,8080". The zero
// value holds no port.
type PortRanges []PortRange

// ParsePorts parses a comma-separated list of ports and ranges lo-hi. An
// empty string is the empty set.
func ParsePorts(s string) (PortRanges, error) {
	var out PortRanges
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := parsePort(lo)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", part, err)
		}
		b := a
		if isRange {
			if b, err = parsePort(hi); err != nil {
				return nil, fmt.Errorf("%q: %w", part, err)
			}
		}
		if b < a {
			return nil, fmt.Errorf("%q: the range ends before it starts", part)
		}
		out = append(out, PortRange{a, b})
	}
	slices.SortFunc(out, func(x, y PortRange) int { return x.Lo - y.Lo })
	return out, nil
}

func parsePort(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("%q is not a port (1-65535)", strings.TrimSpace(s))
	}
	return n, nil
}

// MustParsePorts is ParsePorts for constants; it panics on a bad list.
func MustParsePorts(s string) PortRanges {
	r, err := ParsePorts(s)
	if err != nil {
		panic(err)
	}
	return r
}

// Contains reports whether port is in the set.
func (r PortRanges) Contains(port int) bool {
	for _, pr := range r {
		if port >= pr.Lo && port <= pr.Hi {
			return true
		}
	}
	return false
}

// Min is the lowest port of the set, 0 for the empty set.
func (r PortRanges) Min() int {
	if len(r) == 0 {
		return 0
	}
	return r[0].Lo
}

// String writes the set as ParsePorts reads it; "none" when empty.
func (r PortRanges) String() string {
	if len(r) == 0 {
		return "none"
	}
	parts := make([]string, len(r))
	for i, pr := range r {
		if pr.Lo == pr.Hi {
			parts[i] = strconv.Itoa(pr.Lo)
		} else {
			parts[i] = fmt.Sprintf("%d-%d", pr.Lo, pr.Hi)
		}
	}
	return strings.Join(parts, ",")
}

// PortPolicy says which host ports tenants may have: those in Allowed,
// except the node's own (Reserved), and below 1024 only when the
// operator allowed privileged ports.
type PortPolicy struct {
	Allowed  PortRanges
	Reserved PortRanges
	// Privileged allows ports below 1024 when Allowed holds them.
	Privileged bool
}

// Check returns nil when port may be given to a tenant, else an error
// that says why in the operator's terms (it names no host service).
func (p PortPolicy) Check(port int) error {
	switch {
	case !p.Allowed.Contains(port):
		return fmt.Errorf("port %d is outside this node's allowed ports (%s)", port, p.Allowed)
	case p.Reserved.Contains(port):
		return fmt.Errorf("port %d is reserved for this node's own services", port)
	case port < 1024 && !p.Privileged:
		return fmt.Errorf("port %d is privileged (below 1024) and this node does not allow privileged ports", port)
	}
	return nil
}

// Ports is the set of ports Check passes: Allowed less Reserved, and
// less the privileged ports unless Privileged.
func (p PortPolicy) Ports() PortRanges {
	out := p.Allowed
	if !p.Privileged {
		out = out.minus(PortRange{1, 1023})
	}
	for _, r := range p.Reserved {
		out = out.minus(r)
	}
	return out
}

// minus returns the set without the ports of x.
func (r PortRanges) minus(x PortRange) PortRanges {
	var out PortRanges
	for _, pr := range r {
		if pr.Hi < x.Lo || pr.Lo > x.Hi {
			out = append(out, pr)
			continue
		}
		if pr.Lo < x.Lo {
			out = append(out, PortRange{pr.Lo, x.Lo - 1})
		}
		if pr.Hi > x.Hi {
			out = append(out, PortRange{x.Hi + 1, pr.Hi})
		}
	}
	return out
}
