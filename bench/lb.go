package main

import (
	"context"
	"encoding/csv"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/stratahq/strata/testkit/testenv/haproxycfg"
)

// startLB runs haproxy as docs/operations.md ("A tier behind a TCP load
// balancer") configures it (testkit/testenv/haproxycfg). A frontend is opened for each of fronts
// (one address per replica, in replicas' order); check are the replicas'
// REST addresses the checks go to. It returns the frontends' addresses;
// lbServing tells whether it sends connections to a replica.
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
			f.Servers = append(f.Servers, haproxycfg.Server{Name: lbServer(j), Addr: s, CheckPort: p})
		}
		frontends[i] = f
	}
	g := haproxycfg.Global{MaxConn: maxConn, CAFile: c.caFile, StatsSocket: c.lbSocket(name)}
	cfg := c.s.write(c.name+"-"+name+".cfg", haproxycfg.Render(g, frontends...))
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

// lbServer is the name of the balancer's server for replica i.
func lbServer(i int) string { return fmt.Sprintf("r%d", i+1) }

// lbSocket is the path of the runtime API socket of the balancer name.
func (c *cluster) lbSocket(name string) string {
	return filepath.Join(c.s.dir, c.name+"-"+name+".sock")
}

// lbServing reports whether the balancer name counts replica i in, in
// every frontend: its checks passed (haproxy's "show stat" says UP), so
// that new connections go to it. A replica that is ready but not yet
// counted in (rise: two checks 500 ms apart) gets none.
func (c *cluster) lbServing(name string, i int) error {
	conn, err := net.DialTimeout("unix", c.lbSocket(name), 2*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte("show stat\n")); err != nil {
		return err
	}
	rd := csv.NewReader(conn)
	rd.FieldsPerRecord = -1
	rows, err := rd.ReadAll()
	if err != nil {
		return fmt.Errorf("show stat: %w", err)
	}
	if len(rows) == 0 {
		return fmt.Errorf("show stat: no header")
	}
	col := map[string]int{}
	for j, h := range rows[0] {
		col[strings.TrimPrefix(h, "# ")] = j
	}
	sv, st := col["svname"], col["status"]
	seen := 0
	for _, r := range rows[1:] {
		if len(r) <= max(sv, st) || r[sv] != lbServer(i) {
			continue
		}
		if seen++; r[st] != "UP" {
			return fmt.Errorf("%s is %s in %s", lbServer(i), r[st], r[col["pxname"]])
		}
	}
	if seen == 0 {
		return fmt.Errorf("%s is not in show stat", lbServer(i))
	}
	return nil
}
