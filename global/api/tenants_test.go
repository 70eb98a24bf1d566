package api

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/rest"
)

// setQuota writes tenant's record as the admin.
func (e *testEnv) setQuota(t *testing.T, tenant string, body map[string]any) api.Tenant {
	t.Helper()
	r := e.do(t, "PUT", "/v1/tenants/"+tenant, body)
	if r.code != http.StatusOK && r.code != http.StatusCreated {
		t.Fatalf("PUT /v1/tenants/%s: got %s; want 200 or 201", tenant, r)
	}
	return decodeAs[api.Tenant](t, r)
}

func (e *testEnv) quota(t *testing.T, tenant string, opts ...reqOption) TenantQuota {
	t.Helper()
	return decodeAs[TenantQuota](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/tenants/"+tenant+"/quota", nil, opts...)))
}

// TestQuotaConcurrentCreates races creates of one-replica resources in a
// tenant allowed 5 replicas, over two API replicas whose races only etcd
// sees: exactly 5 are created, every other one is refused 403
// QuotaExceeded naming the quota and the numbers, and the usage says 5.
func TestQuotaConcurrentCreates(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.fixtures(t, nil)
	other := e.replica(t, "global-2")
	e.setQuota(t, "team-a", map[string]any{"quota": map[string]any{"replicas": 5}})
	member := e.token(t, "team-a", api.RoleMember)
	// The other replica learns of the token through its cache.
	poll(t, "the token works on global-2", func() error {
		if r := e.do(t, "GET", "/v1/resources", nil, withToken(member), via(other)); r.code != http.StatusOK {
			return fmt.Errorf("got %s", r)
		}
		return nil
	})

	const creates = 20
	codes := make([]int, creates)
	bodies := make([]string, creates)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range creates {
		wg.Go(func() {
			<-start
			opts := []reqOption{withToken(member)}
			if i%2 == 1 {
				opts = append(opts, via(other))
			}
			r, err := e.send(t.Context(), "POST", "/v1/resources", computeBody(fmt.Sprintf("app-%d", i)), opts...)
			if err != nil {
				bodies[i] = err.Error()
				return
			}
			codes[i], bodies[i] = r.code, string(r.body)
		})
	}
	close(start)
	wg.Wait()
	got := map[int]int{}
	for i, c := range codes {
		got[c]++
		if c == http.StatusForbidden && (!strings.Contains(bodies[i], "QuotaExceeded") || !strings.Contains(bodies[i], "quota exceeded: replicas 6 of 5 in use after this request")) {
			t.Errorf("create %d: got %d %s; want QuotaExceeded naming replicas 6 of 5", i, c, bodies[i])
		}
	}
	if want := map[int]int{http.StatusCreated: 5, http.StatusForbidden: creates - 5}; !maps.Equal(got, want) {
		t.Fatalf("got statuses %v; want %v (bodies %q)", got, want, bodies)
	}
	q := e.quota(t, "team-a", withToken(member))
	if q.Usage.Replicas != 5 || q.Usage.Resources != 5 || q.Usage.VCPUs != 2.5 || q.Usage.MemoryMiB != 5*256 {
		t.Errorf("got usage %+v; want 5 resources, 5 replicas, 2.5 vCPUs, 1280 MiB", q.Usage)
	}
	if q.Quota.Replicas != 5 {
		t.Errorf("got quota %+v; want replicas 5", q.Quota)
	}
}

// TestQuotaWrites checks each write that can grow a tenant against each
// quota, and that a quota lowered below the usage refuses growth only.
func TestQuotaWrites(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.fixtures(t, map[string]string{"r1": "127.0.0.1:1", "r2": "127.0.0.1:2"})
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/flavors", `{"name":"large","kind":"container","spec":{"vcpus":2,"memoryMiB":256}}`))
	e.setQuota(t, "default", map[string]any{
		"quota":        map[string]any{"replicas": 10, "vcpus": 5, "resources": 4, "volumeGiB": 3, "loadbalancers": 1},
		"regionQuotas": map[string]any{"r1": map[string]any{"replicas": 4}},
	})
	inR1 := func(m map[string]any) { m["schedule"] = map[string]any{"regions": []map[string]any{{"name": "r1"}}} }
	replicas := func(n int) func(map[string]any) { return func(m map[string]any) { m["replicas"] = n } }
	// Placed where placement picks, these count in r1 too: in r2 they
	// leave r1's quota alone.
	r2 := map[string]any{"regions": []map[string]any{{"name": "r2"}}}
	volume := func(name string, mib int) map[string]any {
		return map[string]any{"name": name, "kind": "Volume", "schedule": r2, "spec": map[string]any{"volume": map[string]any{"sizeMiB": mib}}}
	}
	lb := func(name string) map[string]any {
		return map[string]any{"name": name, "kind": "Loadbalancer", "schedule": r2, "spec": map[string]any{"flavor": "lbf", "loadbalancer": map[string]any{
			"listeners": []map[string]any{{"port": 30080, "protocol": "http"}}, "selector": map[string]string{"app": "web"}}}}
	}
	steps := []struct {
		name   string
		method string
		path   string
		body   any
		code   int
		says   string
	}{
		{"r1 holds 4", "POST", "/v1/resources", computeBody("a", inR1, replicas(4)), http.StatusCreated, ""},
		{"a fifth in r1 is over its region quota", "POST", "/v1/resources", computeBody("b", inR1, replicas(1)), http.StatusForbidden,
			"quota exceeded: replicas 5 of 4 in region r1 in use after this request (tenant default)"},
		{"left to placement, r1 may get them all", "POST", "/v1/resources", computeBody("b", replicas(1)), http.StatusForbidden,
			"quota exceeded: replicas 5 of 4 in region r1"},
		{"elsewhere fits", "POST", "/v1/resources", computeBody("b", replicas(4), func(m map[string]any) { m["schedule"] = r2 }), http.StatusCreated, ""},
		{"scaling over the vCPUs", "POST", "/v1/resources/b/scale", map[string]any{"replicas": 7}, http.StatusForbidden,
			"quota exceeded: vcpus 5.5 of 5 in use after this request"},
		{"an update over the vCPUs", "PUT", "/v1/resources/b", computeBody("b", replicas(4), func(m map[string]any) {
			m["spec"].(map[string]any)["flavor"] = "large"
			m["schedule"] = r2
		}), http.StatusForbidden, "quota exceeded: vcpus 10 of 5"},
		{"4 GiB of volume is over 3", "POST", "/v1/resources", volume("v", 3*1024+1), http.StatusForbidden, "quota exceeded: volumeGiB 4 of 3"},
		{"3 GiB fits", "POST", "/v1/resources", volume("v", 3*1024), http.StatusCreated, ""},
		{"a load balancer fits", "POST", "/v1/resources", lb("lb1"), http.StatusCreated, ""},
		{"a fifth resource does not", "POST", "/v1/resources", map[string]any{"name": "img", "kind": "Image", "schedule": r2,
			"spec": map[string]any{"image": map[string]any{"ref": "docker.io/library/busybox:latest"}}}, http.StatusForbidden, "quota exceeded: resources 5 of 4"},
		{"scaling down always fits", "POST", "/v1/resources/a/scale", map[string]any{"replicas": 1}, http.StatusOK, ""},
		{"a deleted resource frees its share", "DELETE", "/v1/resources/v", nil, http.StatusAccepted, ""},
		{"so a second load balancer hits its own quota", "POST", "/v1/resources", lb("lb2"), http.StatusForbidden, "quota exceeded: loadbalancers 2 of 1"},
	}
	for _, s := range steps {
		r := e.do(t, s.method, s.path, s.body)
		if r.code != s.code || !strings.Contains(string(r.body), s.says) {
			t.Fatalf("%s: %s %s: got %s; want %d saying %q", s.name, s.method, s.path, r, s.code, s.says)
		}
	}
	// Lowered below what the tenant holds: growth is refused, shrinking is not.
	e.setQuota(t, "default", map[string]any{"quota": map[string]any{"replicas": 2}})
	if r := e.do(t, "POST", "/v1/resources/b/scale", map[string]any{"replicas": 4}); r.code != http.StatusOK {
		t.Errorf("scale to the same count under a lowered quota: got %s; want 200", r)
	}
	if r := e.do(t, "POST", "/v1/resources/b/scale", map[string]any{"replicas": 3}); r.code != http.StatusOK {
		t.Errorf("scale down under a lowered quota: got %s; want 200", r)
	}
	if r := e.do(t, "POST", "/v1/resources/a/scale", map[string]any{"replicas": 2}); r.code != http.StatusForbidden || !strings.Contains(string(r.body), "replicas 6 of 2") {
		t.Errorf("scale up under a lowered quota: got %s; want 403 naming replicas 6 of 2", r)
	}
	q := e.quota(t, "default")
	if want := (api.Quota{Resources: 3, Replicas: 5, VCPUs: 3, MemoryMiB: 4*256 + 128, Loadbalancers: 1}); q.Usage != want {
		t.Errorf("got usage %+v; want %+v", q.Usage, want)
	}
}

// TestTenantsAccess: tenants are the admins' to write; a tenant's own
// tokens read its quota, nobody else's.
func TestTenantsAccess(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.setQuota(t, "team-a", map[string]any{"quota": map[string]any{"replicas": 3}})
	viewerA := e.token(t, "team-a", api.RoleViewer)
	operatorB := e.token(t, "team-b", api.RoleOperator)
	tests := []struct {
		name   string
		tok    string
		method string
		path   string
		body   any
		code   int
	}{
		{"viewer reads its quota", viewerA, "GET", "/v1/tenants/team-a/quota", nil, http.StatusOK},
		{"viewer reads its tenant", viewerA, "GET", "/v1/tenants/team-a", nil, http.StatusOK},
		{"another tenant's quota", operatorB, "GET", "/v1/tenants/team-a/quota", nil, http.StatusForbidden},
		{"viewer lists tenants", viewerA, "GET", "/v1/tenants", nil, http.StatusForbidden},
		{"operator sets its own quota", operatorB, "PUT", "/v1/tenants/team-b", map[string]any{"quota": map[string]any{"replicas": 100}}, http.StatusForbidden},
		{"a negative quota", e.admin, "PUT", "/v1/tenants/team-c", map[string]any{"quota": map[string]any{"replicas": -1}}, http.StatusBadRequest},
		{"a name that differs from the path", e.admin, "PUT", "/v1/tenants/team-c", map[string]any{"name": "team-d"}, http.StatusBadRequest},
		{"a tenant without a record has no quota", e.admin, "GET", "/v1/tenants/team-z/quota", nil, http.StatusOK},
		{"admin lists", e.admin, "GET", "/v1/tenants", nil, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r := e.do(t, tt.method, tt.path, tt.body, withToken(tt.tok)); r.code != tt.code {
				t.Errorf("%s %s: got %s; want %d", tt.method, tt.path, r, tt.code)
			}
		})
	}
	list := decodeAs[rest.List[api.Tenant]](t, e.do(t, "GET", "/v1/tenants", nil))
	if len(list.Items) != 1 || list.Items[0].Name != "team-a" || list.Items[0].Quota.Replicas != 3 {
		t.Errorf("got tenants %+v; want team-a with replicas 3", list.Items)
	}
	// A stale resourceVersion is a conflict; the current one writes.
	v := list.Items[0].ResourceVersion
	e.setQuota(t, "team-a", map[string]any{"quota": map[string]any{"replicas": 4}, "resourceVersion": v})
	if r := e.do(t, "PUT", "/v1/tenants/team-a", map[string]any{"quota": map[string]any{"replicas": 5}, "resourceVersion": v}); r.code != http.StatusConflict {
		t.Errorf("PUT with a stale resourceVersion: got %s; want 409", r)
	}
}

// TestQuotaCharge: what one resource counts, in total and per region.
func TestQuotaCharge(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.fixtures(t, nil)
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/flavors", `{"name":"big","kind":"container","spec":{"vcpus":2,"memoryMiB":1024}}`))
	q := e.svc.resources.quotas
	poll(t, "flavors cached", func() error {
		if _, ok := q.count.Flavors.Get("big"); !ok {
			return fmt.Errorf("flavor big not cached yet")
		}
		return nil
	})
	compute := func(replicas int, sched api.ScheduleRule, overrides map[string]api.SpecOverride) *api.Resource {
		return &api.Resource{Name: "c", Tenant: "t", Kind: api.KindCompute, Replicas: replicas, Schedule: sched, Overrides: overrides,
			Spec: api.ResourceSpec{Flavor: "small", Compute: &api.ComputeSpec{Image: "busybox"}}}
	}
	weights := api.ScheduleRule{Regions: []api.RegionTarget{{Name: "a", Weight: 3}, {Name: "b", Weight: 1}}}
	deleting := compute(4, weights, nil)
	deleting.DeletionRequestedAt = new(now())
	small := func(n int) api.Quota {
		return api.Quota{Resources: 1, Replicas: n, VCPUs: 0.5 * float64(n), MemoryMiB: 256 * int64(n)}
	}
	tests := []struct {
		name    string
		r       *api.Resource
		total   api.Quota
		regions map[string]api.Quota
	}{
		{"split by weight", compute(4, weights, nil), small(4), map[string]api.Quota{"a": small(3), "b": small(1)}},
		{"placement's choice counts everywhere", compute(4, api.ScheduleRule{}, nil), small(4), map[string]api.Quota{"a": small(4), "b": small(4), "c": small(4)}},
		{"spread over named regions", compute(2, api.ScheduleRule{Regions: weights.Regions, SpreadRegions: 1}, nil), small(2), map[string]api.Quota{"a": small(2), "b": small(2)}},
		{"a region's larger flavor", compute(4, weights, map[string]api.SpecOverride{"b": {Flavor: "big"}}),
			api.Quota{Resources: 1, Replicas: 4, VCPUs: 3.5, MemoryMiB: 3*256 + 1024},
			map[string]api.Quota{"a": small(3), "b": {Resources: 1, Replicas: 1, VCPUs: 2, MemoryMiB: 1024}}},
		{"a larger flavor where placement chooses counts for all", compute(2, api.ScheduleRule{}, map[string]api.SpecOverride{"b": {Flavor: "big"}}),
			api.Quota{Resources: 1, Replicas: 2, VCPUs: 4, MemoryMiB: 2048},
			map[string]api.Quota{"a": small(2), "b": {Resources: 1, Replicas: 2, VCPUs: 4, MemoryMiB: 2048}, "c": small(2)}},
		{"a volume", &api.Resource{Name: "v", Kind: api.KindVolume, Replicas: 1, Schedule: api.ScheduleRule{Regions: []api.RegionTarget{{Name: "a", Weight: 1}}},
			Spec: api.ResourceSpec{Volume: &api.VolumeSpec{SizeMiB: 1500}}}, api.Quota{Resources: 1, Replicas: 1, VolumeGiB: 2},
			map[string]api.Quota{"a": {Resources: 1, Replicas: 1, VolumeGiB: 2}}},
		{"being deleted", deleting, api.Quota{}, map[string]api.Quota{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			total, in := q.count.Charge(tt.r, []string{"a", "b", "c"})
			if total != tt.total {
				t.Errorf("total: got %+v; want %+v", total, tt.total)
			}
			if len(in) != len(tt.regions) {
				t.Errorf("regions: got %+v; want %+v", in, tt.regions)
			}
			for region, want := range tt.regions {
				if in[region] != want {
					t.Errorf("region %s: got %+v; want %+v", region, in[region], want)
				}
			}
		})
	}
}

// detailFields are the fields an error answer names, in order.
func detailFields(t *testing.T, r *response) []string {
	t.Helper()
	var out []string
	for _, d := range decodeAs[api.ErrorBody](t, r).Error.Details {
		out = append(out, d.Field)
	}
	return out
}

// TestTenantValidationReportsAll: a tenant's record with several
// mistakes is refused with every one of them, as a resource is.
func TestTenantValidationReportsAll(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.fixtures(t, map[string]string{"r1": "127.0.0.1:1"})
	r := e.must(t, http.StatusBadRequest, e.do(t, "PUT", "/v1/tenants/team-a", map[string]any{
		"quota":        map[string]any{"replicas": -1, "vcpus": -2},
		"regionQuotas": map[string]any{"Bad!": map[string]any{}, "r1": map[string]any{"memoryMiB": -1, "loadbalancers": -1}},
	}))
	want := []string{"quota.replicas", "quota.vcpus", "regionQuotas", "regionQuotas.r1.memoryMiB", "regionQuotas.r1.loadbalancers"}
	if got := detailFields(t, r); !slices.Equal(got, want) {
		t.Errorf("got fields %q (%s); want %q", got, r, want)
	}
}

// TestRegionQuotasNameRegisteredRegions: a region quota for a region
// that is not registered is refused, every such region named at once; a
// region quota the record already holds is kept when its region is gone,
// so that changing the rest of the record still works.
func TestRegionQuotasNameRegisteredRegions(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.fixtures(t, map[string]string{"r1": "127.0.0.1:1", "r2": "127.0.0.1:2"})
	r := e.must(t, http.StatusBadRequest, e.do(t, "PUT", "/v1/tenants/team-a", map[string]any{
		"regionQuotas": map[string]any{"r1": map[string]any{"replicas": 4}, "nowhere": map[string]any{"replicas": 1}, "eu-typo": map[string]any{}},
	}))
	if got, want := detailFields(t, r), []string{"regionQuotas.eu-typo", "regionQuotas.nowhere"}; !slices.Equal(got, want) || !strings.Contains(string(r.body), `region \"nowhere\" is not registered`) {
		t.Errorf("got %s; want fields %q, saying the region is not registered", r, want)
	}
	e.setQuota(t, "team-a", map[string]any{"regionQuotas": map[string]any{"r1": map[string]any{"replicas": 4}, "r2": map[string]any{"replicas": 2}}})
	e.must(t, http.StatusOK, e.do(t, "DELETE", "/v1/regions/r2", nil))
	got := e.setQuota(t, "team-a", map[string]any{"quota": map[string]any{"replicas": 10},
		"regionQuotas": map[string]any{"r1": map[string]any{"replicas": 4}, "r2": map[string]any{"replicas": 3}}})
	if got.Quota.Replicas != 10 || got.RegionQuotas["r2"].Replicas != 3 {
		t.Errorf("got %+v; want the total set and r2's quota kept", got)
	}
	e.must(t, http.StatusBadRequest, e.do(t, "PUT", "/v1/tenants/team-b", map[string]any{"regionQuotas": map[string]any{"r2": map[string]any{}}}))
}
