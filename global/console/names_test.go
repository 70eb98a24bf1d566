package console

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// TestResourcePageNames renders a container resource on the region
// network in headless Chromium: its names as stratactl describe lists
// them, region-less, each region's with the ready replicas it answers
// (by address) or none, and the SRV names of its named ports.
func TestResourcePageNames(t *testing.T) {
	res, reps := namesFixture()
	mux := http.NewServeMux()
	mux.Handle("/console/", Handler(Options{}))
	serve := func(pattern string, v any) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(v)
		})
	}
	type list struct {
		Items any `json:"items"`
	}
	serve("GET /v1/status", map[string]any{})
	serve("GET /v1/resources/db", res)
	serve("GET /v1/resources/db/revisions", list{[]api.Revision{}})
	serve("GET /v1/resources/db/replicas", list{reps})
	serve("GET /v1/events", list{[]api.Event{}})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	got := renderRows(t, srv.URL+"/console/resource?tenant=acme&name=db", "", "resource-names.png",
		[]string{`#names-table tbody tr`}, `(() => {
			const text = (el) => el.textContent.replace(/\s+/g, ' ').trim();
			return { names: [...document.querySelectorAll('#names-table tbody tr')].map((tr) => [...tr.children].map(text).join(' | ')) };
		})()`)
	want := []string{
		"db.acme.strata.internal | the asking node's region, else the first by name with a ready replica",
		"_pg._tcp.db.acme.strata.internal | SRV: port 5432/tcp of each ready replica",
		"db.acme.dev-1.strata.internal | db-2 10.88.1.5, db-1 10.88.1.7",
		"_pg._tcp.db.acme.dev-1.strata.internal | SRV: port 5432/tcp of each ready replica",
		"db.acme.dev-2.strata.internal | no ready replica",
		"_pg._tcp.db.acme.dev-2.strata.internal | SRV: port 5432/tcp of each ready replica",
	}
	if g := got["names"]; len(g) != len(want) {
		t.Fatalf("names: got %q; want %q", g, want)
	}
	for i := range want {
		if got["names"][i] != want[i] {
			t.Errorf("names row %d: got %q; want %q", i, got["names"][i], want[i])
		}
	}
}

// namesFixture is acme's db, a container on the region network with a
// named port and an unnamed one: two ready replicas and a starting one
// in dev-1, a starting one in dev-2.
func namesFixture() (api.Resource, []api.Replica) {
	spec := api.ResourceSpec{Flavor: "small", Compute: &api.ComputeSpec{Image: "postgres:16",
		Ports: []api.PortSpec{{Name: "pg", ContainerPort: 5432}, {ContainerPort: 9187}}}}
	res := api.Resource{Name: "db", Tenant: "acme", Kind: api.KindCompute, Replicas: 4, Revision: 1, Spec: spec,
		Schedule: api.ScheduleRule{Regions: []api.RegionTarget{{Name: "dev-2"}, {Name: "dev-1"}}},
		Status:   &api.ResourceStatus{Phase: api.PhaseProvision, Ready: 2, Replicas: 4}}
	rep := func(id, region string, phase api.Phase, addr string) api.Replica {
		return api.Replica{Assignment: api.Assignment{ID: id, Tenant: "acme", Resource: "db", Kind: api.KindCompute, Provider: api.ProviderContainer,
			Revision: 1, Node: region + "-a", Spec: spec, CreatedAt: time.Now().Add(-time.Minute),
			Network: &api.NetworkAttachment{Network: "default", Address: addr}}, Region: region, Phase: phase}
	}
	return res, []api.Replica{
		rep("db-1", "dev-1", api.PhaseReady, "10.88.1.7"),
		rep("db-2", "dev-1", api.PhaseReady, "10.88.1.5"),
		rep("db-3", "dev-1", api.PhaseProvision, "10.88.1.6"),
		rep("db-4", "dev-2", api.PhaseProvision, "10.88.2.5"),
	}
}
