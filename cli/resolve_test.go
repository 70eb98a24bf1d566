package cli_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stratahq/strata/cli/client"
	"github.com/stratahq/strata/internal/api"
)

// TestResolveCommand: resolve sends the name, type, region and tenant,
// prints SRV answers with their targets' addresses, and exits 0 for
// NXDOMAIN.
func TestResolveCommand(t *testing.T) {
	e := newEnv(t)
	e.srv.Mu.Lock()
	e.srv.Resources["default/db"] = api.Resource{Name: "db", Tenant: "default", Kind: api.KindCompute, Spec: api.ResourceSpec{
		Compute: &api.ComputeSpec{Ports: []api.PortSpec{{Name: "pg", ContainerPort: 5432}}},
	}}
	e.srv.Replicas["db"] = []api.Replica{
		{Assignment: api.Assignment{ID: "db-1", Tenant: "default", Resource: "db"}, Region: "eu", Phase: api.PhaseReady, Status: &api.AssignmentStatus{Address: "10.88.1.5"}},
		{Assignment: api.Assignment{ID: "db-2", Tenant: "default", Resource: "db"}, Region: "eu", Phase: api.PhaseProvision, Status: &api.AssignmentStatus{Address: "10.88.1.6"}},
	}
	e.srv.Mu.Unlock()

	out := e.must("", "resolve", "_pg._tcp.db", "--type", "srv", "--region", "eu")
	for _, want := range []string{
		"NAME", "TTL", "DATA",
		"_pg._tcp.db.default.eu.strata.internal.   SRV",
		"0 10 5432 db-1.db.default.eu.strata.internal.",
		"db-1.db.default.eu.strata.internal.       A      5     10.88.1.5",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("resolve SRV: no %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "10.88.1.6") {
		t.Errorf("resolve SRV: the unready db-2 answered:\n%s", out)
	}

	var res client.Resolution
	if err := json.Unmarshal([]byte(e.must("", "resolve", "db", "-o", "json")), &res); err != nil {
		t.Fatal(err)
	}
	if res.Name != "db.default.strata.internal." || res.Rcode != "NOERROR" || len(res.Answers) != 1 || res.Answers[0].Data != "10.88.1.5" {
		t.Errorf("resolve db -o json: got %+v; want db-1's address", res)
	}

	if got := e.must("", "resolve", "db.other.eu.strata.internal"); got != "db.other.eu.strata.internal. A: NXDOMAIN\n" {
		t.Errorf("resolve another tenant's name: got %q; want NXDOMAIN, exit 0", got)
	}
	if r := e.run("", "resolve"); r.code != 2 {
		t.Errorf("resolve without a name: exit %d; want 2", r.code)
	}
}
