package console

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// TestResourcesPageNames renders the resources page with a container
// resource on the region network expanded, in headless Chromium against
// a fake region API: its names in this region (region-less, the
// region's with the ready replicas it answers, SRV of the named port)
// and each replica's own name beside its address, answered or not.
func TestResourcesPageNames(t *testing.T) {
	spec := api.ResourceSpec{Flavor: "small", Compute: &api.ComputeSpec{Image: "postgres:16",
		Ports: []api.PortSpec{{Name: "pg", ContainerPort: 5432}, {ContainerPort: 9187}}}}
	res := api.Resource{Name: "db", Tenant: "acme", Kind: api.KindCompute, Replicas: 3, Revision: 1, Spec: spec,
		Status: &api.ResourceStatus{Phase: api.PhaseProvision, Ready: 2, Replicas: 3}}
	rep := func(id string, phase api.Phase, addr string) api.Replica {
		return api.Replica{Assignment: api.Assignment{ID: id, Tenant: "acme", Resource: "db", Kind: api.KindCompute, Provider: api.ProviderContainer,
			Revision: 1, Node: "dev-1-a", Spec: spec, CreatedAt: time.Now().Add(-time.Minute),
			Network: &api.NetworkAttachment{Network: "default", Address: addr}}, Phase: phase}
	}
	reps := []api.Replica{rep("db-1", api.PhaseReady, "10.88.1.7"), rep("db-2", api.PhaseReady, "10.88.1.5"), rep("db-3", api.PhaseProvision, "10.88.1.6")}
	mux := http.NewServeMux()
	mux.Handle("/console/", Handler(Options{Region: "dev-1", Token: testToken}))
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
	serve("GET /v1/resources", list{[]api.Placement{{Region: "dev-1", Resource: res}}})
	serve("GET /v1/resources/acme/db/replicas", list{reps})
	serve("GET /v1/events", list{[]api.Event{}})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	got := renderRows(t, srv.URL+"/console/resources?open=acme/db", testToken, "resources-names.png",
		[]string{`[data-role="names"]`}, `(() => {
			const text = (el) => el.textContent.replace(/\s+/g, ' ').trim();
			const detail = document.querySelector('tr.detail-row');
			return {
				names: [...detail.querySelectorAll('[data-role="names"] > div[data-name]')].map(text),
				addresses: [...detail.querySelectorAll('tr[data-replica]')].map((tr) => tr.dataset.replica + ' | ' + text(tr.children[3])),
				rows: [String(detail.querySelectorAll('.subtable tbody tr').length)],
			};
		})()`)
	want := map[string][]string{
		"names": {
			"db.acme.strata.internal — the asking node's region, else the first by name with a ready replica",
			"_pg._tcp.db.acme.strata.internal — SRV: port 5432/tcp of each ready replica",
			"db.acme.dev-1.strata.internal — db-2 10.88.1.5, db-1 10.88.1.7",
			"_pg._tcp.db.acme.dev-1.strata.internal — SRV: port 5432/tcp of each ready replica",
		},
		"addresses": {
			"db-1 | 10.88.1.7db-1.db.acme.dev-1.strata.internal answered",
			"db-2 | 10.88.1.5db-2.db.acme.dev-1.strata.internal answered",
			"db-3 | 10.88.1.6db-3.db.acme.dev-1.strata.internal not answered",
		},
		// The names are no rows of the replicas' table.
		"rows": {"3"},
	}
	for what, w := range want {
		g := got[what]
		if len(g) != len(w) {
			t.Errorf("%s: got %d rows %q; want %d %q", what, len(g), g, len(w), w)
			continue
		}
		for i := range w {
			if g[i] != w[i] {
				t.Errorf("%s row %d: got %q; want %q", what, i, g[i], w[i])
			}
		}
	}
}
