package cli_test

import (
	"strings"
	"testing"

	"github.com/stratahq/strata/internal/api"
)

// TestTenants: set-quota changes only the amounts given (in total or in
// one region) and shows usage against the quotas; list and get show the
// same, "-" where unlimited.
func TestTenants(t *testing.T) {
	e := newEnv(t)
	e.srv.Usage["team-a"] = api.Quota{Resources: 3, Replicas: 7, VCPUs: 3.5, MemoryMiB: 1792}
	steps := []struct {
		args []string
		want []string
	}{
		{[]string{"tenants", "set-quota", "team-a", "--replicas", "10", "--vcpus", "4"},
			[]string{"SCOPE", "total", "3/-", "7/10", "3.5/4", "1.8Gi/-"}},
		{[]string{"tenants", "set-quota", "team-a", "--memory-mib", "4096"},
			[]string{"7/10", "3.5/4", "1.8Gi/4Gi"}},
		{[]string{"tenants", "set-quota", "team-a", "--region", "dev-1", "--replicas", "5"},
			[]string{"region dev-1", "0/5", "7/10"}},
		{[]string{"tenants", "list"}, []string{"TENANT", "team-a", "7/10", "1.8Gi/4Gi"}},
		{[]string{"tenants", "get", "team-a", "-o", "json"}, []string{`"replicas": 10`, `"replicas": 7`, `"dev-1"`}},
	}
	for _, s := range steps {
		r := e.run("", s.args...)
		if r.code != 0 {
			t.Fatalf("stratactl %s: exit %d: %s%s", strings.Join(s.args, " "), r.code, r.stdout, r.stderr)
		}
		for _, w := range s.want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("stratactl %s: got\n%s\nwant it to show %q", strings.Join(s.args, " "), r.stdout, w)
			}
		}
	}
	e.srv.Mu.Lock()
	got := e.srv.Tenants["team-a"]
	e.srv.Mu.Unlock()
	if want := (api.Quota{Replicas: 10, VCPUs: 4, MemoryMiB: 4096}); got.Quota != want || got.RegionQuotas["dev-1"] != (api.Quota{Replicas: 5}) {
		t.Errorf("got tenant %+v; want quota %+v and dev-1 replicas 5", got, want)
	}
	if r := e.run("", "tenants", "set-quota", "team-a", "--replicas", "-1"); r.code == 0 || !strings.Contains(r.stderr, "negative") {
		t.Errorf("a negative quota: got exit %d, %s; want it refused", r.code, r.stderr)
	}
}
