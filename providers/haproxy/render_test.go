package haproxy

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/hostpolicy"
	"github.com/stratahq/strata/providers/provider"
)

func spec(mod func(*api.LoadbalancerSpec)) *api.LoadbalancerSpec {
	s := &api.LoadbalancerSpec{
		Listeners: []api.Listener{{Name: "web", Port: 8080, Protocol: "http"}},
		Selector:  map[string]string{"app": "web"},
	}
	if mod != nil {
		mod(s)
	}
	return s
}

// testLimits let the tests' load balancers bind any port on 127.0.0.1,
// ::1 and 10.0.0.1.
var testLimits = limits{
	bindAddress: "127.0.0.1",
	addresses:   []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1"), netip.MustParseAddr("10.0.0.1")},
	ports:       hostpolicy.PortPolicy{Allowed: hostpolicy.MustParsePorts("1-65535"), Privileged: true},
	maxServers:  64,
}

func TestResolveDefaults(t *testing.T) {
	r, err := resolve("lb1", spec(func(s *api.LoadbalancerSpec) {
		s.Listeners = []api.Listener{{Port: 9000}, {Port: 8080, Protocol: "http", TargetPort: 80, Address: "10.0.0.1"}}
	}), nil, testLimits)
	if err != nil {
		t.Fatalf("resolve: %v", err)
	}
	want := []listenerSpec{
		{Port: 8080, Mode: "http", TargetPort: 80, Address: "10.0.0.1"},
		{Port: 9000, Mode: "tcp", TargetPort: 9000, Address: "127.0.0.1"},
	}
	if !slices.Equal(r.Listeners, want) {
		t.Errorf("listeners: got %+v; want %+v", r.Listeners, want)
	}
	if r.Algorithm != "roundrobin" {
		t.Errorf("algorithm: got %q; want roundrobin", r.Algorithm)
	}
	if wantCheck := (checkSpec{Type: "tcp", Interval: 2 * time.Second, Rise: 2, Fall: 2}); r.Check != wantCheck {
		t.Errorf("check: got %+v; want %+v", r.Check, wantCheck)
	}
}

func TestResolveErrors(t *testing.T) {
	tests := []struct {
		name  string
		spec  *api.LoadbalancerSpec
		field string
	}{
		{"no spec", nil, "spec.loadbalancer"},
		{"no listener", spec(func(s *api.LoadbalancerSpec) { s.Listeners = nil }), "spec.loadbalancer.listeners"},
		{"bad algorithm", spec(func(s *api.LoadbalancerSpec) { s.Algorithm = "random" }), "spec.loadbalancer.algorithm"},
		{"bad protocol", spec(func(s *api.LoadbalancerSpec) { s.Listeners[0].Protocol = "udp" }), "spec.loadbalancer.listeners[0].protocol"},
		{"bad port", spec(func(s *api.LoadbalancerSpec) { s.Listeners[0].Port = 70000 }), "spec.loadbalancer.listeners[0].port"},
		{"same port twice", spec(func(s *api.LoadbalancerSpec) {
			s.Listeners = append(s.Listeners, api.Listener{Port: 8080})
		}), "spec.loadbalancer.listeners[1].port"},
		{"bad address", spec(func(s *api.LoadbalancerSpec) { s.Listeners[0].Address = "localhost" }), "spec.loadbalancer.listeners[0].address"},
		{"bad target port", spec(func(s *api.LoadbalancerSpec) { s.Listeners[0].TargetPort = -1 }), "spec.loadbalancer.listeners[0].targetPort"},
		{"http check without path", spec(func(s *api.LoadbalancerSpec) { s.HealthCheck = &api.HealthCheck{Type: "http"} }), "spec.loadbalancer.healthCheck.path"},
		{"http check path with a space", spec(func(s *api.LoadbalancerSpec) {
			s.HealthCheck = &api.HealthCheck{Type: "http", Path: "/a b"}
		}), "spec.loadbalancer.healthCheck.path"},
		{"bad check type", spec(func(s *api.LoadbalancerSpec) { s.HealthCheck = &api.HealthCheck{Type: "udp"} }), "spec.loadbalancer.healthCheck.type"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := resolve("lb1", tc.spec, nil, testLimits)
			var fe *api.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Fatalf("resolve: got %v; want an invalid %s", err, tc.field)
			}
		})
	}
}

func TestResolveEndpoints(t *testing.T) {
	eps := []api.Endpoint{
		{Replica: "c", Address: "10.0.0.3", Port: 80},
		{Replica: "a", Address: "10.0.0.1", Port: 80},
		{Replica: "a", Address: "10.0.0.1", Port: 80}, // twice
		{Replica: "dns", Address: "web.example.com", Port: 80},
		{Replica: "b", Address: "10.0.0.2"},
	}
	tests := []struct {
		name    string
		max     int
		want    []string
		skipped []string
	}{
		{"all fit", 64, []string{"a", "b", "c"}, []string{"without an IP address are ignored: dns (web.example.com:80)"}},
		{"capped", 2, []string{"a", "b"}, []string{"dns", "1 endpoints beyond maxServers 2 are not balanced"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := resolve("lb1", spec(nil), eps, func() limits { l := testLimits; l.maxServers = tc.max; return l }())
			if err != nil {
				t.Fatalf("resolve: %v", err)
			}
			var got []string
			for _, e := range r.Endpoints {
				got = append(got, e.Replica)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("endpoints: got %v; want %v", got, tc.want)
			}
			for _, s := range tc.skipped {
				if !strings.Contains(r.Skipped, s) {
					t.Errorf("skipped: got %q; want it to mention %q", r.Skipped, s)
				}
			}
		})
	}
}

func mustResolve(t *testing.T, id string, s *api.LoadbalancerSpec, eps ...api.Endpoint) resolved {
	t.Helper()
	r, err := resolve(id, s, eps, testLimits)
	if err != nil {
		t.Fatalf("resolve %s: %v", id, err)
	}
	return r
}

func TestRender(t *testing.T) {
	p := newPaths("/var/lib/strata/haproxy")
	ep := api.Endpoint{Replica: "web-1", Address: "10.0.0.7", Port: 8081}
	noPort := api.Endpoint{Replica: "web-2", Address: "fd00::7"}
	tests := []struct {
		name string
		spec *api.LoadbalancerSpec
		want []string
	}{
		{"http with an http check", spec(func(s *api.LoadbalancerSpec) {
			s.HealthCheck = &api.HealthCheck{Type: "http", Path: "/healthz", Interval: api.D(200 * time.Millisecond), Timeout: api.D(time.Second), Rise: 1, Fall: 3}
		}), []string{
			"frontend fe.lb1.8080", "    mode http", "    bind 127.0.0.1:8080", "    option forwardfor", "    default_backend be.lb1.8080",
			"backend be.lb1.8080", "    balance roundrobin", "    option httpchk GET /healthz", "    timeout check 1000ms",
			"    server " + serverName(ep) + " 10.0.0.7:8081 check inter 200 rise 1 fall 3",
			"    server " + serverName(noPort) + " [fd00::7]:8080 check inter 200 rise 1 fall 3",
		}},
		{"http check on a tcp-only load balancer", spec(func(s *api.LoadbalancerSpec) {
			s.Listeners = []api.Listener{{Port: 9000}}
			s.HealthCheck = &api.HealthCheck{Type: "http", Path: "/up"}
		}), []string{"backend be.lb1.9000", "    mode tcp", "    option httpchk GET /up"}},
		{"tcp, source, IPv6 bind, target port", spec(func(s *api.LoadbalancerSpec) {
			s.Listeners = []api.Listener{{Port: 443, TargetPort: 8443, Address: "::1"}}
			s.Algorithm = "source"
		}), []string{
			"frontend fe.lb1.443", "    mode tcp", "    bind [::1]:443", "    balance source", "    hash-type consistent",
			"    server " + serverName(noPort) + " [fd00::7]:8443 check inter 2000 rise 2 fall 2",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := render(p, runAs{}, []resolved{mustResolve(t, "lb1", tc.spec, ep, noPort)})
			lines := strings.Split(r.Text, "\n")
			for _, w := range tc.want {
				if !slices.Contains(lines, w) {
					t.Errorf("config: got\n%s\nwant the line %q", r.Text, w)
				}
			}
			for _, w := range []string{
				"    stats socket /var/lib/strata/haproxy/admin.sock mode 600 level admin expose-fd listeners",
				"    server-state-file /var/lib/strata/haproxy/servers.state",
				"    load-server-state-from-file global",
			} {
				if !slices.Contains(lines, w) {
					t.Errorf("config: got\n%s\nwant the line %q", r.Text, w)
				}
			}
		})
	}
}

// TestRenderMixedChecks: an http check goes to the http listener only.
func TestRenderMixedChecks(t *testing.T) {
	r := render(newPaths("/state"), runAs{}, []resolved{mustResolve(t, "lb1", spec(func(s *api.LoadbalancerSpec) {
		s.Listeners = append(s.Listeners, api.Listener{Port: 5432})
		s.HealthCheck = &api.HealthCheck{Type: "http", Path: "/up"}
	}))})
	http, tcp := section(r.Text, "backend be.lb1.8080"), section(r.Text, "backend be.lb1.5432")
	if !strings.Contains(http, "option httpchk GET /up") {
		t.Errorf("http backend: got\n%s\nwant option httpchk GET /up", http)
	}
	if strings.Contains(tcp, "httpchk") {
		t.Errorf("tcp backend: got\n%s\nwant a connect check (no httpchk)", tcp)
	}
}

// section returns the configuration section that starts with header.
func section(text, header string) string {
	_, s, _ := strings.Cut(text, header+"\n")
	s, _, _ = strings.Cut(s, "\n\n")
	return header + "\n" + s
}

// TestRenderStructure checks what reloads: endpoints never do; anything
// that needs a new frontend or backend setting does.
func TestRenderStructure(t *testing.T) {
	p := newPaths("/state")
	a := api.Endpoint{Replica: "a", Address: "10.0.0.1", Port: 80}
	b := api.Endpoint{Replica: "b", Address: "10.0.0.2", Port: 80}
	base := render(p, runAs{}, []resolved{mustResolve(t, "lb1", spec(nil), a)})
	tests := []struct {
		name   string
		spec   *api.LoadbalancerSpec
		eps    []api.Endpoint
		reload bool
	}{
		{"same", spec(nil), []api.Endpoint{a}, false},
		{"endpoint added", spec(nil), []api.Endpoint{a, b}, false},
		{"endpoint removed", spec(nil), nil, false},
		{"selector changed", spec(func(s *api.LoadbalancerSpec) { s.Selector = map[string]string{"app": "api"} }), []api.Endpoint{a}, false},
		{"port", spec(func(s *api.LoadbalancerSpec) { s.Listeners[0].Port = 8081 }), []api.Endpoint{a}, true},
		{"new listener", spec(func(s *api.LoadbalancerSpec) {
			s.Listeners = append(s.Listeners, api.Listener{Port: 9000})
		}), []api.Endpoint{a}, true},
		{"mode", spec(func(s *api.LoadbalancerSpec) { s.Listeners[0].Protocol = "tcp" }), []api.Endpoint{a}, true},
		{"algorithm", spec(func(s *api.LoadbalancerSpec) { s.Algorithm = "leastconn" }), []api.Endpoint{a}, true},
		{"check type", spec(func(s *api.LoadbalancerSpec) { s.HealthCheck = &api.HealthCheck{Type: "http", Path: "/"} }), []api.Endpoint{a}, true},
		{"check interval", spec(func(s *api.LoadbalancerSpec) { s.HealthCheck = &api.HealthCheck{Interval: api.D(time.Second)} }), []api.Endpoint{a}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := render(p, runAs{}, []resolved{mustResolve(t, "lb1", tc.spec, tc.eps...)})
			if got := r.Structure != base.Structure; got != tc.reload {
				t.Errorf("structure changed: got %v; want %v", got, tc.reload)
			}
			if got := r.LBStructure["lb1"] != base.LBStructure["lb1"]; got != tc.reload {
				t.Errorf("load balancer structure changed: got %v; want %v", got, tc.reload)
			}
		})
	}
}

func TestNames(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"ct-apply-0a1b2c3d", "ct-apply-0a1b2c3d"},
		{"acme/web lb", "acme_web_lb-" + shortHash("acme/web lb")},
		{"", "-" + shortHash("")},
	}
	for _, tc := range tests {
		if got := safeName(tc.in); got != tc.want {
			t.Errorf("safeName(%q): got %q; want %q", tc.in, got, tc.want)
		}
	}
	a := serverName(api.Endpoint{Replica: "web-1", Address: "10.0.0.1", Port: 80})
	b := serverName(api.Endpoint{Replica: "web-1", Address: "10.0.0.2", Port: 80})
	if a == b || !strings.HasPrefix(a, "web-1-") {
		t.Errorf("server names: got %q and %q; want distinct names starting with the replica", a, b)
	}
	if got, other := stateFile("/d", "ct-x"), stateFile("/d", "../etc"); got != "/d/ct-x.json" || filepath.Dir(other) != "/d" {
		t.Errorf("state files: got %q and %q; want /d/ct-x.json and a hashed name in /d", got, other)
	}
}

func TestParseStat(t *testing.T) {
	out := "# pxname,svname,qcur,status,weight\n" +
		"fe.lb1.8080,FRONTEND,,OPEN,\n" +
		"be.lb1.8080,a-1,0,UP,1\n" +
		"be.lb1.8080,b-2,0,DOWN 1/2,1\n" +
		"be.lb1.8080,c-3,0,MAINT,1\n" +
		"be.lb1.8080,BACKEND,0,UP,1\n\n"
	s, err := parseStat(out)
	if err != nil {
		t.Fatalf("parseStat: %v", err)
	}
	if got := s.Frontends["fe.lb1.8080"].Status; got != "OPEN" {
		t.Errorf("frontend: got %q; want OPEN", got)
	}
	want := map[string]string{"a-1": "UP", "b-2": "DOWN 1/2", "c-3": "MAINT"}
	for name, st := range want {
		if got := s.Servers["be.lb1.8080"][name].Status; got != st {
			t.Errorf("server %s: got %q; want %q", name, got, st)
		}
	}
	if _, err := parseStat("Unknown command\n"); err == nil {
		t.Errorf("parseStat of an error answer: got nil; want an error")
	}
}

func TestHealthOfStatus(t *testing.T) {
	tests := []struct{ in, want string }{
		{"UP", "up"}, {"UP 1/2", "up"}, {"no check", "up"},
		{"DOWN", "down"}, {"DOWN 1/2", "down"}, {"NOLB", "down"},
		{"MAINT", "maint"}, {"MAINT (via be/x)", "maint"}, {"DRAIN", "maint"},
	}
	for _, tc := range tests {
		if got := health(tc.in); got != tc.want {
			t.Errorf("health(%q): got %q; want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseServersState(t *testing.T) {
	out := "1\n# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight srv_iweight srv_time_since_last_change srv_check_status srv_check_result srv_check_health srv_check_state srv_agent_state bk_f_forced_id srv_f_forced_id srv_fqdn srv_port srvrecord\n" +
		"3 be.lb1.8080 1 a-1 127.0.0.1 2 0 1 1 15 6 3 4 6 0 0 0 - 28081 -\n" +
		"3 be.lb1.8080 2 b-2 ::1 0 1 1 1 14 1 0 0 2 0 0 0 - 28082 -\n"
	got, err := parseServersState(out)
	if err != nil {
		t.Fatalf("parseServersState: %v", err)
	}
	want := []runtimeServer{
		{Backend: "be.lb1.8080", Name: "a-1", Addr: "127.0.0.1", Port: 28081, Admin: 0},
		{Backend: "be.lb1.8080", Name: "b-2", Addr: "::1", Port: 28082, Admin: 1},
	}
	if !slices.Equal(got, want) {
		t.Errorf("parseServersState: got %+v; want %+v", got, want)
	}
}

func TestParseShowProc(t *testing.T) {
	out := `#<PID>          <type>          <reloads>       <uptime>        <version>
24114           master          2 [failed: 1]   0d00h01m04s     2.6.12-1+deb12u4
# workers
26494           worker          0               0d00h00m02s     2.6.12-1+deb12u4
22872           worker          1               0d00h00m16s     2.6.12-1+deb12u4
# programs
`
	got, err := parseShowProc(out)
	if err != nil {
		t.Fatalf("parseShowProc: %v", err)
	}
	want := procInfo{MasterPID: 24114, Reloads: 2, Failed: 1, Worker: 26494, WorkerReloads: 0}
	if got != want {
		t.Errorf("parseShowProc: got %+v; want %+v", got, want)
	}
	if _, err := parseShowProc(""); err == nil {
		t.Errorf("parseShowProc of nothing: got nil; want an error")
	}
}

func TestParseAlerts(t *testing.T) {
	p := newPaths("/state")
	r := render(p, runAs{}, []resolved{
		mustResolve(t, "lb1", spec(nil)),
		mustResolve(t, "lb2", spec(func(s *api.LoadbalancerSpec) { s.Listeners[0].Port = 9090 })),
	})
	line := 0
	for i, l := range strings.Split(r.Text, "\n") {
		if l == "    bind 127.0.0.1:9090" {
			line = i + 1
		}
	}
	out := "[NOTICE]   (1) : haproxy version is 2.6.12\n" +
		"[ALERT]    (1) : Binding [/state/haproxy.cfg:" + strconv.Itoa(line) + "] for frontend fe.lb2.9090: cannot bind socket (Address already in use) for [127.0.0.1:9090]\n" +
		"[ALERT]    (1) : [haproxy.main()] Some protocols failed to start their listeners! Exiting.\n" +
		"[ALERT]    (1) : config : something global went wrong\n"
	alerts, byLB := parseAlerts(out, p.Config, r)
	wantLB2 := "haproxy: Binding for frontend fe.lb2.9090: cannot bind socket (Address already in use) for [127.0.0.1:9090]"
	if got := byLB["lb2"]; got != wantLB2 {
		t.Errorf("alert of lb2: got %q; want %q", got, wantLB2)
	}
	if len(byLB) != 1 {
		t.Errorf("attributed alerts: got %v; want only lb2's", byLB)
	}
	if len(alerts) != 2 {
		t.Errorf("alerts: got %q; want the bind and the global one", alerts)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name  string
		cfg   Config
		field string
	}{
		{"defaults", Config{StateDir: "/var/lib/strata"}.withDefaults(), ""},
		{"no state dir", Config{}.withDefaults(), "stateDir"},
		{"bad bind address", Config{StateDir: "/x", BindAddress: "any"}.withDefaults(), "bindAddress"},
		{"no servers", Config{StateDir: "/x", MaxServers: -1}.withDefaults(), "maxServers"},
		{"state dir too long for sockets", Config{StateDir: "/" + strings.Repeat("d", 100)}.withDefaults(), "stateDir"},
		{"bad bind addresses", Config{StateDir: "/x", BindAddresses: []string{"any"}}.withDefaults(), "bindAddresses"},
		{"bad ports", Config{StateDir: "/x", Ports: "80-"}.withDefaults(), "ports"},
		{"user that breaks the configuration", Config{StateDir: "/x", User: "haproxy\n    stats socket /tmp/x"}.withDefaults(), "user"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			var fe *api.FieldError
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("Validate: got %v; want nil", err)
			case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field):
				t.Fatalf("Validate: got %v; want an invalid %s", err, tc.field)
			}
		})
	}
}

func TestFactory(t *testing.T) {
	tests := []struct {
		name    string
		options map[string]any
		want    Config
		err     string
	}{
		{"defaults", nil, Config{Binary: DefaultBinary, BindAddress: DefaultBindAddress, MaxServers: DefaultMaxServers,
			Ports: DefaultPorts, User: DefaultUser, Group: DefaultGroup}, ""},
		{"keys as viper lowercases them", map[string]any{
			"binary": "/opt/haproxy", "bindaddress": "0.0.0.0", "maxservers": 8,
			"bindaddresses": []any{"192.0.2.10"}, "ports": "8000-8999", "allowprivilegedports": true, "user": "root", "group": "root",
		}, Config{
			Binary: "/opt/haproxy", BindAddress: "0.0.0.0", MaxServers: 8,
			BindAddresses: []string{"192.0.2.10"}, Ports: "8000-8999", AllowPrivilegedPorts: true, User: "root", Group: "root",
		}, ""},
		{"no such user", map[string]any{"user": "no-such-user-strata"}, Config{}, "no-such-user-strata"},
		{"typo", map[string]any{"maxserver": 8}, Config{}, "maxserver"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			pv, err := Factory(t.Context(), provider.Options{Name: "lb", DataDir: dir, Config: tc.options})
			if tc.err != "" {
				if !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Factory: got %v; want an invalid error mentioning %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Factory: %v", err)
			}
			p := pv.(*Provider)
			t.Cleanup(func() { p.Shutdown(context.WithoutCancel(t.Context())) })
			tc.want.StateDir = dir
			if !reflect.DeepEqual(p.cfg, tc.want) {
				t.Errorf("config: got %+v; want %+v", p.cfg, tc.want)
			}
			if info, _ := p.Info(t.Context()); info.Name != "lb" || !slices.Equal(info.Kinds, []api.ProviderKind{api.ProviderLoadbalancer}) {
				t.Errorf("Info: got %+v; want name lb serving loadbalancer", info)
			}
		})
	}
}

// TestHostListeners: where replicas may reach load balancers on the
// node: each non-loopback bind address, with the ports listeners may
// bind there (allowed less reserved, privileged only when allowed).
func TestHostListeners(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"loopback only (the default)", Config{BindAddress: "127.0.0.1"}, ""},
		{"node addresses", Config{BindAddress: "127.0.0.1", BindAddresses: []string{"192.0.2.7", "0.0.0.0", "192.0.2.7"}, Ports: "80,30000-30010", AllowPrivilegedPorts: false},
			"tcp 192.0.2.7 30000-30004,30006-30010; tcp 0.0.0.0 30000-30004,30006-30010"},
		{"no port left", Config{BindAddress: "192.0.2.7", Ports: "30005"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.StateDir = t.TempDir()
			cfg := tt.cfg.withDefaults()
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			p := &Provider{lim: cfg.limits(hostpolicy.MustParsePorts("30005"))}
			var got []string
			for _, l := range p.HostListeners() {
				got = append(got, fmt.Sprintf("%s %s %s", l.Proto, l.Addr, l.Ports))
			}
			if s := strings.Join(got, "; "); s != tt.want {
				t.Errorf("got %q; want %q", s, tt.want)
			}
		})
	}
}
