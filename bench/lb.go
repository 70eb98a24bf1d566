package main

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"time"
)

// startLB runs haproxy as docs/operations.md ("A tier behind a TCP load
// balancer") configures it: TCP mode, TLS passed through to the replicas,
// each checked with GET /readyz over TLS (the CA verified) every 500 ms,
// out after two failed checks. A frontend is opened for each of fronts
// (one address per replica, in replicas' order); check are the replicas'
// REST addresses the checks go to. It returns the frontends' addresses.
func (c *cluster) startLB(ctx context.Context, name string, check []string, fronts ...[]string) ([]string, error) {
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		return nil, fmt.Errorf("the production shape's load balancers need haproxy: %w", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `global
  # The most this machine's open-file limit (20,000) lets haproxy
  # hold: two descriptors a connection.
  maxconn 9000
defaults
  mode tcp
  timeout connect 2s
  timeout client 1h
  timeout server 1h
  option redispatch
  retries 2
  option httpchk
  http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host localhost
  http-check expect status 200
  default-server inter 500ms fall 2 rise 2 check-ssl verify required ca-file %s
`, c.caFile)
	addrs := make([]string, len(fronts))
	for i, servers := range fronts {
		addrs[i] = freeAddr()
		fmt.Fprintf(&b, "frontend f%d\n  bind %s\n  default_backend b%d\nbackend b%d\n", i, addrs[i], i, i)
		for j, s := range servers {
			_, port, _ := net.SplitHostPort(check[j])
			fmt.Fprintf(&b, "  server r%d %s check port %s\n", j+1, s, port)
		}
	}
	cfg := c.s.write(c.name+"-"+name+".cfg", b.String())
	p, err := start(c.s.dir, c.name+"-"+name, bin, "-f", cfg, "-db")
	if err != nil {
		return nil, err
	}
	c.s.procs = append(c.s.procs, p)
	// Up when the first frontend takes a connection (haproxy has bound
	// every listener by then); an haproxy that exits ends the wait.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-p.done:
			cancel()
		case <-wctx.Done():
		}
	}()
	return addrs, waitFor(wctx, 50*time.Millisecond, name, func() error {
		select {
		case <-p.done:
			return fmt.Errorf("haproxy exited:\n%s", p.tail(10))
		default:
		}
		conn, err := (&netDialer{}).dial(addrs[0])
		if err == nil {
			conn.Close()
		}
		return err
	})
}
