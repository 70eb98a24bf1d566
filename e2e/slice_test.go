package e2e

import (
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
	"github.com/stratahq/strata/testkit/etcdtest"
)

// sliceCluster is what the vertical-slice scenario drives: the global
// REST API, each region's operator REST API, and a way to restart parts.
type sliceCluster struct {
	global  *framework.Client
	regions map[string]*framework.Client
	// restart restarts a process at a stage of the scenario.
	restart func(t *testing.T, stage string)
}

// runSlice is the vertical slice: a flavor, a compute resource of 3
// replicas in dev-1 that becomes ready at the global API, an update (new
// revision), a delete that leaves nothing in any tier — with processes
// restarted between the steps.
func runSlice(t *testing.T, c sliceCluster) {
	g := c.global
	g.Must(t, http.MethodPost, "/v1/flavors", map[string]any{
		"name": "small", "kind": "container", "spec": map[string]any{"vcpus": 0.5, "memoryMiB": 256},
	}, http.StatusCreated, nil)
	web := map[string]any{
		"name": "web", "kind": "Compute", "replicas": 3,
		"labels": map[string]string{"app": "web"},
		"spec": map[string]any{"flavor": "small", "compute": map[string]any{
			"image": "busybox", "command": []string{"httpd", "-f", "-p", "80"},
		}},
		"schedule": map[string]any{"regions": []map[string]any{{"name": "dev-1"}}},
	}
	var created api.Resource
	g.Must(t, http.MethodPost, "/v1/resources", web, http.StatusCreated, &created)
	if created.Revision != 1 || created.UID == "" {
		t.Fatalf("created resource: revision %d uid %q; want revision 1 and a uid", created.Revision, created.UID)
	}
	c.restart(t, "after-create")
	waitReady(t, g, "web", 1, 3)

	var replicas struct{ Items []api.Replica }
	g.Must(t, http.MethodGet, "/v1/resources/web/replicas", nil, http.StatusOK, &replicas)
	if len(replicas.Items) != 3 {
		t.Fatalf("replicas: got %d; want 3", len(replicas.Items))
	}
	for _, r := range replicas.Items {
		if r.Region != "dev-1" || r.Phase != api.PhaseReady || r.Node == "" {
			t.Errorf("replica %s: region %q phase %q node %q; want dev-1, ready, placed", r.ID, r.Region, r.Phase, r.Node)
		}
	}

	// Update: a spec change is a new revision, rolled out to every replica.
	web["spec"].(map[string]any)["compute"].(map[string]any)["env"] = map[string]string{"GREETING": "hello"}
	var updated api.Resource
	g.Must(t, http.MethodPut, "/v1/resources/web", web, http.StatusOK, &updated)
	if updated.Revision != 2 {
		t.Fatalf("updated resource: revision %d; want 2", updated.Revision)
	}
	c.restart(t, "after-update")
	waitReady(t, g, "web", 2, 3)
	framework.Eventually(t, 60*time.Second, "every replica at revision 2", func() error {
		var reps struct{ Items []api.Replica }
		if _, err := g.Get("/v1/resources/web/replicas", &reps); err != nil {
			return err
		}
		if len(reps.Items) != 3 {
			return fmt.Errorf("%d replicas", len(reps.Items))
		}
		for _, r := range reps.Items {
			if r.Revision != 2 || r.Phase != api.PhaseReady {
				return fmt.Errorf("replica %s at revision %d, %s", r.ID, r.Revision, r.Phase)
			}
		}
		return nil
	})
	var revs struct{ Items []api.Revision }
	g.Must(t, http.MethodGet, "/v1/resources/web/revisions", nil, http.StatusOK, &revs)
	if len(revs.Items) != 2 {
		t.Errorf("revisions: got %d; want 2", len(revs.Items))
	}

	// Delete: destroy walks through every tier and removes the records.
	g.Must(t, http.MethodDelete, "/v1/resources/web", nil, http.StatusAccepted, nil)
	c.restart(t, "after-delete")
	framework.Eventually(t, 60*time.Second, "resource gone from the global API", func() error {
		status, err := g.Get("/v1/resources/web", nil)
		if err != nil {
			return err
		}
		if status != http.StatusNotFound {
			return fmt.Errorf("GET /v1/resources/web: %d", status)
		}
		return nil
	})
	for name, rc := range c.regions {
		framework.Eventually(t, 30*time.Second, "resource gone from region "+name, func() error {
			var res struct{ Items []map[string]any }
			if _, err := rc.Get("/v1/resources", &res); err != nil {
				return err
			}
			if len(res.Items) != 0 {
				return fmt.Errorf("region %s still has %d resources", name, len(res.Items))
			}
			var reps struct{ Items []api.Replica }
			if _, err := rc.Get("/v1/replicas", &reps); err != nil {
				return err
			}
			if len(reps.Items) != 0 {
				return fmt.Errorf("region %s still has %d replicas", name, len(reps.Items))
			}
			return nil
		})
	}
}

func waitReady(t *testing.T, g *framework.Client, name string, revision int64, replicas int) {
	t.Helper()
	framework.Eventually(t, 90*time.Second, fmt.Sprintf("%s ready at revision %d", name, revision), func() error {
		var r api.Resource
		status, err := g.Get("/v1/resources/"+name, &r)
		if err != nil {
			return err
		}
		if status != http.StatusOK {
			return fmt.Errorf("status %d", status)
		}
		if r.Status == nil {
			return fmt.Errorf("no status yet")
		}
		s := r.Status
		if s.Phase != api.PhaseReady || s.Ready != replicas || s.Revision != revision {
			return fmt.Errorf("phase %s (%s), ready %d/%d, revision %d", s.Phase, s.Reason, s.Ready, s.Replicas, s.Revision)
		}
		return nil
	})
}

// TestSliceDev runs the slice against `strata dev`, restarting the whole
// process between steps: its data directory carries everything over.
func TestSliceDev(t *testing.T) {
	bin := framework.Bin(t, "strata")
	dir := t.TempDir()
	// Region i serves on the ports after the global ones: reserve them all.
	httpPort, grpcPort := framework.FreePorts(t, 3), framework.FreePorts(t, 3)
	args := []string{"dev", "--data-dir", dir, "--http-port", fmt.Sprint(httpPort), "--grpc-port", fmt.Sprint(grpcPort), "--log-level", "debug", "--providers", "fake"}
	dev := framework.Start(t, "strata-dev", bin, args)
	base := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	framework.WaitHTTP(t, base+"/readyz", 60*time.Second)
	token := readToken(t, filepath.Join(dir, "admin-token"))
	regionToken := readToken(t, filepath.Join(dir, "region-token"))
	waitRegions(t, framework.NewClient(base, token), 2)
	c := sliceCluster{
		global: framework.NewClient(base, token),
		regions: map[string]*framework.Client{
			"dev-1": framework.NewClient(fmt.Sprintf("http://127.0.0.1:%d", httpPort+1), regionToken),
			"dev-2": framework.NewClient(fmt.Sprintf("http://127.0.0.1:%d", httpPort+2), regionToken),
		},
		restart: func(t *testing.T, stage string) {
			if stage == "after-delete" {
				return
			}
			t.Logf("%s: restarting strata dev", stage)
			dev.Restart()
			framework.WaitHTTP(t, base+"/readyz", 60*time.Second)
			waitRegions(t, framework.NewClient(base, token), 2)
		},
	}
	runSlice(t, c)
}

// waitRegions waits until the global tier knows n regions: they register
// with their first heartbeat, shortly after the global API answers.
func waitRegions(t *testing.T, g *framework.Client, n int) {
	t.Helper()
	framework.Eventually(t, 60*time.Second, fmt.Sprintf("%d regions registered", n), func() error {
		var regions struct{ Items []api.Region }
		if _, err := g.Get("/v1/regions", &regions); err != nil {
			return err
		}
		if len(regions.Items) != n {
			return fmt.Errorf("%d regions", len(regions.Items))
		}
		return nil
	})
}

func readToken(t *testing.T, path string) string {
	t.Helper()
	var tok string
	framework.Eventually(t, 30*time.Second, "admin token written", func() error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		tok = strings.TrimSpace(string(b))
		if tok == "" {
			return fmt.Errorf("empty")
		}
		return nil
	})
	return tok
}

// TestSliceProcesses runs the slice with every tier in its own process,
// each tier on its own real etcd server, mutual TLS between tiers, and
// one process of each kind killed (SIGKILL) and restarted along the way.
func TestSliceProcesses(t *testing.T) {
	bin := framework.Bin(t, "strata")
	dir := t.TempDir()
	ca := framework.NewPKI(t)
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	token := "strata_e2e00001_0123456789abcdef0123456789abcdef01234567"

	globalEtcd := etcdtest.StartProcess(t)
	gHTTP, gGRPC := framework.FreeAddr(t), framework.FreeAddr(t)
	gcfg := write("global.yaml", fmt.Sprintf(`id: g1
listen: {http: %q, grpc: %q}
etcd: {endpoints: [%q]}
api: {bootstrapToken: %q}
log: {level: debug}
`, gHTTP, gGRPC, globalEtcd.Endpoints()[0], token)+ca.YAML(pki.Global("g1")))
	procs := map[string]*framework.Proc{}
	procs["global"] = framework.Start(t, "global", bin, []string{"global", "--config", gcfg})

	regions := map[string]*framework.Client{}
	regionGRPC := map[string]string{}
	for i, name := range []string{"dev-1", "dev-2"} {
		e := etcdtest.StartProcess(t)
		h, g := framework.FreeAddr(t), framework.FreeAddr(t)
		regionGRPC[name] = g
		cfg := write(name+".yaml", fmt.Sprintf(`name: %s
id: %s-r1
listen: {http: %q, grpc: %q}
etcd: {endpoints: [%q]}
global: {endpoint: %q}
zones: [a, b]
network: {subnet: 10.%d.0.0/16, gateway: 10.%d.0.1, bridge: e2e%d}
log: {level: debug}
`, name, name, h, g, e.Endpoints()[0], gGRPC, 90+i, 90+i, i)+framework.RegionAPIYAML+ca.YAML(pki.Region(name)))
		procs[name] = framework.Start(t, "region-"+name, bin, []string{"region", "--config", cfg})
		regions[name] = framework.NewClient("http://"+h, framework.RegionToken)
	}
	for _, name := range []string{"dev-1", "dev-2"} {
		for i := range 2 {
			node := fmt.Sprintf("%s-%c", name, 'a'+i)
			cfg := write(node+".yaml", fmt.Sprintf(`node:
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
`, node, []string{"a", "b"}[i], regionGRPC[name], framework.FreeAddr(t), framework.FreeAddr(t), filepath.Join(dir, node))+ca.YAML(pki.Node(name, node)))
			procs[node] = framework.StartAgent(t, "agent-"+node, cfg)
		}
	}
	g := framework.NewClient("http://"+gHTTP, token)
	framework.WaitHTTP(t, "http://"+gHTTP+"/readyz", 60*time.Second)
	framework.Eventually(t, 60*time.Second, "both regions registered with 2 nodes each", func() error {
		var nodes struct{ Items []api.Node }
		if _, err := g.Get("/v1/nodes", &nodes); err != nil {
			return err
		}
		if len(nodes.Items) != 4 {
			return fmt.Errorf("%d nodes", len(nodes.Items))
		}
		return nil
	})
	runSlice(t, sliceCluster{
		global:  g,
		regions: regions,
		restart: func(t *testing.T, stage string) {
			switch stage {
			case "after-create":
				t.Log("after-create: SIGKILL and restart region dev-1")
				procs["dev-1"].Restart()
			case "after-update":
				t.Log("after-update: SIGKILL and restart agent dev-1-a and the global replica")
				procs["dev-1-a"].Restart()
				procs["global"].Restart()
				framework.WaitHTTP(t, "http://"+gHTTP+"/readyz", 60*time.Second)
			case "after-delete":
				t.Log("after-delete: SIGKILL and restart agent dev-1-b")
				procs["dev-1-b"].Restart()
			}
		},
	})
}
