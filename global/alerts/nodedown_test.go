package alerts_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stratahq/strata/devcluster"
	"github.com/stratahq/strata/global/alerts"
	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/providers/fake"
	"github.com/stratahq/strata/providers/provider"
	"github.com/stratahq/strata/testkit/testenv/scrape"
)

// amWebhook is what an Alertmanager webhook receiver reads.
type amWebhook struct {
	Version  string `json:"version"`
	GroupKey string `json:"groupKey"`
	Status   string `json:"status"`
	Alerts   []struct {
		Status      string            `json:"status"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
		StartsAt    time.Time         `json:"startsAt"`
		EndsAt      time.Time         `json:"endsAt"`
	} `json:"alerts"`
}

// amReceiver is a real HTTP receiver speaking Alertmanager's webhook
// format; it checks every signature.
type amReceiver struct {
	mu   sync.Mutex
	got  []amWebhook
	keys []string
	bad  []string
}

func (rc *amReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if alerts.VerifyRequest([]byte(receiverSecret), r.Header, body) != nil {
		rc.bad = append(rc.bad, "bad signature")
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var m amWebhook
	if err := json.Unmarshal(body, &m); err != nil {
		rc.bad = append(rc.bad, err.Error())
	}
	rc.got = append(rc.got, m)
	rc.keys = append(rc.keys, r.Header.Get(alerts.HeaderDedupeKey))
}

func (rc *amReceiver) snapshot() ([]amWebhook, []string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]amWebhook(nil), rc.got...), append([]string(nil), rc.bad...)
}

// TestNodeDownToAlertmanagerReceiver runs a whole cluster in one process
// (global, a region, two agents on the fake provider) and stops an
// agent: the region's monitor marks its node Down, the master reads the
// NodeDown event from the region's stream and posts one firing alert in
// Alertmanager's format; the agent comes back, and one resolved alert
// follows.
func TestNodeDownToAlertmanagerReceiver(t *testing.T) {
	reg := provider.NewRegistry()
	reg.Register("fake", fake.Factory)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	c, err := devcluster.Start(ctx, devcluster.Options{
		DataDir: dir, Regions: []string{"eu"}, AgentsPerRegion: 2, Registry: reg,
		TuneGlobal: func(g *config.Global) { g.Alerts.ReceiverNetworks = []string{"127.0.0.0/8"} }, // the receiver is on loopback
		TuneRegion: func(r *config.Region) {
			r.Nodes = config.Liveness{HeartbeatInterval: 200 * time.Millisecond, SuspectAfter: time.Second, DownAfter: 2 * time.Second, ProbeTimeout: 200 * time.Millisecond}
		},
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = c.Wait() })
	rc := &amReceiver{}
	hook := httptest.NewServer(rc)
	t.Cleanup(hook.Close)

	body := fmt.Sprintf(`{"name":"nodes","reasons":["NodeDown"],"groupWait":"0s","labels":{"severity":"page"},
		"receiver":{"type":"alertmanager","url":%q,"secret":%q}}`, hook.URL+"/am", receiverSecret)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.GlobalURL()+"/v1/alertrules", bytes.NewBufferString(body))
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || bytes.Contains(b, []byte(receiverSecret)) {
		t.Fatalf("create rule: %d %s; want 201 without the secret", resp.StatusCode, b)
	}

	node := devcluster.NodeName("eu", 1)
	if err := c.StopAgent(node); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the NodeDown alert", 60*time.Second, func() error {
		if got, _ := rc.snapshot(); len(got) == 0 {
			return fmt.Errorf("nothing received")
		}
		return nil
	})
	if err := c.RestartAgent(node); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the resolved alert", 60*time.Second, func() error {
		if got, _ := rc.snapshot(); len(got) < 2 {
			return fmt.Errorf("%d received", len(got))
		}
		return nil
	})
	// Nothing more may come: three more master passes, each of which
	// reads the regions' events and starts whatever notification is due,
	// and then nothing pending, so that whatever they started has reached
	// the receiver (or failed) by the time it is counted.
	passes := `strata_alerts_passes_total{tier="global"}`
	from, err := scrape.Sample(ctx, nil, c.GlobalURL()+"/metrics", passes)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "three more master passes", 60*time.Second, func() error {
		n, err := scrape.Sample(ctx, nil, c.GlobalURL()+"/metrics", passes)
		if err == nil && n < from+3 {
			err = fmt.Errorf("%.0f passes since the resolved alert", n-from)
		}
		return err
	})
	waitFor(t, "nothing pending", 60*time.Second, func() error {
		n, err := scrape.Sample(ctx, nil, c.GlobalURL()+"/metrics", `strata_alerts_pending{tier="global"}`)
		if err == nil && n != 0 {
			err = fmt.Errorf("%.0f alerts pending", n)
		}
		return err
	})
	got, bad := rc.snapshot()
	if len(bad) > 0 {
		t.Fatalf("receiver saw bad posts: %q", bad)
	}
	if len(got) != 2 {
		t.Fatalf("got %d notifications: %+v; want one firing, one resolved", len(got), got)
	}
	for i, want := range []string{alerts.StatusFiring, alerts.StatusResolved} {
		m := got[i]
		if m.Version != "4" || m.Status != want || m.GroupKey != `{}:{rule="nodes"}` || len(m.Alerts) != 1 {
			t.Fatalf("notification %d: got %+v; want Alertmanager v4, %s, one alert", i, m, want)
		}
		a := m.Alerts[0]
		if a.Status != want || a.Labels["alertname"] != "NodeDown" || a.Labels["object"] != "node/"+node ||
			a.Labels["region"] != "eu" || a.Labels["severity"] != "page" || a.StartsAt.IsZero() {
			t.Fatalf("notification %d alert: got %+v", i, a)
		}
		if want == alerts.StatusResolved && !a.EndsAt.After(a.StartsAt) {
			t.Fatalf("resolved alert: endsAt %s not after startsAt %s", a.EndsAt, a.StartsAt)
		}
	}
}
