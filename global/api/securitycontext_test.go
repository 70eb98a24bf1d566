package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stratahq/strata/internal/api"
)

// TestSecurityContextREST: a container's securityContext is stored as
// given; bad ids, runAsNonRoot as root and a VM's securityContext get a
// 400 naming the field.
func TestSecurityContextREST(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.fixtures(t, nil)
	withSC := func(name, flavor string, sc map[string]any) map[string]any {
		return computeBody(name, func(m map[string]any) {
			spec := m["spec"].(map[string]any)
			spec["flavor"] = flavor
			spec["compute"].(map[string]any)["securityContext"] = sc
		})
	}
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", withSC("web", "small", map[string]any{"runAsUser": 1000, "runAsGroup": 0, "runAsNonRoot": true})))
	got := decodeAs[api.Resource](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources/web", nil)))
	sc := got.Spec.Compute.SecurityContext
	if sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 1000 || sc.RunAsGroup == nil || *sc.RunAsGroup != 0 || !sc.RunAsNonRoot {
		t.Errorf("stored securityContext: got %+v; want runAsUser 1000, runAsGroup 0, runAsNonRoot", sc)
	}
	for _, tc := range []struct {
		name, flavor string
		sc           map[string]any
		want         string
	}{
		{"negative uid", "small", map[string]any{"runAsUser": -1}, "spec.compute.securityContext.runAsUser: -1 is not an id"},
		{"negative gid", "small", map[string]any{"runAsGroup": -7}, "spec.compute.securityContext.runAsGroup: -7 is not an id"},
		{"uid too large", "small", map[string]any{"runAsUser": int64(1) << 32}, "spec.compute.securityContext.runAsUser: 4294967296 is not an id"},
		{"uid not a number", "small", map[string]any{"runAsUser": "1000"}, "spec.compute.securityContext.runAsUser"},
		{"unknown field", "small", map[string]any{"privileged": true}, "spec.compute.securityContext.privileged: unknown field"},
		{"non-root as root", "small", map[string]any{"runAsUser": 0, "runAsNonRoot": true}, "spec.compute.securityContext.runAsUser: 0 is root, which runAsNonRoot refuses"},
		{"a VM", "vmx", map[string]any{"runAsUser": 1000}, "spec.compute.securityContext: is for containers"},
	} {
		r := e.do(t, "POST", "/v1/resources", withSC("bad", tc.flavor, tc.sc))
		if r.code != http.StatusBadRequest || !strings.Contains(string(r.body), tc.want) {
			t.Errorf("%s: got %s; want 400 with %q", tc.name, r, tc.want)
		}
	}
}
