package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// regionNodes reads the gauge as the region spells its labels, and a
// health it does not find is an error rather than zero nodes.
func TestRegionNodes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "# HELP strata_region_nodes Nodes by health.\n"+
			"strata_region_nodes{health=\"Down\",tier=\"region\"} 3\n"+
			"strata_region_nodes{health=\"Suspect\",tier=\"region\"} 0\n"+
			"strata_region_nodes{health=\"Up\",tier=\"region\"} 9997\n")
	}))
	defer srv.Close()
	api := newClient(srv.URL, "", nil)
	for h, want := range map[string]float64{"Up": 9997, "Down": 3, "Suspect": 0} {
		if got, err := regionNodes(context.Background(), api, h); err != nil || got != want {
			t.Errorf("regionNodes(%s) = %v, %v; want %v", h, got, err, want)
		}
	}
	if got, err := regionNodes(context.Background(), api, "down"); err == nil {
		t.Errorf("regionNodes(down) = %v; want an error (no such label)", got)
	}
}
