package main

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"time"

	"github.com/stratahq/strata/internal/testenv/haproxycfg"
)

// startLB runs haproxy as docs/operations.md ("A tier behind a TCP load
// balancer") configures it (internal/testenv/haproxycfg). A frontend is opened for each of fronts
// (one address per replica, in replicas' order); check are the replicas'
// REST addresses the checks go to. It returns the frontends' addresses.
func (c *cluster) startLB(ctx context.Context, name string, check []string, fronts ...[]string) ([]string, error) {
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		return nil, fmt.Errorf("the production shape's load balancers need haproxy: %w", err)
	}
	// The most this machine's open-file limit (20,000) lets haproxy hold:
	// two descriptors a connection.
	const maxConn = 9000
	addrs := make([]string, len(fronts))
	frontends := make([]haproxycfg.Frontend, len(fronts))
	for i, servers := range fronts {
		addrs[i] = freeAddr()
		f := haproxycfg.Frontend{Name: fmt.Sprintf("f%d", i), Bind: addrs[i]}
		for j, s := range servers {
			_, port, _ := net.SplitHostPort(check[j])
			p, _ := strconv.Atoi(port)
			f.Servers = append(f.Servers, haproxycfg.Server{Name: fmt.Sprintf("r%d", j+1), Addr: s, CheckPort: p})
		}
		frontends[i] = f
	}
	cfg := c.s.write(c.name+"-"+name+".cfg", haproxycfg.Render(maxConn, c.caFile, frontends...))
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
