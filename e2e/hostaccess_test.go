package e2e

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/e2e/framework"
	"github.com/stratahq/strata/internal/api"
)

// hostAccessNet is the network of TestSecurityTenantHostAccess's cluster.
var hostAccessNet = hostNet{Name: "e2e-s0", Subnet: "10.234.0.0/24", Gateway: "10.234.0.1", Bridge: "e2e-s0"}

// TestSecurityTenantHostAccess replays, through the global API on real
// processes with containerd and HAProxy, the attacks of a review in
// which tenants reached the host: an image archive that is a host file,
// a host port of a host service, the agent's own port, a load balancer
// on every address of the node and on a privileged port. Each replica
// ends in error with a reason a tenant can act on and nothing of the host
// in it; the allowed image still runs.
func TestSecurityTenantHostAccess(t *testing.T) {
	c := startHostCluster(t, hostClusterOpts{region: "e2e-s", network: hostAccessNet, agents: 1, haproxy: true})
	node := c.nodes[0]
	var n api.Node
	c.global.Must(t, "GET", "/v1/regions/e2e-s/nodes/"+node, nil, 200, &n)
	_, agentPort, err := net.SplitHostPort(n.Address)
	if err != nil {
		t.Fatalf("node address %q: %v", n.Address, err)
	}
	c.flavor("small", 0.25, 64)
	c.image()
	c.create(map[string]any{"name": "shadow", "kind": "Image", "spec": map[string]any{
		"image": map[string]any{"ref": "docker.io/library/busybox:latest", "archive": "/etc/shadow"},
	}})
	hostPortSpec := func(p int) map[string]any {
		return map[string]any{"ports": []map[string]any{{"containerPort": 8080, "hostPort": p}}}
	}
	agentPortNum, err := strconv.Atoi(agentPort)
	if err != nil {
		t.Fatal(err)
	}
	lb := func(name string, listener map[string]any) map[string]any {
		return map[string]any{"name": name, "kind": "Loadbalancer", "replicas": 1, "spec": map[string]any{"loadbalancer": map[string]any{
			"listeners": []map[string]any{listener}, "selector": map[string]string{"app": "web"},
		}}}
	}
	c.create(hostCompute("steal", 1, "sleep 3600", map[string]any{"image": "shadow"}))
	c.create(hostCompute("hijack", 1, "sleep 3600", hostPortSpec(6379)))
	c.create(hostCompute("agentport", 1, "sleep 3600", hostPortSpec(agentPortNum)))
	c.create(lb("wide", map[string]any{"port": 31090, "address": "0.0.0.0"}))
	c.create(lb("lowport", map[string]any{"port": 80, "address": "127.0.0.1"}))
	c.create(hostCompute("web", 1, "exec httpd -f -p 8080", nil))

	tests := []struct{ resource, reason string }{
		{"steal", "image: image archive not allowed or not found"},
		{"hijack", "hostPort 6379: port 6379 is outside this node's allowed ports"},
		{"agentport", "hostPort " + agentPort + ": port " + agentPort},
		{"wide", "listeners[0].address: 0.0.0.0 is not an address this node binds load balancers to"},
		{"lowport", "listeners[0].port: port 80 is outside this node's allowed ports"},
	}
	for _, tt := range tests {
		framework.Eventually(t, 90*time.Second, tt.resource+" refused", func() error {
			reps, err := c.replicas(tt.resource)
			if err != nil {
				return err
			}
			for _, r := range reps {
				if r.Status != nil && r.Status.Phase == api.PhaseError && strings.Contains(r.Status.Reason, tt.reason) {
					if strings.Contains(r.Status.Reason, "root:") || strings.Contains(r.Status.Reason, "/etc/") {
						t.Errorf("%s: the reason shows the host: %s", tt.resource, r.Status.Reason)
					}
					return nil
				}
			}
			var got []string
			for _, r := range reps {
				if r.Status != nil {
					got = append(got, fmt.Sprintf("%s %s (%s)", r.ID, r.Status.Phase, r.Status.Reason))
				}
			}
			return fmt.Errorf("replicas %v; want one in error with %q", got, tt.reason)
		})
	}
	// The operator's image and ports still serve.
	c.waitReady("web", 1, 90*time.Second)
}
