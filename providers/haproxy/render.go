package haproxy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/hostpolicy"
)

// Defaults of a health check the assignment leaves out; they match what
// the API fills in (api.Resource defaults), repeated here because an
// assignment may reach the provider without them (an older region, a test).
const (
	defaultCheckInterval = 2 * time.Second
	defaultRise          = 2
	defaultFall          = 2
)

// listenerSpec is a listener with its defaults resolved.
type listenerSpec struct {
	Name       string
	Port       int
	Mode       string // tcp or http
	TargetPort int
	Address    string // the bind address, never empty
}

// checkSpec is the health check of every server of a load balancer.
type checkSpec struct {
	Type     string // tcp or http
	Path     string
	Interval time.Duration
	Timeout  time.Duration
	Rise     int
	Fall     int
}

// serverSpec is one endpoint as a server of one backend.
type serverSpec struct {
	Name    string
	Addr    netip.Addr
	Port    int
	Replica string
	// Endpoint is the index of the endpoint in the load balancer's
	// (sorted) endpoints, to map server rows back to BackendStatus.
	Endpoint int
}

// addrPort is how haproxy spells an address and port; IPv6 in brackets.
func (s serverSpec) addrPort() string { return netip.AddrPortFrom(s.Addr, uint16(s.Port)).String() }

// backendSpec is one listener's backend: the unit the runtime API diffs.
type backendSpec struct {
	Name    string
	LB      string
	Check   checkSpec
	Servers []serverSpec
}

// serverArgs are the keywords of a server line; the config file and
// "add server" use the same, so a reload does not change a server.
func (c checkSpec) serverArgs() string {
	return fmt.Sprintf("check inter %d rise %d fall %d", c.Interval.Milliseconds(), c.Rise, c.Fall)
}

// resolved is a load balancer as haproxy will run it: names chosen,
// defaults applied, endpoints sorted and capped.
type resolved struct {
	ID        string
	Algorithm string
	Check     checkSpec
	Listeners []listenerSpec
	// Endpoints are the usable endpoints, sorted; Skipped says why some
	// were left out (over MaxServers, not an IP address).
	Endpoints []api.Endpoint
	Skipped   string
}

// frontendName and backendName name a listener's proxies. The port is
// in the name because it is unique within a load balancer, whereas
// listener names are optional.
func frontendName(id string, port int) string { return "fe." + safeName(id) + "." + strconv.Itoa(port) }
func backendName(id string, port int) string  { return "be." + safeName(id) + "." + strconv.Itoa(port) }

// serverName names an endpoint's server after its replica, with a hash of
// the replica and address so that a replica that moves gets a new server
// (removed and added through the runtime API) rather than a changed one.
func serverName(e api.Endpoint) string {
	base := e.Replica
	if base == "" {
		base = "ep"
	}
	if len(base) > 40 {
		base = base[:40]
	}
	return sanitize(base) + "-" + shortHash(fmt.Sprintf("%s|%s|%d", e.Replica, e.Address, e.Port))
}

// safeName makes s usable as (part of) an haproxy proxy name, which
// allows letters, digits, '-', '_', '.' and ':'. A name that had to be
// changed gets a hash of the original, so that two ids never collide.
func safeName(s string) string {
	clean := sanitize(s)
	if clean == s && len(s) <= 64 && s != "" {
		return s
	}
	if len(clean) > 48 {
		clean = clean[:48]
	}
	return clean + "-" + shortHash(s)
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, s)
}

func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:4])
}

// limits are what the operator lets a load balancer have (see Config).
type limits struct {
	// bindAddress is where a listener without an address binds.
	bindAddress string
	// addresses are the addresses a listener may name: bindAddress and
	// Config.BindAddresses.
	addresses []netip.Addr
	ports     hostpolicy.PortPolicy
	// maxServers caps the servers of a backend.
	maxServers int
}

// resolve checks a load balancer's spec and applies its defaults. An error
// is a spec haproxy cannot run, or may not on this node: the replica
// goes to phase error.
func resolve(id string, spec *api.LoadbalancerSpec, eps []api.Endpoint, lim limits) (resolved, error) {
	r := resolved{ID: id}
	if spec == nil {
		return r, api.Invalid("spec.loadbalancer", "is missing")
	}
	if len(spec.Listeners) == 0 {
		return r, api.Invalid("spec.loadbalancer.listeners", "needs at least one listener")
	}
	switch spec.Algorithm {
	case "", "roundrobin":
		r.Algorithm = "roundrobin"
	case "leastconn", "source":
		r.Algorithm = spec.Algorithm
	default:
		return r, api.Invalid("spec.loadbalancer.algorithm", "%q is not roundrobin, leastconn or source", spec.Algorithm)
	}
	var err error
	if r.Check, err = resolveCheck(spec.HealthCheck); err != nil {
		return r, err
	}
	ports := map[int]bool{}
	for i, l := range spec.Listeners {
		f := fmt.Sprintf("spec.loadbalancer.listeners[%d]", i)
		if l.Port < 1 || l.Port > 65535 {
			return r, api.Invalid(f+".port", "%d is not a port (1-65535)", l.Port)
		}
		if ports[l.Port] {
			return r, api.Invalid(f+".port", "port %d is used by two listeners", l.Port)
		}
		ports[l.Port] = true
		ls, err := resolveListener(f, l, lim)
		if err != nil {
			return r, err
		}
		r.Listeners = append(r.Listeners, ls)
	}
	slices.SortFunc(r.Listeners, func(a, b listenerSpec) int { return a.Port - b.Port })
	r.resolveEndpoints(eps, lim.maxServers)
	return r, nil
}

// resolveCheck is the health check of hc (nil: the default, a TCP
// connect).
func resolveCheck(hc *api.HealthCheck) (checkSpec, error) {
	c := checkSpec{Type: "tcp", Interval: defaultCheckInterval, Rise: defaultRise, Fall: defaultFall}
	if hc == nil {
		return c, nil
	}
	switch hc.Type {
	case "", "tcp":
	case "http":
		c.Type = "http"
		if !strings.HasPrefix(hc.Path, "/") || strings.ContainsAny(hc.Path, " \t\r\n\"'#\\") {
			return c, api.Invalid("spec.loadbalancer.healthCheck.path", "%q is not a path starting with / without spaces, quotes or #", hc.Path)
		}
		c.Path = hc.Path
	default:
		return c, api.Invalid("spec.loadbalancer.healthCheck.type", "%q is not tcp or http", hc.Type)
	}
	if hc.Interval.Duration > 0 {
		c.Interval = max(hc.Interval.Duration, time.Millisecond)
	}
	if hc.Timeout.Duration > 0 {
		c.Timeout = max(hc.Timeout.Duration, time.Millisecond)
	}
	if hc.Rise > 0 {
		c.Rise = hc.Rise
	}
	if hc.Fall > 0 {
		c.Fall = hc.Fall
	}
	return c, nil
}

// resolveListener is listener l (field f of the spec) within the
// operator's limits: an allowed port, bound to one of the node's
// load-balancer addresses (lim.bindAddress unless it names its own).
func resolveListener(f string, l api.Listener, lim limits) (listenerSpec, error) {
	ls := listenerSpec{Name: l.Name, Port: l.Port, Mode: l.Protocol, TargetPort: l.TargetPort, Address: l.Address}
	if err := lim.ports.Check(l.Port); err != nil {
		return ls, api.Invalid(f+".port", "%v", err)
	}
	switch ls.Mode {
	case "":
		ls.Mode = "tcp"
	case "tcp", "http":
	default:
		return ls, api.Invalid(f+".protocol", "%q is not tcp or http", l.Protocol)
	}
	if ls.TargetPort == 0 {
		ls.TargetPort = l.Port
	}
	if ls.TargetPort < 1 || ls.TargetPort > 65535 {
		return ls, api.Invalid(f+".targetPort", "%d is not a port (1-65535)", l.TargetPort)
	}
	if ls.Address == "" {
		ls.Address = lim.bindAddress
	}
	addr, err := netip.ParseAddr(ls.Address)
	if err != nil {
		return ls, api.Invalid(f+".address", "%q is not an IP address", ls.Address)
	}
	if !slices.Contains(lim.addresses, addr.Unmap()) {
		return ls, api.Invalid(f+".address", "%s is not an address this node binds load balancers to (%s)", addr, joinAddrs(lim.addresses))
	}
	return ls, nil
}

// resolveEndpoints keeps the endpoints with an IP address, sorted and
// once each, at most maxServers, and says in r.Skipped what it left out.
func (r *resolved) resolveEndpoints(eps []api.Endpoint, maxServers int) {
	var bad []string
	for _, e := range eps {
		if _, err := netip.ParseAddr(e.Address); err != nil || e.Port < 0 || e.Port > 65535 {
			bad = append(bad, fmt.Sprintf("%s (%s:%d)", e.Replica, e.Address, e.Port))
			continue
		}
		r.Endpoints = append(r.Endpoints, e)
	}
	slices.SortFunc(r.Endpoints, compareEndpoints)
	r.Endpoints = slices.Compact(r.Endpoints)
	var skipped []string
	if len(bad) > 0 {
		skipped = append(skipped, fmt.Sprintf("endpoints without an IP address are ignored: %s", strings.Join(bad, ", ")))
	}
	if len(r.Endpoints) > maxServers {
		skipped = append(skipped, fmt.Sprintf("%d endpoints beyond maxServers %d are not balanced", len(r.Endpoints)-maxServers, maxServers))
		r.Endpoints = r.Endpoints[:maxServers]
	}
	r.Skipped = strings.Join(skipped, "; ")
}

func joinAddrs(as []netip.Addr) string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.String()
	}
	return strings.Join(out, ", ")
}

// httpCheck says whether a listener's backend checks its servers over
// HTTP. An http check is for http listeners: a TCP listener of the same
// load balancer (a database port next to a web port) gets a connect
// check, unless the load balancer has no http listener, in which case
// the http check can only be meant for its TCP listeners.
func (r *resolved) httpCheck(l listenerSpec) bool {
	if r.Check.Type != "http" {
		return false
	}
	return l.Mode == "http" || !slices.ContainsFunc(r.Listeners, func(o listenerSpec) bool { return o.Mode == "http" })
}

func compareEndpoints(a, b api.Endpoint) int {
	if c := strings.Compare(a.Replica, b.Replica); c != 0 {
		return c
	}
	if c := strings.Compare(a.Address, b.Address); c != 0 {
		return c
	}
	return a.Port - b.Port
}

// backends returns the load balancer's backends with their servers. An
// endpoint's port, when set, is where the region found the replica
// listening and wins over the listener's target port.
func (r *resolved) backends() []backendSpec {
	out := make([]backendSpec, 0, len(r.Listeners))
	for _, l := range r.Listeners {
		b := backendSpec{Name: backendName(r.ID, l.Port), LB: r.ID, Check: r.Check}
		for i, e := range r.Endpoints {
			port := l.TargetPort
			if e.Port != 0 {
				port = e.Port
			}
			b.Servers = append(b.Servers, serverSpec{
				Name:     serverName(e),
				Addr:     netip.MustParseAddr(e.Address),
				Port:     port,
				Replica:  e.Replica,
				Endpoint: i,
			})
		}
		out = append(out, b)
	}
	return out
}

// rendered is the whole configuration with what the provider needs to
// tell a reload from a runtime update and to attribute haproxy's errors.
type rendered struct {
	Text string
	// Structure hashes the configuration without its server lines: when
	// it changes, haproxy must reload; otherwise the runtime API is
	// enough.
	Structure string
	// LBStructure hashes each load balancer's sections without servers.
	LBStructure map[string]string
	Backends    []backendSpec
	// lines maps a line of Text to the load balancer it belongs to, and
	// frontends a frontend name to its load balancer, to attribute
	// haproxy's alerts ("Binding [haproxy.cfg:21] for frontend ...").
	lines     map[int]string
	frontends map[string]string
}

// paths are the files the provider owns in its state directory.
type paths struct {
	Dir         string
	Config      string
	PID         string
	Master      string
	Admin       string
	ServerState string
	Log         string
	Running     string
	LBs         string
}

func newPaths(dir string) paths {
	j := func(name string) string { return dir + "/" + name }
	return paths{
		Dir:         dir,
		Config:      j("haproxy.cfg"),
		PID:         j("haproxy.pid"),
		Master:      j("master.sock"),
		Admin:       j("admin.sock"),
		ServerState: j("servers.state"),
		Log:         j("haproxy.log"),
		Running:     j("running.json"),
		LBs:         j("lbs"),
	}
}

// runAs is the account haproxy's workers (everything that handles
// traffic) run as; the master keeps root to bind and to reload. Empty
// leaves them root.
type runAs struct{ User, Group string }

// render writes the configuration of lbs, sorted by id for a stable text.
func render(p paths, run runAs, lbs []resolved) rendered {
	var b, structure strings.Builder
	out := rendered{LBStructure: map[string]string{}, lines: map[int]string{}, frontends: map[string]string{}}
	line := 0
	// emit writes one line; server lines stay out of the structure.
	emit := func(lb string, server bool, format string, args ...any) {
		s := fmt.Sprintf(format, args...)
		b.WriteString(s)
		b.WriteByte('\n')
		line++
		if lb != "" {
			out.lines[line] = lb
		}
		if !server {
			structure.WriteString(s)
			structure.WriteByte('\n')
		}
	}
	emit("", false, "# Written by strata's haproxy provider; it is rewritten on every change.")
	emit("", false, "global")
	emit("", false, "    stats socket %s mode 600 level admin expose-fd listeners", p.Admin)
	emit("", false, "    stats timeout 30s")
	emit("", false, "    server-state-file %s", p.ServerState)
	// Old workers keep serving their connections after a reload; this
	// bounds how long long-lived TCP connections keep one alive.
	emit("", false, "    hard-stop-after 30s")
	if run.User != "" {
		emit("", false, "    user %s", run.User)
	}
	if run.Group != "" {
		emit("", false, "    group %s", run.Group)
	}
	emit("", false, "")
	emit("", false, "defaults")
	emit("", false, "    mode tcp")
	emit("", false, "    timeout connect 5s")
	emit("", false, "    timeout client 60s")
	emit("", false, "    timeout server 60s")
	emit("", false, "    timeout http-request 10s")
	// A request that hits a server that died before its checks noticed
	// is retried on another server instead of failing.
	emit("", false, "    retries 2")
	emit("", false, "    option redispatch 1")
	// A reload keeps what the checks learnt (saved just before it).
	emit("", false, "    load-server-state-from-file global")

	sorted := slices.Clone(lbs)
	slices.SortFunc(sorted, func(a, b resolved) int { return strings.Compare(a.ID, b.ID) })
	for _, r := range sorted {
		var lbs strings.Builder
		lbEmit := func(server bool, format string, args ...any) {
			emit(r.ID, server, format, args...)
			if !server {
				fmt.Fprintf(&lbs, format+"\n", args...)
			}
		}
		emit("", false, "")
		emit("", false, "# load balancer %s", r.ID)
		bes := r.backends()
		for i, l := range r.Listeners {
			fe, be := frontendName(r.ID, l.Port), bes[i]
			out.frontends[fe] = r.ID
			lbEmit(false, "frontend %s", fe)
			lbEmit(false, "    mode %s", l.Mode)
			lbEmit(false, "    bind %s", netip.AddrPortFrom(netip.MustParseAddr(l.Address), uint16(l.Port)))
			if l.Mode == "http" {
				lbEmit(false, "    option forwardfor")
			}
			lbEmit(false, "    default_backend %s", be.Name)
			lbEmit(false, "")
			lbEmit(false, "backend %s", be.Name)
			lbEmit(false, "    mode %s", l.Mode)
			lbEmit(false, "    balance %s", r.Algorithm)
			if r.Algorithm == "source" {
				// Dynamic servers need a dynamic algorithm; source
				// hashing is static unless consistent.
				lbEmit(false, "    hash-type consistent")
			}
			if r.httpCheck(l) {
				lbEmit(false, "    option httpchk GET %s", r.Check.Path)
			}
			if r.Check.Timeout > 0 {
				lbEmit(false, "    timeout check %dms", r.Check.Timeout.Milliseconds())
			}
			// Check settings are part of the structure through this
			// comment: servers are re-added by a reload when they change.
			lbEmit(false, "    # servers: %s", r.Check.serverArgs())
			for _, s := range be.Servers {
				lbEmit(true, "    server %s %s %s", s.Name, s.addrPort(), r.Check.serverArgs())
			}
			if i < len(r.Listeners)-1 {
				lbEmit(false, "")
			}
		}
		out.LBStructure[r.ID] = hashString(lbs.String())
		out.Backends = append(out.Backends, bes...)
	}
	out.Text = b.String()
	out.Structure = hashString(structure.String())
	return out
}

func hashString(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}
