package api

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stratahq/strata/internal/api"
)

// TestResourceActionEvents checks that every operator action on a
// resource is an event of the resource, readable by its tenant, and by no
// other tenant.
func TestResourceActionEvents(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.fixtures(t, nil)
	member := e.token(t, "acme", api.RoleMember)
	as := withToken(member)
	memberID, _, _ := parseToken(member)
	image := func(img string) func(map[string]any) {
		return func(m map[string]any) { m["spec"].(map[string]any)["compute"] = map[string]any{"image": img} }
	}
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", computeBody("web", func(m map[string]any) { m["replicas"] = 2 }), as))
	e.must(t, http.StatusOK, e.do(t, "PUT", "/v1/resources/web", computeBody("web", image("busybox:1.37"), func(m map[string]any) { m["replicas"] = 2 }), as))

	e.must(t, http.StatusOK, e.do(t, "POST", "/v1/resources/web/scale", `{"replicas":5}`, as))
	e.must(t, http.StatusOK, e.do(t, "POST", "/v1/resources/web/scale", `{"replicas":5}`, as)) // no change: no event
	e.must(t, http.StatusOK, e.do(t, "POST", "/v1/resources/web/rollback", `{"revision":1}`, as))
	e.must(t, http.StatusOK, e.do(t, "POST", "/v1/resources/web/rollout/pause", nil, as))
	e.must(t, http.StatusOK, e.do(t, "POST", "/v1/resources/web/rollout/resume", nil, as))
	e.must(t, http.StatusAccepted, e.do(t, "DELETE", "/v1/resources/web", nil, as))

	list := decodeAs[EventList](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/events?object=resource/acme/web", nil, as)))
	var reasons []string
	for _, ev := range list.Items {
		reasons = append(reasons, ev.Reason)
		if ev.Object != "resource/acme/web" || ev.Fields["token"] != memberID || ev.Fields["role"] != "member" || ev.Time.IsZero() {
			t.Errorf("event %+v; want resource/acme/web, by token %s (member), with a time", ev, memberID)
		}
		if strings.Contains(ev.Message, member) {
			t.Errorf("event %+v carries the token's secret", ev)
		}
	}
	want := []string{"Scaled", "RolledBack", "RolloutPaused", "RolloutResumed", "DeletionRequested"}
	if !slices.Equal(reasons, want) {
		t.Fatalf("got events %v; want %v", reasons, want)
	}
	if msg := list.Items[0].Message; msg != "scaled from 2 to 5 replicas" {
		t.Errorf("Scaled message %q; want %q", msg, "scaled from 2 to 5 replicas")
	}
	if msg := list.Items[1].Message; msg != "rolled back from revision 2 to the spec of revision 1, as revision 3" {
		t.Errorf("RolledBack message %q", msg)
	}

	// A cursor brings what comes after it, and nothing before.
	e.must(t, http.StatusNotFound, e.do(t, "POST", "/v1/resources/nope/scale", `{"replicas":1}`, as))
	after := decodeAs[EventList](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/events?object=resource/acme/web&after="+list.Cursor, nil, as)))
	if len(after.Items) != 0 {
		t.Errorf("after the cursor: got %+v; want nothing", after.Items)
	}

	for _, tc := range []struct {
		name, path string
		token      string
		code       int
	}{
		{"the system tenant's admin", "/v1/events?object=resource/acme/web", e.admin, http.StatusOK},
		{"another tenant's tenant-admin", "/v1/events?object=resource/acme/web", e.token(t, "other", api.RoleTenantAdmin), http.StatusForbidden},
		{"another tenant's member", "/v1/events?object=resource/acme/web", e.token(t, "other", api.RoleMember), http.StatusForbidden},
		// Without a resource object a tenant's token gets its tenant's
		// events only: here, none of a node's.
		{"a member, every event", "/v1/events", member, http.StatusOK},
		{"a member, a node's events", "/v1/events?object=node/n1", member, http.StatusOK},
		{"no tenant", "/v1/events?object=resource/", member, http.StatusBadRequest},
		{"a viewer of the tenant", "/v1/events?object=resource/acme", e.token(t, "acme", api.RoleViewer), http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.must(t, tc.code, e.do(t, "GET", tc.path, nil, withToken(tc.token)))
		})
	}
	// What a tenant's token is shown is its tenant's, whatever it asks.
	for path, want := range map[string]int{"/v1/events": len(want), "/v1/events?object=node/n1": 0} {
		got := decodeAs[EventList](t, e.must(t, http.StatusOK, e.do(t, "GET", path, nil, withToken(member))))
		if len(got.Items) != want {
			t.Errorf("GET %s as acme's member: got %d events %+v; want %d", path, len(got.Items), got.Items, want)
		}
		for _, ev := range got.Items {
			if ev.Tenant != "acme" {
				t.Errorf("GET %s as acme's member: got an event of tenant %q: %+v", path, ev.Tenant, ev)
			}
		}
	}
	if got := decodeAs[EventList](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/events", nil, withToken(e.token(t, "other", api.RoleOperator))))); len(got.Items) != 0 {
		t.Errorf("another tenant's operator: got %+v; want no event of acme", got.Items)
	}
}
