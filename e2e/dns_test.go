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

// dnsClientCommand asks, in rounds, for the page of http://db/ (the bare
// name, through the search path), the port of db's SRV record for http,
// and whether another tenant's web is NXDOMAIN, and prints one line a
// round: "round N: db=<page> srv=<port> other=nxdomain|found".
const dnsClientCommand = `i=0; while true; do i=$((i+1));` +
	` body=$(timeout 2 wget -q -O - http://db/ 2>/dev/null | head -n 1);` +
	` srv=$(timeout 2 nslookup -type=srv _http._tcp.db.default.$REGION.strata.internal 2>&1 | sed -n 's/.*service = [0-9]* [0-9]* \([0-9]*\) .*/\1/p' | head -n 1);` +
	` other=$(timeout 2 nslookup web.e2e-b.$REGION.strata.internal 2>&1 | grep -q NXDOMAIN && echo nxdomain || echo found);` +
	` echo "round $i: db=${body:-none} srv=${srv:-none} other=$other"; sleep 0.3; done`

// TestMultiHostDNS runs three hosts (vxlan) with real containers and the
// agents' name servers. A client on host 1 reaches db, on another host,
// by its bare name (the search path of the resolv.conf its agent gave
// it), finds db's declared port in its SRV record, and gets NXDOMAIN for
// another tenant's resource. Draining db's node moves db; the name then
// answers the new replica.
func TestMultiHostDNS(t *testing.T) {
	c := startHostCluster(t, hostClusterOpts{region: "e2e-d", network: multiNet, agents: 3, hosts: true, labels: hostLabels})
	const other = "e2e-b"
	c.tenants = append(c.tenants, other)
	c.flavor("small", 0.25, 64)
	c.image()
	c.createIn(other, map[string]any{"name": "busybox", "kind": "Image", "spec": map[string]any{
		"image": map[string]any{"ref": "docker.io/library/busybox:latest", "archive": c.archive},
	}})
	c.createIn(other, hostCompute("web", 1, lbWebCommand, nil))

	db := hostCompute("db", 1, lbWebCommand, map[string]any{"ports": []map[string]any{{"name": "http", "containerPort": 80}}})
	c.create(c.onNodes(db, map[string]string{"role": "backend"}, ""))
	before := c.waitReady("db", 1, 90*time.Second)
	c.create(c.onNodes(hostCompute("x", 1, dnsClientCommand, map[string]any{"env": map[string]string{"REGION": c.o.region}}), map[string]string{"host": "h1"}, ""))
	c.waitReady("x", 1, 60*time.Second)
	framework.Eventually(t, 60*time.Second, other+"/web running", func() error {
		reps, err := c.replicasIn(other, "web")
		if err != nil {
			return err
		}
		if len(reps) != 1 || reps[0].Phase != api.PhaseReady {
			return fmt.Errorf("replicas %+v", reps)
		}
		return nil
	})
	if before[0].Node == c.nodes[0] {
		t.Fatalf("db on %s, the client's node; want another host", before[0].Node)
	}
	want := func(id string) func(string) error {
		return func(l string) error {
			if w := fmt.Sprintf("db=%s srv=80 other=nxdomain", id); !strings.Contains(l, w) {
				return fmt.Errorf("%q: want %q", l, w)
			}
			return nil
		}
	}
	c.waitRounds(defaultTenant, "x", "db="+before[0].ID, 90*time.Second, want(before[0].ID))

	// Drain db's node: the name follows the replica to the other host.
	path := "/v1/regions/" + c.o.region + "/nodes/" + before[0].Node + "/drain"
	c.global.Must(t, http.MethodPost, path, map[string]any{"deadline": "2m", "reason": "e2e"}, http.StatusOK, nil)
	var d api.DrainStatus
	framework.Eventually(t, 90*time.Second, "drain of "+before[0].Node+" finished", func() error {
		if _, err := c.global.Get(path, &d); err != nil {
			return err
		}
		if !d.Done() {
			return fmt.Errorf("%s: %s", d.State, d.Message)
		}
		return nil
	})
	if d.State != api.DrainSucceeded || d.Moved != 1 {
		t.Fatalf("drain: %s, %s; want succeeded with 1 moved", d.State, d.Message)
	}
	after := c.waitReady("db", 1, 30*time.Second)
	if after[0].ID == before[0].ID || after[0].Node == before[0].Node {
		t.Fatalf("after the drain: %s on %s; want a new replica elsewhere than %s", after[0].ID, after[0].Node, before[0].Node)
	}
	start := time.Now()
	c.waitRounds(defaultTenant, "x", "db="+after[0].ID, 30*time.Second, want(after[0].ID))
	t.Logf("db moved from %s to %s; the client's rounds showed the new replica %s after it was ready",
		before[0].Node, after[0].Node, time.Since(start).Round(100*time.Millisecond))
}
