package e2e

// End-to-end tests of the agent with the containerd provider (issue
// "Agent and the containerd provider"): a global tier, one region and
// agents as real processes, the agents running real containers through
// the host's containerd, with addresses from the region's IPAM on a
// bridge of the host. Everything is driven through the global REST API
// and checked on the host as an operator would: ctr, /var/run/netns,
// the bridge, HTTP to the containers' addresses, the region's etcd.
//
// The clusters of this file and of loadbalancer_test.go use names no
// other test package uses (bridges e2e-c0 and e2e-l0, subnets
// 10.231.0.0/24 and 10.232.0.0/24, containerd namespaces strata-e2e-*
// with a random part), so that they can run next to other packages.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stratahq/strata/e2e/framework"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/internal/secretbox"
	"github.com/stratahq/strata/testkit/etcdtest"
	"github.com/stratahq/strata/testkit/simhost"
	"github.com/stratahq/strata/testkit/testenv"
)

// hostNet is a region network on this host. Each agent gets a block of
// /NodeMask (default 24) and a bridge of its own, Bridge with the node's letter: the
// agents share one host, whose routes between the bridges carry the
// traffic between blocks (the region's backend is none, the agents'
// data plane disabled).
type hostNet struct {
	Name, Subnet, Gateway, Bridge string
	NodeMask                      int
}

// containersNet is the network of this file's clusters.
var containersNet = hostNet{Name: "e2e-c0", Subnet: "10.231.0.0/24", Gateway: "10.231.0.1", Bridge: "e2e-c0", NodeMask: 26}

// hostClusterOpts shapes a hostCluster.
type hostClusterOpts struct {
	// region names the one region.
	region  string
	network hostNet
	agents  int
	// haproxy adds the haproxy provider (bindAddress 127.0.0.1) to
	// every agent, after containerd.
	haproxy bool
	// regionYAML is appended to the region's configuration.
	regionYAML string
	// hosts runs each agent as a host of its own: in a network namespace
	// with its own underlay address on a shared segment, its data plane
	// enabled, the region's backend backend (default vxlan); the agents
	// then share the network's bridge name, each in its namespace.
	hosts   bool
	backend string
	// labels gives node j its labels (besides none).
	labels func(j int) map[string]string
	// containerdOptions are more options of every agent's containerd
	// provider ("refuseRoot: true").
	containerdOptions string
	// productBackoff leaves the containerd provider its own crash-loop
	// back-off (10 s doubling to 5 min) instead of the quick one (50 ms
	// to 1 s) the other tests restart with.
	productBackoff bool
}

// hostCluster is a global replica, one region and its agents, as real
// processes with mutual TLS, each tier on its own real etcd, the agents
// running the containerd provider (and haproxy) on this host.
type hostCluster struct {
	t       *testing.T
	o       hostClusterOpts
	dir     string
	bin     string
	token   string
	pki     *framework.PKI
	archive string

	global     *framework.Client
	regionAPI  *framework.Client
	regionEtcd *clientv3.Client
	nodes      []string
	agents     map[string]*framework.Proc
	// tiers are the global and region processes.
	tiers []*framework.Proc
	// bridge is each node's bridge.
	bridge map[string]string
	// ns is each node's containerd namespace, dataDir its agent's data
	// directory.
	ns      map[string]string
	dataDir map[string]string
	// seg and host are the simulated hosts (hostClusterOpts.hosts).
	seg  *simhost.Segment
	host map[string]*simhost.Host
	// tenants are the tenants besides the caller's that the test put
	// resources in (deleteAll deletes theirs too).
	tenants []string
}

func hostRandom(t *testing.T) string {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// startHostCluster starts the cluster and waits until every agent is
// registered. When the test ends, every resource is deleted through the
// API and the host is checked clean (hostCluster.checkClean); then, after
// the processes are killed, whatever is left (after a failure) is
// removed from the host.
func startHostCluster(t *testing.T, o hostClusterOpts) *hostCluster {
	t.Helper()
	framework.RequireContainerd(t)
	haproxyBin := ""
	if o.haproxy {
		haproxyBin = testenv.LookPath(t, "haproxy")
	}
	c := &hostCluster{
		t: t, o: o, bin: framework.Bin(t, "strata"), archive: framework.BusyboxArchive(t),
		token:  "strata_e2e00003_0123456789abcdef0123456789abcdef01234567",
		agents: map[string]*framework.Proc{}, ns: map[string]string{}, dataDir: map[string]string{}, bridge: map[string]string{},
		host: map[string]*simhost.Host{},
	}
	if o.hosts {
		framework.RequireHosts(t)
	}
	// A short directory: haproxy's unix sockets live in it.
	dir, err := os.MkdirTemp("", "e2e-h")
	if err != nil {
		t.Fatal(err)
	}
	c.dir = dir
	id := hostRandom(t)
	for j := range o.agents {
		node := fmt.Sprintf("%s-%s-%c", o.region, id, 'a'+j)
		c.nodes = append(c.nodes, node)
		c.ns[node] = "strata-e2e-" + node
		c.dataDir[node] = filepath.Join(dir, node)
		if !o.hosts {
			c.bridge[node] = fmt.Sprintf("%s%c", o.network.Bridge, 'a'+j)
		}
	}
	// Runs last, once every process is killed.
	t.Cleanup(c.scrubHost)
	if o.hosts {
		seg, err := simhost.NewSegment("stn-"+id, netip.MustParsePrefix("192.0.2.0/24"), 1500)
		if err != nil {
			t.Fatal(err)
		}
		c.seg = seg
		// Runs after the processes are killed, before scrubHost.
		t.Cleanup(func() {
			if err := seg.Close(); err != nil {
				t.Errorf("clean-up: %v", err)
			}
		})
		for j, node := range c.nodes {
			h, err := seg.AddHost(fmt.Sprintf("stn-%s-%c", id, 'a'+j))
			if err != nil {
				t.Fatal(err)
			}
			c.host[node] = h
		}
	}
	c.pki = framework.NewPKI(t)

	globalEtcd := etcdtest.StartProcess(t)
	gHTTP, gGRPC := framework.FreeAddr(t), framework.FreeAddr(t)
	secretsKey := filepath.Join(c.dir, "secrets.key")
	if _, err := secretbox.GenerateKey(secretsKey); err != nil {
		t.Fatal(err)
	}
	c.tiers = append(c.tiers, framework.Start(t, "global", c.bin, []string{"global", "--config", c.write("global.yaml", fmt.Sprintf(`id: g1
listen: {http: %q, grpc: %q}
etcd: {endpoints: [%q]}
api: {bootstrapToken: %q}
secrets: {keyFiles: [%q]}
log: {level: debug}
`, gHTTP, gGRPC, globalEtcd.Endpoints()[0], c.token, secretsKey)+c.pki.YAML(pki.Global("g1")))}))
	c.global = framework.NewClient("http://"+gHTTP, c.token)

	regionEtcd := etcdtest.StartProcess(t)
	c.regionEtcd = etcdtest.Client(t, regionEtcd.Endpoints())
	rHTTP, rGRPC := framework.FreeAddr(t), framework.FreeAddr(t)
	n := o.network
	if n.NodeMask == 0 {
		n.NodeMask = 24 // one agent on a /24
	}
	c.tiers = append(c.tiers, framework.Start(t, "region-"+o.region, c.bin, []string{"region", "--config", c.write("region.yaml", fmt.Sprintf(`name: %s
id: %s-r1
listen: {http: %q, grpc: %q}
etcd: {endpoints: [%q]}
global: {endpoint: %q}
zones: [a, b]
network: {name: %s, subnet: %s, gateway: %s, bridge: %s, nodeMask: %d, backend: %s}
log: {level: debug}
`, o.region, o.region, rHTTP, rGRPC, regionEtcd.Endpoints()[0], gGRPC, n.Name, n.Subnet, n.Gateway, n.Bridge, n.NodeMask, c.backend())+framework.RegionAPIYAML+o.regionYAML+c.pki.YAML(pki.Region(o.region)))}))
	c.regionAPI = framework.NewClient("http://"+rHTTP, framework.RegionToken)

	for j, node := range c.nodes {
		// The archive's directory is the one image directory; the load
		// balancers bind free ports, which are the kernel's ephemeral
		// ones, outside the default range.
		backoff := "restartBackoff: 50ms, restartBackoffMax: 1s, "
		if o.productBackoff {
			backoff = ""
		}
		providers := fmt.Sprintf(`providers:
  - name: containerd
    options: {namespace: %s, %simageDirs: [%q]%s}
`, c.ns[node], backoff, filepath.Dir(c.archive), prefixed(", ", o.containerdOptions))
		if o.haproxy {
			providers += fmt.Sprintf("  - name: haproxy\n    options: {bindAddress: 127.0.0.1, binary: %s, ports: \"1024-65535\"}\n", haproxyBin)
		}
		labels := ""
		if o.labels != nil {
			for k, v := range o.labels(j) {
				labels += fmt.Sprintf("    %s: %q\n", k, v)
			}
		}
		if labels != "" {
			labels = "  labels:\n" + labels
		}
		// On the machine's namespace, the agent reaches the region and
		// serves its probes on loopback, and its bridge is its own; on a
		// host of its own, relays carry both ways between the host's
		// loopback and the machine's, and the data plane runs.
		endpoint, listen, advertise, network := rGRPC, framework.FreeAddr(t), "", fmt.Sprintf("{dataPlane: disabled, bridge: %s}", c.bridge[node])
		metrics := fmt.Sprintf(", metrics: %q", framework.FreeAddr(t))
		if o.hosts {
			h := c.host[node]
			in, err := h.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			framework.Relay(t, in, func(ctx context.Context) (net.Conn, error) { return (&net.Dialer{}).DialContext(ctx, "tcp", rGRPC) })
			out, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			const nodeService = "127.0.0.1:19092"
			framework.Relay(t, out, func(ctx context.Context) (net.Conn, error) { return h.Dial(ctx, "tcp", nodeService) })
			endpoint, listen, advertise, network, metrics = in.Addr().String(), nodeService, out.Addr().String(), "{dataPlane: enabled}", ""
		}
		cfg := c.write(node+".yaml", fmt.Sprintf(`node:
  name: %s
  zone: %s
  milliCPU: 4000
  memoryMiB: 4096
%sregion: {endpoint: %q}
listen: {grpc: %q%s}
advertise: {grpc: %q}
dataDir: %s
network: %s
log: {level: debug}
`, node, []string{"a", "b"}[j%2], labels, endpoint, listen, metrics, advertise, c.dataDir[node], network)+providers+c.pki.YAML(pki.Node(o.region, node)))
		bin, args := framework.AgentCommand(t, cfg)
		if o.hosts {
			bin, args = framework.NSCommand(c.host[node].NS, bin, args...)
		}
		c.agents[node] = framework.Start(t, "agent-"+node, bin, args)
	}

	framework.WaitHTTP(t, "http://"+gHTTP+"/readyz", 60*time.Second)
	framework.Eventually(t, 60*time.Second, "every node registered and ready", func() error {
		var nodes struct{ Items []api.Node }
		if _, err := c.global.Get("/v1/nodes", &nodes); err != nil {
			return err
		}
		if len(nodes.Items) != len(c.nodes) {
			return fmt.Errorf("%d nodes; want %d", len(nodes.Items), len(c.nodes))
		}
		return nil
	})
	// Runs first, while every process still runs.
	t.Cleanup(func() {
		if err := c.deleteAll(60 * time.Second); err != nil {
			t.Errorf("clean-up: %v", err)
			return
		}
		if err := c.waitClean(30 * time.Second); err != nil {
			t.Errorf("clean-up: the host is not clean after every resource was deleted: %v", err)
		}
	})
	return c
}

// backend is the region network's backend: none when the agents share
// the machine's namespace.
func (c *hostCluster) backend() string {
	switch {
	case !c.o.hosts:
		return api.BackendNone
	case c.o.backend != "":
		return c.o.backend
	}
	return api.BackendVXLAN
}

// block returns a node's block of the region network.
func (c *hostCluster) block(node string) (netip.Prefix, error) {
	var n api.Node
	status, err := c.global.Get("/v1/regions/"+c.o.region+"/nodes/"+node, &n)
	if err != nil {
		return netip.Prefix{}, err
	}
	if status != http.StatusOK {
		return netip.Prefix{}, fmt.Errorf("GET node %s: %d", node, status)
	}
	if n.Network == nil {
		return netip.Prefix{}, fmt.Errorf("node %s has no network", node)
	}
	return netip.ParsePrefix(n.Network.Block)
}

func (c *hostCluster) write(name, body string) string {
	return framework.WriteFile(c.t, c.dir, name, body)
}

// create posts a resource (its schedule defaults to the cluster's
// region) and returns it as created.
func (c *hostCluster) create(body map[string]any) api.Resource {
	c.t.Helper()
	if _, ok := body["schedule"]; !ok {
		body["schedule"] = map[string]any{"regions": []map[string]any{{"name": c.o.region}}}
	}
	var out api.Resource
	c.global.Must(c.t, http.MethodPost, "/v1/resources", body, http.StatusCreated, &out)
	return out
}

// flavor creates a container flavor.
func (c *hostCluster) flavor(name string, vcpus float64, memoryMiB int) {
	c.t.Helper()
	c.global.Must(c.t, http.MethodPost, "/v1/flavors", map[string]any{
		"name": name, "kind": "container", "spec": map[string]any{"vcpus": vcpus, "memoryMiB": memoryMiB},
	}, http.StatusCreated, nil)
}

// image creates the Image resource "busybox" that imports the archive of
// `make images`.
func (c *hostCluster) image() {
	c.t.Helper()
	c.create(map[string]any{"name": "busybox", "kind": "Image", "spec": map[string]any{
		"image": map[string]any{"ref": "docker.io/library/busybox:latest", "archive": c.archive},
	}})
}

// hostCompute is a Compute resource of the busybox image with the
// flavor "small", stopped within a second.
func hostCompute(name string, replicas int, command string, extra map[string]any) map[string]any {
	cs := map[string]any{"image": "busybox", "command": []string{"sh", "-c", command}, "stopGracePeriod": "1s"}
	for k, v := range extra {
		cs[k] = v
	}
	return map[string]any{
		"name": name, "kind": "Compute", "replicas": replicas, "labels": map[string]string{"app": name},
		"spec": map[string]any{"flavor": "small", "compute": cs},
	}
}

// status reads a resource's status at the global API.
func (c *hostCluster) status(name string) (*api.Resource, error) {
	var r api.Resource
	status, err := c.global.Get("/v1/resources/"+name, &r)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("GET /v1/resources/%s: %d", name, status)
	}
	if r.Status == nil {
		return &r, fmt.Errorf("%s has no status yet", name)
	}
	return &r, nil
}

// waitReady waits until the resource is ready with n ready replicas at
// its current revision, and returns its replicas.
func (c *hostCluster) waitReady(name string, n int, timeout time.Duration) []api.Replica {
	c.t.Helper()
	var reps []api.Replica
	framework.Eventually(c.t, timeout, fmt.Sprintf("%s ready with %d replicas", name, n), func() error {
		r, err := c.status(name)
		if err != nil {
			return err
		}
		s := r.Status
		if s.Phase != api.PhaseReady || s.Ready != n || s.Revision != r.Revision {
			return fmt.Errorf("phase %s (%s), ready %d/%d, revision %d of %d", s.Phase, s.Reason, s.Ready, s.Replicas, s.Revision, r.Revision)
		}
		if reps, err = c.replicas(name); err != nil {
			return err
		}
		if len(reps) != n {
			return fmt.Errorf("%d replicas listed; want %d", len(reps), n)
		}
		for _, rep := range reps {
			if rep.Phase != api.PhaseReady || rep.Revision != r.Revision {
				return fmt.Errorf("replica %s: %s at revision %d", rep.ID, rep.Phase, rep.Revision)
			}
		}
		return nil
	})
	return reps
}

// replicas lists a resource's replicas at the global API.
func (c *hostCluster) replicas(name string) ([]api.Replica, error) {
	var reps struct{ Items []api.Replica }
	status, err := c.global.Get("/v1/resources/"+name+"/replicas", &reps)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("GET /v1/resources/%s/replicas: %d", name, status)
	}
	return reps.Items, nil
}

// logs reads a resource's logs (one replica's when replica is set).
func (c *hostCluster) logs(name, replica string) (string, error) {
	path := "/v1/resources/" + name + "/logs"
	if replica != "" {
		path += "?replica=" + replica
	}
	resp, err := c.global.Do(context.Background(), http.MethodGet, path, nil)
	if err != nil {
		return "", err
	}
	if resp.Status != http.StatusOK {
		return "", fmt.Errorf("GET %s: %d %s", path, resp.Status, resp.Body)
	}
	return string(resp.Body), nil
}

// waitLogs polls the logs until they contain every one of want.
func (c *hostCluster) waitLogs(name, replica string, timeout time.Duration, want ...string) string {
	c.t.Helper()
	var got string
	framework.Eventually(c.t, timeout, fmt.Sprintf("logs of %s %s contain %q", name, replica, want), func() error {
		var err error
		if got, err = c.logs(name, replica); err != nil {
			return err
		}
		for _, w := range want {
			if !strings.Contains(got, w) {
				return fmt.Errorf("no %q in %q", w, got)
			}
		}
		return nil
	})
	return got
}

// replicaAddress is a replica's address on the region network.
func replicaAddress(r api.Replica) string {
	if r.Status != nil && r.Status.Address != "" {
		return r.Status.Address
	}
	if r.Network != nil {
		return r.Network.Address
	}
	return ""
}

// hostHTTP is a client for the containers' addresses: no proxy from the
// environment, no connection reuse.
var hostHTTP = &http.Client{
	Timeout:   5 * time.Second,
	Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
}

// hostGet fetches url and returns its body; any status but 200 is an
// error.
func hostGet(url string) (string, error) { return hostGetBody(hostHTTP, url) }

// hostGetBody fetches url with client and returns its body; any status but
// 200 is an error.
func hostGetBody(client *http.Client, url string) (string, error) {
	resp, err := client.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), nil
}

// deleteAll deletes every resource through the global API, those that
// use others (compute, load balancers) first, and waits until the global
// API and the region know none.
func (c *hostCluster) deleteAll(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, usersOnly := range []bool{true, false} {
		for {
			var left []string
			for _, q := range c.tenantQueries() {
				var list struct{ Items []api.Resource }
				if _, err := c.global.Get("/v1/resources"+q, &list); err != nil {
					return err
				}
				for _, r := range list.Items {
					if usersOnly && r.Kind != api.KindCompute && r.Kind != api.KindLoadbalancer {
						continue
					}
					left = append(left, r.Tenant+"/"+r.Name)
					if r.DeletionRequestedAt == nil {
						resp, err := c.global.Do(context.Background(), http.MethodDelete, "/v1/resources/"+r.Name+q, nil)
						if err != nil {
							return err
						}
						if resp.Status != http.StatusAccepted && resp.Status != http.StatusNotFound {
							return fmt.Errorf("DELETE %s: %d %s", r.Name, resp.Status, resp.Body)
						}
					}
				}
			}
			if len(left) == 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("resources %v still exist %s after their deletion", left, timeout)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	for {
		reps, err := c.regionReplicas()
		if err == nil && len(reps) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the region still has replicas %v (%v) %s after the deletions", hostIDs(reps), err, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// tenantQueries are the query strings of the tenants the test used:
// the caller's ("") and each of tenants.
func (c *hostCluster) tenantQueries() []string {
	out := []string{""}
	for _, t := range c.tenants {
		out = append(out, "?tenant="+t)
	}
	return out
}

// regionReplicas lists the replicas the region has assigned, node by node
// (the region lists replicas per node); any answer but 200 is an error.
func (c *hostCluster) regionReplicas() ([]api.Replica, error) {
	var nodes struct{ Items []api.Node }
	if code, err := c.regionAPI.Get("/v1/nodes", &nodes); err != nil || code != http.StatusOK {
		return nil, fmt.Errorf("GET /v1/nodes: %d %v", code, err)
	}
	var all []api.Replica
	for _, n := range nodes.Items {
		var reps struct{ Items []api.Replica }
		path := "/v1/replicas?node=" + url.QueryEscape(n.Name)
		if code, err := c.regionAPI.Get(path, &reps); err != nil || code != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %d %v", path, code, err)
		}
		all = append(all, reps.Items...)
	}
	return all, nil
}

func hostIDs(reps []api.Replica) []string {
	out := make([]string, 0, len(reps))
	for _, r := range reps {
		out = append(out, r.ID)
	}
	slices.Sort(out)
	return out
}

// dirty says what of the cluster's replicas is left on the host: the
// containers, tasks and root file systems of the agents' containerd
// namespaces, their network namespaces, volumes, the region's address
// records, the bridge, CNI's NAT rules for the network, haproxy
// processes.
func (c *hostCluster) dirty() error {
	var errs []error
	for _, node := range c.nodes {
		ns := c.ns[node]
		if ids, err := framework.CtrContainers(ns); err != nil || len(ids) > 0 {
			errs = append(errs, fmt.Errorf("containers %v in %s (%v)", ids, ns, err))
		}
		if tasks, err := framework.CtrTasks(ns); err != nil || len(tasks) > 0 {
			errs = append(errs, fmt.Errorf("tasks %v in %s (%v)", tasks, ns, err))
		}
		if snaps, err := framework.CtrActiveSnapshots(ns); err != nil || len(snaps) > 0 {
			errs = append(errs, fmt.Errorf("active snapshots %v in %s (%v)", snaps, ns, err))
		}
		if left := framework.NetNSWithPrefix(ns + "-"); len(left) > 0 {
			errs = append(errs, fmt.Errorf("network namespaces %v", left))
		}
		// Volumes are directories, with their records in .strata.
		root := filepath.Join(c.dataDir[node], "providers", "containerd", "volumes")
		vols, _ := os.ReadDir(root)
		records, _ := os.ReadDir(filepath.Join(root, ".strata"))
		for _, v := range append(vols, records...) {
			if v.Name() != ".strata" {
				errs = append(errs, fmt.Errorf("volume %s left on %s", v.Name(), node))
			}
		}
		if pids := framework.PidsWithArg(c.haproxyCfg(node)); len(pids) > 0 {
			errs = append(errs, fmt.Errorf("haproxy processes %v of %s", pids, node))
		}
	}
	if ports, err := c.portRecords(); err != nil || len(ports) > 0 {
		errs = append(errs, fmt.Errorf("address records %v in the region's etcd (%v)", ports, err))
	}
	for _, br := range c.bridge {
		if framework.LinkExists(br) {
			errs = append(errs, fmt.Errorf("bridge %s (ports %v) outlives the replicas", br, framework.LinkPorts(br)))
		}
	}
	if rules, err := framework.NATRulesMentioning(`\"` + c.o.network.Name + `\"`); err != nil || len(rules) > 0 {
		errs = append(errs, fmt.Errorf("NAT rules of network %s: %q (%v)", c.o.network.Name, rules, err))
	}
	return errors.Join(errs...)
}

// portRecords lists the region IPAM's address records, read from the
// region's etcd: <network>/<address>.
func (c *hostCluster) portRecords() ([]string, error) {
	const prefix = "/strata/region/ports/"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.regionEtcd.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("region etcd: %w", err)
	}
	var out []string
	for _, kv := range resp.Kvs {
		out = append(out, strings.TrimPrefix(string(kv.Key), prefix))
	}
	slices.Sort(out)
	return out, nil
}

// waitClean waits until nothing of the replicas is left on the host.
func (c *hostCluster) waitClean(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := c.dirty()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (c *hostCluster) haproxyDir(node string) string {
	return filepath.Join(c.dataDir[node], "providers", "haproxy")
}

func (c *hostCluster) haproxyCfg(node string) string {
	return filepath.Join(c.haproxyDir(node), "haproxy.cfg")
}

// scrubHost removes what the test left on the host once every process
// is gone. After a passing test there is nothing to remove: what is
// found then is reported (images excepted, the provider's cache).
func (c *hostCluster) scrubHost() {
	t := c.t
	report := t.Errorf
	if t.Failed() {
		report = t.Logf
	}
	for _, node := range c.nodes {
		for _, pid := range framework.PidsWithArg(c.haproxyCfg(node)) {
			report("clean-up: haproxy pid %d of %s still runs; killing it", pid, node)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		left, err := framework.RemoveCtrNamespace(c.ns[node])
		if len(left) > 0 {
			report("clean-up: left in containerd namespace %s: %v", c.ns[node], left)
		}
		if err != nil {
			t.Errorf("clean-up: containerd namespace %s: %v", c.ns[node], err)
		}
		for _, n := range framework.NetNSWithPrefix(c.ns[node] + "-") {
			report("clean-up: network namespace %s left", n)
			if err := framework.RemoveNetNS(n); err != nil {
				t.Errorf("clean-up: %v", err)
			}
		}
	}
	for _, br := range c.bridge {
		if framework.LinkExists(br) && len(framework.LinkPorts(br)) == 0 {
			report("clean-up: bridge %s left", br)
			if err := framework.DeleteLink(br); err != nil {
				t.Errorf("clean-up: %v", err)
			}
		}
	}
	if err := os.RemoveAll(c.dir); err != nil {
		t.Errorf("clean-up: %v", err)
	}
}

// agentLogSinceStart returns the agent's log since its last (re)start.
func agentLogSinceStart(p *framework.Proc) string {
	log := p.Tail(1 << 20)
	if i := strings.LastIndex(log, "\n=== "); i >= 0 {
		return log[i+1:]
	}
	return log
}

// TestContainersNetworkAndLogs runs two busybox web servers and a client
// from an Image resource, checks their addresses, reaches them from the
// host and from the client container, reads logs through the global API,
// and checks that deleting everything leaves the host clean.
func TestContainersNetworkAndLogs(t *testing.T) {
	c := startHostCluster(t, hostClusterOpts{region: "e2e-c", network: containersNet, agents: 2})
	c.flavor("small", 0.25, 64)
	c.image()
	start := time.Now()
	c.create(hostCompute("web", 2, "mkdir -p /www && hostname > /www/index.html && exec httpd -f -v -p 80 -h /www", nil))
	web := c.waitReady("web", 2, 60*time.Second)
	t.Logf("2 web replicas ready in %s, on %s and %s", time.Since(start).Round(time.Millisecond), web[0].Node, web[1].Node)

	seen := map[string]string{}
	var targets []string
	for _, r := range web {
		addr := replicaAddress(r)
		ip, err := netip.ParseAddr(addr)
		block, berr := c.block(r.Node)
		if err != nil || berr != nil || !block.Contains(ip) || ip == block.Addr().Next() {
			t.Fatalf("replica %s: address %q; want a host address of its node's block %s (%v) other than its gateway", r.ID, addr, block, berr)
		}
		if other, dup := seen[addr]; dup {
			t.Fatalf("replicas %s and %s share address %s", other, r.ID, addr)
		}
		seen[addr] = r.ID
		targets = append(targets, addr)
		if r.Network == nil || r.Network.Address != addr || r.Network.Bridge != c.bridge[r.Node] || r.Network.Gateway != block.Addr().Next().String() {
			t.Errorf("replica %s: network attachment %+v; want %s on bridge %s, gateway %s", r.ID, r.Network, addr, c.bridge[r.Node], block.Addr().Next())
		}
		// The host reaches the replicas through their node's bridge,
		// which holds the block's gateway.
		if ok, err := framework.LinkHasAddr(c.bridge[r.Node], r.Network.Gateway); !ok {
			t.Fatalf("bridge %s: gateway %s not on the host (%v)", c.bridge[r.Node], r.Network.Gateway, err)
		}
	}
	for _, r := range web {
		// Ready is the task running (the resource has no health check):
		// its shell starts httpd a moment later.
		var body string
		framework.Eventually(t, 30*time.Second, "http://"+replicaAddress(r)+"/ from the host", func() error {
			var err error
			body, err = hostGet("http://" + replicaAddress(r) + "/")
			return err
		})
		if got := strings.TrimSpace(body); got != r.ID {
			t.Errorf("http://%s/ from the host: got %q; want the hostname %q", replicaAddress(r), got, r.ID)
		}
	}

	// A container reaches them too, over the bridge.
	c.create(hostCompute("client", 1, `for ip in $TARGETS; do wget -q -O - http://$ip/; done; sleep 3600`,
		map[string]any{"env": map[string]string{"TARGETS": strings.Join(targets, " ")}}))
	client := c.waitReady("client", 1, 60*time.Second)
	c.waitLogs("client", "", 30*time.Second, web[0].ID, web[1].ID)

	// httpd -v logs every request: the host's (from the gateway of the
	// replica's node) and the client's, unmasqueraded from another node.
	clientAddr := replicaAddress(client[0])
	for _, r := range web {
		framework.Eventually(t, 30*time.Second, "httpd's log of "+r.ID+" through the API", func() error {
			log, err := c.logs("web", r.ID)
			if err != nil {
				return err
			}
			for _, from := range []string{r.Network.Gateway, clientAddr} {
				if !httpdServed(log, from) {
					return fmt.Errorf("no request from %s logged in %q", from, log)
				}
			}
			return nil
		})
	}
	// A container the replica does not have is a 404 naming it, from
	// containerd through the agent, region and global; "main" is the
	// main one.
	path := "/v1/resources/web/logs?replica=" + web[0].ID + "&container="
	if resp, err := c.global.Do(context.Background(), http.MethodGet, path+"nope", nil); err != nil ||
		resp.Status != http.StatusNotFound || !strings.Contains(string(resp.Body), `has no container \"nope\"`) {
		t.Errorf("logs of an unknown container: got %v, %v; want 404 has no container", resp, err)
	}
	if resp, err := c.global.Do(context.Background(), http.MethodGet, path+"main", nil); err != nil || resp.Status != http.StatusOK {
		t.Errorf("logs of container main: got %v, %v; want 200", resp, err)
	}

	// What the clean-up checks must go is there while the replicas run:
	// an address record, a network namespace and a port on a bridge per
	// replica.
	var want []string
	for _, r := range append(web, client...) {
		want = append(want, containersNet.Name+"/"+replicaAddress(r))
	}
	slices.Sort(want)
	if got, err := c.portRecords(); err != nil || !slices.Equal(got, want) {
		t.Errorf("address records in the region's etcd: %v (%v); want %v", got, err, want)
	}
	var netns []string
	for _, node := range c.nodes {
		netns = append(netns, framework.NetNSWithPrefix(c.ns[node]+"-")...)
	}
	if len(netns) != 3 {
		t.Errorf("network namespaces of the agents: %v; want one per replica", netns)
	}
	var ports []string
	for _, br := range c.bridge {
		ports = append(ports, framework.LinkPorts(br)...)
	}
	if len(ports) != 3 {
		t.Errorf("bridges %v: ports %v; want one per replica", c.bridge, ports)
	}

	// Deleting everything leaves nothing behind; the bridge stays only
	// while replicas use it.
	start = time.Now()
	if err := c.deleteAll(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c.waitClean(30 * time.Second); err != nil {
		t.Fatalf("after deleting every resource: %v", err)
	}
	t.Logf("deleted and host clean in %s", time.Since(start).Round(time.Millisecond))
}

// TestContainersVolumeSurvivesReplacement writes a stamp into a Volume
// once, replaces the replica that mounts it (a new revision), and finds
// the same stamp from the new replica.
func TestContainersVolumeSurvivesReplacement(t *testing.T) {
	c := startHostCluster(t, hostClusterOpts{region: "e2e-c", network: containersNet, agents: 2})
	c.flavor("small", 0.25, 64)
	c.image()
	c.create(map[string]any{"name": "data", "kind": "Volume", "replicas": 1, "spec": map[string]any{"volume": map[string]any{"sizeMiB": 16}}})
	// date alone could repeat within a second; the uuid cannot.
	cmd := `[ -f /data/stamp ] || echo "$(date) $(cat /proc/sys/kernel/random/uuid)" > /data/stamp; echo "stamp=$(cat /data/stamp)"; sleep 3600`
	spec := hostCompute("stamp", 1, cmd, map[string]any{"volumes": []map[string]any{{"volume": "data", "path": "/data"}}})
	c.create(spec)
	vol := c.waitReady("data", 1, 60*time.Second)
	first := c.waitReady("stamp", 1, 60*time.Second)[0]
	if first.Node != vol[0].Node {
		t.Errorf("replica %s on %s; want it on its volume's node %s", first.ID, first.Node, vol[0].Node)
	}
	stamp := stampOf(c.waitLogs("stamp", first.ID, 30*time.Second, "stamp="))
	t.Logf("replica %s wrote %q", first.ID, stamp)

	// A new revision replaces the replica.
	spec["spec"].(map[string]any)["compute"].(map[string]any)["env"] = map[string]string{"REVISION": "2"}
	var updated api.Resource
	c.global.Must(t, http.MethodPut, "/v1/resources/stamp", spec, http.StatusOK, &updated)
	second := c.waitReady("stamp", 1, 60*time.Second)[0]
	if second.ID == first.ID || second.Revision != updated.Revision {
		t.Fatalf("after the update: replica %s at revision %d; want a new replica at revision %d", second.ID, second.Revision, updated.Revision)
	}
	if ids, err := framework.CtrContainers(c.ns[second.Node]); err != nil || slices.Contains(ids, first.ID) {
		t.Errorf("containers of %s: %v (%v); want %s gone", second.Node, ids, err, first.ID)
	}
	got := stampOf(c.waitLogs("stamp", second.ID, 30*time.Second, "stamp="))
	if got != stamp {
		t.Fatalf("replica %s read %q; want the stamp %q its predecessor wrote", second.ID, got, stamp)
	}
}

// httpdServed reports whether busybox httpd -v logged a successful
// request from ip: "[::ffff:10.231.0.1]:39152: response:200".
func httpdServed(log, ip string) bool {
	return regexp.MustCompile(`(?m)(^|[\[:])` + regexp.QuoteMeta(ip) + `\]?:\d+: response:200$`).MatchString(log)
}

// stampOf returns the value of the first stamp= line of a log.
func stampOf(log string) string {
	for _, l := range strings.Split(log, "\n") {
		if v, ok := strings.CutPrefix(l, "stamp="); ok {
			return v
		}
	}
	return ""
}

// TestContainersAgentRestart SIGKILLs the agent under 5 running
// containers and restarts it: it adopts them, with the same containers
// and task pids, and no replica is recreated.
func TestContainersAgentRestart(t *testing.T) {
	c := startHostCluster(t, hostClusterOpts{region: "e2e-c", network: containersNet, agents: 1})
	node := c.nodes[0]
	ns := c.ns[node]
	c.flavor("small", 0.25, 64)
	c.image()
	c.create(hostCompute("fleet", 5, `trap 'exit 0' TERM; echo "up $(hostname)"; sleep 3600 & wait`, nil))
	before := hostIDs(c.waitReady("fleet", 5, 60*time.Second))
	ctrBefore, err := framework.CtrContainers(ns)
	if err != nil {
		t.Fatal(err)
	}
	tasksBefore, err := framework.CtrTasks(ns)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ctrBefore, before) || len(tasksBefore) != 5 {
		t.Fatalf("before the restart: containers %v, tasks %v; want the replicas %v", ctrBefore, tasksBefore, before)
	}

	agent := c.agents[node]
	killed := time.Now()
	agent.Restart() // SIGKILL, then the same command line
	var reconciled time.Duration
	framework.Eventually(t, 60*time.Second, "the restarted agent reconciled its first snapshot", func() error {
		if !strings.Contains(agentLogSinceStart(agent), "first assignment snapshot reconciled") {
			return errors.New("not yet")
		}
		reconciled = time.Since(killed)
		return nil
	})
	// Long enough for a status report and a controller pass that would
	// replace anything found missing or failed.
	time.Sleep(3 * time.Second)
	after := hostIDs(c.waitReady("fleet", 5, 30*time.Second))
	t.Logf("agent killed and restarted: first snapshot reconciled after %s", reconciled.Round(time.Millisecond))

	if !slices.Equal(after, before) {
		t.Errorf("replicas: %v after the restart; want the same as before, %v", after, before)
	}
	ctrAfter, err := framework.CtrContainers(ns)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ctrAfter, ctrBefore) {
		t.Errorf("containers: %v after the restart; want %v", ctrAfter, ctrBefore)
	}
	tasksAfter, err := framework.CtrTasks(ns)
	if err != nil {
		t.Fatal(err)
	}
	for id, tb := range tasksBefore {
		ta, ok := tasksAfter[id]
		if !ok || ta.PID != tb.PID || ta.Status != "RUNNING" {
			t.Errorf("task %s: %+v after the restart; want pid %d running", id, ta, tb.PID)
		}
	}
	log := agentLogSinceStart(agent)
	if !regexp.MustCompile(`msg="recovered replicas" .*provider=containerd count=5`).MatchString(log) {
		t.Errorf("the restarted agent's log shows no adoption of the 5 containers:\n%s", log)
	}
	for _, bad := range []string{"container started", "replacing container", "task restarted", "task missing", "applying it again"} {
		if strings.Contains(log, bad) {
			t.Errorf("the restarted agent's log says %q: it did not adopt everything", bad)
		}
	}
}

// TestContainersFailures checks what exits become at the global API: an
// exit with restart policy never (phase error, the exit code), a crash
// loop with on-failure (restarts count up), an OOM kill.
func TestContainersFailures(t *testing.T) {
	c := startHostCluster(t, hostClusterOpts{region: "e2e-c", network: containersNet, agents: 1})
	c.flavor("small", 0.25, 64)
	c.flavor("tiny", 0.25, 16)
	c.image()
	c.create(hostCompute("crash", 1, "echo bye; exit 3", map[string]any{"restartPolicy": "never"}))
	c.create(hostCompute("crashloop", 1, "echo again; exit 3", map[string]any{"restartPolicy": "on-failure"}))
	oom := hostCompute("oom", 1, `x=$(head -c 64m /dev/zero | tr "\0" x); echo "survived ${#x}"`, map[string]any{"restartPolicy": "never"})
	oom["spec"].(map[string]any)["flavor"] = "tiny"
	c.create(oom)

	// An error is replaced after a back-off, so look for the error
	// state while it lasts.
	waitExit := func(name, reason string, code int32) {
		t.Helper()
		start := time.Now()
		framework.Eventually(t, 60*time.Second, fmt.Sprintf("%s in error (%s) with exit code %d", name, reason, code), func() error {
			r, err := c.status(name)
			if err != nil {
				return err
			}
			if r.Status.Phase != api.PhaseError || !strings.Contains(r.Status.Reason, reason) {
				return fmt.Errorf("phase %s (%s)", r.Status.Phase, r.Status.Reason)
			}
			reps, err := c.replicas(name)
			if err != nil {
				return err
			}
			for _, rep := range reps {
				if rep.Status != nil && rep.Status.ExitCode != nil && *rep.Status.ExitCode == code && strings.Contains(rep.Status.Reason, reason) {
					return nil
				}
			}
			return fmt.Errorf("resource in error (%s) but no replica with exit code %d among %+v", r.Status.Reason, code, reps)
		})
		t.Logf("%s: error %q seen after %s", name, reason, time.Since(start).Round(time.Millisecond))
	}
	waitExit("crash", "exited with code 3", 3)
	waitExit("oom", "OOM-killed (memory limit 16 MiB)", 137)

	// on-failure restarts the same replica, counting.
	var id string
	var restarts []int
	framework.Eventually(t, 60*time.Second, "crashloop restarted, and restarted again", func() error {
		reps, err := c.replicas("crashloop")
		if err != nil {
			return err
		}
		if len(reps) != 1 || reps[0].Status == nil {
			return fmt.Errorf("replicas %+v", reps)
		}
		rep := reps[0]
		if id == "" {
			id = rep.ID
		}
		if rep.ID != id {
			return fmt.Errorf("replica %s replaced by %s: on-failure must restart it in place", id, rep.ID)
		}
		if rep.Status.Phase == api.PhaseError {
			t.Errorf("crashloop: phase error (%s) while on-failure restarts it", rep.Status.Reason)
		}
		if n := rep.Status.Restarts; len(restarts) == 0 || restarts[len(restarts)-1] != n {
			restarts = append(restarts, n)
		}
		if len(restarts) < 2 || restarts[0] < 1 {
			return fmt.Errorf("restarts seen: %v", restarts)
		}
		return nil
	})
	if !slices.IsSorted(restarts) {
		t.Errorf("crashloop: restarts went %v; want them to only count up", restarts)
	}
	r, err := c.status("crashloop")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("crashloop: restarts seen %v; resource phase %s (%s)", restarts, r.Status.Phase, r.Status.Reason)
	if logs, err := c.logs("crashloop", id); err != nil || strings.Count(logs, "again") < 2 {
		t.Errorf("crashloop logs: %q (%v); want the output of every run", logs, err)
	}
}

// prefixed is s after prefix; "" for "".
func prefixed(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

// TestContainersUser runs the user settings through every tier: a
// securityContext given to the global API reaches the node (the
// container runs as runAsUser), a node with refuseRoot fails a root
// container with a reason that the resource's status carries, and bad
// ids are 400s naming the field.
func TestContainersUser(t *testing.T) {
	c := startHostCluster(t, hostClusterOpts{region: "e2e-u", network: containersNet, agents: 1, containerdOptions: "refuseRoot: true"})
	c.flavor("small", 0.25, 64)
	c.image()
	const probe = `echo "uid=$(id -u) gid=$(id -g)"; trap 'exit 0' TERM; sleep 3600 & wait`
	c.create(hostCompute("app", 1, probe, map[string]any{"securityContext": map[string]any{"runAsUser": 1000, "runAsGroup": 1000, "runAsNonRoot": true}}))
	c.create(hostCompute("rooted", 1, probe, nil))

	reps := c.waitReady("app", 1, 60*time.Second)
	c.waitLogs("app", reps[0].ID, 30*time.Second, "uid=1000 gid=1000")
	const reason = "securityContext: container would run as root (the image's user is uid 0) and this node refuses root containers (refuseRoot)"
	framework.Eventually(t, 60*time.Second, "rooted in error: "+reason, func() error {
		r, err := c.status("rooted")
		if err != nil {
			return err
		}
		if r.Status.Phase != api.PhaseError || !strings.Contains(r.Status.Reason, reason) {
			return fmt.Errorf("phase %s (%s)", r.Status.Phase, r.Status.Reason)
		}
		return nil
	})

	for _, tc := range []struct {
		sc   map[string]any
		want string
	}{
		{map[string]any{"runAsUser": -1}, "spec.compute.securityContext.runAsUser: -1 is not an id (0-2147483647)"},
		{map[string]any{"runAsGroup": 1 << 31}, "spec.compute.securityContext.runAsGroup: 2147483648 is not an id"},
		{map[string]any{"runAsUser": 0, "runAsNonRoot": true}, "spec.compute.securityContext.runAsUser: 0 is root, which runAsNonRoot refuses"},
	} {
		bad := hostCompute("bad", 1, probe, map[string]any{"securityContext": tc.sc})
		bad["schedule"] = map[string]any{"regions": []map[string]any{{"name": c.o.region}}}
		resp, err := c.global.Do(context.Background(), http.MethodPost, "/v1/resources", bad)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Status != http.StatusBadRequest || !strings.Contains(string(resp.Body), tc.want) {
			t.Errorf("securityContext %v: got %d %s; want 400 with %q", tc.sc, resp.Status, resp.Body, tc.want)
		}
	}
}
