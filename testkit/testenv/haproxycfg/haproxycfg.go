// Package haproxycfg writes the configuration of the TCP load balancer
// that tests and the benchmark put in front of a tier's replicas, as
// docs/operations.md ("A tier behind a TCP load balancer") shows it: TCP
// mode, TLS passed through to the replicas, each checked with GET /readyz
// over TLS (the CA verified) every 500 ms and taken out after two failed
// checks, so that a replica that is down or not ready gets no new
// connections; a connection that fails is retried on another replica at
// once.
package haproxycfg

import (
	"fmt"
	"strings"
)

// Frontend is one listening address and the replicas behind it.
type Frontend struct {
	Name    string
	Bind    string
	Servers []Server
}

// Server is one replica: the address connections go to, and the port of
// its REST API the readiness check goes to (0: Addr's).
type Server struct {
	Name      string
	Addr      string
	CheckPort int
}

// Global is the balancer's process-wide settings.
type Global struct {
	// MaxConn bounds the connections haproxy holds.
	MaxConn int
	// CAFile verifies the replicas' certificates in the checks.
	CAFile string
	// StatsSocket, when set, is the path of a unix socket that serves
	// haproxy's runtime API read-only: "show stat" says which replicas
	// the checks count in.
	StatsSocket string
}

// Render is the configuration of g with fronts.
func Render(g Global, fronts ...Frontend) string {
	var b strings.Builder
	fmt.Fprintf(&b, "global\n  maxconn %d\n", g.MaxConn)
	if g.StatsSocket != "" {
		fmt.Fprintf(&b, "  stats socket %s mode 600 level user\n", g.StatsSocket)
	}
	fmt.Fprintf(&b, `defaults
  mode tcp
  timeout connect 2s
  timeout client 1h
  timeout server 1h
  option redispatch 1
  retries 2
  option httpchk
  http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host localhost
  http-check expect status 200
  default-server inter 500ms fall 2 rise 2 check-ssl verify required ca-file %s
`, g.CAFile)
	for _, f := range fronts {
		fmt.Fprintf(&b, "frontend %s\n  bind %s\n  default_backend %s\nbackend %s\n", f.Name, f.Bind, f.Name, f.Name)
		for _, s := range f.Servers {
			fmt.Fprintf(&b, "  server %s %s check", s.Name, s.Addr)
			if s.CheckPort != 0 {
				fmt.Fprintf(&b, " port %d", s.CheckPort)
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}
