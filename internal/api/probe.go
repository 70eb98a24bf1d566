package api

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// Probes are the checks the agent runs against one container, with the
// names and meaning of Kubernetes' container probes: until the startup
// probe succeeds the others do not run; a container is ready only while
// its readiness probe passes; a container whose liveness (or startup)
// probe fails is restarted. A container spec embeds it; a probe left out
// is no check (a container without a readiness probe is ready once it
// runs, as before probes existed).
type Probes struct {
	StartupProbe   *Probe `json:"startupProbe,omitempty"`
	ReadinessProbe *Probe `json:"readinessProbe,omitempty"`
	LivenessProbe  *Probe `json:"livenessProbe,omitempty"`
}

// ProbeKind is which of a container's probes a check is.
type ProbeKind string

const (
	ProbeStartup   ProbeKind = "startup"
	ProbeReadiness ProbeKind = "readiness"
	ProbeLiveness  ProbeKind = "liveness"
)

// ProbeKinds are the kinds in the order they gate each other.
var ProbeKinds = [...]ProbeKind{ProbeStartup, ProbeReadiness, ProbeLiveness}

// Get is the probe of that kind, nil when there is none.
func (ps *Probes) Get(kind ProbeKind) *Probe {
	switch kind {
	case ProbeStartup:
		return ps.StartupProbe
	case ProbeReadiness:
		return ps.ReadinessProbe
	case ProbeLiveness:
		return ps.LivenessProbe
	}
	return nil
}

// Empty reports whether no probe is set.
func (ps *Probes) Empty() bool {
	return ps.StartupProbe == nil && ps.ReadinessProbe == nil && ps.LivenessProbe == nil
}

// Uses reports whether one of the probes satisfies f.
func (ps *Probes) Uses(f func(*Probe) bool) bool {
	for _, k := range ProbeKinds {
		if pr := ps.Get(k); pr != nil && f(pr) {
			return true
		}
	}
	return false
}

// Probe is one check: exactly one handler (httpGet, tcpSocket, grpc,
// exec or guestAgent) and when to run it. The counts and durations are pointers so that
// an explicit 0, which Kubernetes would take for "left out", is refused
// rather than silently replaced by the default.
type Probe struct {
	HTTPGet   *HTTPGetAction   `json:"httpGet,omitempty"`
	TCPSocket *TCPSocketAction `json:"tcpSocket,omitempty"`
	GRPC      *GRPCAction      `json:"grpc,omitempty"`
	Exec      *ExecAction      `json:"exec,omitempty"`
	// GuestAgent pings the QEMU guest agent of a VM (guest-ping over
	// its virtio-serial channel); VMs only.
	GuestAgent *GuestAgentAction `json:"guestAgent,omitempty"`

	// InitialDelaySeconds is how long after the container starts the
	// first check runs (0: at once).
	InitialDelaySeconds int `json:"initialDelaySeconds,omitempty"`
	// PeriodSeconds is how often the check runs (default 10).
	PeriodSeconds *int `json:"periodSeconds,omitempty"`
	// TimeoutSeconds is how long one check may take before it counts as
	// failed (default 1).
	TimeoutSeconds *int `json:"timeoutSeconds,omitempty"`
	// SuccessThreshold is how many checks in a row must pass for a
	// failed probe to count as passing again (default 1; 1 for liveness
	// and startup probes).
	SuccessThreshold *int `json:"successThreshold,omitempty"`
	// FailureThreshold is how many checks in a row must fail for the
	// probe to count as failed (default 3).
	FailureThreshold *int `json:"failureThreshold,omitempty"`
}

// The defaults of a probe's timing, as Kubernetes'.
const (
	DefaultProbePeriodSeconds    = 10
	DefaultProbeTimeoutSeconds   = 1
	DefaultProbeSuccessThreshold = 1
	DefaultProbeFailureThreshold = 3
	// MaxProbeSeconds bounds a probe's delay, period and timeout (a day):
	// past it a duration in nanoseconds would overflow long before it
	// made sense.
	MaxProbeSeconds = 86400
	// MaxProbeThreshold bounds the thresholds.
	MaxProbeThreshold = 10000
	// MaxProbeHeaders bounds an httpGet's headers.
	MaxProbeHeaders = 32
)

// HTTPGetAction is a GET that passes with a status from 200 to 399.
// Redirects to the same host are followed; a redirect to another host
// passes without being followed, as in Kubernetes.
type HTTPGetAction struct {
	// Path is the request's path and query (default "/").
	Path string `json:"path,omitempty"`
	Port int    `json:"port"`
	// Host is the address to connect to, default the replica's own (a
	// container's pod address, a VM's guest address). A Host header in
	// HTTPHeaders sets the virtual host instead.
	Host string `json:"host,omitempty"`
	// Scheme is "http" (default) or "https"; https does not verify the
	// server's certificate.
	Scheme      URIScheme    `json:"scheme,omitempty"`
	HTTPHeaders []HTTPHeader `json:"httpHeaders,omitempty"`
}

// URIScheme is how an httpGet probe connects.
type URIScheme string

const (
	SchemeHTTP  URIScheme = "http"
	SchemeHTTPS URIScheme = "https"
)

// HTTPHeader is one header field of an httpGet probe's request.
type HTTPHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// TCPSocketAction passes when a TCP connection to the port opens.
type TCPSocketAction struct {
	Port int `json:"port"`
}

// GRPCAction calls the gRPC health checking protocol
// (grpc.health.v1.Health/Check) on the port: it passes when the service
// answers SERVING.
type GRPCAction struct {
	Port int `json:"port"`
	// Service is the name the check asks about; empty asks about the
	// server as a whole.
	Service string `json:"service,omitempty"`
}

// ExecAction runs a command inside the container: exit status 0 passes.
// Containers only.
type ExecAction struct {
	Command []string `json:"command"`
}

// GuestAgentAction passes when the VM's QEMU guest agent (qemu-ga)
// answers a guest-ping: the guest's own userspace is up and serving its
// agent. The VM gets the agent's channel (org.qemu.guest_agent.0) when
// one of its probes has this handler. It has no fields: `{}`.
type GuestAgentAction struct{}

// WithDefaults returns the probes with each one's defaults filled in.
func (ps Probes) WithDefaults() Probes {
	for _, p := range []**Probe{&ps.StartupProbe, &ps.ReadinessProbe, &ps.LivenessProbe} {
		if *p != nil {
			d := (*p).WithDefaults()
			*p = &d
		}
	}
	return ps
}

// WithDefaults returns a copy of the probe with what it leaves out filled
// in. The copy shares nothing the caller may change with p.
func (p Probe) WithDefaults() Probe {
	for _, f := range []struct {
		v   **int
		def int
	}{
		{&p.PeriodSeconds, DefaultProbePeriodSeconds},
		{&p.TimeoutSeconds, DefaultProbeTimeoutSeconds},
		{&p.SuccessThreshold, DefaultProbeSuccessThreshold},
		{&p.FailureThreshold, DefaultProbeFailureThreshold},
	} {
		v := f.def
		if *f.v != nil {
			v = **f.v
		}
		*f.v = &v
	}
	if h := p.HTTPGet; h != nil {
		c := *h
		orDefault(&c.Path, "/")
		// Kubernetes writes the scheme in capitals: a manifest copied
		// from one works.
		c.Scheme = URIScheme(strings.ToLower(string(c.Scheme)))
		orDefault(&c.Scheme, SchemeHTTP)
		c.HTTPHeaders = append([]HTTPHeader(nil), h.HTTPHeaders...)
		p.HTTPGet = &c
	}
	if t := p.TCPSocket; t != nil {
		c := *t
		p.TCPSocket = &c
	}
	if g := p.GRPC; g != nil {
		c := *g
		p.GRPC = &c
	}
	if e := p.Exec; e != nil {
		p.Exec = &ExecAction{Command: append([]string(nil), e.Command...)}
	}
	if p.GuestAgent != nil {
		p.GuestAgent = &GuestAgentAction{}
	}
	return p
}

// Validate checks the probes of a container whose field path is field
// ("containers[0]"): the errors name the probe's fields below it
// ("containers[0].readinessProbe.httpGet.port").
func (ps *Probes) Validate(field string) error {
	var p problems
	for _, kind := range ProbeKinds {
		if pr := ps.Get(kind); pr != nil {
			p.add(pr.Validate(joinField(field, string(kind)+"Probe"), kind))
		}
	}
	return p.err()
}

// Validate checks one probe of the kind, whose field path is field.
func (pr *Probe) Validate(field string, kind ProbeKind) error {
	var p problems
	p.add(pr.validateHandler())
	p.add(pr.validateTiming(kind))
	if err := p.err(); err != nil && field != "" {
		return within(field, err)
	}
	return p.err()
}

// joinField is field.sub, or sub alone at the top.
func joinField(field, sub string) string {
	if field == "" {
		return sub
	}
	return field + "." + sub
}

// validateHandler checks that exactly one handler is set, and that one.
func (pr *Probe) validateHandler() error {
	var set []string
	var p problems
	if h := pr.HTTPGet; h != nil {
		set = append(set, "httpGet")
		p.in("httpGet", h.validate())
	}
	if t := pr.TCPSocket; t != nil {
		set = append(set, "tcpSocket")
		p.in("tcpSocket", validateProbePort("port", t.Port))
	}
	if g := pr.GRPC; g != nil {
		set = append(set, "grpc")
		p.in("grpc", g.validate())
	}
	if e := pr.Exec; e != nil {
		set = append(set, "exec")
		p.in("exec", e.validate())
	}
	if pr.GuestAgent != nil {
		set = append(set, "guestAgent")
	}
	switch len(set) {
	case 0:
		return Invalid("", "needs one handler: httpGet, tcpSocket, grpc, exec or guestAgent")
	case 1:
		return p.err()
	}
	return Invalid("", "has %d handlers (%s): set exactly one", len(set), strings.Join(set, ", "))
}

// validateTiming checks the delays, period, timeout and thresholds.
func (pr *Probe) validateTiming(kind ProbeKind) error {
	var p problems
	if d := pr.InitialDelaySeconds; d < 0 || d > MaxProbeSeconds {
		p.add(Invalid("initialDelaySeconds", "%d is out of range 0-%d", d, MaxProbeSeconds))
	}
	for _, f := range []struct {
		name string
		v    *int
		max  int
	}{
		{"periodSeconds", pr.PeriodSeconds, MaxProbeSeconds},
		{"timeoutSeconds", pr.TimeoutSeconds, MaxProbeSeconds},
		{"successThreshold", pr.SuccessThreshold, MaxProbeThreshold},
		{"failureThreshold", pr.FailureThreshold, MaxProbeThreshold},
	} {
		if f.v != nil && (*f.v < 1 || *f.v > f.max) {
			p.add(Invalid(f.name, "%d is out of range 1-%d", *f.v, f.max))
		}
	}
	if s := pr.SuccessThreshold; s != nil && *s > 1 && kind != ProbeReadiness {
		p.add(Invalid("successThreshold", "must be 1 for a %s probe, not %d", kind, *s))
	}
	return p.err()
}

func validateProbePort(field string, port int) error {
	if port < 1 || port > 65535 {
		return Invalid(field, "%d is out of range 1-65535", port)
	}
	return nil
}

func (h *HTTPGetAction) validate() error {
	var p problems
	p.add(validateProbePort("port", h.Port))
	if h.Path != "" {
		p.add(validateProbePath(h.Path))
	}
	if h.Host != "" && !validProbeHost(h.Host) {
		p.add(Invalid("host", "%q is not an IP address or a host name (no scheme, port or path)", h.Host))
	}
	if h.Scheme != "" {
		p.add(oneOf("scheme", URIScheme(strings.ToLower(string(h.Scheme))), SchemeHTTP, SchemeHTTPS))
	}
	if len(h.HTTPHeaders) > MaxProbeHeaders {
		p.add(Invalid("httpHeaders", "has %d headers; at most %d", len(h.HTTPHeaders), MaxProbeHeaders))
	}
	for i, hd := range h.HTTPHeaders {
		f := fmt.Sprintf("httpHeaders[%d]", i)
		if !httpguts.ValidHeaderFieldName(hd.Name) {
			p.add(Invalid(f+".name", "%q is not a header name", hd.Name))
		}
		if !httpguts.ValidHeaderFieldValue(hd.Value) {
			p.add(Invalid(f+".value", "%q is not a header value (no line breaks or control characters)", hd.Value))
		}
	}
	return p.err()
}

// validateProbePath accepts an absolute path with an optional query, as
// it goes on the request line.
func validateProbePath(path string) error {
	if !strings.HasPrefix(path, "/") {
		return Invalid("path", "%q must start with \"/\"", path)
	}
	if strings.ContainsFunc(path, func(r rune) bool { return r == ' ' || r == '#' || isControl(r) }) {
		return Invalid("path", "%q has a space, '#' or a control character (escape it as %%XX)", path)
	}
	if _, err := url.ParseRequestURI(path); err != nil {
		return Invalid("path", "%q is not a path: %v", path, err)
	}
	return nil
}

// validProbeHost is an IP address or a DNS name.
func validProbeHost(h string) bool {
	if net.ParseIP(h) != nil {
		return true
	}
	if len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(h, "."), ".") {
		if !validHostLabel(label) {
			return false
		}
	}
	return true
}

func validHostLabel(l string) bool {
	if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for _, r := range l {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

func (g *GRPCAction) validate() error {
	var p problems
	p.add(validateProbePort("port", g.Port))
	if len(g.Service) > 253 || hasControl(g.Service) {
		p.add(Invalid("service", "%q is not a service name (at most 253 characters, no control characters)", g.Service))
	}
	return p.err()
}

func (e *ExecAction) validate() error {
	if len(e.Command) == 0 {
		return Invalid("command", "is required: the program to run and its arguments")
	}
	if e.Command[0] == "" {
		return Invalid("command[0]", "is empty: it names the program to run")
	}
	var p problems
	for i, a := range e.Command {
		p.add(validScript(fmt.Sprintf("command[%d]", i), a))
	}
	return p.err()
}
