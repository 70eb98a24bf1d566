// Package security replays attacks on a cluster of real Strata processes
// (bin/strata, bin/etcd): each test is an attack found in a review,
// written so that it fails if the hole opens again. `make test` runs it;
// `make test-security` runs it with every other TestSecurity* test.
package security

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stratahq/strata/e2e/framework"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/testkit/etcdtest"
)

// readTimeout is the tiers' api.readTimeout: short, so that the slow-body
// attack is cut within the test.
const readTimeout = 2 * time.Second

// cluster is one global replica and two regions (sec-1, sec-2) with one
// agent each (sec-1-a, sec-2-a) on the fake provider, over mutual TLS,
// all on one real etcd (each tier under its own prefix).
type cluster struct {
	t     *testing.T
	dir   string
	bin   string
	pki   *framework.PKI
	token string

	globalHTTP, globalGRPC string
	regions                map[string]*region
}

type region struct {
	name       string
	http, grpc string
	// node is the region's one agent; nodeAddr its NodeService.
	node, nodeAddr string
}

var regionNames = []string{"sec-1", "sec-2"}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	c := &cluster{
		t: t, dir: t.TempDir(), bin: framework.Bin(t, "strata"), pki: framework.NewPKI(t),
		token:   "strata_sec00001_0123456789abcdef0123456789abcdef01234567",
		regions: map[string]*region{},
	}
	etcd := etcdtest.StartProcess(t).Endpoints()[0]
	c.globalHTTP, c.globalGRPC = framework.FreeAddr(t), framework.FreeAddr(t)
	framework.Start(t, "global", c.bin, []string{"global", "--config", c.write("global.yaml", fmt.Sprintf(`id: g1
listen: {http: %q, grpc: %q}
etcd: {endpoints: [%q], prefix: /sec/global/}
api: {bootstrapToken: %q, readTimeout: %s}
regions: {heartbeatInterval: 500ms, suspectAfter: 2s, downAfter: 4s, probeTimeout: 1s}
audit: {path: %s}
log: {level: debug}
`, c.globalHTTP, c.globalGRPC, etcd, c.token, readTimeout, c.auditPath("global"))+c.pki.YAML(pki.Global("g1")))})
	for i, name := range regionNames {
		r := &region{name: name, http: framework.FreeAddr(t), grpc: framework.FreeAddr(t), node: name + "-a", nodeAddr: framework.FreeAddr(t)}
		c.regions[name] = r
		framework.Start(t, "region-"+name, c.bin, []string{"region", "--config", c.write(name+".yaml", fmt.Sprintf(`name: %s
id: %s-r1
listen: {http: %q, grpc: %q}
etcd: {endpoints: [%q], prefix: /sec/%s/}
global: {endpoint: %q}
zones: [a]
network: {subnet: 10.%d.0.0/16, gateway: 10.%d.0.1, bridge: sec%d}
api: {token: %s, readTimeout: %s}
audit: {path: %s}
log: {level: debug}
`, name, name, r.http, r.grpc, etcd, name, c.globalGRPC, 70+i, 70+i, i, framework.RegionToken, readTimeout, c.auditPath(name))+c.pki.YAML(pki.Region(name)))})
		framework.StartAgent(t, "agent-"+r.node, c.write(r.node+".yaml", fmt.Sprintf(`node:
  name: %s
  zone: a
  milliCPU: 4000
  memoryMiB: 8192
region: {endpoint: %q}
listen: {grpc: %q}
dataDir: %s
providers:
  - name: fake
log: {level: debug}
`, r.node, r.grpc, r.nodeAddr, filepath.Join(c.dir, r.node))+c.pki.YAML(pki.Node(name, r.node))))
	}
	framework.WaitHTTP(t, "http://"+c.globalHTTP+"/readyz", 60*time.Second)
	framework.Eventually(t, 60*time.Second, "both regions and nodes registered", func() error {
		var nodes struct{ Items []api.Node }
		if _, err := c.global().Get("/v1/nodes", &nodes); err != nil {
			return err
		}
		if len(nodes.Items) != len(regionNames) {
			return fmt.Errorf("%d nodes; want %d", len(nodes.Items), len(regionNames))
		}
		return nil
	})
	return c
}

// auditPath is the audit log of the tier called name.
func (c *cluster) auditPath(name string) string {
	return filepath.Join(c.dir, name+"-audit.log")
}

func (c *cluster) write(name, body string) string {
	return framework.WriteFile(c.t, c.dir, name, body)
}

// global is an admin client of the global REST API.
func (c *cluster) global() *framework.Client {
	return framework.NewClient("http://"+c.globalHTTP, c.token)
}

// regionREST is an operator client of a region's REST API.
func (c *cluster) regionREST(name string) *framework.Client {
	return framework.NewClient("http://"+c.regions[name].http, framework.RegionToken)
}

// registered returns the region registrations the global tier holds.
func (c *cluster) registered(t *testing.T) map[string]api.Region {
	t.Helper()
	var l struct{ Items []api.Region }
	if code, err := c.global().Get("/v1/regions", &l); err != nil || code != 200 {
		t.Fatalf("GET /v1/regions: %d %v", code, err)
	}
	out := map[string]api.Region{}
	for _, r := range l.Items {
		out[r.Name] = r
	}
	return out
}

// node returns a node as its region's REST API shows it.
func (c *cluster) node(t *testing.T, region, name string) api.Node {
	t.Helper()
	var n api.Node
	if code, err := c.regionREST(region).Get("/v1/nodes/"+name, &n); err != nil || code != 200 {
		t.Fatalf("GET %s /v1/nodes/%s: %d %v", region, name, code, err)
	}
	return n
}
