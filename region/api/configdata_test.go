package api

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stratahq/strata/internal/api"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	globalv1 "github.com/stratahq/strata/proto/global/v1"
)

// TestGetConfigData: an agent gets the data its assignment names, asked
// of the global tier for this region, the resource and exactly those
// refs; another node's assignment is not found, and nothing is asked.
func TestGetConfigData(t *testing.T) {
	var (
		mu    sync.Mutex
		asked []*globalv1.GetConfigDataRequest
	)
	e := newEnv(t, func(o *Options, _ *tuning) {
		o.ConfigData = func(_ context.Context, req *globalv1.GetConfigDataRequest) (*globalv1.GetConfigDataResponse, error) {
			mu.Lock()
			asked = append(asked, req)
			mu.Unlock()
			return &globalv1.GetConfigDataResponse{Items: []*globalv1.ConfigData{{Kind: "secret", Name: "db", Data: map[string]string{"password": "pw"}}}}, nil
		}
	})
	a := testAssignment("web-1", "team-a", "web", "n1")
	a.Spec = api.ResourceSpec{Flavor: "small", Compute: &api.ComputeSpec{Image: "busybox", EnvFrom: []api.EnvSource{{Secret: "db", Key: "password"}}}}
	e.putAssignments(a)

	resp, err := e.agent.GetConfigData(e.ctx(), &agentv1.GetConfigDataRequest{Node: "n1", AssignmentId: "web-1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetItems()) != 1 || resp.GetItems()[0].GetData()["password"] != "pw" {
		t.Fatalf("got %v", resp.GetItems())
	}
	mu.Lock()
	req := asked[0]
	mu.Unlock()
	if req.GetRegion() != testRegion || req.GetTenant() != "team-a" || req.GetResource() != "web" ||
		len(req.GetRefs()) != 1 || req.GetRefs()[0].GetKind() != "secret" || req.GetRefs()[0].GetName() != "db" {
		t.Fatalf("asked the global tier %v", req)
	}
	if _, err := e.agent.GetConfigData(e.ctx(), &agentv1.GetConfigDataRequest{Node: "n2", AssignmentId: "web-1"}); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("n2 asking for n1's assignment: %v; want not found", err)
	}
	mu.Lock()
	n := len(asked)
	mu.Unlock()
	if n != 1 {
		t.Fatalf("the global tier was asked %d times; want once", n)
	}
}
