package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/e2e/framework"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/internal/secretbox"
	"github.com/stratahq/strata/testkit/etcdtest"
	"github.com/stratahq/strata/testkit/redistest"
	"github.com/stratahq/strata/testkit/testenv/scrape"
)

// procCluster is a whole Strata cluster of real processes: global
// replicas on one real etcd (and a shared Redis when there are several),
// regions each on their own etcd, agents on the fake provider, mutual TLS
// everywhere.
type procCluster struct {
	t     *testing.T
	dir   string
	bin   string
	token string
	pki   *framework.PKI

	globals    []*framework.Proc
	globalHTTP []string
	globalGRPC []string
	regions    map[string]*regionProcs
	order      []string
}

type regionProcs struct {
	name   string
	proc   *framework.Proc
	http   string
	agents map[string]*framework.Proc
	// agentMetrics are the agents' /metrics addresses.
	agentMetrics map[string]string
}

type clusterOpts struct {
	globals         int
	regions         []string
	agentsPerRegion int
	// regionYAML and agentYAML are appended to every region's and
	// agent's configuration.
	regionYAML, globalYAML, agentYAML string
}

func startCluster(t *testing.T, o clusterOpts) *procCluster {
	t.Helper()
	c := &procCluster{t: t, dir: t.TempDir(), bin: framework.Bin(t, "strata"), regions: map[string]*regionProcs{}, order: o.regions,
		token: "strata_e2e00002_0123456789abcdef0123456789abcdef01234567"}
	c.pki = framework.NewPKI(t)
	redisLine := ""
	if o.globals > 1 {
		redisLine = fmt.Sprintf("redis: {addr: %q}\n", redistest.Start(t).Addr())
	}
	etcd := etcdtest.StartProcess(t)
	// One key seals the Secrets and receiver secrets on every replica.
	keyFile := filepath.Join(c.dir, "secrets.key")
	if _, err := secretbox.GenerateKey(keyFile); err != nil {
		t.Fatal(err)
	}
	for i := range o.globals {
		h, g := framework.FreeAddr(t), framework.FreeAddr(t)
		c.globalHTTP, c.globalGRPC = append(c.globalHTTP, h), append(c.globalGRPC, g)
		id := fmt.Sprintf("g%d", i+1)
		cfg := c.write(id+".yaml", fmt.Sprintf(`id: %s
listen: {http: %q, grpc: %q}
etcd: {endpoints: [%q]}
api: {bootstrapToken: %q}
secrets: {keyFiles: [%q]}
log: {level: debug}
`, id, h, g, etcd.Endpoints()[0], c.token, keyFile)+redisLine+o.globalYAML+c.pki.YAML(pki.Global(id)))
		c.globals = append(c.globals, framework.Start(t, "global-"+id, c.bin, []string{"global", "--config", cfg}))
	}
	for i, name := range o.regions {
		e := etcdtest.StartProcess(t)
		h, g := framework.FreeAddr(t), framework.FreeAddr(t)
		cfg := c.write(name+".yaml", fmt.Sprintf(`name: %s
id: %s-r1
listen: {http: %q, grpc: %q}
etcd: {endpoints: [%q]}
global: {endpoint: %q}
zones: [a, b]
network: {subnet: 10.%d.0.0/16, gateway: 10.%d.0.1, bridge: e2e%d}
log: {level: debug}
`, name, name, h, g, e.Endpoints()[0], strings.Join(c.globalGRPC, ","), 90+i, 90+i, i)+framework.RegionAPIYAML+o.regionYAML+c.pki.YAML(pki.Region(name)))
		rp := &regionProcs{name: name, http: h, agents: map[string]*framework.Proc{}, agentMetrics: map[string]string{}}
		rp.proc = framework.Start(t, "region-"+name, c.bin, []string{"region", "--config", cfg})
		c.regions[name] = rp
		for j := range o.agentsPerRegion {
			node := fmt.Sprintf("%s-%c", name, 'a'+j)
			m := framework.FreeAddr(t)
			rp.agentMetrics[node] = m
			acfg := c.write(node+".yaml", fmt.Sprintf(`node:
  name: %s
  zone: %s
  milliCPU: 4000
  memoryMiB: 8192
region: {endpoint: %q}
listen: {grpc: %q, metrics: %q}
dataDir: %s
providers:
  - name: fake
log: {level: debug}
`, node, []string{"a", "b"}[j%2], g, framework.FreeAddr(t), m, filepath.Join(c.dir, node))+o.agentYAML+c.pki.YAML(pki.Node(name, node)))
			rp.agents[node] = framework.StartAgent(t, "agent-"+node, acfg)
		}
	}
	for _, h := range c.globalHTTP {
		framework.WaitHTTP(t, "http://"+h+"/readyz", 60*time.Second)
	}
	waitRegions(t, c.global(0), len(o.regions))
	framework.Eventually(t, 60*time.Second, "every node registered", func() error {
		var nodes struct{ Items []api.Node }
		if _, err := c.global(0).Get("/v1/nodes", &nodes); err != nil {
			return err
		}
		if want := len(o.regions) * o.agentsPerRegion; len(nodes.Items) != want {
			return fmt.Errorf("%d nodes; want %d", len(nodes.Items), want)
		}
		return nil
	})
	return c
}

func (c *procCluster) write(name, body string) string {
	p := filepath.Join(c.dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		c.t.Fatal(err)
	}
	return p
}

func (c *procCluster) global(i int) *framework.Client {
	return framework.NewClient("http://"+c.globalHTTP[i], c.token)
}

func (c *procCluster) region(name string) *framework.Client {
	return framework.NewClient("http://"+c.regions[name].http, framework.RegionToken)
}

// killRegion SIGKILLs a region's process and its agents.
func (c *procCluster) killRegion(name string) {
	rp := c.regions[name]
	rp.proc.Kill()
	for _, a := range rp.agents {
		a.Kill()
	}
}

// startRegion starts a killed region and its agents again.
func (c *procCluster) startRegion(name string) {
	rp := c.regions[name]
	rp.proc.Restart()
	for _, a := range rp.agents {
		a.Restart()
	}
}

// leader returns the index of the global replica that is master, asking
// the replicas that are up.
func (c *procCluster) leader() (int, error) {
	for i, p := range c.globals {
		if p.Exited() {
			continue
		}
		var st struct {
			ID       string `json:"id"`
			Leader   string `json:"leader"`
			IsLeader bool   `json:"isLeader"`
		}
		if _, err := c.global(i).Get("/v1/status", &st); err != nil {
			continue
		}
		if st.Leader == "" {
			return -1, fmt.Errorf("no master yet (asked %s)", st.ID)
		}
		for j := range c.globals {
			if fmt.Sprintf("g%d", j+1) == st.Leader {
				return j, nil
			}
		}
		return -1, fmt.Errorf("unknown master %q", st.Leader)
	}
	return -1, fmt.Errorf("no global replica answers")
}

// metric reads one sample (name with its labels, as exposed) from a
// /metrics endpoint; a missing sample reads 0.
func metric(t *testing.T, addr, sample string) float64 {
	t.Helper()
	v, err := scrape.Sample(context.Background(), nil, "http://"+addr+"/metrics", sample)
	if err != nil && !errors.Is(err, scrape.ErrNoSample) {
		t.Fatalf("metric %s: %v", sample, err)
	}
	return v
}

// resourceStatus reads a resource's status from a global replica.
func resourceStatus(g *framework.Client, name string) (*api.Resource, error) {
	var r api.Resource
	status, err := g.Get("/v1/resources/"+name, &r)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d", name, status)
	}
	if r.Status == nil {
		return &r, fmt.Errorf("no status yet")
	}
	return &r, nil
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
