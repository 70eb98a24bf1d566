package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/stratahq/strata/providers/fake"
)

// shape is how a benchmark cluster is built.
//
// production is what issue #21 asks of the B1–B6 figures: a 3-member
// etcd per tier (separate processes, stock flags, fsync on), redis-server
// for heartbeats and events, mutual TLS on every gRPC link with a
// certificate per identity, TLS on the REST APIs, a connection per
// simulated agent, a fake provider taking 50–200 ms to start a replica,
// nodes of 4, 16 and 64 cores; and, as docs/operations.md lays the tiers
// out, haproxy (TCP, TLS passed through) in front of the two global
// replicas' REST API and of the region's two replicas, which the agents
// dial.
//
// light is the cluster the figures before #21 came from: one etcd member
// per tier, plaintext gRPC on loopback (insecure mode), heartbeats in the
// region's memory, every simulated agent on one shared connection, a fake
// provider answering at once, 64-core nodes. It shows the core's own costs,
// so that a regression there is not hidden by the production shape's.
type shape struct {
	name       string
	production bool
	members    int
	fake       fake.Config
}

var (
	production = shape{name: "production", production: true, members: 3,
		fake: fake.Config{ApplyLatency: 50 * time.Millisecond, ApplyJitter: 150 * time.Millisecond}}
	light = shape{name: "light", members: 1}
)

// cluster is one running benchmark cluster.
type cluster struct {
	s     *suite
	shape shape
	name  string // prefix of process and file names

	certs     *clusterCerts // production only
	caFile    string
	tlsClient *tls.Config

	etcdGlobal []string
	etcdRegion []string
	redis      string
	redisProc  *proc

	// put1 and put128 are B0's: one put's latency and the 128-client
	// rate, the baselines of B2 and B1; b1Rate is B1's median (B10's
	// baseline, and what B3's half load is half of); b3IdleGets and
	// b3IdlePosts are B3's baseline on the idle cluster, which B1 takes.
	put1        *latencies
	put128      float64
	b1Rate      float64
	b3IdleGets  *latencies
	b3IdlePosts *latencies

	globals []*proc
	gCfgs   []string
	gHTTP   []string
	gGRPC   []string
	gLB     string // production: haproxy in front of gHTTP
	// region is the region's leader as last found (the replica whose
	// RSS and CPU B1 and B8 read); regions are its replicas, two in
	// production behind haproxy, whose addresses rHTTP and rGRPC are
	// then (every replica's advertise, the agents' region.endpoint).
	region   *proc
	regions  []*proc
	rCfgs    []string
	rHTTPs   []string
	rGRPCs   []string
	rHTTP    string
	rGRPC    string
	sim      *proc
	g        *client
	token    string
	regionID string
}

func (c *cluster) scheme() string {
	if c.shape.production {
		return "https://"
	}
	return "http://"
}

func (c *cluster) newClient(httpAddr string) *client {
	return newClient(c.scheme()+httpAddr, c.token, c.tlsClient)
}

// startEtcd starts an etcd cluster of members processes with stock flags
// (fsync on, --max-txn-ops at its default) and returns its client URLs.
func (s *suite) startEtcd(ctx context.Context, name string, members int) ([]string, error) {
	clients, peers := make([]string, members), make([]string, members)
	var initial []string
	for i := range members {
		clients[i], peers[i] = "http://"+freeAddr(), "http://"+freeAddr()
		initial = append(initial, fmt.Sprintf("%s-%d=%s", name, i, peers[i]))
	}
	for i := range members {
		m := fmt.Sprintf("%s-%d", name, i)
		args := []string{"--name", m, "--data-dir", filepath.Join(s.dir, m),
			"--listen-client-urls", clients[i], "--advertise-client-urls", clients[i],
			"--listen-peer-urls", peers[i], "--initial-advertise-peer-urls", peers[i],
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-token", name,
			"--quota-backend-bytes", fmt.Sprint(8 << 30),
			"--auto-compaction-mode", "revision", "--auto-compaction-retention", "100000",
			"--log-level", "error"}
		if s.o.profiles != "" {
			// etcd serves its profiler on the client URL, so that B1's
			// profiles show where each member's CPU goes.
			args = append(args, "--enable-pprof")
			pprofAddrs[m] = strings.TrimPrefix(clients[i], "http://")
		}
		p, err := start(s.dir, m, s.etcdBin(), args...)
		if err != nil {
			return nil, err
		}
		s.procs = append(s.procs, p)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: clients, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	return clients, waitFor(ctx, 50*time.Millisecond, "etcd "+name, func() error {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := cli.Put(cctx, "/probe", "x")
		return err
	})
}

// startCluster brings up a cluster of shape sh: two global replicas (for
// B5), the region's replicas, the simulated agents. B0 runs on the global tier's etcd
// before the tiers start, so that B1's baseline is the same etcd.
func (s *suite) startCluster(ctx context.Context, sh shape) (*cluster, error) {
	c := &cluster{s: s, shape: sh, name: sh.name, token: "strata_bench001_0123456789abcdef0123456789abcdef01234567", regionID: "bench"}
	var err error
	if c.etcdGlobal, err = s.startEtcd(ctx, c.name+"-etcd-global", sh.members); err != nil {
		return nil, err
	}
	if err := s.b0(ctx, c); err != nil {
		return nil, fmt.Errorf("B0: %w", err)
	}
	if c.etcdRegion, err = s.startEtcd(ctx, c.name+"-etcd-region", sh.members); err != nil {
		return nil, err
	}
	if sh.production {
		if c.certs, err = makeCerts(filepath.Join(s.dir, c.name+"-pki"), c.regionID); err != nil {
			return nil, err
		}
		c.caFile, c.tlsClient = c.certs.caFile, c.certs.client
	}
	if c.redisProc, c.redis, err = s.startRedis(ctx, c.name+"-redis"); err != nil {
		return nil, err
	}
	if err := c.startGlobals(ctx); err != nil {
		return nil, err
	}
	if err := c.startRegions(ctx); err != nil {
		return nil, err
	}
	c.g = c.newClient(c.gHTTP[0])
	if err := waitFor(ctx, 100*time.Millisecond, "global API", func() error {
		_, err := c.g.do(ctx, http.MethodGet, "/readyz", nil, nil)
		return err
	}); err != nil {
		return nil, err
	}
	if c.sim, err = c.startSims(ctx, "sim", s.o.agents, 0, c.rGRPC); err != nil {
		return nil, err
	}
	if err := c.waitNodesUp(ctx, s.o.agents, 5*time.Minute); err != nil {
		return nil, fmt.Errorf("%w\nregion log:\n%s\nsim log:\n%s", err, c.regions[0].tail(10), c.sim.tail(10))
	}
	if _, err := c.findRegionLeader(ctx); err != nil {
		return nil, err
	}
	_, err = c.g.do(ctx, http.MethodPost, "/v1/flavors", map[string]any{
		"name": "tiny", "kind": "container", "spec": map[string]any{"vcpus": 0.1, "memoryMiB": 64},
	}, nil)
	return c, err
}

// startGlobals starts the two global replicas and, in production,
// haproxy in front of their REST API.
func (c *cluster) startGlobals(ctx context.Context) error {
	for i := range 2 {
		h, g := freeAddr(), freeAddr()
		c.gHTTP, c.gGRPC = append(c.gHTTP, h), append(c.gGRPC, g)
		cfg := c.s.write(fmt.Sprintf("%s-g%d.yaml", c.name, i+1), fmt.Sprintf(`id: g%d
listen: {http: %q, grpc: %q}
etcd: {endpoints: [%s]}
%s
log: {level: warn}
`, i+1, h, g, quoted(c.etcdGlobal), c.security(fmt.Sprintf("g%d", i+1), "api: {bootstrapToken: "+c.token+"}")))
		c.gCfgs = append(c.gCfgs, cfg)
		p, err := c.s.start(fmt.Sprintf("%s-global-%d", c.name, i+1), "global", "--config", cfg)
		if err != nil {
			return err
		}
		c.globals = append(c.globals, p)
	}
	if c.shape.production {
		lb, err := c.startLB(ctx, "lb-global", c.gHTTP, c.gHTTP)
		if err != nil {
			return err
		}
		c.gLB = lb[0]
	}
	return nil
}

// startRegions starts the region's replicas: one in the light shape, two
// behind haproxy in production, advertising the balancer's addresses, as
// docs/operations.md ("Scaling the tiers") has it.
func (c *cluster) startRegions(ctx context.Context) error {
	n := 1
	if c.shape.production {
		n = 2
	}
	for range n {
		c.rHTTPs, c.rGRPCs = append(c.rHTTPs, freeAddr()), append(c.rGRPCs, freeAddr())
	}
	grpcs := c.rGRPCs
	c.rHTTP, c.rGRPC = c.rHTTPs[0], grpcs[0]
	if c.shape.production {
		lb, err := c.startLB(ctx, "lb-region", c.rHTTPs, c.rHTTPs, grpcs)
		if err != nil {
			return err
		}
		c.rHTTP, c.rGRPC = lb[0], lb[1]
	}
	for i := range n {
		cfg := c.s.write(fmt.Sprintf("%s-region-%d.yaml", c.name, i+1), fmt.Sprintf(`name: %s
id: %s-r%d
listen: {http: %q, grpc: %q}
advertise: {http: %q, grpc: %q}
etcd: {endpoints: [%s]}
global: {endpoint: %q}
zones: [z0, z1, z2]
# Every node gets a block of the network: a /10 holds a /24 for each of
# 16,384 nodes (B8 brings 10,000; the default /16 has room for 256).
network: {subnet: 10.64.0.0/10, gateway: 10.64.0.1, nodeMask: 24}
%s
log: {level: warn}
`, c.regionID, c.regionID, i+1, c.rHTTPs[i], grpcs[i], c.rHTTP, c.rGRPC, quoted(c.etcdRegion), strings.Join(c.gGRPC, ","), c.regionSecurity()))
		c.rCfgs = append(c.rCfgs, cfg)
		p, err := c.s.start(fmt.Sprintf("%s-region-%d", c.name, i+1), "region", "--config", cfg)
		if err != nil {
			return err
		}
		c.regions = append(c.regions, p)
	}
	return nil
}

// findRegionLeader asks each region replica (directly) who leads the
// region, sets c.region to it and returns its index.
func (c *cluster) findRegionLeader(ctx context.Context) (int, error) {
	leader := -1
	err := waitFor(ctx, 50*time.Millisecond, "a region leader", func() error {
		for i, h := range c.rHTTPs {
			var st struct {
				Leader string `json:"leader"`
			}
			_, err := newClient(c.scheme()+h, regionToken, c.tlsClient).do(ctx, http.MethodGet, "/v1/status", nil, &st)
			if err == nil && st.Leader == fmt.Sprintf("%s-r%d", c.regionID, i+1) {
				leader = i
				return nil
			}
		}
		return fmt.Errorf("none")
	})
	if err == nil {
		c.region = c.regions[leader]
	}
	return leader, err
}

// leaderGRPC is the gRPC address of the region's leader as last found.
func (c *cluster) leaderGRPC() string {
	for i, p := range c.regions {
		if p == c.region {
			return c.rGRPCs[i]
		}
	}
	return c.rGRPC
}

// security is the YAML of a tier's transport security and REST API: the
// identity's certificate (production) or insecure mode (light), with api
// the tier's api block, TLS added in production.
func (c *cluster) security(identity, api string) string {
	redis := ""
	if c.redis != "" {
		redis = fmt.Sprintf("\nredis: {addr: %q}", c.redis)
	}
	if !c.shape.production {
		return api + "\ninsecure: true" + redis
	}
	dir := filepath.Join(c.s.dir, c.name+"-pki")
	cert, key := filepath.Join(dir, identity+".pem"), filepath.Join(dir, identity+"-key.pem")
	api = strings.TrimSuffix(api, "}") + fmt.Sprintf(", tls: {cert: %q, key: %q}}", cert, key)
	return fmt.Sprintf("%s\ntls: {ca: %q, cert: %q, key: %q}%s", api, c.caFile, cert, key, redis)
}

// regionSecurity is security for the region: in the light shape without
// Redis (heartbeats and events in the region's memory, as before #21).
func (c *cluster) regionSecurity() string {
	api := "api: {token: " + regionToken + "}"
	if !c.shape.production {
		return api + "\ninsecure: true"
	}
	return c.security("region", api)
}

// startSims starts a sim-agents process of count agents named
// prefix-NNNN, dialling the region at endpoint, rate of them a second (0:
// all at once).
func (c *cluster) startSims(ctx context.Context, prefix string, count, rate int, endpoint string) (*proc, error) {
	args := []string{"sim-agents", "--count", fmt.Sprint(count), "--region", endpoint, "--prefix", prefix, "--start-rate", fmt.Sprint(rate)}
	if c.shape.production {
		dir := filepath.Join(c.s.dir, c.name+"-"+prefix+"-certs")
		names := make([]string, count)
		for i := range names {
			names[i] = fmt.Sprintf("%s-%04d", prefix, i)
		}
		if err := c.certs.nodeCerts(dir, names...); err != nil {
			return nil, err
		}
		args = append(args, "--tls-dir", dir, "--mixed-sizes",
			"--apply-latency", c.shape.fake.ApplyLatency.String(), "--apply-jitter", c.shape.fake.ApplyJitter.String())
	} else {
		args = append(args, "--insecure")
	}
	return c.s.start(c.name+"-"+prefix, args...)
}

// regionStatus is the region's node counts as the global API reports them.
func (c *cluster) nodesUp(ctx context.Context) (int, error) {
	var regions struct {
		Items []struct {
			Status *struct {
				NodesUp int `json:"nodesUp"`
			} `json:"status"`
		} `json:"items"`
	}
	if _, err := c.g.do(ctx, http.MethodGet, "/v1/regions", nil, &regions); err != nil {
		return 0, err
	}
	if len(regions.Items) != 1 || regions.Items[0].Status == nil {
		return 0, nil
	}
	return regions.Items[0].Status.NodesUp, nil
}

func (c *cluster) waitNodesUp(ctx context.Context, want int, within time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	return waitFor(wctx, 500*time.Millisecond, fmt.Sprintf("%d nodes Up", want), func() error {
		n, err := c.nodesUp(ctx)
		if err == nil && n < want {
			err = fmt.Errorf("%d up", n)
		}
		return err
	})
}

// regionToken is the bearer token of the region's operator API.
const regionToken = "strata-bench-region-token-0123456789"

// regionAPI is a client of the region's operator API.
func (c *cluster) regionAPI() *client {
	return newClient(c.scheme()+c.rHTTP, regionToken, c.tlsClient)
}

func quoted(v []string) string {
	q := make([]string, len(v))
	for i, s := range v {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

func (s *suite) startRedis(ctx context.Context, name string) (*proc, string, error) {
	addr := freeAddr()
	_, port, _ := strings.Cut(addr, ":")
	p, err := start(s.dir, name, "redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err != nil {
		return nil, "", err
	}
	s.procs = append(s.procs, p)
	return p, addr, waitFor(ctx, 50*time.Millisecond, "redis", func() error {
		c, err := (&netDialer{}).dial(addr)
		if err == nil {
			c.Close()
		}
		return err
	})
}

func (s *suite) write(name, body string) string {
	p := filepath.Join(s.dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		panic(err)
	}
	return p
}

// startAgent starts a real agent process (strata-agent, as installed) for
// node (label bench=<node>) with the shape's fake provider, and waits for
// it to be Up.
func (c *cluster) startAgent(ctx context.Context, node string) (*proc, error) {
	sec := "insecure: true"
	if c.shape.production {
		dir := filepath.Join(c.s.dir, c.name+"-"+node)
		if err := c.certs.nodeCerts(dir, node); err != nil {
			return nil, err
		}
		sec = fmt.Sprintf("tls: {ca: %q, cert: %q, key: %q}", filepath.Join(dir, "ca.pem"), filepath.Join(dir, node+".pem"), filepath.Join(dir, node+"-key.pem"))
	}
	before, err := c.nodesUp(ctx)
	if err != nil {
		return nil, err
	}
	cfg := c.s.write(c.name+"-"+node+".yaml", fmt.Sprintf(`node:
  name: %s
  zone: z0
  labels: {bench: %s}
  milliCPU: 64000
  memoryMiB: 65536
region: {endpoint: %q}
listen: {grpc: %q}
dataDir: %s
providers: [{name: fake, options: {applyLatency: %s, applyJitter: %s}}]
%s
log: {level: warn}
`, node, node, c.rGRPC, freeAddr(), filepath.Join(c.s.dir, c.name+"-"+node+"-data"), c.shape.fake.ApplyLatency, c.shape.fake.ApplyJitter, sec))
	p, err := c.s.startBin(c.name+"-agent-"+node, c.s.agentBin(), "--config", cfg)
	if err != nil {
		return nil, err
	}
	if err := c.waitNodesUp(ctx, before+1, time.Minute); err != nil {
		return nil, fmt.Errorf("%w\nagent log:\n%s", err, p.tail(10))
	}
	return p, nil
}
