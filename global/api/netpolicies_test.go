package api

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stratahq/strata/internal/api"
)

// TestNetworkPolicies covers the kind over REST: validation errors name
// their fields; a tenant reads and writes its own policies only (another
// tenant's is "not found"); the generation grows with the content only;
// a stale resourceVersion is 409.
func TestNetworkPolicies(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.fixtures(t, nil)
	for _, c := range []struct {
		body, field string
	}{
		{`{"name":"Bad"}`, "name"},
		{`{"name":"p","selector":{"a b":"c"}}`, "selector"},
		{`{"name":"p","ingress":[{"from":[{}]}]}`, "ingress[0].from[0]"},
		{`{"name":"p","ingress":[{"from":[{"resources":{},"ipBlock":{"cidr":"10.0.0.0/8"}}]}]}`, "ingress[0].from[0]"},
		{`{"name":"p","ingress":[{"from":[{"ipBlock":{"cidr":"10.0.0.1/8"}}]}]}`, "ingress[0].from[0].ipBlock.cidr"},
		{`{"name":"p","ingress":[{"from":[{"ipBlock":{"cidr":"10.0.0.0/8","except":["11.0.0.0/16"]}}]}]}`, "ingress[0].from[0].ipBlock.except[0]"},
		{`{"name":"p","ingress":[{"ports":[{"protocol":"icmp"}]}]}`, "ingress[0].ports[0].protocol"},
		{`{"name":"p","ingress":[{"ports":[{"port":70000}]}]}`, "ingress[0].ports[0].port"},
		{`{"name":"p","ingress":[{"ports":[{"port":90,"endPort":80}]}]}`, "ingress[0].ports[0].endPort"},
	} {
		r := e.do(t, "POST", "/v1/networkpolicies", c.body)
		if r.code != http.StatusBadRequest || !strings.Contains(r.String(), `"field":"`+c.field+`"`) {
			t.Errorf("POST %s: got %s; want 400 naming field %s", c.body, r, c.field)
		}
	}

	p := decodeAs[api.NetworkPolicy](t, e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/networkpolicies",
		`{"name":"web","selector":{"app":"web"},"ingress":[{"from":[{"resources":{"matchLabels":{"app":"lb"}}}],"ports":[{"port":80}]}]}`)))
	if p.Tenant != DefaultTenant || p.Generation != 1 || p.UID == "" || p.ResourceVersion == 0 {
		t.Fatalf("created: %+v; want the caller's tenant, generation 1, a uid and a version", p)
	}
	same := decodeAs[api.NetworkPolicy](t, e.must(t, http.StatusOK, e.do(t, "PUT", "/v1/networkpolicies/web",
		`{"selector":{"app":"web"},"ingress":[{"from":[{"resources":{"matchLabels":{"app":"lb"}}}],"ports":[{"port":80}]}]}`)))
	if same.Generation != 1 {
		t.Errorf("PUT of the same content: generation %d; want 1", same.Generation)
	}
	next := decodeAs[api.NetworkPolicy](t, e.must(t, http.StatusOK, e.do(t, "PUT", "/v1/networkpolicies/web", `{"selector":{"app":"web"}}`)))
	if next.Generation != 2 || len(next.Ingress) != 0 {
		t.Errorf("PUT of new rules: %+v; want generation 2, no rules", next)
	}
	stale := fmt.Sprintf(`{"selector":{},"resourceVersion":%d}`, p.ResourceVersion)
	e.must(t, http.StatusConflict, e.do(t, "PUT", "/v1/networkpolicies/web", stale))

	// Another tenant sees none of it.
	member := e.token(t, "team-b", api.RoleMember)
	if l := decodeAs[struct{ Items []api.NetworkPolicy }](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/networkpolicies", nil, withToken(member)))); len(l.Items) != 0 {
		t.Errorf("team-b lists %v; want none of default's", l.Items)
	}
	e.must(t, http.StatusNotFound, e.do(t, "GET", "/v1/networkpolicies/web?tenant=default", nil, withToken(member)))
	e.must(t, http.StatusNotFound, e.do(t, "DELETE", "/v1/networkpolicies/web?tenant=default", nil, withToken(member)))
	e.must(t, http.StatusForbidden, e.do(t, "POST", "/v1/networkpolicies?tenant=default", `{"name":"x"}`, withToken(member)))
	viewer := e.token(t, "team-b", api.RoleViewer)
	e.must(t, http.StatusForbidden, e.do(t, "POST", "/v1/networkpolicies", `{"name":"x"}`, withToken(viewer)))

	e.must(t, http.StatusOK, e.do(t, "DELETE", "/v1/networkpolicies/web", nil))
	e.must(t, http.StatusNotFound, e.do(t, "GET", "/v1/networkpolicies/web", nil))
}
