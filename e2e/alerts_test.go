package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stratahq/strata/e2e/framework"
	"github.com/stratahq/strata/global/alerts"
	"github.com/stratahq/strata/internal/api"
)

const e2eReceiverSecret = "e2e-receiver-secret-0123456789"

// hookReceiver is a real HTTP receiver: it keeps every notification
// whose signature checks, and counts the ones that do not.
type hookReceiver struct {
	mu    sync.Mutex
	taken []alerts.Notification
	bad   int
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var n alerts.Notification
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case err != nil, alerts.VerifyRequest([]byte(e2eReceiverSecret), r.Header, body) != nil:
		h.bad++
		w.WriteHeader(http.StatusUnauthorized)
		return
	case json.Unmarshal(body, &n) != nil, n.DedupeKey != r.Header.Get(alerts.HeaderDedupeKey):
		h.bad++
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	h.taken = append(h.taken, n)
	w.WriteHeader(http.StatusNoContent)
}

// count returns how many notifications of status the receiver took,
// and how many posts it refused.
func (h *hookReceiver) count(status string) (n, bad int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, x := range h.taken {
		if x.Status == status {
			n++
		}
	}
	return n, h.bad
}

// TestAlertNodeDownAcrossFailover: on real processes (two global
// replicas, a region, two agents), an agent stopped makes its node Down
// and a real receiver gets exactly one firing notification for it,
// signed with the rule's secret and carrying the alert's labels (the
// rule's selector keeps the other node's alerts out). The master is then
// killed; once the agent is back, the new master sends exactly one
// resolved notification, and no copy of the firing one.
func TestAlertNodeDownAcrossFailover(t *testing.T) {
	c := startCluster(t, clusterOpts{
		globals: 2, regions: []string{"dev-1"}, agentsPerRegion: 2,
		regionYAML: "nodes: {heartbeatInterval: 500ms, suspectAfter: 2s, downAfter: 4s, probeTimeout: 1s}\n",
		// The receiver listens on loopback, which the operator allows.
		globalYAML: "alerts: {receiverNetworks: [127.0.0.0/8]}\n",
	})
	hook := &hookReceiver{}
	srv := httptest.NewServer(hook)
	t.Cleanup(srv.Close)

	g := c.global(0)
	g.Must(t, http.MethodPost, "/v1/alertrules", map[string]any{
		"name": "nodes", "reasons": []string{"NodeDown"}, "groupWait": "0s",
		"selector": "severity=critical,node=dev-1-a,region=dev-1",
		"receiver": map[string]any{"type": "webhook", "url": srv.URL + "/hook", "secret": e2eReceiverSecret},
	}, http.StatusCreated, nil)
	// Loopback is allowed, the clouds' metadata address is not.
	g.Must(t, http.MethodPost, "/v1/alertrules", map[string]any{
		"name": "metadata", "reasons": []string{"NodeDown"},
		"receiver": map[string]any{"type": "webhook", "url": "http://169.254.169.254/latest/meta-data/"},
	}, http.StatusBadRequest, nil)
	// The master has seen the rule before the node goes: it fires on
	// what happens from the rule's creation on.
	framework.Eventually(t, 30*time.Second, "the master took the rule", func() error {
		var r api.AlertRule
		if _, err := g.Get("/v1/alertrules/nodes", &r); err != nil {
			return err
		}
		if r.Status == nil {
			return fmt.Errorf("no delivery state yet")
		}
		return nil
	})

	t.Log("stopping agent dev-1-a (dev-1-b stays up)")
	c.regions["dev-1"].agents["dev-1-a"].Kill()
	framework.Eventually(t, 60*time.Second, "one firing notification", func() error {
		if n, bad := hook.count(alerts.StatusFiring); n != 1 || bad != 0 {
			return fmt.Errorf("%d firing notifications, %d refused posts; want 1 and 0", n, bad)
		}
		return nil
	})
	hook.mu.Lock()
	fired := hook.taken[0]
	hook.mu.Unlock()
	if len(fired.Alerts) != 1 {
		t.Fatalf("firing notification carries %d alerts; want 1: %+v", len(fired.Alerts), fired)
	}
	a := fired.Alerts[0]
	if a.Name != "NodeDown" || a.Object != "node/dev-1-a" || a.Labels["node"] != "dev-1-a" || a.Labels["severity"] != "critical" ||
		a.Labels["region"] != "dev-1" || a.Labels["kind"] != "node" {
		t.Fatalf("firing alert %+v; want NodeDown of node/dev-1-a with its labels", a)
	}
	// The master recorded the send before it is killed: a new master must
	// not send it again.
	framework.Eventually(t, 30*time.Second, "the send is recorded", func() error {
		var r api.AlertRule
		if _, err := g.Get("/v1/alertrules/nodes", &r); err != nil {
			return err
		}
		if r.Status == nil || r.Status.Sent != 1 || r.Status.Pending != 0 || r.Status.Active != 1 {
			return fmt.Errorf("delivery state %+v; want 1 sent, 0 pending, 1 active", r.Status)
		}
		return nil
	})

	master, err := c.leader()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("killing the master g%d", master+1)
	c.globals[master].Kill()
	other := c.global(1 - master)
	framework.Eventually(t, 60*time.Second, "the other replica is master", func() error {
		m, err := c.leader()
		if err != nil {
			return err
		}
		if m == master {
			return fmt.Errorf("g%d still master", m+1)
		}
		return nil
	})

	t.Log("bringing dev-1-a back")
	c.regions["dev-1"].agents["dev-1-a"].Restart()
	framework.Eventually(t, 60*time.Second, "one resolved notification", func() error {
		if n, bad := hook.count(alerts.StatusResolved); n != 1 || bad != 0 {
			return fmt.Errorf("%d resolved notifications, %d refused posts; want 1 and 0", n, bad)
		}
		return nil
	})
	var r api.AlertRule
	if _, err := other.Get("/v1/alertrules/nodes", &r); err != nil {
		t.Fatal(err)
	}
	if r.Status == nil || r.Status.Active != 0 || r.Status.Sent != 2 {
		t.Fatalf("delivery state %+v; want 0 active, 2 sent", r.Status)
	}
	hook.mu.Lock()
	defer hook.mu.Unlock()
	if len(hook.taken) != 2 || hook.taken[0].DedupeKey == hook.taken[1].DedupeKey {
		t.Fatalf("the receiver took %d notifications %+v; want the firing one and the resolved one, with their own keys", len(hook.taken), hook.taken)
	}
	if res := hook.taken[1].Alerts; len(res) != 1 || res[0].Object != "node/dev-1-a" || res[0].EndsAt.IsZero() {
		t.Fatalf("resolved alerts %+v; want node/dev-1-a with its end", res)
	}
}
