package e2e

// End-to-end tests of networking across hosts (issue 15): each agent runs
// as a host of its own, in a network namespace with its own underlay
// address on a shared segment, its own bridge and VXLAN device, its data
// plane following the region's node list; containerd is the machine's,
// shared. Real containers and HAProxy carry the traffic, which is sent
// from inside the hosts' namespaces; the data plane is checked with
// netlink in those namespaces, as `ip route`, `ip neigh` and `bridge fdb`
// would show it.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/agent/netplane"
	"github.com/stratahq/strata/e2e/framework"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/testkit/simhost"
)

// multiNet is the network of this file's clusters; every host names its
// bridge e2e-m0, in its own namespace.
var multiNet = hostNet{Name: "e2e-m0", Subnet: "10.235.0.0/16", Gateway: "10.235.0.1", Bridge: "e2e-m0", NodeMask: 24}

// hostLabels labels node j host=h<j+1>, and role=front for the first,
// backend for the others.
func hostLabels(j int) map[string]string {
	role := "backend"
	if j == 0 {
		role = "front"
	}
	return map[string]string{"host": fmt.Sprintf("h%d", j+1), "role": role}
}

// onNodes schedules resource r in the cluster's region on the nodes with
// labels selector.
func (c *hostCluster) onNodes(r map[string]any, selector map[string]string, antiAffinity string) map[string]any {
	s := map[string]any{"regions": []map[string]any{{"name": c.o.region}}, "nodeSelector": selector}
	if antiAffinity != "" {
		s["antiAffinity"] = antiAffinity
	}
	r["schedule"] = s
	return r
}

// kernel is the data plane's view of node's host, in its namespace.
func (c *hostCluster) kernel(node string) *netplane.Netlink {
	c.t.Helper()
	k, err := netplane.NewNetlink(c.host[node].Path)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(k.Close)
	return k
}

// routesTo reports what node's host has of other's: its block's route,
// and with VXLAN its neighbour and forwarding entries.
func (c *hostCluster) routesTo(node, other string) (route, neigh, fdb bool, err error) {
	block, err := c.block(other)
	if err != nil {
		return false, false, false, err
	}
	return c.entriesFor(node, block, netplane.VTEPMAC(other))
}

// entriesFor reports whether node's host has a route to block, and with
// VXLAN a neighbour entry for it and a forwarding entry for mac.
func (c *hostCluster) entriesFor(node string, block netip.Prefix, mac net.HardwareAddr) (route, neigh, fdb bool, err error) {
	k := c.kernel(node)
	rs, err := k.Routes()
	if err != nil {
		return false, false, false, err
	}
	route = slices.ContainsFunc(rs, func(r netplane.Route) bool { return r.Dst == block })
	if c.backend() != api.BackendVXLAN {
		return route, false, false, nil
	}
	ns, err := k.Neighbors(netplane.DefaultVXLANDevice)
	if err != nil {
		return false, false, false, err
	}
	neigh = slices.ContainsFunc(ns, func(n netplane.Neighbor) bool { return n.IP == block.Addr() })
	fs, err := k.FDB(netplane.DefaultVXLANDevice)
	if err != nil {
		return false, false, false, err
	}
	fdb = slices.ContainsFunc(fs, func(e netplane.FDBEntry) bool { return e.MAC.String() == mac.String() })
	return route, neigh, fdb, nil
}

// nodeOf returns the node each replica runs on.
func nodesOf(reps []api.Replica) []string {
	var out []string
	for _, r := range reps {
		out = append(out, r.Node)
	}
	slices.Sort(out)
	return out
}

// waitDataPlaneApplied waits until the agent of node, since its last
// start, has applied the region's network once, and returns the message:
// "data plane applied" (it changed something) or "data plane unchanged".
func (c *hostCluster) waitDataPlaneApplied(node string, timeout time.Duration) string {
	c.t.Helper()
	var got string
	framework.Eventually(c.t, timeout, "the data plane of "+node+" applied after the agent's start", func() error {
		log := agentLogSinceStart(c.agents[node])
		for _, msg := range []string{`msg="data plane applied"`, `msg="data plane unchanged"`} {
			if strings.Contains(log, msg) {
				got = msg
				return nil
			}
		}
		return fmt.Errorf("not yet")
	})
	return got
}

// echoLine sends a line on c and reads it back.
func echoLine(c net.Conn, r *bufio.Reader, line string) error {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return err
	}
	got, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(got) != line {
		return fmt.Errorf("echo: got %q; want %q", got, line)
	}
	return nil
}

// TestMultiHostVXLAN runs three hosts on the vxlan backend: web replicas
// on hosts 2 and 3, a client replica and a load balancer on host 1.
// It checks, in order: the client reaches both web replicas by address,
// unmasqueraded; the load balancer on host 1 round-robins over them; a
// connection from host 1 to a replica on host 2 survives restarts of
// both agents, which change nothing on their hosts; draining host 2
// moves its web replica to host 3 while the load balancer keeps
// answering (the failed requests are counted); deleting node 2 removes
// its route, neighbour and forwarding entries from the other hosts.
func TestMultiHostVXLAN(t *testing.T) {
	c := startHostCluster(t, hostClusterOpts{region: "e2e-m", network: multiNet, agents: 3, haproxy: true, hosts: true, labels: hostLabels})
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	c.flavor("small", 0.25, 64)
	c.image()

	// Every host routes the others' blocks, with neighbour and
	// forwarding entries.
	framework.Eventually(t, 30*time.Second, "every host routes every other host's block", func() error {
		for _, a := range c.nodes {
			for _, b := range c.nodes {
				if a == b {
					continue
				}
				route, neigh, fdb, err := c.routesTo(a, b)
				if err != nil || !route || !neigh || !fdb {
					return fmt.Errorf("%s → %s: route %v, neighbour %v, fdb %v (%v)", a, b, route, neigh, fdb, err)
				}
			}
		}
		return nil
	})

	c.create(c.onNodes(hostCompute("web", 2, lbWebCommand, nil), map[string]string{"role": "backend"}, "soft"))
	web := c.waitReady("web", 2, 90*time.Second)
	if got := nodesOf(web); !slices.Equal(got, []string{n2, n3}) {
		t.Fatalf("web replicas on %v; want one on each of %s and %s", got, n2, n3)
	}
	var targets []string
	for _, r := range web {
		block, err := c.block(r.Node)
		addr, aerr := netip.ParseAddr(replicaAddress(r))
		if err != nil || aerr != nil || !block.Contains(addr) || r.Network.MTU != 1450 {
			t.Fatalf("replica %s on %s: %+v; want an address of the node's block %s (%v), MTU 1450", r.ID, r.Node, r.Network, block, err)
		}
		targets = append(targets, addr.String())
	}

	// A replica on host 1 reaches both, by address.
	c.create(c.onNodes(hostCompute("client", 1,
		`echo mtu=$(cat /sys/class/net/eth0/mtu); for ip in $TARGETS; do n=0; until timeout 5 wget -q -O - http://$ip/; do n=$((n+1)); [ $n -ge 50 ] && exit 1; sleep 0.2; done; done; sleep 3600`,
		map[string]any{"env": map[string]string{"TARGETS": strings.Join(targets, " ")}}), map[string]string{"host": "h1"}, ""))
	client := c.waitReady("client", 1, 60*time.Second)
	// Its interface leaves room for the encapsulation.
	c.waitLogs("client", "", 60*time.Second, web[0].ID, web[1].ID, "mtu=1450")
	clientAddr := replicaAddress(client[0])
	for _, r := range web {
		framework.Eventually(t, 30*time.Second, "the request of the client in "+r.ID+"'s log", func() error {
			log, err := c.logs("web", r.ID)
			if err != nil {
				return err
			}
			if !httpdServed(log, clientAddr) {
				return fmt.Errorf("no request from %s (the client, unmasqueraded) in %q", clientAddr, log)
			}
			return nil
		})
	}

	// A load balancer on host 1 round-robins over hosts 2 and 3.
	c.create(c.onNodes(lbResource("front", 8080), map[string]string{"host": "h1"}, ""))
	c.waitReady("front", 1, 60*time.Second)
	c.waitBackendsUp("front", web, 60*time.Second)
	h1 := framework.NSHTTPClient(c.host[n1].NS, 3*time.Second)
	const lbURL = "http://127.0.0.1:8080/"
	counts := map[string]int{}
	for i := range 20 {
		body, err := hostGetBody(h1, lbURL)
		if err != nil {
			t.Fatalf("request %d through the load balancer on host 1: %v", i+1, err)
		}
		counts[strings.TrimSpace(body)]++
	}
	if counts[web[0].ID] < 5 || counts[web[1].ID] < 5 || len(counts) != 2 {
		t.Fatalf("20 requests through the load balancer: answers %v; want both web replicas, round robin", counts)
	}

	// A connection from host 1 to a replica on host 2, across agent
	// restarts: the restarted data plane finds nothing to change.
	c.create(c.onNodes(hostCompute("echo", 1, "exec nc -ll -p 9000 -e cat", nil), map[string]string{"host": "h2"}, ""))
	echo := c.waitReady("echo", 1, 60*time.Second)
	var conn net.Conn
	framework.Eventually(t, 30*time.Second, "a connection from host 1 to the echo server on host 2", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		cn, err := c.host[n1].Dial(ctx, "tcp", net.JoinHostPort(replicaAddress(echo[0]), "9000"))
		if err != nil {
			return err
		}
		if err := echoLine(cn, bufio.NewReader(cn), "hello"); err != nil {
			cn.Close()
			return err
		}
		conn = cn
		return nil
	})
	defer conn.Close()
	rd := bufio.NewReader(conn)
	for _, node := range []string{n1, n2} {
		c.agents[node].Restart()
		if got := c.waitDataPlaneApplied(node, 60*time.Second); got != `msg="data plane unchanged"` {
			t.Errorf("the first apply after restarting the agent of %s: %s; want unchanged (the host was right)", node, got)
		}
		if err := echoLine(conn, rd, "after restarting "+node); err != nil {
			t.Fatalf("the connection after restarting the agent of %s: %v", node, err)
		}
	}
	c.deleteResource("echo")

	// Drain host 2 under load: its web replica moves to host 3.
	load := lbStartLoadWith(t, framework.NSHTTPClient(c.host[n1].NS, 3*time.Second), lbURL, 4)
	time.Sleep(500 * time.Millisecond)
	drainStart := time.Now()
	c.global.Must(t, http.MethodPost, "/v1/regions/"+c.o.region+"/nodes/"+n2+"/drain", map[string]any{"deadline": "2m", "reason": "e2e: drain host 2"}, http.StatusOK, nil)
	var moved []api.Replica
	framework.Eventually(t, 2*time.Minute, "host 2 drained, both web replicas on host 3 behind the load balancer", func() error {
		var d api.DrainStatus
		if _, err := c.global.Get("/v1/regions/"+c.o.region+"/nodes/"+n2+"/drain", &d); err != nil {
			return err
		}
		if d.State != api.DrainSucceeded {
			return fmt.Errorf("drain %s (%s)", d.State, d.Message)
		}
		reps, err := c.replicas("web")
		if err != nil {
			return err
		}
		if got := nodesOf(reps); !slices.Equal(got, []string{n3, n3}) || slices.ContainsFunc(reps, func(r api.Replica) bool { return r.Phase != api.PhaseReady }) {
			return fmt.Errorf("web replicas on %v", got)
		}
		bes, err := c.backends("front")
		if err != nil {
			return err
		}
		for _, r := range reps {
			if b, ok := bes[r.ID]; !ok || b.Health != "up" {
				return fmt.Errorf("backend %s: %+v", r.ID, b)
			}
		}
		if len(bes) != 2 {
			return fmt.Errorf("backends %v", bes)
		}
		moved = reps
		return nil
	})
	drained := time.Now()
	time.Sleep(time.Second)
	res := load.halt()
	n, failed, firstErr := lbSummarize(res, drainStart, time.Now())
	t.Logf("drain of host 2 under load through the load balancer on host 1: %d requests in %s, %d failed (first: %v)",
		n, drained.Sub(drainStart).Round(time.Millisecond), failed, firstErr)
	if n < 20 {
		t.Fatalf("only %d requests during the drain; want a load", n)
	}
	// The load balancer kept answering: a failure is a request caught
	// in flight on the replica that stops, and stays rare.
	if failed*20 > n {
		t.Errorf("%d of %d requests failed during the drain; want at most 5%%", failed, n)
	}
	after, _, _ := lbSummarize(res, drained, time.Now())
	if afterFailed := countFailed(res, drained); after == 0 || afterFailed > 0 {
		t.Errorf("after the drain: %d requests, %d failed; want all answered", after, afterFailed)
	}
	for _, r := range moved {
		if block, err := c.block(n3); err != nil || !block.Contains(netip.MustParseAddr(replicaAddress(r))) {
			t.Errorf("moved replica %s: address %s; want one of host 3's block %s (%v)", r.ID, replicaAddress(r), block, err)
		}
	}

	// Deleting node 2 removes its entries from hosts 1 and 3.
	for _, node := range []string{n1, n3} {
		if route, neigh, fdb, err := c.routesTo(node, n2); err != nil || !route || !neigh || !fdb {
			t.Fatalf("before deleting %s, %s has route %v, neighbour %v, fdb %v (%v); want all", n2, node, route, neigh, fdb, err)
		}
	}
	block2, err := c.block(n2)
	if err != nil {
		t.Fatal(err)
	}
	c.agents[n2].Kill()
	deleted := time.Now()
	c.global.Must(t, http.MethodDelete, "/v1/regions/"+c.o.region+"/nodes/"+n2, nil, http.StatusOK, nil)
	framework.Eventually(t, 30*time.Second, "node 2's entries gone from hosts 1 and 3", func() error {
		for _, node := range []string{n1, n3} {
			route, neigh, fdb, err := c.entriesFor(node, block2, netplane.VTEPMAC(n2))
			if err != nil || route || neigh || fdb {
				return fmt.Errorf("%s still has route %v, neighbour %v, fdb %v of %s (%v)", node, route, neigh, fdb, n2, err)
			}
		}
		return nil
	})
	t.Logf("node %s deleted: its route, neighbour and forwarding entries gone from the other hosts in %s",
		n2, time.Since(deleted).Round(time.Millisecond))
	// The others still reach each other.
	for _, pair := range [][2]string{{n1, n3}, {n3, n1}} {
		if route, neigh, fdb, err := c.routesTo(pair[0], pair[1]); err != nil || !route || !neigh || !fdb {
			t.Errorf("%s → %s after deleting %s: route %v, neighbour %v, fdb %v (%v); want all", pair[0], pair[1], n2, route, neigh, fdb, err)
		}
	}
	if _, err := hostGetBody(h1, lbURL); err != nil {
		t.Errorf("the load balancer after deleting %s: %v", n2, err)
	}
}

// countFailed counts the failed requests started at from or later.
func countFailed(res []lbResult, from time.Time) int {
	_, failed, _ := lbSummarize(res, from, time.Now().Add(time.Hour))
	return failed
}

// deleteResource deletes a resource and waits until it is gone.
func (c *hostCluster) deleteResource(name string) {
	c.t.Helper()
	c.global.Must(c.t, http.MethodDelete, "/v1/resources/"+name, nil, http.StatusAccepted, nil)
	framework.Eventually(c.t, 60*time.Second, name+" deleted", func() error {
		status, err := c.global.Get("/v1/resources/"+name, nil)
		if err != nil {
			return err
		}
		if status != http.StatusNotFound {
			return fmt.Errorf("GET: %d", status)
		}
		return nil
	})
}

// TestMultiHostHostGW runs two hosts on the host-gw backend (they share
// a segment): a replica on host 1 reaches one on host 2 by address, over
// a plain route via host 2's underlay address, with no VXLAN device.
func TestMultiHostHostGW(t *testing.T) {
	c := startHostCluster(t, hostClusterOpts{region: "e2e-g", network: multiNet, agents: 2, hosts: true, backend: api.BackendHostGW, labels: hostLabels})
	n1, n2 := c.nodes[0], c.nodes[1]
	c.flavor("small", 0.25, 64)
	c.image()
	framework.Eventually(t, 30*time.Second, "host 1 routes host 2's block via host 2's address", func() error {
		block, err := c.block(n2)
		if err != nil {
			return err
		}
		rs, err := c.kernel(n1).Routes()
		if err != nil {
			return err
		}
		for _, r := range rs {
			if r.Dst == block && r.Gw == c.host[n2].Addr && r.Dev == "eth0" && !r.OnLink {
				return nil
			}
		}
		return fmt.Errorf("routes %+v; want %s via %s dev eth0", rs, block, c.host[n2].Addr)
	})
	if _, ok, err := c.kernel(n1).Link(netplane.DefaultVXLANDevice); ok || err != nil {
		t.Fatalf("host 1 has a VXLAN device (%v) with host-gw; want none", err)
	}

	c.create(c.onNodes(hostCompute("web", 1, lbWebCommand, nil), map[string]string{"host": "h2"}, ""))
	web := c.waitReady("web", 1, 90*time.Second)
	if web[0].Network.MTU != 1500 {
		t.Errorf("replica MTU with host-gw: got %d; want the underlay's 1500", web[0].Network.MTU)
	}
	c.create(c.onNodes(hostCompute("client", 1,
		`n=0; until timeout 5 wget -q -O - http://$TARGET/; do n=$((n+1)); [ $n -ge 50 ] && exit 1; sleep 0.2; done; sleep 3600`,
		map[string]any{"env": map[string]string{"TARGET": replicaAddress(web[0])}}), map[string]string{"host": "h1"}, ""))
	client := c.waitReady("client", 1, 60*time.Second)
	c.waitLogs("client", "", 60*time.Second, web[0].ID)
	framework.Eventually(t, 30*time.Second, "the client's request in the web replica's log", func() error {
		log, err := c.logs("web", web[0].ID)
		if err != nil {
			return err
		}
		if !httpdServed(log, replicaAddress(client[0])) {
			return fmt.Errorf("no request from %s in %q", replicaAddress(client[0]), log)
		}
		return nil
	})

	// Host isolation: a service of host 1 listening on every address is
	// closed to host 1's replicas, at the bridge's gateway and at the
	// host's own address, while host 2 reaches it; a replica's traffic
	// through the host to the outside still passes.
	hostSvc, err := c.host[n1].Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	greet(t, hostSvc, "host-service")
	outside, err := c.seg.NS.Listen("tcp", net.JoinHostPort(c.seg.Gateway().String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	greet(t, outside, "outside")
	port := fmt.Sprint(hostSvc.Addr().(*net.TCPAddr).Port)
	if got, err := readGreeting(c.host[n2].NS, net.JoinHostPort(c.host[n1].Addr.String(), port)); err != nil || got != "host-service" {
		t.Fatalf("host 2 → the service of host 1: got %q, %v; want its greeting", got, err)
	}
	block1, err := c.block(n1)
	if err != nil {
		t.Fatal(err)
	}
	gw := block1.Addr().Next().String()
	c.create(c.onNodes(hostCompute("prober", 1,
		`for t in $TARGETS; do echo "$t: $(timeout 5 nc ${t%:*} ${t##*:} </dev/null)"; done; echo probed; sleep 3600`,
		map[string]any{"env": map[string]string{"TARGETS": strings.Join([]string{
			gw + ":" + port, c.host[n1].Addr.String() + ":" + port, outside.Addr().String()}, " ")}}), map[string]string{"host": "h1"}, ""))
	c.waitReady("prober", 1, 60*time.Second)
	log := c.waitLogs("prober", "", 60*time.Second, "probed")
	for target, want := range map[string]string{
		gw + ":" + port:                       "",
		c.host[n1].Addr.String() + ":" + port: "",
		outside.Addr().String():               "outside",
	} {
		line := target + ": " + want + "\n"
		if !strings.Contains(log, line) {
			t.Errorf("a replica of host 1 → %s: log %q; want %q (greeting %q)", target, log, line, want)
		}
	}
}

// greet answers every connection on l with line, then closes it, until
// the test ends.
func greet(t *testing.T, l net.Listener, line string) {
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			cn, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(cn, line+"\n")
			cn.Close()
		}
	}()
}

// readGreeting dials addr from ns and reads the first line.
func readGreeting(ns *simhost.NS, addr string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cn, err := ns.Dial(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer cn.Close()
	_ = cn.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(cn).ReadString('\n')
	return strings.TrimSpace(line), err
}
