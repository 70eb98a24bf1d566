package api

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func intp(v int) *int { return &v }

func TestProbeValidate(t *testing.T) {
	httpProbe := func(mod func(*Probe)) *Probe {
		p := &Probe{HTTPGet: &HTTPGetAction{Path: "/healthz", Port: 8080}}
		if mod != nil {
			mod(p)
		}
		return p
	}
	for _, tc := range []struct {
		name string
		kind ProbeKind
		p    *Probe
		want []string // every field error, in order; none: valid
	}{
		{name: "http ok", kind: ProbeReadiness, p: httpProbe(nil)},
		{name: "http all fields", kind: ProbeReadiness, p: httpProbe(func(p *Probe) {
			p.HTTPGet.Host = "10.0.0.1"
			p.HTTPGet.Scheme = "HTTPS"
			p.HTTPGet.Path = "/ready?full=1"
			p.HTTPGet.HTTPHeaders = []HTTPHeader{{Name: "Host", Value: "example.com"}, {Name: "X-Token", Value: "a b"}}
			p.InitialDelaySeconds, p.PeriodSeconds, p.TimeoutSeconds = 5, intp(2), intp(1)
			p.SuccessThreshold, p.FailureThreshold = intp(2), intp(5)
		})},
		{name: "tcp ok", kind: ProbeLiveness, p: &Probe{TCPSocket: &TCPSocketAction{Port: 22}}},
		{name: "grpc ok", kind: ProbeStartup, p: &Probe{GRPC: &GRPCAction{Port: 9090, Service: "strata.v1"}}},
		{name: "exec ok", kind: ProbeLiveness, p: &Probe{Exec: &ExecAction{Command: []string{"sh", "-c", "test -f /tmp/ok\n"}}}},
		{name: "no handler", kind: ProbeReadiness, p: &Probe{},
			want: []string{"c.readinessProbe: needs one handler: httpGet, tcpSocket, grpc, exec or guestAgent"}},
		{name: "two handlers", kind: ProbeReadiness, p: &Probe{HTTPGet: &HTTPGetAction{Port: 80}, Exec: &ExecAction{Command: []string{"true"}}},
			want: []string{"c.readinessProbe: has 2 handlers (httpGet, exec): set exactly one"}},
		{name: "port too high", kind: ProbeReadiness, p: httpProbe(func(p *Probe) { p.HTTPGet.Port = 70000 }),
			want: []string{"c.readinessProbe.httpGet.port: 70000 is out of range 1-65535"}},
		{name: "port missing", kind: ProbeReadiness, p: &Probe{HTTPGet: &HTTPGetAction{}},
			want: []string{"c.readinessProbe.httpGet.port: 0 is out of range 1-65535"}},
		{name: "tcp port", kind: ProbeLiveness, p: &Probe{TCPSocket: &TCPSocketAction{Port: -1}},
			want: []string{"c.livenessProbe.tcpSocket.port: -1 is out of range 1-65535"}},
		{name: "grpc port", kind: ProbeStartup, p: &Probe{GRPC: &GRPCAction{Port: 65536}},
			want: []string{"c.startupProbe.grpc.port: 65536 is out of range 1-65535"}},
		{name: "grpc service", kind: ProbeStartup, p: &Probe{GRPC: &GRPCAction{Port: 1, Service: "a\x1bb"}},
			want: []string{"c.startupProbe.grpc.service: \"a\\x1bb\" is not a service name (at most 253 characters, no control characters)"}},
		{name: "relative path", kind: ProbeReadiness, p: httpProbe(func(p *Probe) { p.HTTPGet.Path = "healthz" }),
			want: []string{`c.readinessProbe.httpGet.path: "healthz" must start with "/"`}},
		{name: "url as path", kind: ProbeReadiness, p: httpProbe(func(p *Probe) { p.HTTPGet.Path = "http://x/healthz" }),
			want: []string{`c.readinessProbe.httpGet.path: "http://x/healthz" must start with "/"`}},
		{name: "path with space", kind: ProbeReadiness, p: httpProbe(func(p *Probe) { p.HTTPGet.Path = "/a b" }),
			want: []string{`c.readinessProbe.httpGet.path: "/a b" has a space, '#' or a control character (escape it as %XX)`}},
		{name: "path with newline", kind: ProbeReadiness, p: httpProbe(func(p *Probe) { p.HTTPGet.Path = "/a\r\nX: y" }),
			want: []string{`c.readinessProbe.httpGet.path: "/a\r\nX: y" has a space, '#' or a control character (escape it as %XX)`}},
		{name: "host with port", kind: ProbeReadiness, p: httpProbe(func(p *Probe) { p.HTTPGet.Host = "example.com:80" }),
			want: []string{`c.readinessProbe.httpGet.host: "example.com:80" is not an IP address or a host name (no scheme, port or path)`}},
		{name: "scheme", kind: ProbeReadiness, p: httpProbe(func(p *Probe) { p.HTTPGet.Scheme = "ftp" }),
			want: []string{`c.readinessProbe.httpGet.scheme: "ftp" is not one of "http", "https"`}},
		{name: "header name", kind: ProbeReadiness, p: httpProbe(func(p *Probe) {
			p.HTTPGet.HTTPHeaders = []HTTPHeader{{Name: "Bad Name", Value: "v"}, {Name: "X", Value: "a\nb"}}
		}), want: []string{
			`c.readinessProbe.httpGet.httpHeaders[0].name: "Bad Name" is not a header name`,
			`c.readinessProbe.httpGet.httpHeaders[1].value: "a\nb" is not a header value (no line breaks or control characters)`,
		}},
		{name: "exec without command", kind: ProbeLiveness, p: &Probe{Exec: &ExecAction{}},
			want: []string{"c.livenessProbe.exec.command: is required: the program to run and its arguments"}},
		{name: "exec empty program", kind: ProbeLiveness, p: &Probe{Exec: &ExecAction{Command: []string{""}}},
			want: []string{"c.livenessProbe.exec.command[0]: is empty: it names the program to run"}},
		{name: "exec NUL", kind: ProbeLiveness, p: &Probe{Exec: &ExecAction{Command: []string{"sh", "a\x00b"}}},
			want: []string{"c.livenessProbe.exec.command[1]: has a NUL character"}},
		{name: "zero thresholds and period", kind: ProbeReadiness, p: httpProbe(func(p *Probe) {
			p.PeriodSeconds, p.TimeoutSeconds, p.SuccessThreshold, p.FailureThreshold = intp(0), intp(0), intp(0), intp(0)
		}), want: []string{
			"c.readinessProbe.periodSeconds: 0 is out of range 1-86400",
			"c.readinessProbe.timeoutSeconds: 0 is out of range 1-86400",
			"c.readinessProbe.successThreshold: 0 is out of range 1-10000",
			"c.readinessProbe.failureThreshold: 0 is out of range 1-10000",
		}},
		{name: "negative delay", kind: ProbeReadiness, p: httpProbe(func(p *Probe) { p.InitialDelaySeconds = -1 }),
			want: []string{"c.readinessProbe.initialDelaySeconds: -1 is out of range 0-86400"}},
		{name: "period overflow", kind: ProbeReadiness, p: httpProbe(func(p *Probe) { p.PeriodSeconds = intp(1 << 40) }),
			want: []string{"c.readinessProbe.periodSeconds: 1099511627776 is out of range 1-86400"}},
		{name: "liveness success threshold", kind: ProbeLiveness, p: httpProbe(func(p *Probe) { p.SuccessThreshold = intp(2) }),
			want: []string{"c.livenessProbe.successThreshold: must be 1 for a liveness probe, not 2"}},
		{name: "startup success threshold", kind: ProbeStartup, p: httpProbe(func(p *Probe) { p.SuccessThreshold = intp(3) }),
			want: []string{"c.startupProbe.successThreshold: must be 1 for a startup probe, not 3"}},
		{name: "handler and timing errors together", kind: ProbeReadiness, p: &Probe{TCPSocket: &TCPSocketAction{Port: 0}, FailureThreshold: intp(-2)},
			want: []string{
				"c.readinessProbe.tcpSocket.port: 0 is out of range 1-65535",
				"c.readinessProbe.failureThreshold: -2 is out of range 1-10000",
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ps Probes
			switch tc.kind {
			case ProbeStartup:
				ps.StartupProbe = tc.p
			case ProbeReadiness:
				ps.ReadinessProbe = tc.p
			case ProbeLiveness:
				ps.LivenessProbe = tc.p
			}
			err := ps.Validate("c")
			var got []string
			for _, fe := range Fields(err) {
				got = append(got, fe.Error())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %q; want %q", got, tc.want)
			}
			if tc.want != nil && !errors.Is(err, ErrInvalid) {
				t.Errorf("errors.Is(%v, ErrInvalid) = false; want true", err)
			}
			// Defaults never make an invalid probe valid or a valid one
			// invalid.
			d := ps.WithDefaults()
			if derr := d.Validate("c"); (derr == nil) != (err == nil) {
				t.Errorf("after WithDefaults: %v; before: %v", derr, err)
			}
		})
	}
}

func TestProbesValidateNamesEachProbe(t *testing.T) {
	ps := Probes{
		StartupProbe:   &Probe{TCPSocket: &TCPSocketAction{Port: 99999}},
		ReadinessProbe: &Probe{Exec: &ExecAction{}},
		LivenessProbe:  &Probe{HTTPGet: &HTTPGetAction{Port: 80, Path: "x"}},
	}
	err := ps.Validate("containers[0]")
	want := "containers[0].startupProbe.tcpSocket.port: 99999 is out of range 1-65535; " +
		"containers[0].readinessProbe.exec.command: is required: the program to run and its arguments; " +
		`containers[0].livenessProbe.httpGet.path: "x" must start with "/"`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v; want %s", err, want)
	}
	if err := (&Probes{}).Validate("c"); err != nil {
		t.Errorf("no probes: got %v; want nil", err)
	}
	if err := (&Probe{TCPSocket: &TCPSocketAction{Port: 0}}).Validate("", ProbeReadiness); err == nil || err.Error() != "tcpSocket.port: 0 is out of range 1-65535" {
		t.Errorf("top-level probe: got %v", err)
	}
}

func TestProbeWithDefaults(t *testing.T) {
	in := Probe{HTTPGet: &HTTPGetAction{Port: 80, Scheme: "HTTPS", HTTPHeaders: []HTTPHeader{{Name: "A", Value: "b"}}}, InitialDelaySeconds: 3, FailureThreshold: intp(7)}
	got := in.WithDefaults()
	want := Probe{
		HTTPGet:             &HTTPGetAction{Port: 80, Path: "/", Scheme: SchemeHTTPS, HTTPHeaders: []HTTPHeader{{Name: "A", Value: "b"}}},
		InitialDelaySeconds: 3,
		PeriodSeconds:       intp(10), TimeoutSeconds: intp(1), SuccessThreshold: intp(1), FailureThreshold: intp(7),
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v; want %+v", got, want)
	}
	// The copy shares nothing with the input.
	*got.FailureThreshold = 1
	got.HTTPGet.HTTPHeaders[0].Value = "changed"
	got.HTTPGet.Path = "/other"
	if *in.FailureThreshold != 7 || in.HTTPGet.HTTPHeaders[0].Value != "b" || in.HTTPGet.Path != "" || in.HTTPGet.Scheme != "HTTPS" {
		t.Errorf("WithDefaults changed its input: %+v %+v", in, in.HTTPGet)
	}
	e := Probe{Exec: &ExecAction{Command: []string{"true"}}}
	ed := e.WithDefaults()
	ed.Exec.Command[0] = "false"
	if e.Exec.Command[0] != "true" {
		t.Errorf("WithDefaults shares exec.command with its input")
	}

	ps := Probes{ReadinessProbe: &Probe{TCPSocket: &TCPSocketAction{Port: 1}}}
	pd := ps.WithDefaults()
	if pd.StartupProbe != nil || pd.LivenessProbe != nil {
		t.Errorf("WithDefaults added probes: %+v", pd)
	}
	if pd.ReadinessProbe == ps.ReadinessProbe || *pd.ReadinessProbe.PeriodSeconds != 10 || ps.ReadinessProbe.PeriodSeconds != nil {
		t.Errorf("Probes.WithDefaults: got %+v from %+v", pd.ReadinessProbe, ps.ReadinessProbe)
	}
}

// The JSON is Kubernetes': a probe written for a pod decodes the same.
func TestProbeJSONIsKubernetes(t *testing.T) {
	const k8s = `{
	  "startupProbe": {"exec": {"command": ["cat", "/tmp/started"]}, "failureThreshold": 30, "periodSeconds": 10},
	  "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080, "scheme": "HTTP", "httpHeaders": [{"name": "X-Probe", "value": "1"}]},
	                     "initialDelaySeconds": 5, "timeoutSeconds": 2, "successThreshold": 2},
	  "livenessProbe": {"grpc": {"port": 9090, "service": "liveness"}, "periodSeconds": 3}
	}`
	var ps Probes
	dec := json.NewDecoder(strings.NewReader(k8s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ps); err != nil {
		t.Fatal(err)
	}
	if err := ps.Validate("spec"); err != nil {
		t.Fatal(err)
	}
	r := ps.ReadinessProbe
	if r.HTTPGet.Path != "/ready" || r.HTTPGet.Port != 8080 || r.InitialDelaySeconds != 5 || *r.TimeoutSeconds != 2 || *r.SuccessThreshold != 2 || r.HTTPGet.HTTPHeaders[0].Name != "X-Probe" {
		t.Errorf("readinessProbe decoded as %+v %+v", r, r.HTTPGet)
	}
	if ps.StartupProbe.Exec.Command[1] != "/tmp/started" || *ps.StartupProbe.FailureThreshold != 30 {
		t.Errorf("startupProbe decoded as %+v", ps.StartupProbe)
	}
	if ps.LivenessProbe.GRPC.Service != "liveness" || *ps.LivenessProbe.PeriodSeconds != 3 {
		t.Errorf("livenessProbe decoded as %+v", ps.LivenessProbe)
	}
	out, err := json.Marshal(Probes{LivenessProbe: &Probe{TCPSocket: &TCPSocketAction{Port: 22}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"livenessProbe":{"tcpSocket":{"port":22}}}`; string(out) != want {
		t.Errorf("got %s; want %s", out, want)
	}
}
