package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"time"
)

type row struct {
	id     string
	what   string
	figure string
	target string
	ratio  string
	met    string // "yes", "no", or "" when there is no target
	notes  string
}

type report struct {
	started time.Time
	rows    []row
	notes   []string
}

func (r *report) add(x row) {
	r.rows = append(r.rows, x)
	fmt.Printf("%-4s %-58s %-28s target %-22s %s\n", x.id, x.what, x.figure, x.target, x.met)
}

func (r *report) note(format string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

func verdict(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

func (r *report) markdown(o options) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Benchmarks\n\n")
	fmt.Fprintf(&b, "Measured by `make bench` (`go run ./bench`) on %s, in %s.\n\n", r.started.UTC().Format("2006-01-02 15:04 MST"), time.Since(r.started).Round(time.Second))
	fmt.Fprintf(&b, "Machine: %s. Absolute times on a shared machine are noise; the ratios to baselines measured in the same run are what to compare.\n\n", machine())
	fmt.Fprintf(&b, "| | Benchmark | Result | Target | Ratio to baseline | Met |\n|---|---|---|---|---|---|\n")
	rows := append([]row(nil), r.rows...)
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].id < rows[j].id })
	for _, x := range rows {
		met := x.met
		if met == "" {
			met = "—"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", x.id, x.what, x.figure, orDash(x.target), orDash(x.ratio), met)
	}
	fmt.Fprintf(&b, "\n")
	for _, x := range rows {
		if x.notes != "" {
			fmt.Fprintf(&b, "- **%s**: %s\n", x.id, x.notes)
		}
	}
	if len(r.notes) > 0 {
		fmt.Fprintf(&b, "\n## Notes\n\n")
		for _, n := range r.notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	fmt.Fprintf(&b, "\n## What the profiles changed\n\n%s", wins)
	fmt.Fprintf(&b, "\n## How each figure is measured\n\n%s", methods)
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func machine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				cpu = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int
		fmt.Sscanf(strings.SplitN(string(b), "\n", 2)[0], "MemTotal: %d kB", &kb)
		mem = fmt.Sprintf(", %.0f GiB", float64(kb)/(1<<20))
	}
	kernel, _ := exec.Command("uname", "-r").Output()
	return fmt.Sprintf("%d × %s%s, Linux %s, %s", runtime.NumCPU(), cpu, mem, strings.TrimSpace(string(kernel)), runtime.Version())
}

// wins are the changes CPU profiles of B1 (make bench writes them to
// .cache/profiles; go tool pprof reads them) led to, largest first.
const wins = `1. **Scheduler** (B7, and the region's share of B1): every replica was filtered and scored against every node through maps and pointers, ~1 ms per replica at 10,000 nodes. Flat per-node arrays, filters run once per resource rather than per replica, and an incremental best-node scan: ~28 µs per replica, the same decisions (checked by a property test with an independent oracle).
2. **Global API writes** (B1's acceptance, B3): each create read its flavor and image from etcd before its write transaction; with fsync'd etcd those reads were most of a POST. They are answered from the API's caches (etcd decides only on a miss): in back-to-back runs on the same (loaded) machine, POST p50 under B1 went from ~90 ms to ~55 ms and the 2,000 creates were accepted in 3.9 s instead of 6.2 s.
3. **Region controller passes** (B1): every pass summed the capacity of all 20,000 replicas to build the scheduler's snapshot; the controller now keeps each node's usage current from its cache's change feed. Together with the coalescing windows on the status path (agent reports, region status writes, share and assignment streams) cut from 100/20/50/20 ms to 10/5/10/5 ms, the timers on an idle create→ready path (B2) went from ~190 ms to ~30 ms, while batches still grow under load.

What is left in the profiles: JSON encoding of etcd values and GC (memeqbody, scanObject) in the region; a binary codec for assignments would be the next step.
`

const methods = `- **B0** raw etcd: a fresh ` + "`bin/etcd`" + ` server (the same build and flags as the tiers' etcd in B1), puts of 512-byte values to distinct keys by 1, 16 and 128 concurrent clients for a few seconds each.
- **B1** throughput: ` + "`strata global`" + `, ` + "`strata region`" + ` (each on its own ` + "`bin/etcd`" + `) and one ` + "`strata sim-agents`" + ` process running 1,000 agents with the fake provider (zero latency), each with its own node, heartbeats and assignment stream over one shared gRPC connection (plaintext on loopback: the tiers run in insecure mode, as one connection cannot carry a thousand node certificates). The resources are created through the global REST API by 32 concurrent clients; the clock runs from the first POST to the moment every resource reads ` + "`ready`" + ` with all its replicas at the global API. Ratio: replicas/s over B0's 128-client put rate.
- **B2** latency: the same cluster, idle; one resource of one replica at a time, POST then GET every 2 ms until ` + "`ready`" + `.
- **B3** API under load: latencies of the B1 POSTs, and of GETs of single resources issued every 5 ms by another client while B1 runs.
- **B4** node loss: a real ` + "`strata agent`" + ` process holding 100 replicas is SIGKILLed; the clock stops when the resource reads 100 ready replicas again (default settings: suspect after 6 s, down after 10 s).
- **B5** master failover: two ` + "`strata global`" + ` processes; the master is SIGKILLed and a resource is created through the other; the clock stops when the new master's first propagation is applied by the region (its ` + "`strata_global_propagations_total`" + ` moves).
- **B6** memory: resident set size (VmRSS) of the ` + "`strata region`" + ` process holding 1,000 nodes and the B1 replicas, and of the ` + "`strata agent`" + ` process of B4 with its 100 replicas.
- **B7** scheduler: ` + "`go test -bench BenchmarkPlace1000On10000Nodes ./region/scheduler`" + `, one batch of 1,000 replicas of 100 resources on 10,000 nodes.
- **B8** one big resource: the B1 cluster (etcds with stock ` + "`--max-txn-ops`" + `, 128); one resource of 10,000 replicas in the one region, through the global REST API: POST until it reads ` + "`ready`" + ` with 10,000 ready; PUT with 0 replicas until it reads ` + "`ready`" + ` with none; scaled back up (not timed), then DELETE until the global API answers 404 (the region destroyed every replica and forgot the resource). Three runs; median with the range.
- **B9** lists that scale: one ` + "`strata global`" + ` process on its own etcd (stock flags); a tenant of 10,000 Compute resources (0 replicas, no region) and one of 10, each with 10 labelled ` + "`sel=hit`" + `; 16 clients GET ` + "`/v1/resources?tenant=...&selector=sel=hit`" + ` as fast as answered for 5 s per tenant (the small tenant first, after 1 s of each unmeasured); every answer must hold the 10. The ratio is the big tenant's req/s over the small one's.
- **C1** containers: ` + "`go test -bench`" + ` in providers/containerd: create+start+delete of a busybox container through the containerd client directly (baseline) and through the provider's Apply→ready→Delete.
- **N1** network across hosts (root): two simulated hosts (network namespaces of this machine, each with its own underlay address on one segment) programmed by the agent's data plane (agent/netplane, vxlan backend); replicas are namespaces attached to a host's bridge by a veth pair of MTU 1450, as the CNI bridge plugin attaches a container. In each of five fresh topologies, from one replica, one TCP stream of 1 GiB and 2,000 one-byte round trips to a replica on the other host and to a replica on the same host, twice each, taking turns; ratios per run. The hosts share one kernel and its CPUs, so the figure is what the path costs (VXLAN encapsulation, one more bridge and veth), not a NIC.
- **N2** data plane convergence (root): agent/netplane's Apply over the real kernel, on a fresh simulated host: 1,000 other nodes from scratch (a route, a neighbour and an FDB entry each, plus the bridge, VXLAN device, NAT and isolation chains), then 20 changes of one node's underlay address, then the same list again (what an agent restart costs); each Apply reads the kernel's entries back first. Five runs.
- **V1** VMs: the libvirt provider's Apply until the guest prints its init marker, against raw ` + "`virsh create`" + ` of the same domain XML until the same marker.
`
