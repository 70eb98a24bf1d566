package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/e2e/framework"
	"github.com/stratahq/strata/internal/api"
)

// defaultTenant is the bootstrap token's tenant, the caller's.
const defaultTenant = "default"

// probeCommand tries each address of $TARGETS over HTTP (port 80) in
// rounds and prints one line a round: "round N: <addr>=ok|refused ...".
const probeCommand = `i=0; while true; do i=$((i+1)); line="round $i:"; for t in $TARGETS; do if timeout 2 wget -q -O /dev/null http://$t/ 2>/dev/null; then line="$line $t=ok"; else line="$line $t=refused"; fi; done; echo "$line"; sleep 0.3; done`

// createIn posts a resource in tenant (the caller's when "").
func (c *hostCluster) createIn(tenant string, body map[string]any) {
	c.t.Helper()
	if _, ok := body["schedule"]; !ok {
		body["schedule"] = map[string]any{"regions": []map[string]any{{"name": c.o.region}}}
	}
	q := ""
	if tenant != "" {
		q = "?tenant=" + tenant
	}
	c.global.Must(c.t, http.MethodPost, "/v1/resources"+q, body, http.StatusCreated, nil)
}

// replicasIn lists a resource's replicas in tenant.
func (c *hostCluster) replicasIn(tenant, name string) ([]api.Replica, error) {
	var reps struct{ Items []api.Replica }
	status, err := c.global.Get("/v1/resources/"+name+"/replicas?tenant="+tenant, &reps)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("GET replicas of %s/%s: %d", tenant, name, status)
	}
	return reps.Items, nil
}

// waitProbes waits until the last rounds of the probe resource name (in
// tenant) all show want: for each target address, whether it answered.
func (c *hostCluster) waitProbes(tenant, name string, want map[string]bool, timeout time.Duration) {
	c.t.Helper()
	c.waitRounds(tenant, name, fmt.Sprint(want), timeout, func(l string) error {
		for addr, ok := range want {
			w := addr + "=refused"
			if ok {
				w = addr + "=ok"
			}
			if !strings.Contains(l+" ", " "+w+" ") {
				return fmt.Errorf("%q: want %s", l, w)
			}
		}
		return nil
	})
}

// waitRounds waits until check passes on each of the last 3 lines
// "round N: ..." the resource name (in tenant) logged; what says what
// they should show.
func (c *hostCluster) waitRounds(tenant, name, what string, timeout time.Duration, check func(line string) error) {
	c.t.Helper()
	const rounds = 3
	framework.Eventually(c.t, timeout, fmt.Sprintf("%s/%s's last %d rounds show %s", tenant, name, rounds, what), func() error {
		resp, err := c.global.Do(c.t.Context(), http.MethodGet, "/v1/resources/"+name+"/logs?tenant="+tenant, nil)
		if err != nil {
			return err
		}
		if resp.Status != http.StatusOK {
			return fmt.Errorf("logs: %d %s", resp.Status, resp.Body)
		}
		var lines []string
		for l := range strings.Lines(string(resp.Body)) {
			if strings.HasPrefix(l, "round ") {
				lines = append(lines, strings.TrimSpace(l))
			}
		}
		if len(lines) < rounds {
			return fmt.Errorf("%d rounds so far", len(lines))
		}
		for _, l := range lines[len(lines)-rounds:] {
			if err := check(l); err != nil {
				return err
			}
		}
		return nil
	})
}

// TestMultiHostNetworkPolicy runs two hosts (vxlan) and two tenants, with
// real containers. Tenant a serves web and db on host 2; its clients x
// and y run on host 1; tenant b probes from host 1 (across hosts) and
// from host 2 (the same bridge). Tenants are isolated by default: b
// reaches nothing of a's while a's clients reach both. Then a policy
// selects web and admits x on port 80: x still reaches web, y no longer
// does, and db, which no policy selects, stays open to both. The policy's
// status says where it is enforced. Deleting the policy opens web to y
// again.
func TestMultiHostNetworkPolicy(t *testing.T) {
	c := startHostCluster(t, hostClusterOpts{region: "e2e-p", network: multiNet, agents: 2, hosts: true, labels: hostLabels})
	const other = "e2e-b"
	c.tenants = append(c.tenants, other)
	c.flavor("small", 0.25, 64)
	c.image()
	c.createIn(other, map[string]any{"name": "busybox", "kind": "Image", "spec": map[string]any{
		"image": map[string]any{"ref": "docker.io/library/busybox:latest", "archive": c.archive},
	}})

	h1, h2 := map[string]string{"host": "h1"}, map[string]string{"host": "h2"}
	c.create(c.onNodes(hostCompute("web", 1, lbWebCommand, nil), h2, ""))
	c.create(c.onNodes(hostCompute("db", 1, lbWebCommand, nil), h2, ""))
	web, db := c.waitReady("web", 1, 90*time.Second), c.waitReady("db", 1, 60*time.Second)
	webAddr, dbAddr := replicaAddress(web[0]), replicaAddress(db[0])
	targets := map[string]any{"env": map[string]string{"TARGETS": webAddr + " " + dbAddr}}
	c.create(c.onNodes(hostCompute("x", 1, probeCommand, targets), h1, ""))
	c.create(c.onNodes(hostCompute("y", 1, probeCommand, targets), h1, ""))
	c.createIn(other, c.onNodes(hostCompute("remote", 1, probeCommand, targets), h1, ""))
	c.createIn(other, c.onNodes(hostCompute("local", 1, probeCommand, targets), h2, ""))
	c.waitReady("x", 1, 60*time.Second)
	c.waitReady("y", 1, 60*time.Second)
	for _, name := range []string{"remote", "local"} {
		framework.Eventually(t, 60*time.Second, other+"/"+name+" running", func() error {
			reps, err := c.replicasIn(other, name)
			if err != nil {
				return err
			}
			if len(reps) != 1 || reps[0].Phase != api.PhaseReady {
				return fmt.Errorf("replicas %+v", reps)
			}
			return nil
		})
	}

	// Isolation by default.
	open := map[string]bool{webAddr: true, dbAddr: true}
	closed := map[string]bool{webAddr: false, dbAddr: false}
	c.waitProbes(defaultTenant, "x", open, 90*time.Second)
	c.waitProbes(defaultTenant, "y", open, 30*time.Second)
	c.waitProbes(other, "remote", closed, 60*time.Second)
	c.waitProbes(other, "local", closed, 30*time.Second)

	// A policy selects web and admits x on port 80.
	var pol api.NetworkPolicy
	c.global.Must(t, http.MethodPost, "/v1/networkpolicies", map[string]any{
		"name": "web-from-x", "selector": map[string]string{"app": "web"},
		"ingress": []map[string]any{{
			"from":  []map[string]any{{"resources": map[string]any{"matchLabels": map[string]string{"app": "x"}}}},
			"ports": []map[string]any{{"protocol": "tcp", "port": 80}},
		}},
	}, http.StatusCreated, &pol)
	if pol.Tenant != defaultTenant || pol.Generation != 1 || pol.UID == "" {
		t.Fatalf("created policy: %+v; want the caller's tenant, generation 1, a uid", pol)
	}
	c.waitProbes(defaultTenant, "y", map[string]bool{webAddr: false, dbAddr: true}, 60*time.Second)
	c.waitProbes(defaultTenant, "x", open, 30*time.Second)
	c.waitProbes(other, "remote", closed, 30*time.Second)
	c.waitProbes(other, "local", closed, 30*time.Second)

	// Its status: the region holds generation 1 and enforces it on the
	// one node that runs web.
	framework.Eventually(t, 30*time.Second, "the policy's status names the region and node", func() error {
		var got api.NetworkPolicy
		if _, err := c.global.Get("/v1/networkpolicies/web-from-x", &got); err != nil {
			return err
		}
		if got.Status == nil || len(got.Status.Regions) != 1 {
			return fmt.Errorf("status %+v", got.Status)
		}
		r := got.Status.Regions[0]
		if r.Region != c.o.region || r.ObservedGeneration != 1 || r.Replicas != 1 || r.Nodes != 1 {
			return fmt.Errorf("region status %+v; want %s, generation 1, 1 replica on 1 node", r, c.o.region)
		}
		return nil
	})

	// The policy gone, y reaches web again; b still nothing.
	c.global.Must(t, http.MethodDelete, "/v1/networkpolicies/web-from-x", nil, http.StatusOK, nil)
	c.waitProbes(defaultTenant, "y", open, 60*time.Second)
	c.waitProbes(other, "remote", closed, 30*time.Second)
}
