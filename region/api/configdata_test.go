package api

import (
	"context"
	"errors"
	"strings"
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

// TestGetConfigDataPod: the refs of a pod's init containers and
// sidecars count as the spec's: the region asks the global tier for
// the main container's and theirs, each once, and nothing else; an
// answer that holds data the spec does not name is not handed on, and
// the error shows no value.
func TestGetConfigDataPod(t *testing.T) {
	var (
		mu    sync.Mutex
		asked []*globalv1.GetConfigDataRequest
		extra bool
	)
	e := newEnv(t, func(o *Options, _ *tuning) {
		o.ConfigData = func(_ context.Context, req *globalv1.GetConfigDataRequest) (*globalv1.GetConfigDataResponse, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, req)
			resp := &globalv1.GetConfigDataResponse{}
			for _, r := range req.GetRefs() {
				resp.Items = append(resp.Items, &globalv1.ConfigData{Kind: r.GetKind(), Name: r.GetName(), Data: map[string]string{"k": "v-" + r.GetName()}})
			}
			if extra {
				resp.Items = append(resp.Items, &globalv1.ConfigData{Kind: "secret", Name: "other", Data: map[string]string{"k": "not-for-this-node"}})
			}
			return resp, nil
		}
	})
	a := testAssignment("pod-1", "team-a", "pod", "n1")
	a.Spec = api.ResourceSpec{Flavor: "small", Compute: &api.ComputeSpec{
		Image: "busybox",
		Files: []api.FileMount{{Config: "main-conf", Path: "/etc/app"}},
		InitContainers: []api.Container{{Name: "prep", Image: "busybox",
			Files: []api.FileMount{{Config: "prep-conf", Path: "/etc/prep"}, {Config: "main-conf", Path: "/etc/app"}}}},
		Containers: []api.Container{{Name: "side", Image: "busybox",
			EnvFrom: []api.EnvSource{{Secret: "side-secret", Key: "k", Name: "TOKEN"}}}},
	}}
	e.putAssignments(a)

	resp, err := e.agent.GetConfigData(e.ctx(), &agentv1.GetConfigDataRequest{Node: "n1", AssignmentId: "pod-1"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, it := range resp.GetItems() {
		got[it.GetKind()+"/"+it.GetName()] = it.GetData()["k"]
	}
	want := map[string]string{"config/prep-conf": "v-prep-conf", "config/main-conf": "v-main-conf", "secret/side-secret": "v-side-secret"}
	if len(got) != len(want) || len(resp.GetItems()) != len(want) {
		t.Fatalf("the node got %v; want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("the node got %s = %q; want %q", k, got[k], v)
		}
	}
	mu.Lock()
	refs := asked[0].GetRefs()
	extra = true
	mu.Unlock()
	if len(refs) != 3 {
		t.Errorf("asked the global tier for %v; want the 3 refs of the pod, each once", refs)
	}

	_, err = e.agent.GetConfigData(e.ctx(), &agentv1.GetConfigDataRequest{Node: "n1", AssignmentId: "pod-1"})
	if err == nil || !strings.Contains(err.Error(), "other") || strings.Contains(err.Error(), "not-for-this-node") {
		t.Fatalf("an answer with a secret the spec does not name: %v; want an error naming it, without its value", err)
	}
}
