package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// unboundBin is Debian's unbound, DNS1's baseline (deploy/dev/deps.sh
// installs it; nothing needs its service running).
const unboundBin = "/usr/sbin/unbound"

// dnsRun is one DNS1 run against one server.
type dnsRun struct {
	qps, cpu, loadCPU float64 // answers/s; the server's and the load generator's CPU, in cores
	answers, errs     int
}

// dnsInFlight is the queries DNS1 keeps in flight: enough that both
// servers are busy all the time (the figure), and the 32.
var dnsInFlight = []int{128, 32}

// dns1 is the queries per second the agent's name server answers on one
// core against unbound serving the same records, in the same run: each
// server in a network namespace of its own pinned to core 0, the load
// generator in a replica's namespace pinned to core 1, over a veth pair.
// Each round runs both servers at each number of queries in flight.
func (s *suite) dns1(ctx context.Context) error {
	if runtime.NumCPU() < 2 {
		return errors.New("needs 2 cores (a server's and the load generator's)")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	conf, version, err := unboundConf(s.dir)
	if err != nil {
		return err
	}
	nets, err := newDNSNet(ctx)
	defer nets.close()
	if err != nil {
		return err
	}
	servers := map[string][]string{
		"strata":  {self, "serve-dns", net.JoinHostPort(dnsServerIP, "53")},
		"unbound": {unboundBin, "-d", "-c", conf},
	}
	runs := map[string][]dnsRun{}
	for i := range s.o.rounds {
		order := []string{"strata", "unbound"}
		if i%2 == 1 {
			slices.Reverse(order)
		}
		for _, conc := range dnsInFlight {
			for _, name := range order {
				r, err := nets.run(ctx, self, servers[name], conc)
				if err != nil {
					return fmt.Errorf("%s, %d in flight, run %d: %w", name, conc, i+1, err)
				}
				key := fmt.Sprint(name, conc)
				runs[key] = append(runs[key], r)
			}
		}
	}
	s.r.add(dns1Row(runs, version))
	return nil
}

// dnsSpread is the spread of one figure of runs.
func dnsSpread(rs []dnsRun, f func(dnsRun) float64) spreadOf {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	return spreadFloats(v)
}

// dnsCompare is Strata's runs against unbound's of the same rounds: the
// ratios' spread and the errors of each of all the queries each.
type dnsCompare struct {
	ratio, perCPU          spreadOf
	sErr, sAll, uErr, uAll int
}

func compareDNS(st, ub []dnsRun) dnsCompare {
	var c dnsCompare
	ratios, perCPU := make([]float64, len(st)), make([]float64, len(st))
	for i := range st {
		ratios[i] = st[i].qps / ub[i].qps
		perCPU[i] = (st[i].qps / max(st[i].cpu, 1e-3)) / (ub[i].qps / max(ub[i].cpu, 1e-3))
		c.sErr, c.sAll = c.sErr+st[i].errs, c.sAll+st[i].answers+st[i].errs
		c.uErr, c.uAll = c.uErr+ub[i].errs, c.uAll+ub[i].answers+ub[i].errs
	}
	c.ratio, c.perCPU = spreadFloats(ratios), spreadFloats(perCPU)
	return c
}

// busy is how many of runs kept their server busy 90 % of the time or more.
func busy(runs []dnsRun) int {
	n := 0
	for _, r := range runs {
		if r.cpu >= 0.9 {
			n++
		}
	}
	return n
}

func dns1Row(runs map[string][]dnsRun, version string) row {
	qps := func(r dnsRun) float64 { return r.qps }
	cpu := func(r dnsRun) float64 { return r.cpu * 100 }
	load := func(r dnsRun) float64 { return r.loadCPU * 100 }
	perCPU := func(r dnsRun) float64 { return r.qps / max(r.cpu, 1e-3) }
	rate := func(v float64) string { return fmt.Sprintf("%.0f q/s", v) }
	pc := func(v float64) string { return fmt.Sprintf("%.0f %%", v) }
	st, ub := runs["strata128"], runs["unbound128"]
	c, c32 := compareDNS(st, ub), compareDNS(runs["strata32"], runs["unbound32"])
	return row{id: "DNS1", what: "name server: queries/s answered on one core (in-zone A, one name of 3 ready replicas, 128 in flight, from a replica's network namespace)",
		figure: dnsSpread(st, qps).format(rate) + fmt.Sprintf(", %d errors of %d", c.sErr, c.sAll), target: "≥ 1.0 × unbound", met: verdict(c.ratio.med >= 1.0),
		ratio: fmt.Sprintf("%.2f (%.2f–%.2f) × unbound %s serving the same records (local-data, one thread): %s, %d errors of %d; median of the rounds' ratios", c.ratio.med, c.ratio.lo, c.ratio.hi, version, dnsSpread(ub, qps).format(rate), c.uErr, c.uAll),
		notes: fmt.Sprintf("Each server in a network namespace of its own, pinned to core 0 (taskset): the agent's server is internal/dns's Server, as the agent runs it, in a child process with GOMAXPROCS=1, its table holding the asking replica (its tenant told from the source address, as on a node) and the 3 replicas; unbound %s from a generated config (num-threads 1, local-zone static with local-data of the same 3 A records, TTL 5 s, no remote control, no chroot). The load generator runs in a client namespace (a replica's) pinned to core 1, over a veth pair: 128 queries in flight over 4 UDP sockets, closed loop (a new query for each answer), sent and read in batches (sendmmsg/recvmmsg), 1 s unmeasured then 5 s a run; the two servers alternate, each first in every other round. An answer counts when it is NOERROR with the 3 records; an error is a timeout (1 s) or any other answer. CPU over the measured window (user + system from /proc, share of one core): Strata's server %s, unbound %s, the load generator %s and %s; Strata's server was busy ≥ 90 %% of the window in %d of %d runs, unbound in %d of %d: in the others the load generator, the veth path or the machine's other work set the pace, and the rate understates the server. Answers per CPU-second of the server, which that does not bias: Strata %s, unbound %s, ratio %.2f (%.2f–%.2f). With 32 in flight (the same runs): Strata %s, unbound %s, ratio %.2f (%.2f–%.2f), errors %d of %d and %d of %d; Strata's server's CPU there %s (with fewer in flight each socket waits on its answers more, so that figure weighs round-trip latency more than capacity). UDP only; a table of 4 endpoints (lookups are map reads; DNS3 covers a full table); forwarding outside the zone and TCP are not measured; the machine is shared with other work, so absolute rates are noise and the same-run ratio is the figure to compare.",
			version, dnsSpread(st, cpu).format(pc), dnsSpread(ub, cpu).format(pc), dnsSpread(st, load).format(pc), dnsSpread(ub, load).format(pc),
			busy(st), len(st), busy(ub), len(ub), dnsSpread(st, perCPU).format(rate), dnsSpread(ub, perCPU).format(rate), c.perCPU.med, c.perCPU.lo, c.perCPU.hi,
			dnsSpread(runs["strata32"], qps).format(rate), dnsSpread(runs["unbound32"], qps).format(rate), c32.ratio.med, c32.ratio.lo, c32.ratio.hi,
			c32.sErr, c32.sAll, c32.uErr, c32.uAll, dnsSpread(runs["strata32"], cpu).format(pc))}
}

// unboundConf writes DNS1's unbound config under dir and returns its path
// and unbound's version.
func unboundConf(dir string) (path, version string, err error) {
	out, err := exec.Command(unboundBin, "-V").CombinedOutput()
	if m := regexp.MustCompile(`Version (\S+)`).FindSubmatch(out); m != nil {
		version = string(m[1])
	} else {
		return "", "", fmt.Errorf("%s -V (is the unbound package installed? deploy/dev/deps.sh installs it): %v: %s", unboundBin, err, out)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "server:\n  interface: %s\n  port: 53\n  do-daemonize: no\n  chroot: \"\"\n  username: \"\"\n  directory: %q\n  pidfile: \"\"\n", dnsServerIP, dir)
	b.WriteString("  use-syslog: no\n  logfile: \"\"\n  verbosity: 0\n  num-threads: 1\n  do-ip6: no\n  access-control: 10.53.0.0/24 allow\n")
	b.WriteString("  local-zone: \"strata.internal.\" static\n")
	for _, a := range dnsAnswers {
		fmt.Fprintf(&b, "  local-data: \"%s 5 IN A %s\"\n", dnsName, a)
	}
	b.WriteString("remote-control:\n  control-enable: no\n")
	path = filepath.Join(dir, "unbound.conf")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return "", "", err
	}
	if out, err := exec.Command("unbound-checkconf", path).CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("unbound-checkconf: %v: %s", err, out)
	}
	return path, version, nil
}

// dnsNet is DNS1's two namespaces, the server's and the client's, joined
// by a veth pair.
type dnsNet struct{ server, client string }

func newDNSNet(ctx context.Context) (*dnsNet, error) {
	pid := os.Getpid()
	n := &dnsNet{server: fmt.Sprintf("strata-bench-dns-%d-s", pid), client: fmt.Sprintf("strata-bench-dns-%d-c", pid)}
	sv, cv := fmt.Sprintf("dnss%d", pid), fmt.Sprintf("dnsc%d", pid)
	steps := [][]string{
		{"netns", "add", n.server}, {"netns", "add", n.client},
		{"link", "add", sv, "netns", n.server, "type", "veth", "peer", "name", cv, "netns", n.client},
		{"-n", n.server, "addr", "add", dnsServerIP + "/24", "dev", sv},
		{"-n", n.client, "addr", "add", dnsClientIP + "/24", "dev", cv},
		{"-n", n.server, "link", "set", sv, "up"}, {"-n", n.client, "link", "set", cv, "up"},
		{"-n", n.server, "link", "set", "lo", "up"}, {"-n", n.client, "link", "set", "lo", "up"},
	}
	for _, args := range steps {
		if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
			return n, fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return n, nil
}

// close deletes the namespaces (the veth pair goes with them).
func (n *dnsNet) close() {
	if n == nil {
		return
	}
	for _, ns := range []string{n.server, n.client} {
		_ = exec.Command("ip", "netns", "del", ns).Run()
	}
}

// run starts server (argv) in the server's namespace on core 0, runs the
// load generator against it from the client's on core 1, and stops it.
func (n *dnsNet) run(ctx context.Context, self string, server []string, conc int) (dnsRun, error) {
	args := append([]string{"--net=/var/run/netns/" + n.server, "taskset", "-c", "0"}, server...)
	cmd := exec.CommandContext(ctx, "nsenter", args...)
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return dnsRun{}, err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	// nsenter and taskset exec what they run: the pid is the server's.
	out, err := exec.CommandContext(ctx, "nsenter", "--net=/var/run/netns/"+n.client, "taskset", "-c", "1",
		self, "dns-load", "-pid", strconv.Itoa(cmd.Process.Pid), "-conc", strconv.Itoa(conc)).CombinedOutput()
	if err != nil {
		return dnsRun{}, fmt.Errorf("load: %v\n%s\nserver:\n%s", err, tailOf(string(out), 10), tailOf(log.String(), 10))
	}
	return parseDNSLoad(string(out))
}

func parseDNSLoad(out string) (dnsRun, error) {
	m := regexp.MustCompile(`dnsload answers=(\d+) timeouts=(\d+) wrong=(\d+) secs=([0-9.]+) cpu=(-?[0-9.]+) loadcpu=(-?[0-9.]+)`).FindStringSubmatch(out)
	if m == nil {
		return dnsRun{}, fmt.Errorf("no result in the load generator's output:\n%s", tailOf(out, 10))
	}
	var v [6]float64
	for i := range v {
		v[i], _ = strconv.ParseFloat(m[i+1], 64)
	}
	return dnsRun{qps: v[0] / v[3], cpu: v[4] / v[3], loadCPU: v[5] / v[3], answers: int(v[0]), errs: int(v[1] + v[2])}, nil
}

// dns3 is the agent's name server table for 1,000 nodes × 20 replicas,
// from internal/dns's BenchmarkTable: its heap, and one endpoint's change
// in it against the same change in a table of 2,000 (O(changed): about 1).
func (s *suite) dns3(ctx context.Context) error {
	got, err := goBenchUnits(ctx, "./internal/dns", "^BenchmarkTable$", "1x", s.o.rounds, "MiB", "ns/upsert")
	if err != nil {
		return err
	}
	var v [4][]float64
	for i, q := range []struct{ unit, name string }{
		{"MiB", "BenchmarkTable/20000"}, {"MiB", "BenchmarkTable/2000"},
		{"ns/upsert", "BenchmarkTable/20000"}, {"ns/upsert", "BenchmarkTable/2000"},
	} {
		if v[i], err = benchValues(got[q.unit], q.name, s.o.rounds); err != nil {
			return err
		}
	}
	ratios := make([]float64, len(v[2]))
	for i := range ratios {
		ratios[i] = v[2][i] / v[3][i]
	}
	mib := func(x float64) string { return fmt.Sprintf("%.1f MiB", x) }
	us := func(x float64) string { return fmt.Sprintf("%.2f µs", x/1000) }
	big, small, up, upSmall, r := spreadFloats(v[0]), spreadFloats(v[1]), spreadFloats(v[2]), spreadFloats(v[3]), spreadFloats(ratios)
	s.r.add(row{id: "DNS3", what: "name server's table: 20,000 endpoints (1,000 nodes × 20 replicas), heap; one endpoint's change in it",
		figure: big.format(mib) + ", " + up.format(us) + " a change", target: "≤ 20 MiB", met: verdict(big.med <= 20),
		ratio: fmt.Sprintf("change: %.2f (%.2f–%.2f) × the same change in a table of 2,000 (%s), median of the runs' ratios (O(changed): ≈ 1); heap of that table %s", r.med, r.lo, r.hi, upSmall.format(us), small.format(mib)),
		notes: "internal/dns's BenchmarkTable, one run each of -count rounds: the table filled by Upsert one endpoint at a time (as the agent's network stream fills it), each endpoint with a 19-character id, tenant, resource, region (50 tenants, 40 resources, 5 regions), an IPv4 address and two named ports; heap = HeapAlloc after two GCs less before, every endpoint's strings made inside the window so that what the table keeps counts. A change is an Upsert of an endpoint already in the table with its readiness flipped and its address moved, over 100,000 changes spread over the whole table (made outside the clock), taking the table's lock each; the answers' path and the agent's stream decoding are not included."})
	return nil
}
