package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stratahq/strata/e2e/framework"
)

// TestMetrics: after some work, every tier's /metrics shows the metrics
// operators are promised, with values that moved.
func TestMetrics(t *testing.T) {
	c := startCluster(t, clusterOpts{globals: 1, regions: []string{"dev-1"}, agentsPerRegion: 2})
	g := c.global(0)
	createFlavor(t, g)
	g.Must(t, http.MethodPost, "/v1/resources", compute("web", 3, []map[string]any{{"name": "dev-1"}}, nil), http.StatusCreated, nil)
	waitShares(t, g, "web", map[string]int{"dev-1": 3}, 60*time.Second)
	g.Must(t, http.MethodGet, "/v1/resources/web", nil, http.StatusOK, nil)

	global, region := c.globalHTTP[0], c.regions["dev-1"].http
	var agent string
	for _, a := range c.regions["dev-1"].agentMetrics {
		agent = a
		break
	}
	checks := []struct {
		tier, addr, sample string
	}{
		{"global", global, `strata_http_requests_total{code="201",method="POST",route="POST /v1/resources",tier="global"}`},
		{"global", global, `strata_http_request_duration_seconds_count{method="GET",route="GET /v1/resources/{name}",tier="global"}`},
		{"global", global, `strata_controller_passes_total{tier="global"}`},
		{"global", global, `strata_controller_reconciles_total{tier="global"}`},
		{"global", global, `strata_global_is_master{tier="global"}`},
		{"global", global, `strata_global_propagations_total{tier="global"}`},
		{"global", global, `strata_global_regions{health="Up",tier="global"}`},
		{"global", global, `strata_global_resources{phase="ready",tier="global"}`},
		{"global", global, `strata_heartbeat_lag_seconds_count{tier="global"}`},
		{"global", global, `strata_grpc_requests_total{code="OK",method="/strata.global.v1.FederationService/RegionHeartbeat",tier="global"}`},
		{"region", region, `strata_grpc_requests_total{code="OK",method="/strata.region.v1.RegionService/ApplyPlacements",tier="region"}`},
		{"region", region, `strata_grpc_request_duration_seconds_count{method="/strata.agent.v1.AgentService/ReportStatus",tier="region"}`},
		{"region", region, `strata_controller_passes_total{tier="region"}`},
		{"region", region, `strata_controller_pass_duration_seconds_count{tier="region"}`},
		{"region", region, `strata_controller_write_ops_total{tier="region"}`},
		{"region", region, `strata_scheduler_decisions_total{result="placed",tier="region"}`},
		{"region", region, `strata_scheduler_batch_duration_seconds_count{tier="region"}`},
		{"region", region, `strata_region_nodes{health="Up",tier="region"}`},
		{"region", region, `strata_region_replicas{phase="ready",tier="region"}`},
		{"region", region, `strata_region_placements_applied_total{tier="region"}`},
		{"region", region, `strata_heartbeat_lag_seconds_count{tier="region"}`},
		{"agent", agent, `strata_provider_operation_duration_seconds_count{op="apply",provider="fake",tier="agent"}`},
		{"agent", agent, `strata_provider_operation_duration_seconds_count{op="health",provider="fake",tier="agent"}`},
	}
	for _, ch := range checks {
		framework.Eventually(t, 15*time.Second, fmt.Sprintf("%s: %s > 0", ch.tier, ch.sample), func() error {
			if v := metric(t, ch.addr, ch.sample); v <= 0 {
				return fmt.Errorf("got %v", v)
			}
			return nil
		})
	}
}
