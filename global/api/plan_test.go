package api

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/heartbeat"
)

// planTestWorld sets up three Up regions with headroom for small (a: 10,
// b: 1, c: 10) and web: 6 replicas over a and b, with failover to b and
// c, its status saying a and b run 3 each.
func planTestWorld(t *testing.T) *testEnv {
	t.Helper()
	e := newEnv(t, envConfig{})
	e.fixtures(t, map[string]string{"a": "127.0.0.1:1", "b": "127.0.0.1:2", "c": "127.0.0.1:3"})
	ctx := t.Context()
	for name, free := range map[string]int{"a": 10, "b": 1, "c": 10} {
		if _, err := e.st.RegionStatus.Put(ctx, name, &api.RegionStatus{Health: api.HealthUp, Since: time.Now().Add(-time.Hour)}); err != nil {
			t.Fatal(err)
		}
		h, _ := state.EncodeHeadroom([]api.FlavorHeadroom{{Flavor: "small", Replicas: free}})
		if err := e.beats.Record(ctx, heartbeat.Beat{ID: name, At: time.Now(), Attrs: map[string]string{state.HeadroomAttr: h}}); err != nil {
			t.Fatal(err)
		}
	}
	web := computeBody("web", func(m map[string]any) {
		m["replicas"] = 6
		m["schedule"] = map[string]any{"regions": []map[string]any{{"name": "a"}, {"name": "b"}}, "reserve": "N+1"}
		m["failover"] = map[string]any{"enabled": true, "toRegions": []string{"b", "c"}}
	})
	created := decodeAs[api.Resource](t, e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", web)))
	st := &api.ResourceStatus{UID: created.UID, Phase: api.PhaseReady, Replicas: 6, Ready: 6, Regions: map[string]api.RegionShare{
		"a": {Phase: api.PhaseReady, Replicas: 3, Ready: 3, Revision: 1, ObservedGeneration: 1},
		"b": {Phase: api.PhaseReady, Replicas: 3, Ready: 3, Revision: 1, ObservedGeneration: 1},
	}}
	if _, err := e.st.Statuses.Put(ctx, state.ResourceName("default", "web"), st); err != nil {
		t.Fatal(err)
	}
	poll(t, "the caches hold the status", func() error {
		if s, ok := e.svc.caches.Statuses.Get("default/web"); !ok || len(s.Value.Regions) != 2 {
			return fmt.Errorf("not yet")
		}
		if _, ok := e.svc.caches.RegionStatus.Get("c"); !ok {
			return fmt.Errorf("no region status yet")
		}
		return nil
	})
	return e
}

func TestPlan(t *testing.T) {
	e := planTestWorld(t)
	plan := func(body string, opts ...reqOption) api.Plan {
		t.Helper()
		return decodeAs[api.Plan](t, e.must(t, http.StatusOK, e.do(t, "POST", "/v1/plan", body, opts...)))
	}
	// Losing a: its 3 go to the stand-ins as they have room; b, which
	// runs 3 of its own and has room for 1 more, takes 1 of its 2, c the
	// rest; nothing is written.
	got := plan(`{"loseRegions":["a"]}`)
	want := api.ResourcePlan{Tenant: "default", Name: "web", Kind: api.KindCompute,
		Before: map[string]int{"a": 3, "b": 3}, After: map[string]int{"b": 4, "c": 2},
		Moves: []api.ReplicaMove{{From: "a", To: "b", Replicas: 1}, {From: "a", To: "c", Replicas: 2}},
		Split: "standing in for a: b has room for 1 of its 2; went to c +1",
		Reserve: &api.ReserveStatus{Holds: true, Lost: []string{"b"}, Need: 4, Free: 10,
			Message: "losing b (4 replicas) leaves room for 10 elsewhere (c 10)"}}
	if len(got.Resources) != 1 || !reflect.DeepEqual(got.Resources[0], want) || got.Moved != 3 || got.Unfit != 0 {
		g, _ := json.Marshal(got)
		t.Fatalf("plan for losing a: %s; want %+v, 3 moved", g, want)
	}
	r := decodeAs[api.Resource](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources/web", nil)))
	if r.Replicas != 6 || r.Status.Regions["a"].Replicas != 3 {
		t.Fatalf("the plan changed the resource: %+v", r)
	}

	// Scaled to 30 with a lost too: b and c have room for 14 (b 3 + 1,
	// c 10), so 16 find room nowhere.
	got = plan(`{"loseRegions":["a"],"scale":{"web":30}}`)
	if p := got.Resources[0]; got.Unfit != 16 || p.Unfit != 16 || p.After["b"]+p.After["c"] != 30 || p.After["c"] != 10 ||
		!strings.HasSuffix(p.Split, "; 16 found room in no region and wait for it") {
		t.Errorf("lose a and scale to 30: %+v; want 16 unfit, c full", got)
	}

	// A manifest: a new resource over b, which has room for 1, and c.
	got = plan(`{"apply":[{"name":"api","kind":"Compute","replicas":4,"spec":{"flavor":"small","compute":{"image":"docker.io/library/busybox:latest"}},"schedule":{"regions":[{"name":"b"},{"name":"c"}]}}]}`)
	if len(got.Resources) != 1 || got.Resources[0].Name != "api" || !reflect.DeepEqual(got.Resources[0].After, map[string]int{"b": 1, "c": 3}) ||
		!reflect.DeepEqual(got.Resources[0].Moves, []api.ReplicaMove{{To: "b", Replicas: 1}, {To: "c", Replicas: 3}}) {
		t.Errorf("apply api: %+v", got)
	}
	if code := e.do(t, "GET", "/v1/resources/api", nil).code; code != http.StatusNotFound {
		t.Errorf("the plan created api: GET %d", code)
	}

	// Over quota: blocked, the split left as it is.
	e.setQuota(t, "default", map[string]any{"quota": map[string]any{"replicas": 10}})
	got = plan(`{"scale":{"web":12}}`)
	if p := got.Resources[0]; got.Blocked != 1 || !strings.Contains(p.Blocked, "quota") || !reflect.DeepEqual(p.After, p.Before) {
		t.Errorf("scale over quota: %+v; want blocked, unchanged", got)
	}

	// Bad input is refused, naming what is wrong.
	for _, tc := range []struct {
		body string
		code int
		msg  string
	}{
		{`{}`, http.StatusBadRequest, "a plan needs an action"},
		{`{"loseRegions":["nowhere"]}`, http.StatusBadRequest, `region \"nowhere\" is not registered`},
		{`{"scale":{"nope":3}}`, http.StatusNotFound, "nope"},
		{`{"scale":{"web":-1}}`, http.StatusBadRequest, "replicas"},
		{`{"apply":[{"name":"x","kind":"Compute","spec":{}}]}`, http.StatusBadRequest, ""},
		{`{"loseRegions":"a"}`, http.StatusBadRequest, ""},
	} {
		r := e.do(t, "POST", "/v1/plan", tc.body)
		if r.code != tc.code || !strings.Contains(string(r.body), tc.msg) {
			t.Errorf("POST /v1/plan %s: %s; want %d naming %q", tc.body, r, tc.code, tc.msg)
		}
	}
	// A viewer may plan scales but not the loss of a region.
	viewer := withToken(e.token(t, "default", api.RoleViewer))
	if r := e.do(t, "POST", "/v1/plan", `{"loseRegions":["a"]}`, viewer); r.code != http.StatusForbidden {
		t.Errorf("viewer loses a region: %s; want 403", r)
	}
	plan(`{"scale":{"web":2}}`, viewer)
}

// BenchmarkPlanLoseRegion is bench A2: POST /v1/plan for losing a region
// that holds half of 20,000 replicas (2,000 resources of 10, 5 in region
// a and 5 in b, failing over to b and c), against GET /v1/resources of
// the same 2,000 (the API's own read of them, every page), measured in
// the same run. The plan decides every resource twice (now, and with a
// lost); regions are the master's entries, not their nodes.
func BenchmarkPlanLoseRegion(b *testing.B) {
	e := newEnv(b, envConfig{logger: slog.New(slog.DiscardHandler)})
	e.fixtures(b, map[string]string{"a": "127.0.0.1:1", "b": "127.0.0.1:2", "c": "127.0.0.1:3"})
	ctx := b.Context()
	for name, free := range map[string]int{"a": 0, "b": 6000, "c": 6000} {
		if _, err := e.st.RegionStatus.Put(ctx, name, &api.RegionStatus{Health: api.HealthUp, Since: time.Now().Add(-time.Hour)}); err != nil {
			b.Fatal(err)
		}
		h, _ := state.EncodeHeadroom([]api.FlavorHeadroom{{Flavor: "small", Replicas: free}})
		if err := e.beats.Record(ctx, heartbeat.Beat{ID: name, At: time.Now(), Attrs: map[string]string{state.HeadroomAttr: h}}); err != nil {
			b.Fatal(err)
		}
	}
	const resources = 2000
	var g errgroup.Group
	g.SetLimit(16)
	for i := range resources {
		g.Go(func() error {
			name := fmt.Sprintf("web-%04d", i)
			r := &api.Resource{Name: name, Tenant: "default", UID: fmt.Sprintf("u%04d", i), Kind: api.KindCompute, Replicas: 10,
				Revision: 1, Generation: 1,
				Spec:     api.ResourceSpec{Flavor: "small", Compute: &api.ComputeSpec{Image: "docker.io/library/busybox:latest"}},
				Schedule: api.ScheduleRule{Regions: []api.RegionTarget{{Name: "a", Weight: 1}, {Name: "b", Weight: 1}}},
				Failover: &api.FailoverPolicy{Enabled: true, ToRegions: []string{"b", "c"}}}
			st := &api.ResourceStatus{UID: r.UID, Phase: api.PhaseReady, Replicas: 10, Ready: 10, Revision: 1, ObservedGeneration: 1,
				Regions: map[string]api.RegionShare{
					"a": {Phase: api.PhaseReady, Replicas: 5, Ready: 5, Revision: 1, ObservedGeneration: 1},
					"b": {Phase: api.PhaseReady, Replicas: 5, Ready: 5, Revision: 1, ObservedGeneration: 1},
				}}
			key := state.ResourceName("default", name)
			if _, err := e.st.Resources.Put(ctx, key, r); err != nil {
				return err
			}
			_, err := e.st.Statuses.Put(ctx, key, st)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	poll(b, "the caches hold every status", func() error {
		if n := len(e.svc.caches.Statuses.List()); n != resources {
			return fmt.Errorf("%d statuses", n)
		}
		return nil
	})
	b.Run("plan", func(b *testing.B) {
		for b.Loop() {
			p := decodeAs[api.Plan](b, e.must(b, http.StatusOK, e.do(b, "POST", "/v1/plan", `{"loseRegions":["a"]}`)))
			if len(p.Resources) != resources || p.Moved != resources*5 || p.Unfit != 0 {
				b.Fatalf("plan: %d resources, %d moved, %d unfit; want %d, %d, 0", len(p.Resources), p.Moved, p.Unfit, resources, resources*5)
			}
		}
		b.ReportMetric(float64(resources*10), "replicas")
	})
	b.Run("list", func(b *testing.B) {
		for b.Loop() {
			n, next := 0, ""
			for {
				page := decodeAs[struct {
					Items    []api.Resource `json:"items"`
					Continue string         `json:"continue"`
				}](b, e.must(b, http.StatusOK, e.do(b, "GET", "/v1/resources?limit=1000&continue="+next, nil)))
				n += len(page.Items)
				if next = page.Continue; next == "" {
					break
				}
			}
			if n != resources {
				b.Fatalf("list: %d resources; want %d", n, resources)
			}
		}
	})
}
