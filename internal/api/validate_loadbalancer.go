package api

import (
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// The validation of a Loadbalancer spec: its listeners and health check.

func (lb *LoadbalancerSpec) validate() error {
	if err := validateListeners(lb.Listeners); err != nil {
		return err
	}
	if len(lb.Selector) == 0 {
		return Invalid("selector", "is required: the labels of the compute resources to balance over")
	}
	if err := ValidateLabels("selector", lb.Selector); err != nil {
		return err
	}
	if err := oneOf("algorithm", lb.Algorithm, "", "roundrobin", "leastconn", "source"); err != nil {
		return err
	}
	if hc := lb.HealthCheck; hc != nil {
		return within("healthCheck", hc.validate())
	}
	return nil
}

// validateListeners checks a load balancer's listeners: at least one,
// each on its own port.
func validateListeners(listeners []Listener) error {
	if len(listeners) == 0 {
		return Invalid("listeners", "needs at least one listener")
	}
	ports := map[int]bool{}
	for i, l := range listeners {
		f := fmt.Sprintf("listeners[%d]", i)
		if l.Port < 1 || l.Port > 65535 {
			return Invalid(f+".port", "%d is not a port (1-65535)", l.Port)
		}
		if ports[l.Port] {
			return Invalid(f+".port", "port %d is used by two listeners", l.Port)
		}
		ports[l.Port] = true
		if l.TargetPort < 0 || l.TargetPort > 65535 {
			return Invalid(f+".targetPort", "%d is not a port (1-65535)", l.TargetPort)
		}
		if err := oneOf(f+".protocol", l.Protocol, "", "tcp", "http"); err != nil {
			return err
		}
		if _, err := netip.ParseAddr(l.Address); l.Address != "" && err != nil {
			return Invalid(f+".address", "%q is not an IP address", l.Address)
		}
	}
	return nil
}

func (hc *HealthCheck) validate() error {
	if err := oneOf("type", hc.Type, "", "tcp", "http"); err != nil {
		return err
	}
	if hc.Type == "http" && !strings.HasPrefix(hc.Path, "/") {
		return Invalid("path", "an http check needs a path starting with /")
	}
	// The path is a word of HAProxy's configuration: what would split or
	// end it there is refused here, not by the node.
	if err := validText("path", hc.Path, MaxCheckPathLen); err != nil {
		return err
	}
	if strings.ContainsAny(hc.Path, " \"'#\\") {
		return Invalid("path", "%q must not have spaces, quotes, # or backslashes", hc.Path)
	}
	if hc.Interval.Duration != 0 && hc.Interval.Duration < 100*time.Millisecond {
		return Invalid("interval", "%s is shorter than 100ms", hc.Interval)
	}
	if hc.Rise < 0 || hc.Fall < 0 {
		return Invalid("", "rise and fall must not be negative")
	}
	return nil
}
