package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stratahq/strata/e2e/framework"
	"github.com/stratahq/strata/internal/api"
	regionstate "github.com/stratahq/strata/region/state"
)

// Scenarios are the faults, each named; `make chaos` runs them all.
var Scenarios = []Scenario{
	{Name: "global-master-kill", About: "SIGKILL of the global master; restarted after a new master is elected", Fast: true, Inject: globalMasterKill},
	{Name: "global-master-pause", About: "SIGSTOP of the global master past its lease, then SIGCONT: its election key is gone when it wakes, it steps down, and no region holds a placement of its epoch written after it woke", Inject: globalMasterPause},
	{Name: "region-leader-kill", About: "SIGKILL of a region's leader; restarted after a new leader is elected", Inject: regionLeaderKill},
	{Name: "region-global-partition", About: "a region's replicas cut from the global tier for 10 s", Fast: true, Inject: regionGlobalPartition},
	{Name: "agent-region-partition", About: "an agent cut from its region for 8 s (past downAfter)", Inject: agentRegionPartition},
	{Name: "agent-kill", About: "SIGKILL of an agent, restarted 3 s later", Inject: agentKill},
	{Name: "etcd-member-restart", About: "one member of the global etcd's three killed and restarted 3 s later", Inject: etcdMemberRestart},
	{Name: "etcd-leader-kill", About: "the raft leader of the global etcd killed, restarted once another leads", Inject: etcdLeaderKill},
	{Name: "redis-failover", About: "SIGKILL of the global Redis master: Sentinel promotes the replica; no region judged Down", Inject: redisFailover},
	{Name: "redis-data-loss", About: "a region's Redis restarted empty (no persistence): every beat lost, and no node judged Down", Inject: redisDataLoss},
	{Name: "etcd-compaction", About: "a global replica cut from etcd for 6 s while the history it missed is compacted: it lists what was written since", Inject: etcdCompaction},
	{Name: "containerd-agent-kill", About: "SIGKILL of an agent on the containerd provider while its resource is scaled 2, 3, 1; restarted 3 s later: no orphan container, task or network namespace", Inject: containerdAgentKill, Topology: []TopologyOption{WithContainerdAgent()}},
	{Name: "region-leader-pause", About: "SIGSTOP of a region's leader past its lease, twice in a row (the second time the leader the first made): no list from a woken replica is older than what the other replica listed before it woke", Inject: regionLeaderPause},
	{Name: "region-etcd-outage", About: "every member of a region's etcd stopped for 30 s, then restarted: the region leads again within its lease TTL (+1 s) of etcd answering", Inject: regionEtcdOutage},
	{Name: "agent-pause-redis-flush", About: "SIGSTOP of an agent for 2.5 s, its region's Redis flushed 0.3 s into it: no node judged Down", Inject: agentPauseRedisFlush},
	{Name: "big-resource", About: "one resource of 5,000 replicas created under load: all ready, each run once", Inject: bigResource},
	{Name: "global-tier-down", About: "both global replicas killed for a minute: regions keep answering, and running what their placements ask", Inject: globalTierDown},
}

// status is a replica's GET /v1/status.
type status struct {
	ID       string `json:"id"`
	Leader   string `json:"leader"`
	IsLeader bool   `json:"isLeader"`
}

// globalMaster asks each global replica, past the load balancer, whether
// it is the master.
func globalMaster(top *Topology) (*Replica, error) {
	var found []*Replica
	for _, r := range top.Global.Replicas {
		var st status
		if code, err := top.ReplicaREST(r, globalHTTP, adminToken).Get("/v1/status", &st); err == nil && code == 200 && st.IsLeader {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("%d global replicas say they are master", len(found))
	}
	return found[0], nil
}

// regionLeader asks a region which replica leads.
func regionLeader(top *Topology, tier *Tier) (*Replica, error) {
	for _, r := range tier.Replicas {
		var st api.RegionStatus
		if code, err := top.ReplicaREST(r, regionHTTP, framework.RegionToken).Get("/v1/status", &st); err != nil || code != 200 {
			continue
		}
		for _, l := range tier.Replicas {
			if l.ID == st.Leader {
				return l, nil
			}
		}
	}
	return nil, fmt.Errorf("region %s: no replica names a leader", tier.Name)
}

func waitGlobalMaster(t *testing.T, top *Topology, not *Replica, timeout time.Duration) *Replica {
	t.Helper()
	var m *Replica
	framework.Eventually(t, timeout, "a new global master", func() (err error) {
		if m, err = globalMaster(top); err == nil && m == not {
			err = fmt.Errorf("%s is still master", m.ID)
		}
		return err
	})
	return m
}

func globalMasterKill(t *testing.T, r *Run) {
	m := waitGlobalMaster(t, r.Top, nil, 10*time.Second)
	r.fault()
	m.Proc.Kill()
	waitGlobalMaster(t, r.Top, m, 20*time.Second)
	r.recovered()
	m.Proc.Restart()
	r.heal()
}

func globalMasterPause(t *testing.T, r *Run) {
	m := waitGlobalMaster(t, r.Top, nil, 10*time.Second)
	key := electionKey(t, m.Proc)
	r.fault()
	m.Proc.Signal(syscall.SIGSTOP)
	waitGlobalMaster(t, r.Top, m, 20*time.Second)
	r.recovered()
	// Past its lease: the new master was elected only after the old
	// lease expired; wait a lease more all the same.
	time.Sleep(3 * time.Second)
	cli := r.Top.Global.Etcd.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	resp, err := cli.Get(ctx, key)
	cancel()
	if err != nil {
		t.Fatalf("get the paused master's election key %s: %v", key, err)
	}
	if len(resp.Kvs) != 0 {
		t.Errorf("the paused master's election key %s still exists after its lease: its writes would not be fenced", key)
	}
	// What the regions hold before it wakes: a placement of its epoch
	// written after this revision was written by it after waking.
	epoch := logInt(t, m.Proc, "master leading", "epoch")
	wakeRevs := map[string]int64{}
	for _, tier := range r.Top.Regions {
		wakeRevs[tier.Name] = etcdRevision(t, tier.Etcd.Client(t))
	}
	m.Proc.Signal(syscall.SIGCONT)
	woke := time.Now()
	// It must step down: poll until it says it is not master.
	framework.Eventually(t, 15*time.Second, m.ID+" steps down after waking", func() error {
		var st status
		code, err := r.Top.ReplicaREST(m, globalHTTP, adminToken).Get("/v1/status", &st)
		if err != nil || code != 200 {
			return fmt.Errorf("status: %d %v", code, err)
		}
		if st.IsLeader {
			return fmt.Errorf("%s still says it is master", m.ID)
		}
		return nil
	})
	r.note("%s stepped down %.1fs after SIGCONT; its election key %s was gone when it woke", m.ID, time.Since(woke).Seconds(), key)
	r.heal()
	// It must not have written after waking: no region holds a placement
	// of its epoch written since, and it logged none applied since. (Its
	// own etcd writes carry its election key as a guard, which was gone.)
	for _, tier := range r.Top.Regions {
		for _, p := range placements(t, tier) {
			if p.epoch == epoch && p.modRev > wakeRevs[tier.Name] {
				t.Errorf("%s holds placement %s of the woken master's epoch %d written at revision %d, after it woke (revision %d)",
					tier.Name, p.key, epoch, p.modRev, wakeRevs[tier.Name])
			}
		}
	}
	applied := logLines(m.Proc, "placement applied")
	for _, line := range applied {
		if line.Time.After(woke) {
			t.Errorf("%s applied a placement of %s at %s, after it woke at %s", m.ID, line.Resource, line.Time.Format(time.StampMilli), woke.Format(time.StampMilli))
		}
	}
	r.note("%s (epoch %d) had applied %d placements before the pause", m.ID, epoch, len(applied))
}

// logLine is what the scenarios read of a process's JSON log line.
type logLine struct {
	Time     time.Time `json:"time"`
	Msg      string    `json:"msg"`
	Key      string    `json:"key"`
	Resource string    `json:"resource"`
	Epoch    int64     `json:"epoch"`
	// Health transitions: a node's (region monitor), a region's (global).
	Node   string `json:"node"`
	To     string `json:"to"`
	Region string `json:"region"`
	Health string `json:"health"`
}

// noneDown fails the test if a replica of tier logged, since from, a
// node (region) or a region (global) judged Down: a fault of Redis alone
// must not make anyone look dead (liveness is measured from the newest of
// registration, the last beat recorded in etcd and when the beat was
// first seen missing).
func noneDown(t *testing.T, tier *Tier, from time.Time) {
	t.Helper()
	for _, x := range tier.Replicas {
		for _, l := range logLines(x.Proc, "node health changed") {
			if l.To == string(api.HealthDown) && l.Time.After(from) {
				t.Errorf("%s judged node %s Down at %s", x.ID, l.Node, l.Time.Format(time.StampMilli))
			}
		}
		for _, l := range logLines(x.Proc, "region health changed") {
			if l.Health == string(api.HealthDown) && l.Time.After(from) {
				t.Errorf("%s judged region %s Down at %s", x.ID, l.Region, l.Time.Format(time.StampMilli))
			}
		}
	}
}

// logLines are the lines of p's log with message msg.
func logLines(p *framework.Proc, msg string) []logLine {
	var out []logLine
	sc := bufio.NewScanner(bytes.NewReader(p.Log()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line logLine
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == msg {
			out = append(out, line)
		}
	}
	return out
}

// logInt is field (epoch) of the last line of p's log with message msg.
func logInt(t *testing.T, p *framework.Proc, msg, field string) int64 {
	t.Helper()
	lines := logLines(p, msg)
	if len(lines) == 0 || lines[len(lines)-1].Epoch == 0 {
		t.Fatalf("%s: no %q with a %s in its log", p.Name, msg, field)
	}
	return lines[len(lines)-1].Epoch
}

// etcdRevision is the cluster's current revision.
func etcdRevision(t *testing.T, cli *clientv3.Client) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "chaos-revision-probe")
	if err != nil {
		t.Fatalf("etcd revision: %v", err)
	}
	return resp.Header.Revision
}

// regionPlacement is a placement as a region's etcd holds it.
type regionPlacement struct {
	key, name string
	epoch     int64
	modRev    int64
	replicas  int
	deleting  bool
}

// placements reads a region's placements from its etcd.
func placements(t *testing.T, tier *Tier) []regionPlacement {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := tier.Etcd.Client(t).Get(ctx, regionPlacementsPrefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("%s placements: %v", tier.Name, err)
	}
	var out []regionPlacement
	codec := regionstate.New(nil).Placements.Codec()
	for _, kv := range resp.Kvs {
		var p api.Placement
		if err := codec.Unmarshal(kv.Value, &p); err != nil {
			t.Fatalf("%s placement %s: %v", tier.Name, kv.Key, err)
		}
		out = append(out, regionPlacement{key: string(kv.Key), name: p.Resource.Name, epoch: p.Epoch, modRev: kv.ModRevision,
			replicas: p.Resource.Replicas, deleting: p.Resource.Deleting()})
	}
	return out
}

// regionPlacementsPrefix is where a region keeps its placements (the
// default etcd prefix, region/state).
const regionPlacementsPrefix = "/strata/region/placements/"

// electionKey is the election key a replica holds, from its log's last
// "became leader".
func electionKey(t *testing.T, p *framework.Proc) string {
	t.Helper()
	lines := logLines(p, "became leader")
	if len(lines) == 0 || lines[len(lines)-1].Key == "" {
		t.Fatalf("%s: no \"became leader\" in its log", p.Name)
	}
	return lines[len(lines)-1].Key
}

func regionLeaderKill(t *testing.T, r *Run) {
	tier := r.Top.Regions[r.Rng.IntN(len(r.Top.Regions))]
	var l *Replica
	framework.Eventually(t, 10*time.Second, "region leader", func() (err error) { l, err = regionLeader(r.Top, tier); return err })
	r.fault()
	l.Proc.Kill()
	framework.Eventually(t, 20*time.Second, "a new region leader", func() error {
		n, err := regionLeader(r.Top, tier)
		if err == nil && n == l {
			err = fmt.Errorf("%s still leads", l.ID)
		}
		return err
	})
	r.recovered()
	r.note("killed %s, leader of %s", l.ID, tier.Name)
	l.Proc.Restart()
	r.heal()
}

func regionGlobalPartition(t *testing.T, r *Run) {
	tier := r.Top.Regions[r.Rng.IntN(len(r.Top.Regions))]
	side := []*framework.Host{tier.LB}
	for _, x := range tier.Replicas {
		side = append(side, x.Host)
	}
	global := []*framework.Host{r.Top.Global.LB}
	for _, x := range r.Top.Global.Replicas {
		global = append(global, x.Host)
	}
	r.note("partitioned %s from the global tier", tier.Name)
	r.fault()
	r.Top.Lab.Partition(side, global)
	time.Sleep(10 * time.Second)
	r.Top.Lab.Heal(side)
	r.heal()
}

func agentRegionPartition(t *testing.T, r *Run) {
	a := r.Top.Agents[r.Rng.IntN(len(r.Top.Agents))]
	tier := r.Top.tier(a.Region)
	region := []*framework.Host{tier.LB}
	for _, x := range tier.Replicas {
		region = append(region, x.Host)
	}
	r.note("partitioned %s from %s", a.Name, a.Region)
	r.isolated = append(r.isolated, a.Name)
	r.fault()
	r.Top.Lab.Partition([]*framework.Host{a.Host}, region)
	time.Sleep(8 * time.Second)
	r.Top.Lab.Heal([]*framework.Host{a.Host})
	r.heal()
}

func agentKill(t *testing.T, r *Run) {
	a := r.Top.Agents[r.Rng.IntN(len(r.Top.Agents))]
	r.note("killed %s", a.Name)
	r.fault()
	a.Proc.Kill()
	time.Sleep(3 * time.Second)
	a.Proc.Restart()
	r.heal()
}

func etcdMemberRestart(t *testing.T, r *Run) {
	m := r.Top.Global.Etcd.members[r.Rng.IntN(3)]
	r.note("restarted global etcd member %s", m.name)
	r.fault()
	m.proc.Kill()
	time.Sleep(3 * time.Second)
	m.proc.Restart()
	r.heal()
}

func etcdLeaderKill(t *testing.T, r *Run) {
	e := r.Top.Global.Etcd
	cli := e.Client(t)
	var old int
	framework.Eventually(t, 10*time.Second, "etcd leader", func() (err error) {
		old, err = e.leader(cli)
		return err
	})
	r.note("killed global etcd leader %s", e.members[old].name)
	r.fault()
	e.members[old].proc.Kill()
	framework.Eventually(t, 20*time.Second, "a new etcd leader", func() error {
		n, err := e.leader(cli)
		if err == nil && n == old {
			err = fmt.Errorf("old leader still leads")
		}
		return err
	})
	r.recovered()
	e.members[old].proc.Restart()
	r.heal()
}

func redisFailover(t *testing.T, r *Run) {
	g := r.Top.Redis
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	old, err := g.MasterAddr(ctx)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	master := g.Master
	if g.Replica.Addr() == old {
		master = g.Replica
	}
	r.fault()
	master.Kill()
	g.WaitFailover(t, old, 30*time.Second)
	r.recovered()
	// Back as a replica of the new master (Sentinel reconfigures it).
	master.Restart(t)
	r.heal()
	// Past downAfter: a region whose beats were lost with the old master
	// would have been judged by now.
	time.Sleep(quietPast)
	noneDown(t, r.Top.Global, r.faultAt)
}

// quietPast is longer than the tiers' downAfter (4 s) and a probe (1 s).
const quietPast = 6 * time.Second

func redisDataLoss(t *testing.T, r *Run) {
	tier := r.Top.Regions[r.Rng.IntN(len(r.Top.Regions))]
	r.note("restarted %s's Redis empty", tier.Name)
	r.fault()
	tier.RegionRedis.Restart(t)
	r.heal()
	// Every node's beat is gone from Redis: a monitor that measured the
	// silence from registration would judge them Down at once.
	time.Sleep(quietPast)
	noneDown(t, tier, r.faultAt)
}

func etcdCompaction(t *testing.T, r *Run) {
	m, err := globalMaster(r.Top)
	if err != nil {
		t.Fatal(err)
	}
	var other *Replica
	for _, x := range r.Top.Global.Replicas {
		if x != m {
			other = x
		}
	}
	var members []*framework.Host
	for _, x := range r.Top.Global.Etcd.members {
		members = append(members, x.host)
	}
	r.note("cut %s (not master) from the global etcd and compacted meanwhile", other.ID)
	r.fault()
	r.Top.Lab.Partition([]*framework.Host{other.Host}, members)
	time.Sleep(3 * time.Second) // writes go on through the master meanwhile
	cli := r.Top.Global.Etcd.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	resp, err := cli.Get(ctx, "chaos-compaction-probe")
	if err == nil {
		_, err = cli.Compact(ctx, resp.Header.Revision)
	}
	cancel()
	if err != nil {
		t.Fatalf("compact the global etcd: %v", err)
	}
	time.Sleep(3 * time.Second)
	r.Top.Lab.Heal([]*framework.Host{other.Host})
	r.heal()
	// Its caches resumed from a compacted revision: they must relist.
	// A resource written through the master after the heal shows up in
	// the lists of the replica that was cut off (lists come from the
	// caches; a single GET would go to etcd).
	probe := map[string]any{"name": "compaction-probe", "kind": "Compute", "replicas": 0,
		"spec": map[string]any{"flavor": flavorName, "compute": map[string]any{"image": "busybox"}}}
	framework.Eventually(t, 10*time.Second, "create the probe through the master", func() error {
		resp, err := r.Top.ReplicaREST(m, globalHTTP, adminToken).Do(context.Background(), http.MethodPost, "/v1/resources", probe)
		if err != nil {
			return err
		}
		if resp.Status != http.StatusCreated {
			return fmt.Errorf("status %d: %s", resp.Status, resp.Body)
		}
		return nil
	})
	start := time.Now()
	framework.Eventually(t, 15*time.Second, other.ID+" lists the probe", func() error {
		var list struct{ Items []struct{ Name string } }
		if code, err := r.Top.ReplicaREST(other, globalHTTP, adminToken).Get("/v1/resources?limit=1000", &list); err != nil || code != http.StatusOK {
			return fmt.Errorf("list: %d %v", code, err)
		}
		for _, it := range list.Items {
			if it.Name == "compaction-probe" {
				return nil
			}
		}
		return fmt.Errorf("%d resources listed, not the probe", len(list.Items))
	})
	r.note("%s listed a resource written after the compaction %.1fs after it was written", other.ID, time.Since(start).Seconds())
}

// globalOutage is how long global-tier-down holds the global tier down.
const globalOutage = time.Minute

func globalTierDown(t *testing.T, r *Run) {
	smp := newSampler(t, r.Top)
	r.fault()
	for _, g := range r.Top.Global.Replicas {
		g.Proc.Kill()
	}
	down := time.Now()
	for time.Since(down) < globalOutage {
		for _, tier := range r.Top.Regions {
			if code, err := r.Top.RegionREST(tier, 5*time.Second).Get("/v1/resources", nil); err != nil || code != http.StatusOK {
				t.Errorf("%s REST during the global outage: %d %v", tier.Name, code, err)
			}
		}
		// The regions keep running what their placements ask. Placements
		// the master sent as it died, and rollouts under way (maxUnavailable
		// 1), settle first.
		if time.Since(down) > outageSettle {
			keepsRunning(t, r.Top, smp)
		}
		time.Sleep(time.Second)
	}
	r.restartAt = time.Now()
	for _, g := range r.Top.Global.Replicas {
		g.Proc.Restart()
	}
	waitGlobalMaster(t, r.Top, nil, 30*time.Second)
	r.recovered()
	r.heal()
}

// outageSettle is how long after the global tier goes down its last
// placements and the rollouts under way may still change what runs.
const outageSettle = 10 * time.Second

// keepsRunning checks that the providers run, of each resource, at least
// the replicas that the regions' placements ask (the global tier being
// down, nothing changes them).
func keepsRunning(t *testing.T, top *Topology, smp *sampler) {
	t.Helper()
	want := map[string]int{}
	for _, tier := range top.Regions {
		for _, p := range placements(t, tier) {
			if !p.deleting {
				want[p.name] += p.replicas
			}
		}
	}
	now := smp.take(context.Background())
	if len(now.Unreachable) > 0 {
		return
	}
	got := now.count()
	for k, n := range want {
		if got[k] < n {
			t.Errorf("during the global outage %s runs %d replicas; the regions' placements ask %d", k, got[k], n)
		}
	}
}

// tier is a region by name.
func (top *Topology) tier(name string) *Tier {
	for _, t := range top.Regions {
		if t.Name == name {
			return t
		}
	}
	return nil
}

func containerdAgentKill(t *testing.T, r *Run) {
	var a *Agent
	for _, x := range r.Top.Agents {
		if x.Containerd != "" {
			a = x
		}
	}
	rest := r.Top.REST(30 * time.Second)
	// runc itself needs more than the fake replicas' 16 MiB.
	rest.Must(t, http.MethodPost, "/v1/flavors", map[string]any{
		"name": "ctr", "kind": "container", "spec": map[string]any{"vcpus": 0.25, "memoryMiB": 64},
	}, http.StatusCreated, nil)
	rest.Must(t, http.MethodPost, "/v1/resources", map[string]any{
		"name": "busybox", "kind": "Image",
		"spec": map[string]any{"image": map[string]any{"ref": "docker.io/library/busybox:latest", "archive": a.Archive}},
	}, http.StatusCreated, nil)
	rest.Must(t, http.MethodPost, "/v1/resources", map[string]any{
		"name": "ctr", "kind": "Compute", "replicas": 2,
		"spec": map[string]any{"flavor": "ctr", "compute": map[string]any{
			"image": "busybox", "command": []string{"sleep", "3600"}, "stopGracePeriod": "1s",
		}},
		"schedule": map[string]any{"regions": []map[string]any{{"name": a.Region}}, "nodeSelector": map[string]string{"runtime": "containerd"}},
	}, http.StatusCreated, nil)
	smp := newSampler(t, r.Top)
	runs := func(n int) func() error {
		return func() error {
			got := 0
			for _, nodes := range smp.take(context.Background()).Running {
				if slices.Contains(nodes, a.Name) {
					got++
				}
			}
			if got != n {
				return fmt.Errorf("%s runs %d replicas; want %d", a.Name, got, n)
			}
			return nil
		}
	}
	framework.Eventually(t, 90*time.Second, "2 containers running", runs(2))

	r.fault()
	a.Proc.Kill()
	for _, n := range []int{3, 1} {
		rest.Must(t, http.MethodPost, "/v1/resources/ctr/scale", map[string]int{"replicas": n}, http.StatusOK, nil)
	}
	time.Sleep(3 * time.Second)
	a.Proc.Restart()
	r.heal()

	// No orphans: as many containers and running tasks in the agent's
	// containerd namespace as replicas it runs, which is what was asked.
	framework.Eventually(t, convergeWithin, "1 container, no orphan", func() error {
		if err := runs(1)(); err != nil {
			return err
		}
		return ctrHolds(a.Containerd, 1)
	})
	rest.Must(t, http.MethodDelete, "/v1/resources/ctr", nil, http.StatusAccepted, nil)
	framework.Eventually(t, convergeWithin, "no container left after the delete", func() error {
		if err := ctrHolds(a.Containerd, 0); err != nil {
			return err
		}
		if left := framework.NetNSWithPrefix("strata-" + a.Name + "-"); len(left) > 0 {
			return fmt.Errorf("network namespaces left: %v", left)
		}
		return nil
	})
}

// ctrHolds checks that containerd namespace ns holds n containers, each
// with a running task.
func ctrHolds(ns string, n int) error {
	ids, err := framework.CtrContainers(ns)
	if err != nil {
		return err
	}
	tasks, err := framework.CtrTasks(ns)
	if err != nil {
		return err
	}
	running := 0
	for _, tk := range tasks {
		if tk.Status == "RUNNING" {
			running++
		}
	}
	if len(ids) != n || len(tasks) != n || running != n {
		return fmt.Errorf("containerd namespace %s: %d containers %v, %d tasks (%d running); want %d of each", ns, len(ids), ids, len(tasks), running, n)
	}
	return nil
}
