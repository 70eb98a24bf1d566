package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/e2e/framework"
)

// TestContainersConfigsAndSecrets runs the real tiers with a real etcd
// and containerd: a container reads a mounted Config file and takes a
// Secret as a variable (its command prints both, read through the logs
// API); changing the Config rolls out a new replica that sees the new
// value; the secret's value is in no tier's log.
func TestContainersConfigsAndSecrets(t *testing.T) {
	c := startHostCluster(t, hostClusterOpts{region: "e2e-c", network: containersNet, agents: 1})
	c.flavor("small", 0.25, 64)
	c.image()
	const secret = "e2e-Secret-4f21"
	c.global.Must(t, http.MethodPost, "/v1/configs", map[string]any{"name": "web-conf", "data": map[string]string{"app.conf": "greeting=hello-1"}}, http.StatusCreated, nil)
	c.global.Must(t, http.MethodPost, "/v1/secrets", map[string]any{"name": "db", "data": map[string]string{"password": secret}}, http.StatusCreated, nil)

	cmd := `echo "conf=$(cat /etc/app/app.conf)"; echo "pw=$DB_PASSWORD"; ls -l /run/secrets/db; sleep 3600`
	c.create(hostCompute("app", 1, cmd, map[string]any{
		"files":   []map[string]any{{"config": "web-conf", "path": "/etc/app"}, {"secret": "db", "path": "/run/secrets/db"}},
		"envFrom": []map[string]any{{"secret": "db", "key": "password", "name": "DB_PASSWORD"}},
	}))
	first := c.waitReady("app", 1, 90*time.Second)[0]
	log := c.waitLogs("app", first.ID, 30*time.Second, "conf=greeting=hello-1", "pw="+secret)
	if !strings.Contains(log, "-r--------") {
		t.Errorf("the secret's file is not mode 0400: %q", log)
	}

	// A new value of the Config is a new revision, rolled out: a new
	// replica that reads it.
	c.global.Must(t, http.MethodPut, "/v1/configs/web-conf", map[string]any{"data": map[string]string{"app.conf": "greeting=hello-2"}}, http.StatusOK, nil)
	// The PUT made the new revision: waitReady waits for its replica.
	second := c.waitReady("app", 1, 90*time.Second)[0]
	if second.ID == first.ID || second.Revision <= first.Revision {
		t.Fatalf("after the config change: replica %s at revision %d; want a new replica at a new revision", second.ID, second.Revision)
	}
	c.waitLogs("app", second.ID, 30*time.Second, "conf=greeting=hello-2", "pw="+secret)

	// The secret's value is in no tier's log (debug level).
	procs := append([]*framework.Proc{}, c.tiers...)
	for _, p := range c.agents {
		procs = append(procs, p)
	}
	if len(procs) != 3 {
		t.Fatalf("%d processes; want global, region and agent", len(procs))
	}
	for _, p := range procs {
		if log := p.Log(); len(log) == 0 || strings.Contains(string(log), secret) {
			t.Errorf("the log of %s is empty or holds the secret value", p.Name)
		}
	}
}

// TestPodContainersConfigsAndSecrets: a pod's init container and
// sidecar take Configs and Secrets of their own through every tier: the
// init container reads a Config's file, the sidecar another file and a
// Secret as a variable, each read through the logs API (?container=),
// and the main container sees neither; the secret's value is in no
// tier's log.
func TestPodContainersConfigsAndSecrets(t *testing.T) {
	c := startHostCluster(t, hostClusterOpts{region: "e2e-pc", network: containersNet, agents: 1})
	c.flavor("small", 0.25, 64)
	c.image()
	const secret = "e2e-Side-Secret-93ab"
	c.global.Must(t, http.MethodPost, "/v1/configs", map[string]any{"name": "prep-conf", "data": map[string]string{"step": "migrate-7"}}, http.StatusCreated, nil)
	c.global.Must(t, http.MethodPost, "/v1/configs", map[string]any{"name": "side-conf", "data": map[string]string{"side.conf": "ship=loki"}}, http.StatusCreated, nil)
	c.global.Must(t, http.MethodPost, "/v1/secrets", map[string]any{"name": "side-token", "data": map[string]string{"token": secret}}, http.StatusCreated, nil)

	main := `[ -e /etc/side ] || echo "main: no side files"; echo "main: token=${TOKEN:-unset}"; sleep 3600`
	c.create(hostCompute("pod", 1, main, map[string]any{
		"initContainers": []map[string]any{{"name": "prep", "image": "busybox",
			"command": []string{"sh", "-c", `echo "prep: step=$(cat /etc/prep/step)"`},
			"files":   []map[string]any{{"config": "prep-conf", "path": "/etc/prep"}}}},
		"containers": []map[string]any{{"name": "side", "image": "busybox",
			"command": []string{"sh", "-c", `echo "side: $(cat /etc/side/side.conf) token=$TOKEN"; sleep 3600`},
			"files":   []map[string]any{{"config": "side-conf", "path": "/etc/side"}},
			"envFrom": []map[string]any{{"secret": "side-token", "key": "token", "name": "TOKEN"}}}},
	}))
	rep := c.waitReady("pod", 1, 90*time.Second)[0]
	c.waitLogs("pod", rep.ID, 30*time.Second, "main: no side files", "main: token=unset")
	c.waitContainerLogs("pod", rep.ID, "prep", 30*time.Second, "prep: step=migrate-7")
	c.waitContainerLogs("pod", rep.ID, "side", 30*time.Second, "side: ship=loki token="+secret)

	procs := append([]*framework.Proc{}, c.tiers...)
	for _, p := range c.agents {
		procs = append(procs, p)
	}
	for _, p := range procs {
		if log := p.Log(); len(log) == 0 || strings.Contains(string(log), secret) {
			t.Errorf("the log of %s is empty or holds the secret value", p.Name)
		}
	}
}

// waitContainerLogs polls the logs of container of a replica until they
// contain every one of want.
func (c *hostCluster) waitContainerLogs(name, replica, container string, timeout time.Duration, want ...string) {
	c.t.Helper()
	path := "/v1/resources/" + name + "/logs?replica=" + replica + "&container=" + container
	framework.Eventually(c.t, timeout, fmt.Sprintf("logs of %s -c %s contain %q", replica, container, want), func() error {
		resp, err := c.global.Do(context.Background(), http.MethodGet, path, nil)
		if err != nil {
			return err
		}
		if resp.Status != http.StatusOK {
			return fmt.Errorf("GET %s: %d %s", path, resp.Status, resp.Body)
		}
		for _, w := range want {
			if !strings.Contains(string(resp.Body), w) {
				return fmt.Errorf("no %q in %q", w, resp.Body)
			}
		}
		return nil
	})
}
