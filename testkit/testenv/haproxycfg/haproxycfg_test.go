package haproxycfg

import (
	"strings"
	"testing"
)

func TestRender(t *testing.T) {
	got := Render(Global{MaxConn: 2000, CAFile: "/ca.pem", StatsSocket: "/run/lb.sock"},
		Frontend{Name: "rest", Bind: "10.0.0.1:8080", Servers: []Server{{Name: "g1", Addr: "10.0.0.2:8080"}}},
		Frontend{Name: "grpc", Bind: "10.0.0.1:9090", Servers: []Server{{Name: "g1", Addr: "10.0.0.2:9090", CheckPort: 8080}}})
	for _, want := range []string{
		"global\n  maxconn 2000\n  stats socket /run/lb.sock mode 600 level user\ndefaults\n",
		"  option redispatch 1\n",
		"  default-server inter 500ms fall 2 rise 2 check-ssl verify required ca-file /ca.pem\n",
		"frontend rest\n  bind 10.0.0.1:8080\n  default_backend rest\nbackend rest\n  server g1 10.0.0.2:8080 check\n",
		"frontend grpc\n  bind 10.0.0.1:9090\n  default_backend grpc\nbackend grpc\n  server g1 10.0.0.2:9090 check port 8080\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("config lacks %q:\n%s", want, got)
		}
	}
}
