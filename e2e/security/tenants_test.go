package security

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratahq/strata/e2e/framework"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/audit"
)

// newToken makes a token as the admin and returns it with its id.
func (c *cluster) newToken(t *testing.T, body map[string]any) (plain, id string) {
	t.Helper()
	var tok struct{ ID, Token string }
	c.global().Must(t, http.MethodPost, "/v1/tokens", body, http.StatusCreated, &tok)
	return tok.Token, tok.ID
}

func (c *cluster) as(token string) *framework.Client {
	return framework.NewClient("http://"+c.globalHTTP, token)
}

func resourceBody(name string) map[string]any {
	return map[string]any{"name": name, "kind": "Compute", "spec": map[string]any{
		"flavor": "sec-small", "compute": map[string]any{"image": "docker.io/library/busybox:latest"},
	}}
}

// tenantAttacks: what one tenant may do to another or past its bounds.
func tenantAttacks(t *testing.T, c *cluster) {
	c.global().Must(t, http.MethodPost, "/v1/flavors", map[string]any{"name": "sec-small", "kind": "container", "spec": map[string]any{"vcpus": 0.1, "memoryMiB": 16}}, http.StatusCreated, nil)
	memberA, _ := c.newToken(t, map[string]any{"tenant": "sec-a", "role": "member"})
	operatorA, _ := c.newToken(t, map[string]any{"tenant": "sec-a", "role": "operator"})
	viewerA, _ := c.newToken(t, map[string]any{"tenant": "sec-a", "role": "viewer"})
	infra, infraID := c.newToken(t, map[string]any{"tenant": "ops", "role": "infra", "name": "oncall"})

	t.Run("a quota holds against concurrent creates", func(t *testing.T) {
		const allowed, creates = 3, 12
		c.global().Must(t, http.MethodPut, "/v1/tenants/sec-a", map[string]any{"quota": map[string]any{"resources": allowed}}, http.StatusCreated, nil)
		codes := make([]int, creates)
		bodies := make([]string, creates)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range creates {
			wg.Go(func() {
				<-start
				resp, err := c.as(memberA).Do(callCtx(t), http.MethodPost, "/v1/resources", resourceBody(fmt.Sprintf("q-%d", i)))
				if err != nil {
					bodies[i] = err.Error()
					return
				}
				codes[i], bodies[i] = resp.Status, string(resp.Body)
			})
		}
		close(start)
		wg.Wait()
		got := map[int]int{}
		for i, code := range codes {
			got[code]++
			if code == http.StatusForbidden && !strings.Contains(bodies[i], fmt.Sprintf("quota exceeded: resources %d of %d in use after this request", allowed+1, allowed)) {
				t.Errorf("create %d: got %d %s; want the quota and the numbers named", i, code, bodies[i])
			}
		}
		if want := map[int]int{http.StatusCreated: allowed, http.StatusForbidden: creates - allowed}; !maps.Equal(got, want) {
			t.Fatalf("got statuses %v; want %v (%q)", got, want, bodies)
		}
		var q struct{ Usage, Quota api.Quota }
		c.as(viewerA).Must(t, http.MethodGet, "/v1/tenants/sec-a/quota", nil, http.StatusOK, &q)
		if q.Usage.Resources != allowed || q.Quota.Resources != allowed {
			t.Errorf("got usage %+v of quota %+v; want %d of %d resources", q.Usage, q.Quota, allowed, allowed)
		}
	})

	t.Run("another tenant's events are not shown", func(t *testing.T) {
		c.global().Must(t, http.MethodPost, "/v1/resources?tenant=sec-b", resourceBody("secret-b"), http.StatusCreated, nil)
		// The admin sees sec-b's events once the regions have them.
		framework.Eventually(t, 60*time.Second, "sec-b's and sec-a's events reach the regions", func() error {
			seen := tenantsIn(t, c.global())
			if !seen["sec-b"] || !seen["sec-a"] || !seen[""] {
				return fmt.Errorf("tenants in the admin's events: %v; want sec-a, sec-b and the infrastructure's", seen)
			}
			return nil
		})
		for who, tok := range map[string]string{"operator": operatorA, "viewer": viewerA} {
			seen := tenantsIn(t, c.as(tok))
			if len(seen) != 1 || !seen["sec-a"] {
				t.Errorf("sec-a's %s: got events of tenants %v; want sec-a's only", who, seen)
			}
		}
	})

	t.Run("viewers do not see where regions are", func(t *testing.T) {
		var st struct{ Regions []api.Region }
		c.as(viewerA).Must(t, http.MethodGet, "/v1/status", nil, http.StatusOK, &st)
		for _, r := range st.Regions {
			if r.Endpoint != "" || r.ConsoleURL != "" {
				t.Errorf("a viewer's status shows region %s at %s, %s; want neither", r.Name, r.Endpoint, r.ConsoleURL)
			}
		}
	})

	t.Run("node operations are the infra role's", func(t *testing.T) {
		node := "/v1/regions/sec-1/nodes/" + c.regions["sec-1"].node
		for _, path := range []string{node + "/cordon", node + "/drain"} {
			c.as(operatorA).Must(t, http.MethodPost, path, nil, http.StatusForbidden, nil)
		}
		c.as(operatorA).Must(t, http.MethodDelete, node, nil, http.StatusForbidden, nil)
		c.as(infra).Must(t, http.MethodPost, node+"/cordon", map[string]string{"reason": "security test"}, http.StatusOK, nil)
		c.as(infra).Must(t, http.MethodPost, node+"/uncordon", nil, http.StatusOK, nil)
		c.as(infra).Must(t, http.MethodPost, "/v1/resources", resourceBody("infra-app"), http.StatusForbidden, nil)
	})

	t.Run("an expired token is refused", func(t *testing.T) {
		short, _ := c.newToken(t, map[string]any{"tenant": "sec-a", "role": "viewer", "expiresAt": time.Now().Add(3 * time.Second).UTC().Format(time.RFC3339)})
		c.as(short).Must(t, http.MethodGet, "/v1/resources", nil, http.StatusOK, nil)
		framework.Eventually(t, 30*time.Second, "the token expires", func() error {
			resp, err := c.as(short).Do(callCtx(t), http.MethodGet, "/v1/resources", nil)
			if err != nil {
				return err
			}
			if resp.Status != http.StatusUnauthorized || !strings.Contains(string(resp.Body), "expired") {
				return fmt.Errorf("got %d %s; want 401 saying expired", resp.Status, resp.Body)
			}
			return nil
		})
	})

	t.Run("a tenant's administrator reaches its tenant only", func(t *testing.T) {
		r, err := c.global().Do(callCtx(t), http.MethodPost, "/v1/tokens", map[string]any{"tenant": "sec-a", "role": "admin"})
		if err != nil || r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "tenant-admin") {
			t.Fatalf("an admin of sec-a: got %v %v; want 400 pointing at tenant-admin", r, err)
		}
		adminA, adminAID := c.newToken(t, map[string]any{"tenant": "sec-a", "role": "tenant-admin", "name": "sec-a-admin"})
		as := c.as(adminA)
		var mine struct{ ID, Tenant string }
		as.Must(t, http.MethodPost, "/v1/tokens", map[string]any{"role": "member", "name": "sec-a-ci"}, http.StatusCreated, &mine)
		if mine.Tenant != "sec-a" {
			t.Errorf("the tenant-admin's new token is of %q; want sec-a", mine.Tenant)
		}
		as.Must(t, http.MethodPost, "/v1/tokens", map[string]any{"tenant": "sec-b", "role": "member"}, http.StatusForbidden, nil)
		as.Must(t, http.MethodPost, "/v1/tokens", map[string]any{"role": "infra"}, http.StatusForbidden, nil)
		as.Must(t, http.MethodGet, "/v1/resources/secret-b?tenant=sec-b", nil, http.StatusNotFound, nil)
		as.Must(t, http.MethodPut, "/v1/tenants/sec-a", map[string]any{"quota": map[string]any{"resources": 1000}}, http.StatusForbidden, nil)
		as.Must(t, http.MethodDelete, "/v1/tokens/"+mine.ID, nil, http.StatusOK, nil)
		// The probe of sec-b is in the audit log as a read of another
		// tenant.
		framework.Eventually(t, 10*time.Second, "the audit log has the probe", func() error {
			entries, raw := readAudit(t, c.auditPath("global"))
			for _, e := range entries {
				if e.Path == "/v1/resources/secret-b" && e.Status == http.StatusNotFound && e.Tenant == "sec-b" &&
					e.Who.TokenID == adminAID && slices.Contains(e.Reads, audit.ReadOtherTenant) {
					return nil
				}
			}
			return fmt.Errorf("no read of sec-b by %s in:\n%s", adminAID, raw)
		})
	})

	t.Run("the audit log names who changed what, and no secret", func(t *testing.T) {
		entries, raw := readAudit(t, c.auditPath("global"))
		for _, leak := range []string{c.token, infra, memberA, operatorA} {
			if strings.Contains(raw, leak) {
				t.Fatalf("the global audit log holds a token:\n%s", raw)
			}
		}
		found := false
		for _, e := range entries {
			if strings.HasSuffix(e.Path, "/cordon") && e.Status == http.StatusOK {
				found = e.Who == (audit.Who{TokenID: infraID, TokenName: "oncall", Tenant: "ops", Role: "infra"})
			}
		}
		if !found {
			t.Errorf("no cordon by the infra token %s in the global audit log:\n%s", infraID, raw)
		}
		// The region audited the call the global tier forwarded, as the
		// global tier's identity.
		framework.Eventually(t, 10*time.Second, "the region's audit log has the cordon", func() error {
			entries, raw := readAudit(t, c.auditPath("sec-1"))
			for _, e := range entries {
				if strings.HasSuffix(e.Path, "/CordonNode") && e.Code == "OK" && e.Who.Identity == "global:g1" {
					return nil
				}
			}
			return fmt.Errorf("no CordonNode by global:g1 in:\n%s", raw)
		})
	})
}

// tenantsIn returns the tenants of the events client c is shown ("" for
// the infrastructure's).
func tenantsIn(t *testing.T, c *framework.Client) map[string]bool {
	t.Helper()
	var l struct{ Items []api.Event }
	if code, err := c.Get("/v1/events?limit=1000", &l); err != nil || code != http.StatusOK {
		t.Fatalf("GET /v1/events: %d %v", code, err)
	}
	out := map[string]bool{}
	for _, ev := range l.Items {
		out[ev.Tenant] = true
	}
	return out
}

func readAudit(t *testing.T, path string) ([]audit.Entry, string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []audit.Entry
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	for sc.Scan() {
		var e audit.Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out, string(raw)
}
