package console

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/stratahq/strata/internal/api"
)

// TestResourcePageFit renders a resource page in headless Chromium
// against a fake API: under its placement, why the split differs from
// the weights, and whether its reserve holds (marked when it does not),
// as stratactl describe says them; a resource with neither shows no
// such notes.
func TestResourcePageFit(t *testing.T) {
	spec := api.ResourceSpec{Flavor: "big", Compute: &api.ComputeSpec{Image: "busybox"}}
	fitted := api.Resource{Name: "web", Tenant: "default", Kind: api.KindCompute, Replicas: 6, Revision: 1, Spec: spec,
		Schedule: api.ScheduleRule{Regions: []api.RegionTarget{{Name: "dev-1", Weight: 1}, {Name: "dev-2", Weight: 1}}, Reserve: "N+1"},
		Status: &api.ResourceStatus{Phase: api.PhaseReady, Ready: 6, Replicas: 6,
			Regions: map[string]api.RegionShare{"dev-1": {Phase: api.PhaseReady, Replicas: 2, Ready: 2}, "dev-2": {Phase: api.PhaseReady, Replicas: 4, Ready: 4}},
			Split:   "dev-1 has room for 2 of its 3; went to dev-2 +1",
			Reserve: &api.ReserveStatus{Lost: []string{"dev-2"}, Need: 4, Message: "losing dev-2 (4 replicas): room for 0 elsewhere (dev-1 0), 4 short"}}}
	// Autoscaled: its bounds and the master's last reading; Scale… is
	// disabled (the API refuses it).
	fitted.Autoscale = &api.AutoscalePolicy{MinReplicas: 2, MaxReplicas: 9, LoadBalancer: "lb", RequestsPerSecond: 50}
	fitted.Status.Autoscale = &api.AutoscaleStatus{Desired: 6, Metrics: []string{"requests 51/s per replica of 50/s"}, Message: "scale-down window 5m0s holds 6"}
	plain := fitted
	plain.Name, plain.Schedule.Reserve, plain.Autoscale = "plain", "", nil
	st := *fitted.Status
	st.Split, st.Reserve = "", nil
	plain.Status = &st
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
	for _, r := range []api.Resource{fitted, plain} {
		serve("GET /v1/resources/"+r.Name, r)
		serve("GET /v1/resources/"+r.Name+"/revisions", list{[]api.Revision{}})
		serve("GET /v1/resources/"+r.Name+"/replicas", list{[]api.Replica{}})
	}
	serve("GET /v1/events", list{[]api.Event{}})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	notes := `(() => ({
		notes: [...document.querySelectorAll('#placement-fit p')].map((p) => p.dataset.role + ' ' + (p.dataset.holds || '-') + ' ' + p.className + ' | ' + p.textContent.replace(/\s+/g, ' ').trim()),
		hidden: [String(document.querySelector('#placement-fit').hidden)],
		scale: [String(document.querySelector('button[data-action="scale"]').disabled)],
	}))()`
	got := renderRows(t, srv.URL+"/console/resource?tenant=default&name=web", "", "resource-fit.png", []string{`#placement-fit p`}, notes)
	want := []string{
		"split -  | Split: dev-1 has room for 2 of its 3; went to dev-2 +1",
		"reserve false tone-warn | Reserve N+1 short: losing dev-2 (4 replicas): room for 0 elsewhere (dev-1 0), 4 short",
		"autoscale -  | Autoscale: 2 to 9; desired 6 (requests 51/s per replica of 50/s): scale-down window 5m0s holds 6",
	}
	if !slices.Equal(got["notes"], want) || got["hidden"][0] != "false" || got["scale"][0] != "true" {
		t.Errorf("notes %q (hidden %v, scale disabled %v); want %q, shown, disabled", got["notes"], got["hidden"], got["scale"], want)
	}
	got = renderRows(t, srv.URL+"/console/resource?tenant=default&name=plain", "", "resource-plain.png", []string{`#placement tbody tr[data-region]`}, notes)
	if len(got["notes"]) != 0 || got["hidden"][0] != "true" || got["scale"][0] != "false" {
		t.Errorf("a resource without a note or a reserve: notes %q (hidden %v); want none, hidden", got["notes"], got["hidden"])
	}
}
