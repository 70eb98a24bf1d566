package e2e

// End-to-end tests of one region: a real etcd server process, a real
// redis-server, `strata region` stand-alone (no global tier) and two or
// three `strata agent` processes with the fake provider. Work is given to
// the region the way the global tier does it: placements written through
// RegionService.ApplyPlacements over gRPC. Everything is observed through
// the region's operator REST API, the agents' NodeService, the fake
// providers, etcd and Redis.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stratahq/strata/e2e/framework"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/internal/rest"
	"github.com/stratahq/strata/internal/transport"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	"github.com/stratahq/strata/proto/apiproto"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
	"github.com/stratahq/strata/providers/fake"
	"github.com/stratahq/strata/providers/provider"
	regionapi "github.com/stratahq/strata/region/api"
	"github.com/stratahq/strata/testkit/etcdtest"
	"github.com/stratahq/strata/testkit/redistest"
	"github.com/stratahq/strata/testkit/testenv"
)

const (
	regionName   = "e2e-r"
	regionTenant = "e2e"
)

// liveness is the region's nodes section.
type liveness struct {
	heartbeat, suspect, down, probe time.Duration
}

// slack is what a loaded 2-core machine may add to a timing bound: a
// monitor pass or a heartbeat RPC that runs late, the REST poll's period.
func slack() time.Duration {
	if testenv.InCI() {
		return 3 * time.Second
	}
	return 2 * time.Second
}

// regionCluster is one region with its etcd, Redis and agents.
type regionCluster struct {
	t      *testing.T
	dir    string
	bin    string
	etcd   *etcdtest.Process
	kv     *clientv3.Client
	redis  *redistest.Server
	proc   *framework.Proc
	rest   *framework.Client
	http   string // the REST API's address (and /metrics')
	grpc   string
	rs     regionv1.RegionServiceClient
	agents map[string]*regionAgent
	// pki issues the tiers' certificates; the test speaks to the region
	// as the global tier and to agents as the region.
	pki *framework.PKI
}

// regionAgent is one `strata agent` process.
type regionAgent struct {
	name, zone string
	// addr is its NodeService address.
	addr string
	proc *framework.Proc
	// fake is the agent's provider when the test serves it on a unix
	// socket (agentOpts.socket): it outlives the agent process, as a
	// container runtime does.
	fake *fake.Fake
	// healthFile injects conditions into the in-process fake.
	healthFile string
}

type agentOpts struct {
	zone string
	// node is extra YAML under node: (two-space indented lines).
	node string
	// socket serves the fake from the test process instead of inside
	// the agent.
	socket bool
	// fake is extra options of the in-process fake, as YAML flow
	// entries ("applyLatency: 300ms").
	fake string
}

func startRegion(t *testing.T, lv liveness) *regionCluster {
	t.Helper()
	c := &regionCluster{t: t, dir: t.TempDir(), bin: framework.Bin(t, "strata"), agents: map[string]*regionAgent{}, pki: framework.NewPKI(t)}
	c.etcd = etcdtest.StartProcess(t)
	c.kv = etcdtest.Client(t, c.etcd.Endpoints())
	c.redis = redistest.Start(t)
	httpAddr := framework.FreeAddr(t)
	c.grpc = framework.FreeAddr(t)
	cfg := framework.WriteFile(t, c.dir, "region.yaml", fmt.Sprintf(`name: %s
id: %s-1
zones: [a, b, c]
listen: {http: %q, grpc: %q}
etcd: {endpoints: [%q]}
redis: {addr: %q}
nodes: {heartbeatInterval: %s, suspectAfter: %s, downAfter: %s, probeTimeout: %s}
network: {subnet: 10.97.0.0/16, gateway: 10.97.0.1, bridge: e2ereg0}
log: {level: debug}
`, regionName, regionName, httpAddr, c.grpc, c.etcd.Endpoints()[0], c.redis.Addr(), lv.heartbeat, lv.suspect, lv.down, lv.probe)+
		framework.RegionAPIYAML+c.pki.YAML(pki.Region(regionName)))
	c.proc = framework.Start(t, "region", c.bin, []string{"region", "--config", cfg})
	framework.WaitHTTP(t, "http://"+httpAddr+"/readyz", 60*time.Second)
	c.rest = framework.NewClient("http://"+httpAddr, framework.RegionToken)
	c.http = httpAddr
	cc, err := transport.Dial(c.grpc, c.pki.Security(pki.Global("e2e")), transport.ServerIs(pki.Region(regionName)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	c.rs = regionv1.NewRegionServiceClient(cc)
	return c
}

// addAgent starts an agent for node name.
func (c *regionCluster) addAgent(name string, o agentOpts) *regionAgent {
	t := c.t
	t.Helper()
	a := &regionAgent{name: name, zone: o.zone, addr: framework.FreeAddr(t), healthFile: filepath.Join(c.dir, name+"-health.json")}
	opts := fmt.Sprintf("healthFile: %q", a.healthFile)
	if o.fake != "" {
		opts += ", " + o.fake
	}
	prov := fmt.Sprintf("  - name: fake\n    options: {%s}\n", opts)
	if o.socket {
		a.fake = fake.New(fake.Config{}, fake.WithNode(name))
		sock := filepath.Join(c.dir, name+".sock")
		ctx, cancel := context.WithCancel(context.Background())
		served := make(chan error, 1)
		go func() { served <- provider.Serve(ctx, a.fake, sock, nil) }()
		t.Cleanup(func() {
			cancel()
			if err := <-served; err != nil {
				t.Errorf("serve fake of %s: %v", name, err)
			}
		})
		framework.Eventually(t, 10*time.Second, "fake provider socket of "+name, func() error {
			_, err := os.Stat(sock)
			return err
		})
		prov = fmt.Sprintf("  - name: fake\n    socket: %s\n", sock)
	}
	cfg := framework.WriteFile(t, c.dir, name+".yaml", fmt.Sprintf(`node:
  name: %s
  zone: %s
  milliCPU: 4000
  memoryMiB: 8192
%sregion: {endpoint: %q}
listen: {grpc: %q}
dataDir: %s
statusInterval: 500ms
providers:
%slog: {level: debug}
`, name, o.zone, o.node, c.grpc, a.addr, filepath.Join(c.dir, name), prov)+c.pki.YAML(pki.Node(regionName, name)))
	a.proc = framework.StartAgent(t, "agent-"+name, cfg)
	c.agents[name] = a
	return a
}

// startAgents starts one plain agent per zone a, b, c (as many as names)
// and waits until every node is Up.
func (c *regionCluster) startAgents(o agentOpts, names ...string) {
	c.t.Helper()
	for i, n := range names {
		o.zone = string(rune('a' + i))
		c.addAgent(n, o)
	}
	c.waitUp(names...)
}

// waitUp waits until GET /v1/nodes lists every node of names Up.
func (c *regionCluster) waitUp(names ...string) {
	c.t.Helper()
	framework.Eventually(c.t, 60*time.Second, fmt.Sprintf("nodes %v registered and Up", names), func() error {
		var l rest.List[api.Node]
		if err := c.get("/v1/nodes", &l); err != nil {
			return err
		}
		up := map[string]api.Health{}
		for _, n := range l.Items {
			up[n.Name] = health(n)
		}
		for _, n := range names {
			if h := up[n]; h != api.HealthUp {
				return fmt.Errorf("node %s is %q", n, h)
			}
		}
		return nil
	})
}

// get fetches path into out; anything but 200 is an error.
func (c *regionCluster) get(path string, out any) error {
	resp, err := c.rest.Do(context.Background(), http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	if resp.Status != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", path, resp.Status, resp.Body)
	}
	return resp.JSON(out)
}

func (c *regionCluster) node(name string) (api.Node, error) {
	var n api.Node
	err := c.get("/v1/nodes/"+name, &n)
	return n, err
}

func health(n api.Node) api.Health {
	if n.Status == nil {
		return api.HealthUnknown
	}
	return n.Status.Health
}

// replicas lists every replica record of a resource (running or being
// destroyed).
func (c *regionCluster) replicas(resource string) ([]api.Replica, error) {
	var l rest.List[api.Replica]
	err := c.get("/v1/resources/"+regionTenant+"/"+resource+"/replicas", &l)
	return l.Items, err
}

func (c *regionCluster) nodeReplicas(node string) ([]api.Replica, error) {
	var l rest.List[api.Replica]
	err := c.get("/v1/replicas?node="+node, &l)
	return l.Items, err
}

// shares returns each resource's status in the region, by name.
func (c *regionCluster) shares() (map[string]*api.ResourceStatus, error) {
	var l rest.List[api.Placement]
	if err := c.get("/v1/resources", &l); err != nil {
		return nil, err
	}
	out := map[string]*api.ResourceStatus{}
	for _, p := range l.Items {
		out[p.Resource.Name] = p.Resource.Status
	}
	return out, nil
}

// events returns the events of object (e.g. node/n-a), oldest first.
func (c *regionCluster) events(object string) ([]regionapi.Event, error) {
	var l rest.List[regionapi.Event]
	err := c.get("/v1/events?limit=1000&object="+object, &l)
	return l.Items, err
}

// firstEvent returns the first event of object with reason at or after
// since.
func (c *regionCluster) firstEvent(object, reason string, since time.Time) (regionapi.Event, bool) {
	c.t.Helper()
	evs, err := c.events(object)
	if err != nil {
		c.t.Fatalf("events of %s: %v", object, err)
	}
	for _, ev := range evs {
		if ev.Reason == reason && !ev.Time.Before(since) {
			return ev, true
		}
	}
	return regionapi.Event{}, false
}

// countEvents counts the events of object with reason at or after since.
func (c *regionCluster) countEvents(object, reason string, since time.Time) int {
	c.t.Helper()
	evs, err := c.events(object)
	if err != nil {
		c.t.Fatalf("events of %s: %v", object, err)
	}
	n := 0
	for _, ev := range evs {
		if ev.Reason == reason && !ev.Time.Before(since) {
			n++
		}
	}
	return n
}

func (c *regionCluster) waitEvent(object, reason string, since time.Time) regionapi.Event {
	c.t.Helper()
	var ev regionapi.Event
	framework.Eventually(c.t, 30*time.Second, "event "+reason+" of "+object, func() error {
		var ok bool
		if ev, ok = c.firstEvent(object, reason, since); !ok {
			return fmt.Errorf("no %s event since %s", reason, since.Format(time.RFC3339Nano))
		}
		return nil
	})
	return ev
}

// apply places a compute resource of replicas in the region, as the
// global tier would.
func (c *regionCluster) apply(name string, replicas int) {
	c.t.Helper()
	p := api.Placement{
		Region: regionName,
		Resource: api.Resource{
			Name: name, Tenant: regionTenant, UID: "uid-" + name, Kind: api.KindCompute,
			Replicas: replicas, Revision: 1, Generation: 1,
			Spec: api.ResourceSpec{Flavor: "tiny", Compute: &api.ComputeSpec{Image: "busybox"}},
		},
		Flavor: &api.Flavor{Name: "tiny", Kind: api.ProviderContainer, Spec: api.FlavorSpec{VCPUs: 0.1, MemoryMiB: 64}},
		Epoch:  1,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := c.rs.ApplyPlacements(ctx, &regionv1.ApplyPlacementsRequest{Placements: []*resourcev1.Placement{apiproto.PlacementToPB(&p)}})
	if err != nil {
		c.t.Fatalf("ApplyPlacements %s: %v", name, err)
	}
	if r := resp.GetResults(); len(r) != 1 || !r[0].GetApplied() || r[0].GetError() != "" {
		c.t.Fatalf("ApplyPlacements %s: %v", name, r)
	}
}

// readyCheck reports nil when a resource has exactly n running replicas,
// all ready and none on the nodes in avoid, and its share says so; it
// returns the running replicas.
func (c *regionCluster) readyCheck(name string, n int, avoid ...string) ([]api.Replica, error) {
	all, err := c.replicas(name)
	if err != nil {
		return nil, err
	}
	run := running(all)
	if len(run) != n {
		return nil, fmt.Errorf("%s: %d running replicas; want %d", name, len(run), n)
	}
	for _, r := range run {
		if r.Phase != api.PhaseReady {
			return nil, fmt.Errorf("%s: replica %s on %q is %s", name, r.ID, r.Node, r.Phase)
		}
		if slices.Contains(avoid, r.Node) {
			return nil, fmt.Errorf("%s: replica %s runs on %s", name, r.ID, r.Node)
		}
	}
	sh, err := c.shares()
	if err != nil {
		return nil, err
	}
	if s := sh[name]; s == nil || s.Ready != n || s.Phase != api.PhaseReady {
		return nil, fmt.Errorf("%s: share %+v; want %d ready", name, s, n)
	}
	return run, nil
}

func (c *regionCluster) waitReady(name string, n int, avoid ...string) []api.Replica {
	c.t.Helper()
	var run []api.Replica
	framework.Eventually(c.t, 60*time.Second, fmt.Sprintf("%s: %d replicas ready", name, n), func() error {
		var err error
		run, err = c.readyCheck(name, n, avoid...)
		return err
	})
	return run
}

// monitorPasses waits until the node monitor has run n more passes. A
// pass looks at every node once and observes its heartbeat's age, so the
// lag histogram's count grows by the number of nodes each pass.
func (c *regionCluster) monitorPasses(n int) {
	c.t.Helper()
	const looks = `strata_heartbeat_lag_seconds_count{tier="region"}`
	from := metric(c.t, c.http, looks)
	framework.Eventually(c.t, 30*time.Second, fmt.Sprintf("%d monitor passes", n), func() error {
		// Every node the test started registered, and stays registered.
		if passes := (metric(c.t, c.http, looks) - from) / float64(len(c.agents)); passes < float64(n) {
			return fmt.Errorf("%.1f passes", passes)
		}
		return nil
	})
}

func (c *regionCluster) rev() int64 {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.kv.Get(ctx, "e2e-revision-probe")
	if err != nil {
		c.t.Fatalf("etcd get: %v", err)
	}
	return resp.Header.Revision
}

// write is one change in the region's etcd.
type write struct {
	rev   int64
	typ   string // PUT or DELETE
	key   string
	value []byte
}

func (w write) String() string { return fmt.Sprintf("rev %d %s %s", w.rev, w.typ, w.key) }

// history replays the writes of revisions from..to (inclusive) from etcd.
func (c *regionCluster) history(from, to int64) []write {
	c.t.Helper()
	if from > to {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []write
	for wr := range c.kv.Watch(ctx, "\x00", clientv3.WithFromKey(), clientv3.WithRev(from)) {
		if err := wr.Err(); err != nil {
			c.t.Fatalf("etcd history from %d: %v", from, err)
		}
		for _, ev := range wr.Events {
			if ev.Kv.ModRevision > to {
				return out
			}
			out = append(out, write{rev: ev.Kv.ModRevision, typ: ev.Type.String(), key: string(ev.Kv.Key), value: ev.Kv.Value})
		}
		if len(out) > 0 && out[len(out)-1].rev >= to {
			return out
		}
	}
	c.t.Fatalf("etcd history %d..%d: incomplete after 10s (%d writes)", from, to, len(out))
	return nil
}

// healthWrites returns the health each write of a node's status set.
func healthWrites(ws []write, node string) []api.Health {
	var out []api.Health
	for _, w := range ws {
		if !strings.HasSuffix(w.key, "/nodestatus/"+node) {
			continue
		}
		var st api.NodeStatus
		if w.typ == "PUT" {
			_ = json.Unmarshal(w.value, &st)
		}
		out = append(out, st.Health)
	}
	return out
}

// keysUnder returns the writes of keys under /<collection>/.
func keysUnder(ws []write, collection string) []write {
	var out []write
	for _, w := range ws {
		if strings.Contains(w.key, "/"+collection+"/") {
			out = append(out, w)
		}
	}
	return out
}

func running(reps []api.Replica) []api.Replica {
	var out []api.Replica
	for _, r := range reps {
		if r.Desired == api.DesiredRunning {
			out = append(out, r)
		}
	}
	return out
}

func ids(reps []api.Replica) []string {
	out := make([]string, 0, len(reps))
	for _, r := range reps {
		out = append(out, r.ID)
	}
	sort.Strings(out)
	return out
}

func onNode(reps []api.Replica, node string) []api.Replica {
	var out []api.Replica
	for _, r := range reps {
		if r.Node == node {
			out = append(out, r)
		}
	}
	return out
}

// nodeStatus calls an agent's NodeService.Status as the region's probe
// does, with the region's identity.
func (c *regionCluster) nodeStatus(node, addr string) (*agentv1.NodeStatusResponse, error) {
	cc, err := transport.Dial(addr, c.pki.Security(pki.Region(regionName)), transport.ServerIs(pki.Node(regionName, node)))
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return agentv1.NewNodeServiceClient(cc).Status(ctx, &agentv1.NodeStatusRequest{})
}

// TestRegionNodeLoss kills an agent (SIGKILL): its node goes Suspect, then
// Down within downAfter and a heartbeat interval, and its replicas are
// replaced on the other nodes. When the agent returns its node is Up
// again and the replicas that were on it are destroyed — in the provider
// too, which (served by the test, like a container runtime) outlived the
// agent.
func TestRegionNodeLoss(t *testing.T) {
	lv := liveness{heartbeat: time.Second, suspect: 3 * time.Second, down: 6 * time.Second, probe: 500 * time.Millisecond}
	c := startRegion(t, lv)
	c.startAgents(agentOpts{socket: true}, "n-a", "n-b", "n-c")
	c.apply("web", 6)
	before := c.waitReady("web", 6)

	victim := ""
	for _, n := range []string{"n-a", "n-b", "n-c"} {
		if victim == "" || len(onNode(before, n)) > len(onNode(before, victim)) {
			victim = n
		}
	}
	old := ids(onNode(before, victim))
	if len(old) == 0 {
		t.Fatalf("no replica on any node: %v", before)
	}
	v := c.agents[victim]
	held := fakeIDs(t, v.fake)
	for _, id := range old {
		if !slices.Contains(held, id) {
			t.Fatalf("replica %s is not in the fake provider of %s (it holds %v)", id, victim, held)
		}
	}
	t.Logf("killing the agent of %s, which runs %v", victim, old)

	revKill := c.rev()
	killedAt := time.Now()
	v.proc.Signal(syscall.SIGKILL)
	var suspectSeen, downSeen time.Time
	framework.Eventually(t, lv.down+lv.heartbeat+30*time.Second, victim+" Down", func() error {
		n, err := c.node(victim)
		if err != nil {
			return err
		}
		switch health(n) {
		case api.HealthSuspect:
			if suspectSeen.IsZero() {
				suspectSeen = time.Now()
			}
		case api.HealthDown:
			downSeen = time.Now()
			return nil
		}
		return fmt.Errorf("%s is %s", victim, health(n))
	})
	if suspectSeen.IsZero() {
		t.Errorf("GET /v1/nodes/%s never showed Suspect between the kill and Down", victim)
	}
	object := "node/" + victim
	suspectEv, ok := c.firstEvent(object, "NodeSuspect", killedAt)
	if !ok {
		t.Fatalf("no NodeSuspect event for %s after the kill", victim)
	}
	downEv := c.waitEvent(object, "NodeDown", killedAt)
	toSuspect, toDown := suspectEv.Time.Sub(killedAt), downEv.Time.Sub(killedAt)
	t.Logf("kill→Suspect %v (event; REST saw it after %v), kill→Down %v (event; REST %v); suspectAfter %v, downAfter %v, heartbeat %v",
		toSuspect.Round(time.Millisecond), suspectSeen.Sub(killedAt).Round(time.Millisecond),
		toDown.Round(time.Millisecond), downSeen.Sub(killedAt).Round(time.Millisecond), lv.suspect, lv.down, lv.heartbeat)
	t.Logf("Down reason: %s", downEv.Message)
	// The last beat came at most a heartbeat interval (and an RPC) before
	// the kill: neither verdict may come earlier than that allows.
	early := lv.heartbeat + 250*time.Millisecond
	if toSuspect < lv.suspect-early || toSuspect > lv.suspect+lv.heartbeat+slack() {
		t.Errorf("kill→Suspect %v; want within [%v, %v]", toSuspect, lv.suspect-early, lv.suspect+lv.heartbeat+slack())
	}
	if toDown < lv.down-early || toDown > lv.down+lv.heartbeat+slack() {
		t.Errorf("kill→Down %v; want within [%v, %v] (downAfter + one heartbeat interval + slack)", toDown, lv.down-early, lv.down+lv.heartbeat+slack())
	}
	if !suspectEv.Time.Before(downEv.Time) {
		t.Errorf("NodeSuspect at %v is not before NodeDown at %v", suspectEv.Time, downEv.Time)
	}
	if !strings.Contains(downEv.Message, "probe failed") {
		t.Errorf("NodeDown message %q does not say the probe failed", downEv.Message)
	}

	after := c.waitReady("web", 6, victim)
	t.Logf("kill→6 replicas ready off %s: %v", victim, time.Since(killedAt).Round(time.Millisecond))
	all, err := c.replicas("web")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range all {
		if slices.Contains(old, r.ID) && r.Desired != api.DesiredDestroyed {
			t.Errorf("replica %s on the dead node: desired %s; want destroyed", r.ID, r.Desired)
		}
	}
	// In etcd: the node's status was written twice (Suspect, Down), and
	// no replica was touched before the Down verdict.
	time.Sleep(500 * time.Millisecond)
	settled := c.rev()
	ws := c.history(revKill+1, settled)
	if hs := healthWrites(ws, victim); !slices.Equal(hs, []api.Health{api.HealthSuspect, api.HealthDown}) {
		t.Errorf("status writes of %s from the kill to the failover: %v; want [Suspect Down] (only transitions)", victim, hs)
	}
	var downRev int64
	for _, w := range keysUnder(ws, "nodestatus") {
		downRev = w.rev
	}
	for _, w := range keysUnder(ws, "assignments") {
		if w.rev < downRev {
			t.Errorf("replica written at %s, before %s was Down (rev %d): replicas of a Suspect node must stay", w, victim, downRev)
		}
	}
	// A Down node costs nothing while it stays down: its replicas wait
	// for their destroy to be confirmed, without writes. The monitor is
	// what looks at it again and again (the controller passes on changes
	// and its own deadlines): four of its passes must write nothing.
	c.monitorPasses(4)
	if ws := c.history(settled+1, c.rev()); len(ws) != 0 {
		t.Errorf("etcd writes while %s stayed Down:\n%s", victim, joinWrites(ws))
	}

	restartedAt := time.Now()
	v.proc.Restart()
	c.waitUp(victim)
	upEv := c.waitEvent(object, "NodeUp", downEv.Time)
	t.Logf("restart→Up %v", upEv.Time.Sub(restartedAt).Round(time.Millisecond))

	framework.Eventually(t, 60*time.Second, "old replicas destroyed on "+victim, func() error {
		reps, err := c.nodeReplicas(victim)
		if err != nil {
			return err
		}
		for _, r := range reps {
			if r.Resource == "web" && r.Desired == api.DesiredRunning {
				return fmt.Errorf("running replica %s of web on %s", r.ID, victim)
			}
			if slices.Contains(old, r.ID) {
				return fmt.Errorf("old replica %s still recorded on %s (%s, %s)", r.ID, victim, r.Desired, r.Phase)
			}
		}
		if held := fakeIDs(t, v.fake); len(held) != 0 {
			return fmt.Errorf("fake provider of %s still holds %v", victim, held)
		}
		st, err := c.nodeStatus(v.name, v.addr)
		if err != nil {
			return err
		}
		for _, a := range st.GetAssignments() {
			if slices.Contains(old, a.GetId()) && a.GetPhase() != string(api.PhaseDestroyed) {
				return fmt.Errorf("NodeService.Status of %s: old replica %s is %s", victim, a.GetId(), a.GetPhase())
			}
		}
		return nil
	})
	for _, reason := range []string{"NodeSuspect", "NodeDown", "NodeUp"} {
		if n := c.countEvents(object, reason, killedAt); n != 1 {
			t.Errorf("%d %s events for %s since the kill; want 1", n, reason, victim)
		}
	}
	final := c.waitReady("web", 6, victim)
	if !slices.Equal(ids(final), ids(after)) {
		t.Errorf("replicas after the node returned %v; want those of the failover %v (nothing moves back)", ids(final), ids(after))
	}
}

func joinWrites(ws []write) string {
	lines := make([]string, len(ws))
	for i, w := range ws {
		lines[i] = w.String()
	}
	return strings.Join(lines, "\n")
}

// fakeIDs lists what a fake provider holds.
func fakeIDs(t *testing.T, f *fake.Fake) []string {
	t.Helper()
	listed, err := f.List(context.Background())
	if err != nil {
		t.Fatalf("fake List: %v", err)
	}
	out := make([]string, 0, len(listed))
	for _, l := range listed {
		out = append(out, l.ID)
	}
	return out
}

// TestRegionPause stops an agent (SIGSTOP) for less than downAfter: the
// node may turn Suspect but never Down, and none of its replicas moves.
func TestRegionPause(t *testing.T) {
	// Suspect comes at most suspectAfter + a heartbeat interval + a probe
	// timeout + a monitor tick (3.5s) after the stop, Down at the earliest
	// downAfter - a heartbeat interval (5s): a 3.5s pause is Suspect and
	// resumes well before Down could be decided.
	lv := liveness{heartbeat: time.Second, suspect: 1500 * time.Millisecond, down: 6 * time.Second, probe: 500 * time.Millisecond}
	const pause = 3500 * time.Millisecond
	c := startRegion(t, lv)
	c.startAgents(agentOpts{}, "n-a", "n-b", "n-c")
	c.apply("steady", 6)
	before := c.waitReady("steady", 6)
	victim := "n-b"
	mine := ids(onNode(before, victim))
	if len(mine) == 0 {
		t.Fatalf("no replica on %s: %v", victim, before)
	}
	v := c.agents[victim]

	revStop := c.rev()
	stoppedAt := time.Now()
	v.proc.Signal(syscall.SIGSTOP)
	t.Cleanup(func() { v.proc.Signal(syscall.SIGCONT) })
	seen := map[api.Health]bool{}
	for time.Since(stoppedAt) < pause {
		if n, err := c.node(victim); err == nil {
			seen[health(n)] = true
		}
		time.Sleep(100 * time.Millisecond)
	}
	v.proc.Signal(syscall.SIGCONT)
	t.Logf("%s paused for %v; health seen meanwhile: %v", victim, time.Since(stoppedAt).Round(time.Millisecond), seen)
	c.waitUp(victim)

	// Watch until a Down verdict would certainly have been made.
	until := stoppedAt.Add(lv.down + lv.heartbeat + slack())
	for time.Now().Before(until) {
		n, err := c.node(victim)
		if err != nil {
			t.Fatal(err)
		}
		if h := health(n); h != api.HealthUp {
			t.Fatalf("%s is %s after it resumed: %s", victim, h, n.Status.Reason)
		}
		time.Sleep(100 * time.Millisecond)
	}
	object := "node/" + victim
	if ev, ok := c.firstEvent(object, "NodeDown", stoppedAt); ok {
		t.Errorf("NodeDown event for a node paused shorter than downAfter: %s", ev.Message)
	}
	if ev, ok := c.firstEvent(object, "NodeSuspect", stoppedAt); ok {
		t.Logf("NodeSuspect %v after the pause began: %s", ev.Time.Sub(stoppedAt).Round(time.Millisecond), ev.Message)
		if _, ok := c.firstEvent(object, "NodeUp", ev.Time); !ok {
			t.Errorf("no NodeUp event after NodeSuspect")
		}
	} else {
		t.Errorf("no NodeSuspect event: a %v pause with suspectAfter %v went unnoticed", pause, lv.suspect)
	}

	for _, reason := range []string{"NodeSuspect", "NodeUp"} {
		if n := c.countEvents(object, reason, stoppedAt); n != 1 {
			t.Errorf("%d %s events for %s since the pause; want 1", n, reason, victim)
		}
	}
	after, err := c.readyCheck("steady", 6)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(onNode(after, victim)); !slices.Equal(got, mine) {
		t.Errorf("replicas on %s: %v before the pause, %v after; want unchanged", victim, mine, got)
	}
	if !slices.Equal(ids(after), ids(before)) {
		t.Errorf("replicas: %v before the pause, %v after; want unchanged", ids(before), ids(after))
	}
	all, err := c.replicas("steady")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 6 {
		t.Errorf("%d replica records; want 6 (nothing destroyed or replaced)", len(all))
	}
	ws := c.history(revStop+1, c.rev())
	if hs := healthWrites(ws, victim); !slices.Equal(hs, []api.Health{api.HealthSuspect, api.HealthUp}) {
		t.Errorf("status writes of %s during and after the pause: %v; want [Suspect Up]", victim, hs)
	}
	if aw := keysUnder(ws, "assignments"); len(aw) != 0 {
		t.Errorf("replicas written during the pause:\n%s", joinWrites(aw))
	}
}

// TestRegionDrain drains a node holding 10 replicas of 5 resources with
// maxParallel 2: the drain reports its progress move by move and no
// resource ever has fewer ready replicas than it asks for.
func TestRegionDrain(t *testing.T) {
	lv := liveness{heartbeat: time.Second, suspect: 3 * time.Second, down: 6 * time.Second, probe: 500 * time.Millisecond}
	c := startRegion(t, lv)
	// Replicas take a while to start and to stop, as real ones do: a
	// replacement is not ready at once, which make-before-break must wait
	// for.
	c.startAgents(agentOpts{fake: "applyLatency: 300ms, deleteLatency: 200ms"}, "n-a", "n-b", "n-c")
	const target = "n-a"
	for _, n := range []string{"n-b", "n-c"} {
		c.rest.Must(t, http.MethodPost, "/v1/nodes/"+n+"/cordon", map[string]string{"reason": "e2e: fill " + target}, http.StatusOK, nil)
	}
	names := []string{"d0", "d1", "d2", "d3", "d4"}
	for _, n := range names {
		c.apply(n, 2)
	}
	var orig []string
	for _, n := range names {
		run := c.waitReady(n, 2, "n-b", "n-c")
		orig = append(orig, ids(run)...)
	}
	for _, n := range []string{"n-b", "n-c"} {
		c.rest.Must(t, http.MethodPost, "/v1/nodes/"+n+"/uncordon", nil, http.StatusOK, nil)
	}

	type progress struct {
		state                   string
		total, moved, remaining int
	}
	var (
		mu       sync.Mutex
		minReady = map[string]int{}
		// minRunning counts, from the replicas themselves, the ready
		// replicas that are meant to run.
		minRunning = map[string]int{}
		samples    int
		seq        []progress
		last       *api.DrainStatus
		sampErr    error
	)
	for _, n := range names {
		minReady[n], minRunning[n] = 2, 2
	}
	sample := func() {
		readyRunning := map[string]int{}
		var rerr error
		for _, n := range []string{"n-a", "n-b", "n-c"} {
			reps, err := c.nodeReplicas(n)
			if err != nil {
				rerr = err
			}
			for _, r := range reps {
				if r.Desired == api.DesiredRunning && r.Phase == api.PhaseReady {
					readyRunning[r.Resource]++
				}
			}
		}
		sh, err := c.shares()
		var d api.DrainStatus
		var derr error
		resp, err2 := c.rest.Do(context.Background(), http.MethodGet, "/v1/nodes/"+target+"/drain", nil)
		switch {
		case err2 != nil:
			derr = err2
		case resp.Status == http.StatusOK:
			derr = resp.JSON(&d)
		case resp.Status != http.StatusNotFound:
			derr = fmt.Errorf("GET drain: %d %s", resp.Status, resp.Body)
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil || derr != nil || rerr != nil {
			sampErr = fmt.Errorf("sample: %v %v %v", err, derr, rerr)
			return
		}
		samples++
		for _, n := range names {
			ready := 0
			if s := sh[n]; s != nil {
				ready = s.Ready
			}
			minReady[n] = min(minReady[n], ready)
			minRunning[n] = min(minRunning[n], readyRunning[n])
		}
		if d.Node != "" {
			p := progress{d.State, d.Total, d.Moved, d.Remaining}
			if len(seq) == 0 || seq[len(seq)-1] != p {
				seq = append(seq, p)
			}
			last = &d
		}
	}
	stop := framework.Sample(t, 50*time.Millisecond, sample)

	postedAt := time.Now()
	var started api.DrainStatus
	c.rest.Must(t, http.MethodPost, "/v1/nodes/"+target+"/drain", map[string]any{"maxParallel": 2, "reason": "e2e drain"}, http.StatusOK, &started)
	if started.State != api.DrainRunning || started.MaxParallel != 2 {
		t.Fatalf("drain started as %+v; want running with maxParallel 2", started)
	}
	framework.Eventually(t, 60*time.Second, "drain of "+target+" finished", func() error {
		mu.Lock()
		defer mu.Unlock()
		if last == nil || last.State == api.DrainRunning {
			return fmt.Errorf("drain %+v", last)
		}
		return nil
	})
	wall := time.Since(postedAt)
	// A few more samples after the end: the last moves' shares.
	time.Sleep(300 * time.Millisecond)
	stop()

	mu.Lock()
	defer mu.Unlock()
	if sampErr != nil {
		t.Errorf("last sampling error: %v", sampErr)
	}
	d := *last
	t.Logf("drain: %s in %v (startedAt→finishedAt %v) over %d samples; progress %v",
		d.State, wall.Round(time.Millisecond), d.FinishedAt.Sub(d.StartedAt).Round(time.Millisecond), samples, seq)
	t.Logf("min ready during the drain: %v in the shares, %v counting the replicas", minReady, minRunning)
	if d.State != api.DrainSucceeded || d.Total != 10 || d.Moved != 10 || d.Remaining != 0 || d.Failed != 0 {
		t.Errorf("drain ended %s: total %d moved %d remaining %d failed %d (%s); want succeeded, 10 moved",
			d.State, d.Total, d.Moved, d.Remaining, d.Failed, d.Message)
	}
	for _, n := range names {
		if minReady[n] < 2 || minRunning[n] < 2 {
			t.Errorf("%s had %d ready replicas during the drain (%d by its replicas); want never fewer than 2", n, minReady[n], minRunning[n])
		}
	}
	// Progress step by step: moved never goes back, moved+remaining is
	// the total, and intermediate states were seen.
	intermediate := map[int]bool{}
	for i, p := range seq {
		if i > 0 && p.moved < seq[i-1].moved {
			t.Errorf("moved went back: %v", seq)
		}
		if p.total != 0 && p.moved+p.remaining != p.total {
			t.Errorf("progress %+v: moved + remaining != total", p)
		}
		if p.moved > 0 && p.moved < 10 {
			intermediate[p.moved] = true
		}
	}
	if len(intermediate) < 2 {
		t.Errorf("progress %v: want the moved count seen at two or more values between 0 and 10", seq)
	}
	// The steps log every move: at most maxParallel at once, each replica
	// moving first and moved once its replacement is ready.
	moving, moved := map[string]bool{}, map[string]bool{}
	inflight, peak := 0, 0
	for i := 0; i < len(d.Steps); {
		j := i
		for j < len(d.Steps) && d.Steps[j].At.Equal(d.Steps[i].At) {
			switch s := d.Steps[j]; s.State {
			case "moving":
				moving[s.Replica] = true
				inflight++
			case "moved":
				if !moving[s.Replica] {
					t.Errorf("replica %s moved without a moving step", s.Replica)
				}
				moved[s.Replica] = true
				inflight--
			default:
				t.Errorf("unexpected step %+v", s)
			}
			j++
		}
		peak = max(peak, inflight)
		i = j
	}
	if peak > 2 {
		t.Errorf("%d moves in flight at once; want at most maxParallel 2", peak)
	}
	if len(moved) != 10 || !slices.Equal(sortedKeys(moved), orig) {
		t.Errorf("moved replicas %v; want the original %v", sortedKeys(moved), orig)
	}

	left, err := c.nodeReplicas(target)
	if err != nil {
		t.Fatal(err)
	}
	if run := running(left); len(run) != 0 {
		t.Errorf("running replicas left on %s: %v", target, ids(run))
	}
	for _, n := range names {
		if _, err := c.readyCheck(n, 2, target); err != nil {
			t.Error(err)
		}
	}
	if n, err := c.node(target); err != nil || n.Schedulable {
		t.Errorf("%s after its drain: schedulable %v (%v); want cordoned", target, n.Schedulable, err)
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestRegionAutoCordonDrain injects a condition in Error into a real agent
// through the fake provider's health file: the node is cordoned after
// autoCordonInterval and drained after autoDrainInterval, with reasons
// naming the condition.
func TestRegionAutoCordonDrain(t *testing.T) {
	lv := liveness{heartbeat: time.Second, suspect: 3 * time.Second, down: 6 * time.Second, probe: 500 * time.Millisecond}
	const cordonAfter, drainAfter = time.Second, 3 * time.Second
	c := startRegion(t, lv)
	const target = "n-x"
	x := c.addAgent(target, agentOpts{zone: "a", node: fmt.Sprintf(
		"  enableAutoCordon: true\n  autoCordonInterval: %s\n  enableAutoDrain: true\n  autoDrainInterval: %s\n", cordonAfter, drainAfter)})
	c.addAgent("n-y", agentOpts{zone: "b"})
	c.addAgent("n-z", agentOpts{zone: "c"})
	c.waitUp(target, "n-y", "n-z")
	n, err := c.node(target)
	if err != nil {
		t.Fatal(err)
	}
	if !n.EnableAutoCordon || !n.EnableAutoDrain || n.AutoCordonInterval.Duration != cordonAfter || n.AutoDrainInterval.Duration != drainAfter {
		t.Fatalf("node %s registered auto policies %v/%v, %v/%v; want on, %v and %v",
			target, n.EnableAutoCordon, n.AutoCordonInterval, n.EnableAutoDrain, n.AutoDrainInterval, cordonAfter, drainAfter)
	}
	c.apply("auto", 6)
	before := c.waitReady("auto", 6)
	mine := ids(onNode(before, target))
	if len(mine) == 0 {
		t.Fatalf("no replica on %s: %v", target, before)
	}

	injectedAt := time.Now()
	framework.WriteFileAtomic(t, x.healthFile, []byte(`[{"type":"CRI","status":"Error","reason":"RuntimeDown","message":"e2e: injected through the health file"}]`))
	object := "node/" + target
	var cordonSeen time.Time
	framework.Eventually(t, 30*time.Second, target+" auto-cordoned", func() error {
		n, err := c.node(target)
		if err != nil {
			return err
		}
		if n.Schedulable {
			return fmt.Errorf("%s is schedulable (conditions %+v)", target, n.Status.Conditions)
		}
		cordonSeen = time.Now()
		return nil
	})
	n, err = c.node(target)
	if err != nil {
		t.Fatal(err)
	}
	if n.CordonedBy != "auto-cordon" || !strings.Contains(n.CordonReason, "CRI") || !strings.Contains(n.CordonReason, "RuntimeDown") {
		t.Errorf("%s cordoned by %q: %q; want by auto-cordon, naming CRI and RuntimeDown", target, n.CordonedBy, n.CordonReason)
	}
	condEv := c.waitEvent(object, "ConditionChanged", injectedAt)
	cordonEv := c.waitEvent(object, "AutoCordoned", injectedAt)
	drainEv := c.waitEvent(object, "AutoDrainStarted", injectedAt)
	for _, ev := range []regionapi.Event{cordonEv, drainEv} {
		if !strings.Contains(ev.Message, "CRI") || !strings.Contains(ev.Message, "RuntimeDown") {
			t.Errorf("%s event %q does not name the condition", ev.Reason, ev.Message)
		}
	}
	seenBy := condEv.Time.Sub(injectedAt)
	toCordon, toDrain := cordonEv.Time.Sub(condEv.Time), drainEv.Time.Sub(condEv.Time)
	t.Logf("health file written→condition at the region %v; condition→AutoCordoned %v (REST saw the cordon %v after the write); condition→AutoDrainStarted %v",
		seenBy.Round(time.Millisecond), toCordon.Round(time.Millisecond), cordonSeen.Sub(injectedAt).Round(time.Millisecond), toDrain.Round(time.Millisecond))
	// The agent polls health every 500ms and beats every heartbeat.
	if bound := 500*time.Millisecond + lv.heartbeat + slack(); seenBy > bound {
		t.Errorf("the region saw the condition %v after the write; want within %v", seenBy, bound)
	}
	if toCordon < cordonAfter || toCordon > cordonAfter+lv.heartbeat+slack() {
		t.Errorf("condition→AutoCordoned %v; want within [%v, %v]", toCordon, cordonAfter, cordonAfter+lv.heartbeat+slack())
	}
	if toDrain < drainAfter || toDrain > drainAfter+lv.heartbeat+slack() {
		t.Errorf("condition→AutoDrainStarted %v; want within [%v, %v]", toDrain, drainAfter, drainAfter+lv.heartbeat+slack())
	}

	var d api.DrainStatus
	framework.Eventually(t, 60*time.Second, "auto-drain of "+target+" finished", func() error {
		if err := c.get("/v1/nodes/"+target+"/drain", &d); err != nil {
			return err
		}
		if d.State == api.DrainRunning {
			return fmt.Errorf("drain: %s", d.Message)
		}
		return nil
	})
	t.Logf("auto-drain: %s in %v: %s", d.State, d.FinishedAt.Sub(d.StartedAt).Round(time.Millisecond), d.Message)
	if d.State != api.DrainSucceeded || d.Moved != len(mine) || !strings.HasPrefix(d.Reason, "auto-drain: ") || !strings.Contains(d.Reason, "CRI") {
		t.Errorf("auto-drain ended %+v; want succeeded, %d moved, reason auto-drain naming CRI", d, len(mine))
	}
	c.waitReady("auto", 6, target)
	left, err := c.nodeReplicas(target)
	if err != nil {
		t.Fatal(err)
	}
	if run := running(left); len(run) != 0 {
		t.Errorf("running replicas left on %s: %v", target, ids(run))
	}
	for _, reason := range []string{"AutoCordoned", "AutoDrainStarted"} {
		if n := c.countEvents(object, reason, injectedAt); n != 1 {
			t.Errorf("%d %s events for %s; want 1", n, reason, target)
		}
	}
	if n, err := c.node(target); err != nil || n.Schedulable || n.CordonedBy != "auto-cordon" {
		t.Errorf("%s after the auto-drain: schedulable %v by %q (%v); want cordoned by auto-cordon", target, n.Schedulable, n.CordonedBy, err)
	}
}

// TestRegionHeartbeatsNoEtcdWrites leaves a region with three agents and
// a ready resource alone: heartbeats keep arriving (Redis holds fresh
// beats) and etcd sees no write at all.
func TestRegionHeartbeatsNoEtcdWrites(t *testing.T) {
	lv := liveness{heartbeat: time.Second, suspect: 3 * time.Second, down: 6 * time.Second, probe: 500 * time.Millisecond}
	const idle = 5 * time.Second
	c := startRegion(t, lv)
	nodes := []string{"n-a", "n-b", "n-c"}
	c.startAgents(agentOpts{}, nodes...)
	c.apply("idle", 3)
	c.waitReady("idle", 3)
	// Let the last status reports and the share they cause land.
	time.Sleep(time.Second)

	rdb := c.redis.Client(t)
	ns := "{strata:region:" + regionName + "}:hb"
	ctx := context.Background()
	seqs := func() map[string]int64 {
		out := map[string]int64{}
		for _, n := range nodes {
			v, err := rdb.HGet(ctx, ns+":"+n, "seq").Int64()
			if err != nil {
				t.Fatalf("HGET %s:%s seq: %v", ns, n, err)
			}
			out[n] = v
		}
		return out
	}
	seq0 := seqs()
	rev0 := c.rev()
	time.Sleep(idle)
	rev1 := c.rev()
	seq1 := seqs()

	t.Logf("etcd revision %d → %d over %v idle; heartbeat seq %v → %v", rev0, rev1, idle, seq0, seq1)
	if rev1 != rev0 {
		t.Errorf("etcd revision grew by %d while the region was idle; want 0. Writes:\n%s", rev1-rev0, joinWrites(c.history(rev0+1, rev1)))
	}

	now := time.Now()
	zs, err := rdb.ZRangeWithScores(ctx, ns, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	beats := map[string]time.Time{}
	for _, z := range zs {
		beats[z.Member.(string)] = time.UnixMicro(int64(z.Score))
	}
	for _, n := range nodes {
		at, ok := beats[n]
		if !ok {
			t.Errorf("no heartbeat of %s in %s (has %v)", n, ns, beats)
			continue
		}
		if age := now.Sub(at); age > 2*lv.heartbeat+slack() {
			t.Errorf("last heartbeat of %s is %v old; want fresh (heartbeat %v)", n, age, lv.heartbeat)
		}
		// Five seconds at one beat a second: at least three beats, even
		// on a slow machine.
		if got := seq1[n] - seq0[n]; got < 3 {
			t.Errorf("%s sent %d heartbeats in %v; want at least 3", n, got, idle)
		}
		m, err := rdb.HGetAll(ctx, ns+":"+n).Result()
		if err != nil {
			t.Fatal(err)
		}
		if m["m:replicas"] == "" {
			t.Errorf("heartbeat hash of %s has no replicas metric: %v", n, m)
		}
	}
	for _, n := range nodes {
		node, err := c.node(n)
		if err != nil {
			t.Fatal(err)
		}
		if health(node) != api.HealthUp {
			t.Errorf("%s is %s", n, health(node))
		}
	}
}

// TestRegionHeadroom: a region reports, in its heartbeat, how many more
// replicas of each flavor of the global catalog its nodes hold, per zone
// too; GET /v1/regions shows it, a new flavor appears in it within a few
// heartbeats, and replicas placed take it down by their number.
func TestRegionHeadroom(t *testing.T) {
	c := startCluster(t, clusterOpts{globals: 1, regions: []string{"dev-1"}, agentsPerRegion: 2})
	g := c.global(0)
	createFlavor(t, g)
	headroom := func(flavor string) (api.FlavorHeadroom, error) {
		var r api.Region
		if _, err := g.Get("/v1/regions/dev-1", &r); err != nil {
			return api.FlavorHeadroom{}, err
		}
		if r.Status == nil {
			return api.FlavorHeadroom{}, fmt.Errorf("no status")
		}
		for _, h := range r.Status.Headroom {
			if h.Flavor == flavor {
				return h, nil
			}
		}
		return api.FlavorHeadroom{}, fmt.Errorf("no headroom for %s in %+v", flavor, r.Status.Headroom)
	}
	var before api.FlavorHeadroom
	framework.Eventually(t, 30*time.Second, "dev-1 reports its headroom for small", func() error {
		h, err := headroom("small")
		if err != nil {
			return err
		}
		sum := 0
		for _, n := range h.Zones {
			sum += n
		}
		if h.Replicas <= 3 || sum != h.Replicas {
			return fmt.Errorf("headroom %+v; want more than 3, the zones adding up to it", h)
		}
		before = h
		return nil
	})
	t.Logf("headroom for small before: %+v", before)

	// A flavor added to the catalog reaches the region with the next
	// heartbeat's answer; one twice as big fits half as many, or fewer
	// (the nodes' free addresses bound both alike).
	g.Must(t, http.MethodPost, "/v1/flavors", map[string]any{
		"name": "double", "kind": "container", "spec": map[string]any{"vcpus": 0.5, "memoryMiB": 256},
	}, http.StatusCreated, nil)
	framework.Eventually(t, 30*time.Second, "the new flavor in dev-1's headroom", func() error {
		h, err := headroom("double")
		if err != nil {
			return err
		}
		if h.Replicas <= 0 || h.Replicas > before.Replicas {
			return fmt.Errorf("double fits %d; small %d", h.Replicas, before.Replicas)
		}
		return nil
	})

	g.Must(t, http.MethodPost, "/v1/resources", compute("web", 3, []map[string]any{{"name": "dev-1"}}, nil), http.StatusCreated, nil)
	waitShares(t, g, "web", map[string]int{"dev-1": 3}, 60*time.Second)
	framework.Eventually(t, 30*time.Second, "3 fewer small replicas fit", func() error {
		h, err := headroom("small")
		if err != nil {
			return err
		}
		if h.Replicas != before.Replicas-3 {
			return fmt.Errorf("headroom %d; want %d - 3", h.Replicas, before.Replicas)
		}
		return nil
	})
}
