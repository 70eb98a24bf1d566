package chaos

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/stratahq/strata/e2e/framework"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/internal/transport"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	"github.com/stratahq/strata/testkit/redistest"
	"github.com/stratahq/strata/testkit/testenv"
	"github.com/stratahq/strata/testkit/testenv/haproxycfg"
)

// Ports every host uses: each host is a network namespace of its own
// with its own address, where nothing but the test's process listens, so
// the tiers' default ports collide with nothing and need no reservation
// (testkit/testenv/ports is for servers on the machine's loopback).
const (
	globalHTTP, globalGRPC = 8080, 9090
	regionHTTP, regionGRPC = 8081, 9091
	agentGRPC              = 9092
)

// adminToken is the bootstrap admin token of the global tier.
const adminToken = "strata_chaos001_0123456789abcdef0123456789abcdef01234567"

// Topology is the production layout in miniature, every process on a
// test host of its own (a network namespace with its own address):
//
//	global: 2 replicas behind haproxy (TCP, TLS passthrough), a
//	        3-member etcd, Redis with Sentinel (master, replica, three
//	        sentinels on one host)
//	each of 2 regions: 2 replicas behind haproxy, a 3-member etcd, a
//	        Redis, 2 agents on the fake provider
//
// with mutual TLS on every link (etcd clients and peers, Redis, gRPC)
// and HTTPS on the REST APIs. The test itself speaks from the client
// host, through the load balancers.
type Topology struct {
	t       *testing.T
	Dir     string
	Lab     *framework.Lab
	PKI     *chaosPKI
	Client  *framework.Host
	bin     string
	etcdBin string

	Global  *Tier
	Regions []*Tier
	Redis   *redistest.Sentinel
	Agents  []*Agent
}

// Tier is the global tier or one region.
type Tier struct {
	Name     string // "global" or the region's name
	Replicas []*Replica
	LB       *framework.Host
	Etcd     *etcdCluster
	// RegionRedis is a region's Redis.
	RegionRedis *redistest.Server
}

// Replica is one strata process of a tier.
type Replica struct {
	ID   string
	Host *framework.Host
	Proc *framework.Proc
}

// Agent is one node.
type Agent struct {
	Name, Region string
	Host         *framework.Host
	Proc         *framework.Proc
	// Containerd is the containerd namespace of an agent on the
	// containerd provider; empty on the fake provider. Archive is the
	// busybox image archive it may import (its directory is the
	// provider's one imageDirs).
	Containerd, Archive string
}

// redisPassword is the password of the tiers' Redis user and of the
// sentinels.
const redisPassword = "chaos-redis-password-0123456789"

// redisUser is the tiers' ACL user on every Redis.
var redisUser = redistest.WithUser("strata", redisPassword, "~*", "&*", "+@all")

// Regions the topology runs.
var regionNames = []string{"r1", "r2"}

// agentsPerRegion is how many fake nodes each region has.
const agentsPerRegion = 2

// chaosPKI issues the certificates of the lab's processes, each valid
// for its host's address and its load balancer's.
type chaosPKI struct {
	*framework.PKI
}

func (p *chaosPKI) files(t *testing.T, file, cn string, hosts ...string) pki.Files {
	return p.FilesForHosts(t, file, cn, hosts...)
}

// tlsYAML is the tls section of the process file (a region's replicas
// share their identity, not their addresses: each has its own files).
func (p *chaosPKI) tlsYAML(t *testing.T, file string, id pki.Identity, hosts ...string) (string, pki.Files) {
	f := p.files(t, file, id.String(), hosts...)
	return fmt.Sprintf("tls: {ca: %s, cert: %s, key: %s}\n", f.CA, f.Cert, f.Key), f
}

// clientTLS is a client TLS configuration of identity id trusting the CA.
func (p *chaosPKI) clientTLS(t *testing.T, id pki.Identity) *tls.Config {
	t.Helper()
	f := p.files(t, "client-"+strings.NewReplacer(":", "-", "/", "-").Replace(id.String()), id.String())
	pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{RootCAs: p.pool(t), Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
}

func (p *chaosPKI) pool(t *testing.T) *x509.CertPool {
	t.Helper()
	pem, err := os.ReadFile(p.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return pool
}

// StartTopology builds the lab and starts every process, and returns
// when the global tier sees both regions Up with all their nodes.
func StartTopology(t *testing.T, opts ...TopologyOption) *Topology {
	t.Helper()
	var o topologyOptions
	for _, f := range opts {
		f(&o)
	}
	top := &Topology{
		t: t, Dir: t.TempDir(),
		PKI:     &chaosPKI{framework.NewPKI(t)},
		bin:     framework.Bin(t, "strata"),
		etcdBin: framework.Bin(t, "etcd"),
	}
	top.Lab = framework.NewLab(t, "stc-", "10.251.0")
	top.Client = top.Lab.AddHost("client")
	redisTLS := redistest.NewTLS(t)

	// The global tier's state.
	gEtcd := []*framework.Host{top.Lab.AddHost("g-etcd0"), top.Lab.AddHost("g-etcd1"), top.Lab.AddHost("g-etcd2")}
	top.Global = &Tier{Name: "global", LB: top.Lab.AddHost("g-lb")}
	top.Global.Etcd = startEtcd(t, top, "global", gEtcd)
	redisHost := top.Lab.AddHost("g-redis")
	top.Redis = redistest.StartSentinel(t, redistest.WithSentinelPassword(redisPassword),
		redistest.WithServerOptions(redistest.OnHost(redisHost), redistest.WithTLS(redisTLS), redisUser))

	for i := range 2 {
		id := fmt.Sprintf("g%d", i+1)
		top.Global.Replicas = append(top.Global.Replicas, &Replica{ID: id, Host: top.Lab.AddHost(id)})
	}
	for _, r := range top.Global.Replicas {
		r.Proc = r.Host.Start(t, r.ID, top.bin, []string{"global", "--config", top.globalConfig(r, redisTLS)})
	}
	startHAProxy(t, top, top.Global, globalHTTP, globalGRPC)

	for ri, name := range regionNames {
		tier := &Tier{Name: name, LB: top.Lab.AddHost(name + "-lb")}
		top.Regions = append(top.Regions, tier)
		tier.Etcd = startEtcd(t, top, name, []*framework.Host{
			top.Lab.AddHost(name + "-etcd0"), top.Lab.AddHost(name + "-etcd1"), top.Lab.AddHost(name + "-etcd2"),
		})
		tier.RegionRedis = redistest.Start(t, redistest.OnHost(top.Lab.AddHost(name+"-redis")), redistest.WithTLS(redisTLS), redisUser)
		for i := range 2 {
			id := fmt.Sprintf("%s-%c", name, 'a'+i)
			tier.Replicas = append(tier.Replicas, &Replica{ID: id, Host: top.Lab.AddHost(id)})
		}
		for _, r := range tier.Replicas {
			r.Proc = r.Host.Start(t, r.ID, top.bin, []string{"region", "--config", top.regionConfig(tier, ri, r, redisTLS)})
		}
		startHAProxy(t, top, tier, regionHTTP, regionGRPC)
		for i := range agentsPerRegion {
			a := &Agent{Name: fmt.Sprintf("%s-n%d", name, i+1), Region: name}
			a.Host = top.Lab.AddHost(a.Name)
			top.Agents = append(top.Agents, a)
			a.Proc = a.Host.StartAgent(t, a.Name, top.agentConfig(tier, a))
		}
		if o.containerd && ri == 0 {
			top.startContainerdAgent(t, tier)
		}
	}
	top.WaitHealthy(t, 90*time.Second)
	return top
}

func (top *Topology) write(name, body string) string {
	return framework.WriteFile(top.t, top.Dir, name, body)
}

func (top *Topology) globalConfig(r *Replica, rt *redistest.TLS) string {
	t := top.t
	tlsSec, f := top.PKI.tlsYAML(t, r.ID, pki.Global(r.ID), r.Host.IP, top.Global.LB.IP)
	return top.write(r.ID+".yaml", fmt.Sprintf(`id: %s
listen: {http: %q, grpc: %q}
etcd: {endpoints: [%s], tls: {ca: %s, cert: %s, key: %s}}
redis:
  mode: sentinel
  sentinel: {masterName: %s, addrs: [%s], password: %s}
  username: strata
  password: %s
  tls: {ca: %s, cert: %s, key: %s, serverName: %s}
api: {bootstrapToken: %q, tls: {cert: %s, key: %s}}
regions: {heartbeatInterval: 500ms, suspectAfter: 2s, downAfter: 4s, probeTimeout: 1s}
log: {level: debug, format: json}
`, r.ID, r.Host.Addr(globalHTTP), r.Host.Addr(globalGRPC),
		strings.Join(top.Global.Etcd.Endpoints(), ", "), f.CA, f.Cert, f.Key,
		redistest.MasterName, strings.Join(top.Redis.SentinelAddrs(), ", "), redisPassword, redisPassword,
		rt.CA, rt.ClientCert, rt.ClientKey, rt.ServerName,
		adminToken, f.Cert, f.Key)+tlsSec)
}

func (top *Topology) regionConfig(tier *Tier, ri int, r *Replica, rt *redistest.TLS) string {
	t := top.t
	tlsSec, f := top.PKI.tlsYAML(t, r.ID, pki.Region(tier.Name), r.Host.IP, tier.LB.IP)
	return top.write(r.ID+".yaml", fmt.Sprintf(`name: %s
id: %s
zones: [a]
listen: {http: %q, grpc: %q}
advertise: {http: %q, grpc: %q}
etcd: {endpoints: [%s], tls: {ca: %s, cert: %s, key: %s}}
redis:
  addr: %s
  username: strata
  password: %s
  tls: {ca: %s, cert: %s, key: %s, serverName: %s}
global: {endpoint: %q}
network: {subnet: 10.%d.0.0/16, gateway: 10.%d.0.1, bridge: stc%d, nodeMask: 20}
api: {token: %s, tls: {cert: %s, key: %s}}
nodes: {heartbeatInterval: 500ms, suspectAfter: 2s, downAfter: 4s, probeTimeout: 1s}
controller: {retryBackoff: 200ms}
log: {level: debug, format: json}
`, tier.Name, r.ID, r.Host.Addr(regionHTTP), r.Host.Addr(regionGRPC), tier.LB.Addr(regionHTTP), tier.LB.Addr(regionGRPC),
		strings.Join(tier.Etcd.Endpoints(), ", "), f.CA, f.Cert, f.Key,
		tier.RegionRedis.Addr(), redisPassword, rt.CA, rt.ClientCert, rt.ClientKey, rt.ServerName,
		top.Global.LB.Addr(globalGRPC), 80+ri, 80+ri, ri,
		framework.RegionToken, f.Cert, f.Key)+tlsSec)
}

func (top *Topology) agentConfig(tier *Tier, a *Agent) string {
	tlsSec, _ := top.PKI.tlsYAML(top.t, a.Name, pki.Node(a.Region, a.Name), a.Host.IP)
	runtime, providers := "fake", "  - name: fake\n"
	if a.Containerd != "" {
		runtime = "containerd"
		// The lab's hosts have no default route: the data plane is told
		// which address is the host's underlay.
		providers = fmt.Sprintf("  - name: containerd\n    options: {namespace: %s, restartBackoff: 50ms, restartBackoffMax: 1s, imageDirs: [%q]}\nnetwork: {underlayAddress: %s}\n",
			a.Containerd, filepath.Dir(a.Archive), a.Host.IP)
	}
	return top.write(a.Name+".yaml", fmt.Sprintf(`node: {name: %s, zone: a, milliCPU: 64000, memoryMiB: 262144, labels: {runtime: %s}}
region: {endpoint: %q}
listen: {grpc: %q}
dataDir: %s
statusInterval: 1s
providers:
%slog: {level: debug, format: json}
`, a.Name, runtime, tier.LB.Addr(regionGRPC), a.Host.Addr(agentGRPC), filepath.Join(top.Dir, a.Name), providers)+tlsSec)
}

// TopologyOption changes what StartTopology starts.
type TopologyOption func(*topologyOptions)

type topologyOptions struct{ containerd bool }

// WithContainerdAgent adds to the first region an agent on the
// containerd provider (labelled runtime=containerd; the fake ones are
// runtime=fake), in a containerd namespace of its own that is removed,
// with whatever the provider left on the host, when the test ends.
func WithContainerdAgent() TopologyOption { return func(o *topologyOptions) { o.containerd = true } }

func (top *Topology) startContainerdAgent(t *testing.T, tier *Tier) {
	t.Helper()
	framework.RequireContainerd(t)
	// Unique on the host: containerd namespaces and the provider's
	// network namespaces (strata-<node>-...) are host-wide.
	a := &Agent{Name: fmt.Sprintf("%s-ctr%d", tier.Name, os.Getpid()%100000), Region: tier.Name}
	a.Containerd, a.Archive = "strata-chaos-"+a.Name, framework.BusyboxArchive(t)
	a.Host = top.Lab.AddHost(a.Name)
	t.Cleanup(func() { scrubContainerd(t, a) })
	top.Agents = append(top.Agents, a)
	a.Proc = a.Host.StartAgent(t, a.Name, top.agentConfig(tier, a))
}

// scrubContainerd removes what the containerd agent left (after a
// failure; a passing scenario checks it left nothing itself).
func scrubContainerd(t *testing.T, a *Agent) {
	if _, err := framework.RemoveCtrNamespace(a.Containerd); err != nil {
		t.Logf("clean-up: containerd namespace %s: %v", a.Containerd, err)
	}
	for _, n := range framework.NetNSWithPrefix("strata-" + a.Name + "-") {
		if err := framework.RemoveNetNS(n); err != nil {
			t.Logf("clean-up: %v", err)
		}
	}
}

// startHAProxy runs haproxy on the tier's LB host with the configuration
// docs/operations.md shows (testkit/testenv/haproxycfg): a replica that
// is down or not ready gets no new connections.
func startHAProxy(t *testing.T, top *Topology, tier *Tier, httpPort, grpcPort int) {
	t.Helper()
	rest := haproxycfg.Frontend{Name: "rest", Bind: tier.LB.Addr(httpPort)}
	grpcF := haproxycfg.Frontend{Name: "grpc", Bind: tier.LB.Addr(grpcPort)}
	for _, r := range tier.Replicas {
		rest.Servers = append(rest.Servers, haproxycfg.Server{Name: r.ID, Addr: r.Host.Addr(httpPort)})
		grpcF.Servers = append(grpcF.Servers, haproxycfg.Server{Name: r.ID, Addr: r.Host.Addr(grpcPort), CheckPort: httpPort})
	}
	cfg := haproxycfg.Render(haproxycfg.Global{MaxConn: 2000, CAFile: top.PKI.CAFile()}, rest, grpcF)
	path := top.write(tier.Name+"-haproxy.cfg", cfg)
	tier.LB.Start(t, tier.Name+"-lb", testenv.LookPath(t, "haproxy"), []string{"-f", path, "-db"})
}

// REST is a client of the global REST API through its load balancer.
func (top *Topology) REST(timeout time.Duration) *framework.Client {
	c := framework.NewClient("https://"+top.Global.LB.Addr(globalHTTP), adminToken)
	c.HTTP = top.httpClient(timeout)
	return c
}

// RegionREST is an operator client of a region's REST API through its
// load balancer.
func (top *Topology) RegionREST(tier *Tier, timeout time.Duration) *framework.Client {
	c := framework.NewClient("https://"+tier.LB.Addr(regionHTTP), framework.RegionToken)
	c.HTTP = top.httpClient(timeout)
	return c
}

// ReplicaREST is a client of one replica, past the load balancer.
func (top *Topology) ReplicaREST(r *Replica, port int, token string) *framework.Client {
	c := framework.NewClient("https://"+r.Host.Addr(port), token)
	c.HTTP = top.httpClient(2 * time.Second)
	return c
}

func (top *Topology) httpClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		DialContext:         top.Client.DialContext,
		TLSClientConfig:     &tls.Config{RootCAs: top.PKI.pool(top.t), MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     30 * time.Second,
	}}
}

// WaitHealthy waits until both regions are Up with every node Up, as the
// global tier says, and every replica answers /readyz.
func (top *Topology) WaitHealthy(t *testing.T, timeout time.Duration) {
	t.Helper()
	c := top.REST(5 * time.Second)
	framework.Eventually(t, timeout, "regions and nodes Up", func() error {
		var regions struct{ Items []api.Region }
		if code, err := c.Get("/v1/regions", &regions); err != nil || code != 200 {
			return fmt.Errorf("GET /v1/regions: %d %v", code, err)
		}
		nodes := map[string]int{}
		for _, a := range top.Agents {
			nodes[a.Region]++
		}
		up := 0
		for _, r := range regions.Items {
			if r.Status != nil && r.Status.Health == api.HealthUp && r.Status.NodesUp == nodes[r.Name] {
				up++
			}
		}
		if up != len(regionNames) {
			return fmt.Errorf("%d of %d regions Up with all nodes: %+v", up, len(regionNames), regions.Items)
		}
		return nil
	})
}

// nodeConn is a NodeService connection to an agent, as its region.
func (top *Topology) nodeConn(t *testing.T, a *Agent) *grpc.ClientConn {
	t.Helper()
	f := top.PKI.files(t, "sampler-"+a.Region, pki.Region(a.Region).String())
	sec, err := transport.NewSecurity(config.TLS{CA: f.CA, Cert: f.Cert, Key: f.Key}, false)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := transport.Dial(a.Host.Addr(agentGRPC), sec, transport.ServerIs(pki.Node(a.Region, a.Name)),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return top.Client.DialContext(ctx, "tcp", addr)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// nodeStatus asks an agent for its replicas.
func nodeStatus(ctx context.Context, cc *grpc.ClientConn) (*agentv1.NodeStatusResponse, error) {
	return agentv1.NewNodeServiceClient(cc).Status(ctx, &agentv1.NodeStatusRequest{})
}
