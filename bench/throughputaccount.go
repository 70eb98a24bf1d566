package main

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// b1Account is what one run of B1 cost the etcd clusters and the
// processes, from outside them: a watch of each tier's etcd counts the
// writes of each collection (keys, transactions, bytes) and when they
// happened, each member's /metrics the raft entries, fsyncs and bytes
// sent to peers, /proc each process's CPU time. It says which writes per
// replica B1 is made of and which step ends last.
type b1Account struct {
	start time.Time
	mu    sync.Mutex
	kinds map[string]*kindWrites // "tier collection" → its writes
	stop  func()

	metrics0 map[string]float64
	tiers0   map[string]float64
	cpu0     map[string]float64 // by process
	machine0 float64
	// rest is the CPU of each process, in cores, over restFor before the
	// run: what the cluster costs with nothing to do but heartbeats and
	// resyncs.
	rest        map[string]float64
	restMachine float64
}

// restFor is how long the account measures the cluster at rest.
const restFor = 5 * time.Second

// kindWrites is one collection's writes during a run.
type kindWrites struct {
	puts, deletes int
	bytes         int64
	txns          int   // distinct revisions that wrote the collection
	lastRev       int64 // of the last write seen
	at            []time.Duration
}

// etcdCounters are the samples of each etcd member's /metrics the
// account reads (see scrapeCounters).
var etcdCounters = []string{
	"etcd_server_proposals_committed_total",
	"etcd_disk_wal_fsync_duration_seconds_count",
	"etcd_disk_wal_write_bytes_total",
	"etcd_network_peer_sent_bytes_total",
	"etcd_network_client_grpc_received_bytes_total",
	`grpc_server_handled_total{grpc_method="Txn"`,
	`grpc_server_handled_total{grpc_method="Put"`,
	// Reads and watches: client Ranges, the MVCC ranges the members run
	// (transactions' compares and reads included), the events they send
	// to watchers and the bytes to clients.
	`grpc_server_handled_total{grpc_method="Range"`,
	"etcd_mvcc_range_total",
	"etcd_debugging_mvcc_events_total",
	"etcd_network_client_grpc_sent_bytes_total",
}

// startB1Account starts watching both tiers' etcd and reads the counters
// the run is measured against.
func (c *cluster) startB1Account(ctx context.Context) (*b1Account, error) {
	a := &b1Account{kinds: map[string]*kindWrites{}, rest: map[string]float64{}}
	cpu, machine := c.s.cpuByProc(), machineBusy()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(restFor):
	}
	cpu1, machine1 := c.s.cpuByProc(), machineBusy()
	for p := range cpu1 {
		a.rest[p] = (cpu1[p] - cpu[p]) / restFor.Seconds()
	}
	a.restMachine = (machine1 - machine) / restFor.Seconds()
	a.start = time.Now()
	stop, err := c.watchEtcd(ctx, func(tier string, resp clientv3.WatchResponse, now time.Time) {
		a.mu.Lock()
		defer a.mu.Unlock()
		for _, ev := range resp.Events {
			a.sawLocked(tier, ev, now)
		}
	})
	if err != nil {
		return nil, err
	}
	a.stop = stop
	a.metrics0, a.tiers0 = c.etcdMetrics(ctx), c.controllerMetrics(ctx)
	a.cpu0, a.machine0 = c.s.cpuByProc(), machineBusy()
	return a, nil
}

func (a *b1Account) sawLocked(tier string, ev *clientv3.Event, now time.Time) {
	kind, _ := stepKey(string(ev.Kv.Key))
	if kind == "" {
		return
	}
	k := a.kinds[tier+" "+kind]
	if k == nil {
		k = &kindWrites{}
		a.kinds[tier+" "+kind] = k
	}
	if ev.Type == clientv3.EventTypePut {
		k.puts++
		k.bytes += int64(len(ev.Kv.Key) + len(ev.Kv.Value))
	} else {
		k.deletes++
	}
	if ev.Kv.ModRevision != k.lastRev {
		k.txns++
		k.lastRev = ev.Kv.ModRevision
	}
	k.at = append(k.at, now.Sub(a.start))
}

// watchEtcd watches every key of both tiers' etcd clusters ("global",
// "region") and hands each response to fn until stop.
func (c *cluster) watchEtcd(ctx context.Context, fn func(tier string, resp clientv3.WatchResponse, now time.Time)) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	var clis []*clientv3.Client
	var wg sync.WaitGroup
	stop = func() {
		cancel()
		wg.Wait()
		for _, cli := range clis {
			_ = cli.Close()
		}
	}
	for i, eps := range [][]string{c.etcdGlobal, c.etcdRegion} {
		tier := []string{"global", "region"}[i]
		cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			stop()
			return nil, err
		}
		clis = append(clis, cli)
		w := cli.Watch(clientv3.WithRequireLeader(ctx), "/", clientv3.WithPrefix(), clientv3.WithCreatedNotify())
		if resp := <-w; resp.Err() != nil {
			stop()
			return nil, resp.Err()
		}
		wg.Go(func() {
			for resp := range w {
				fn(tier, resp, time.Now())
			}
		})
	}
	return stop, nil
}

// etcdMetrics reads etcdCounters from every member of both tiers, keyed
// "tier counter", summed over the tier's members.
func (c *cluster) etcdMetrics(ctx context.Context) map[string]float64 {
	out := map[string]float64{}
	for i, eps := range [][]string{c.etcdGlobal, c.etcdRegion} {
		tier := []string{"global", "region"}[i]
		for _, ep := range eps {
			for name, v := range scrapeCounters(ctx, http.DefaultClient, ep, etcdCounters) {
				out[tier+" "+name] += v
			}
		}
	}
	return out
}

// scrapeCounters reads names from the /metrics of the server at base,
// each summed over its labels (a "name{text" entry: over the lines of
// name that hold text); a server that does not answer counts nothing.
func scrapeCounters(ctx context.Context, hc *http.Client, base string, names []string) map[string]float64 {
	out := map[string]float64{}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return out
	}
	resp, err := hc.Do(req)
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		for _, name := range names {
			base, label, _ := strings.Cut(name, "{")
			if !strings.HasPrefix(l, base) || !strings.Contains(l, label) {
				continue
			}
			if rest := l[len(base):]; rest == "" || (rest[0] != ' ' && rest[0] != '{') {
				continue
			}
			f := strings.Fields(l)
			if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
				out[name] += v
			}
		}
	}
	return out
}

// controllerCounters are the samples of the tiers' /metrics the account
// reads: their controllers' passes.
var controllerCounters = []string{
	"strata_controller_passes_total",
	"strata_controller_pass_duration_seconds_sum",
	"strata_controller_reconciles_total",
	"strata_controller_write_ops_total",
	`strata_controller_pass_phase_seconds_sum{phase="catchup"`,
	`strata_controller_pass_phase_seconds_sum{phase="plan"`,
	`strata_controller_pass_phase_seconds_sum{phase="commit"`,
	`strata_controller_pass_phase_seconds_sum{phase="readback"`,
}

// passPhases are the phases of a pass the controllers time.
var passPhases = []string{"catchup", "plan", "commit", "readback"}

// controllerMetrics reads controllerCounters from the global replicas
// and the region's replicas (only a leader counts passes), keyed "tier
// counter".
func (c *cluster) controllerMetrics(ctx context.Context) map[string]float64 {
	out := map[string]float64{}
	for tier, addrs := range map[string][]string{"global": c.gHTTP, "region": c.rHTTPs} {
		for _, addr := range addrs {
			cl := c.newClient(addr)
			for name, v := range scrapeCounters(ctx, cl.http, cl.base, controllerCounters) {
				out[tier+" "+name] += v
			}
		}
	}
	return out
}

// cpuByProc is the CPU seconds of each of the suite's running processes,
// by name.
func (s *suite) cpuByProc() map[string]float64 {
	out := map[string]float64{}
	for _, p := range s.procs {
		select {
		case <-p.done:
			continue
		default:
		}
		if v, err := p.cpuSeconds(); err == nil {
			out[p.name] += v
		}
	}
	return out
}

// machineBusy is the CPU seconds every process of the machine has used
// (all but idle and iowait in /proc/stat); 0 when unreadable.
func machineBusy() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	busy := 0.0
	for i, x := range f[1:] {
		v, _ := strconv.ParseFloat(x, 64)
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy / clockTicks
}

// procGroup is the group of process name: production-etcd-global-2 is
// etcd-global, production-region-1 region.
func procGroup(name string) string {
	_, rest, ok := strings.Cut(name, "-")
	if !ok {
		return name
	}
	return strings.TrimRightFunc(strings.TrimRight(rest, "0123456789"), func(r rune) bool { return r == '-' })
}

// finish stops the watches and describes the run: its writes per
// replica (replicas of them) by collection with their timeline, the etcd
// members' counters per replica, the controllers' passes, and each
// process group's CPU over elapsed.
func (a *b1Account) finish(ctx context.Context, c *cluster, replicas int, elapsed time.Duration) string {
	a.stop()
	m1, t1, cpu1, machine1 := c.etcdMetrics(ctx), c.controllerMetrics(ctx), c.s.cpuByProc(), machineBusy()
	a.mu.Lock()
	defer a.mu.Unlock()
	return fmt.Sprintf("writes by collection, per replica (from watches of both tiers' etcd): %s. etcd counters per replica (summed over each tier's members): %s. Controllers' passes (mean): %s. CPU (cores, over the run) by process group: %s",
		a.writesSummary(replicas), a.countersSummary(m1, replicas), a.passesSummary(t1), a.cpuSummary(cpu1, machine1, elapsed, replicas))
}

func perReplica(v float64, replicas int) string { return fmt.Sprintf("%.2f", v/float64(replicas)) }

// writesSummary is each collection's writes per replica and when 50%,
// 90% and 99% of them were seen.
func (a *b1Account) writesSummary(replicas int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(a.kinds)) {
		w := a.kinds[k]
		if w.puts+w.deletes < replicas/100 {
			continue // the run's few writes elsewhere (heartbeats, events)
		}
		slices.Sort(w.at)
		at := func(pct int) string { return fmtSecs(w.at[len(w.at)*pct/100].Seconds()) }
		parts = append(parts, fmt.Sprintf("%s %s puts, %s deletes, %s txns, %.0f B/replica, 50%% by %s, 90%% by %s, 99%% by %s", k,
			perReplica(float64(w.puts), replicas), perReplica(float64(w.deletes), replicas), perReplica(float64(w.txns), replicas),
			float64(w.bytes)/float64(replicas), at(50), at(90), at(99)))
	}
	return strings.Join(parts, "; ")
}

// countersSummary is each etcd counter's growth per replica, by tier.
func (a *b1Account) countersSummary(m1 map[string]float64, replicas int) string {
	var ms []string
	for _, name := range etcdCounters {
		for _, tier := range []string{"global", "region"} {
			k := tier + " " + name
			ms = append(ms, fmt.Sprintf("%s %s", k, perReplica(m1[k]-a.metrics0[k], replicas)))
		}
	}
	return strings.Join(ms, ", ")
}

// passesSummary is each tier's controller passes during the run.
func (a *b1Account) passesSummary(t1 map[string]float64) string {
	var passes []string
	for _, tier := range []string{"global", "region"} {
		d := func(name string) float64 { k := tier + " " + name; return t1[k] - a.tiers0[k] }
		n := max(d("strata_controller_passes_total"), 1)
		var phases []string
		for _, ph := range passPhases {
			phases = append(phases, fmt.Sprintf("%s %.0f ms", ph, 1000*d(`strata_controller_pass_phase_seconds_sum{phase="`+ph+`"`)/n))
		}
		passes = append(passes, fmt.Sprintf("%s %.0f passes, %.0f ms (%s), %.0f resources and %.0f writes each", tier, d("strata_controller_passes_total"),
			1000*d("strata_controller_pass_duration_seconds_sum")/n, strings.Join(phases, ", "), d("strata_controller_reconciles_total")/n, d("strata_controller_write_ops_total")/n))
	}
	return strings.Join(passes, "; ")
}

// cpuSummary is the cores each process group used over the run (and at
// rest), the busiest first, with their sum and the whole machine's; a
// group of several processes (a tier's replicas, etcd's members) also
// names each one's share, so that a leader shows apart from its standby.
func (a *b1Account) cpuSummary(cpu1 map[string]float64, machine1 float64, elapsed time.Duration, replicas int) string {
	used := map[string]float64{}   // by group
	rest := map[string]float64{}   // by group
	procs := map[string][]string{} // group → its processes' shares
	names := slices.Sorted(maps.Keys(cpu1))
	ours, restOurs := 0.0, 0.0
	for _, p := range names {
		g, u := procGroup(p), (cpu1[p]-a.cpu0[p])/elapsed.Seconds()
		used[g] += u
		rest[g] += a.rest[p]
		ours += u
		restOurs += a.rest[p]
		procs[g] = append(procs[g], fmt.Sprintf("%s %.2f", p, u))
	}
	cpus := []string{fmt.Sprintf("all of them %.2f (the machine: %.2f of %d; at rest before the run: %.2f, the machine %.2f)",
		ours, (machine1-a.machine0)/elapsed.Seconds(), runtime.NumCPU(), restOurs, a.restMachine)}
	groups := slices.Collect(maps.Keys(used))
	sort.Slice(groups, func(i, j int) bool { return used[groups[i]] > used[groups[j]] })
	for _, g := range groups {
		each := ""
		if len(procs[g]) > 1 {
			each = "; " + strings.Join(procs[g], ", ")
		}
		cpus = append(cpus, fmt.Sprintf("%s %.2f (at rest %.2f%s)", g, used[g], rest[g], each))
	}
	return strings.Join(cpus, ", ") + ". " + cpuBudget(used, groups, elapsed, replicas)
}

// cpuBudget is the CPU time the cluster spent per replica, by group, and
// the rate the machine's cores would hold at that cost: the ceiling a
// saturated machine puts on B1, with and without the simulated agents
// (whose work is spread over the nodes in production).
func cpuBudget(used map[string]float64, groups []string, elapsed time.Duration, replicas int) string {
	ms := func(cores float64) float64 { return cores * elapsed.Seconds() * 1000 / float64(replicas) }
	all, sim := 0.0, used["sim"]
	var parts []string
	for _, g := range groups {
		all += used[g]
		parts = append(parts, fmt.Sprintf("%s %.3f", g, ms(used[g])))
	}
	ceiling := func(cost float64) string {
		if cost <= 0 {
			return "—"
		}
		return fmt.Sprintf("%.0f/s", float64(runtime.NumCPU())*1000/cost)
	}
	return fmt.Sprintf("CPU time per replica: %.3f ms (%s); at that cost the machine's %d cores hold at most %s, %s without the simulated agents",
		ms(all), strings.Join(parts, ", "), runtime.NumCPU(), ceiling(ms(all)), ceiling(ms(all-sim)))
}
