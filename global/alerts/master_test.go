package alerts_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratahq/strata/global"
	"github.com/stratahq/strata/global/alerts"
	globalapi "github.com/stratahq/strata/global/api"
	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/heartbeat"
	"github.com/stratahq/strata/internal/secretbox"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/testkit/etcdtest"
	"github.com/stratahq/strata/testkit/testenv/ports"
)

const receiverSecret = "a-secret-of-the-receiver-0123"

// receiver is a real HTTP receiver on loopback: it checks every
// signature, answers 500 to the first failFirst posts, and keeps what
// it took.
type receiver struct {
	mu        sync.Mutex
	failFirst int
	attempts  []string // dedupe keys of every post, refused ones included
	taken     []alerts.Notification
	bad       []string
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	key := r.Header.Get(alerts.HeaderDedupeKey)
	rc.attempts = append(rc.attempts, key)
	if alerts.VerifyRequest([]byte(receiverSecret), r.Header, body) != nil {
		rc.bad = append(rc.bad, "bad signature: "+r.Header.Get(alerts.HeaderSignature))
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	if len(rc.attempts) <= rc.failFirst {
		http.Error(w, "try later", http.StatusInternalServerError)
		return
	}
	var n alerts.Notification
	if err := json.Unmarshal(body, &n); err != nil || n.DedupeKey != key {
		rc.bad = append(rc.bad, fmt.Sprintf("body %s (%v), header key %q", body, err, key))
	}
	rc.taken = append(rc.taken, n)
	w.WriteHeader(http.StatusNoContent)
}

func (rc *receiver) snapshot() (attempts []string, taken []alerts.Notification, bad []string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.attempts...), append([]alerts.Notification(nil), rc.taken...), append([]string(nil), rc.bad...)
}

// replica is one `strata global` process in this test.
type replica struct {
	srv    *global.Server
	cancel context.CancelFunc
	done   chan error
}

func startReplica(t *testing.T, endpoints []string, id, keyFile string, beats heartbeat.Store) *replica {
	t.Helper()
	cfg := config.DefaultGlobal()
	cfg.ID = id
	cfg.Secrets.KeyFiles = []string{keyFile}
	cfg.Alerts.ReceiverNetworks = []string{"127.0.0.0/8"} // the receivers listen on loopback
	cfg.Insecure = true
	cfg.Listen.HTTP, cfg.Listen.GRPC = "127.0.0.1:0", "127.0.0.1:0"
	cfg.LeaseTTL = 2 * time.Second
	cfg.Regions = config.Liveness{
		HeartbeatInterval: 200 * time.Millisecond, SuspectAfter: time.Second, DownAfter: 2 * time.Second, ProbeTimeout: 200 * time.Millisecond,
	}
	srv, err := global.New(global.Options{Config: cfg, Etcd: etcdtest.Client(t, endpoints), Heartbeats: beats})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{srv: srv, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- srv.Run(ctx) }()
	t.Cleanup(r.stop)
	select {
	case <-srv.Ready():
	case err := <-r.done:
		t.Fatalf("replica %s: %v", id, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("replica %s not ready", id)
	}
	return r
}

func (r *replica) stop() {
	r.cancel()
	<-r.done
	r.done <- nil // a second stop returns at once
}

var admin = globalapi.Identity{Tenant: globalapi.DefaultTenant, Role: api.RoleAdmin}

func (r *replica) isMaster(ctx context.Context) bool {
	st, err := r.srv.API().Status(globalapi.WithIdentity(ctx, admin))
	return err == nil && st.IsLeader
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestMasterSendsRegionDownOnceAcrossFailover runs two global replicas
// on one real etcd and a real receiver. A registered region that never
// heartbeats goes Down: the receiver answers the first post 500, takes
// the retry (same dedupe key, valid signature), and takes nothing more
// for it after the master fails over. The region then heartbeats, comes
// Up, and the new master sends the resolution, once.
func TestMasterSendsRegionDownOnceAcrossFailover(t *testing.T) {
	ctx := t.Context()
	endpoints := etcdtest.Embedded(t)
	beats := heartbeat.NewMemory()
	rc := &receiver{failFirst: 1}
	hook := httptest.NewServer(rc)
	t.Cleanup(hook.Close)
	// Both replicas seal and open the receiver's secret with one key.
	keyFile := filepath.Join(t.TempDir(), "secrets.key")
	if _, err := secretbox.GenerateKey(keyFile); err != nil {
		t.Fatal(err)
	}

	a := startReplica(t, endpoints, "g1", keyFile, beats)
	waitFor(t, "g1 is master", 20*time.Second, func() error {
		if !a.isMaster(ctx) {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	b := startReplica(t, endpoints, "g2", keyFile, beats)

	zero := api.D(0)
	_, err := a.srv.API().AlertRules().Create(globalapi.WithIdentity(ctx, admin), api.AlertRule{
		Name: "regions", Reasons: []string{"RegionDown"}, GroupWait: &zero,
		Receiver: api.AlertReceiver{Type: api.ReceiverWebhook, URL: hook.URL + "/hook", Secret: receiverSecret},
	})
	if err != nil {
		t.Fatal(err)
	}
	// A region whose endpoint answers nothing: its probe fails. The port
	// is reserved, so that no other test's server takes it meanwhile.
	dead := ports.Addr(t)
	st := state.New(store.New(etcdtest.Client(t, endpoints), "/strata/global/"))
	if _, err := st.Regions.Create(ctx, "eu", &api.Region{Name: "eu", Endpoint: dead, RegisteredAt: time.Now()}); err != nil {
		t.Fatal(err)
	}

	waitFor(t, "the firing notification taken", 30*time.Second, func() error {
		_, taken, _ := rc.snapshot()
		if len(taken) == 0 {
			return fmt.Errorf("nothing taken")
		}
		return nil
	})
	attempts, taken, bad := rc.snapshot()
	if len(bad) > 0 {
		t.Fatalf("receiver saw bad posts: %q", bad)
	}
	if len(attempts) != 2 || attempts[0] != attempts[1] {
		t.Fatalf("attempts: got %q; want a refused one and its retry, with the same dedupe key", attempts)
	}
	firing := taken[0]
	if firing.Status != alerts.StatusFiring || len(firing.Alerts) != 1 || firing.Alerts[0].Name != "RegionDown" || firing.Alerts[0].Object != "region/eu" {
		t.Fatalf("firing: got %+v; want RegionDown of region/eu", firing)
	}
	// The delivery state says so.
	waitFor(t, "delivery state recorded", 10*time.Second, func() error {
		r, err := b.srv.API().AlertRules().Get(globalapi.WithIdentity(ctx, admin), "regions")
		if err != nil {
			return err
		}
		if s := r.Status; s == nil || s.Sent != 1 || s.Active != 1 || s.Pending != 0 || s.LastSuccess.IsZero() {
			return fmt.Errorf("status %+v", r.Status)
		}
		return nil
	})

	// The master's metrics count the refused post and the one taken.
	waitFor(t, "the master's metrics", 10*time.Second, func() error {
		resp, err := http.Get("http://" + a.srv.HTTPAddr() + "/metrics")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for _, want := range []string{`strata_alerts_sent_total{tier="global"} 1`, `strata_alerts_failed_total{tier="global"} 1`, `strata_alerts_pending{tier="global"} 0`} {
			if !strings.Contains(string(body), want) {
				return fmt.Errorf("no %q in the metrics", want)
			}
		}
		return nil
	})

	// Fail over: the master stops, the other takes over and keeps
	// reading from the cursor and state in etcd.
	a.stop()
	waitFor(t, "g2 is master", 20*time.Second, func() error {
		if !b.isMaster(ctx) {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	// The region heartbeats again: Up resolves the alert.
	beatCtx, stopBeats := context.WithCancel(ctx)
	defer stopBeats()
	go func() {
		for beatCtx.Err() == nil {
			_ = beats.Record(beatCtx, heartbeat.Beat{ID: "eu", At: time.Now()})
			time.Sleep(100 * time.Millisecond)
		}
	}()
	waitFor(t, "the resolved notification taken", 30*time.Second, func() error {
		_, taken, _ := rc.snapshot()
		if len(taken) < 2 {
			return fmt.Errorf("%d taken", len(taken))
		}
		return nil
	})
	// Let the new master run a few more passes: nothing more may come.
	time.Sleep(3 * time.Second)
	attempts, taken, bad = rc.snapshot()
	if len(bad) > 0 {
		t.Fatalf("receiver saw bad posts: %q", bad)
	}
	if len(taken) != 2 || len(attempts) != 3 {
		t.Fatalf("got %d notifications taken in %d attempts: %+v; want 2 in 3 (firing once, resolved once)", len(taken), len(attempts), taken)
	}
	res := taken[1]
	if res.Status != alerts.StatusResolved || len(res.Alerts) != 1 || res.Alerts[0].Name != "RegionDown" || res.Alerts[0].EndsAt.IsZero() {
		t.Fatalf("resolved: got %+v; want RegionDown resolved with endsAt", res)
	}
	if res.DedupeKey == firing.DedupeKey {
		t.Fatal("the resolution has the firing notification's dedupe key")
	}
}

// TestQuotaNearFullFiresAndResolves: a tenant that reaches 90% of its
// replicas quota fires QuotaNearFull once at a real receiver; scaled
// down, it resolves.
func TestQuotaNearFullFiresAndResolves(t *testing.T) {
	ctx := t.Context()
	endpoints := etcdtest.Embedded(t)
	rc := &receiver{}
	hook := httptest.NewServer(rc)
	t.Cleanup(hook.Close)
	keyFile := filepath.Join(t.TempDir(), "secrets.key")
	if _, err := secretbox.GenerateKey(keyFile); err != nil {
		t.Fatal(err)
	}
	g := startReplica(t, endpoints, "g1", keyFile, heartbeat.NewMemory())
	waitFor(t, "g1 is master", 20*time.Second, func() error {
		if !g.isMaster(ctx) {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	as := globalapi.WithIdentity(ctx, admin)
	svc := g.srv.API()
	zero := api.D(0)
	if _, err := svc.AlertRules().Create(as, api.AlertRule{
		Name: "quotas", Reasons: []string{"QuotaNearFull"}, GroupWait: &zero,
		Receiver: api.AlertReceiver{Type: api.ReceiverWebhook, URL: hook.URL + "/hook", Secret: receiverSecret},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Flavors().Create(as, api.Flavor{Name: "small", Kind: api.ProviderContainer, Spec: api.FlavorSpec{VCPUs: 0.5, MemoryMiB: 256}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.Tenants().Put(as, api.Tenant{Name: "acme", Quota: api.Quota{Replicas: 10}}); err != nil {
		t.Fatal(err)
	}
	web := api.Resource{Name: "web", Kind: api.KindCompute, Replicas: 8,
		Spec: api.ResourceSpec{Flavor: "small", Compute: &api.ComputeSpec{Image: "busybox"}}}
	if _, err := svc.Resources().Create(as, "acme", web, globalapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	// 8 of 10 is not near full; 9 is.
	if _, err := svc.Resources().Scale(as, "acme", "web", 9); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "QuotaNearFull taken", 30*time.Second, func() error {
		if _, taken, _ := rc.snapshot(); len(taken) == 0 {
			return fmt.Errorf("nothing taken")
		}
		return nil
	})
	if _, err := svc.Resources().Scale(as, "acme", "web", 2); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the resolution taken", 30*time.Second, func() error {
		if _, taken, _ := rc.snapshot(); len(taken) < 2 {
			return fmt.Errorf("%d taken", len(taken))
		}
		return nil
	})
	_, taken, bad := rc.snapshot()
	if len(bad) > 0 {
		t.Fatalf("receiver saw bad posts: %q", bad)
	}
	if len(taken) != 2 {
		t.Fatalf("taken: %+v; want a firing notification and its resolution", taken)
	}
	fire, res := taken[0], taken[1]
	if fire.Status != alerts.StatusFiring || len(fire.Alerts) != 1 || fire.Alerts[0].Name != "QuotaNearFull" ||
		fire.Alerts[0].Object != "tenant/acme" || !strings.Contains(fire.Alerts[0].Message, "replicas 9 of 10") {
		t.Errorf("firing: got %+v; want QuotaNearFull of tenant/acme, replicas 9 of 10", fire)
	}
	if res.Status != alerts.StatusResolved || len(res.Alerts) != 1 || res.Alerts[0].Object != "tenant/acme" {
		t.Errorf("resolution: got %+v; want QuotaNearFull of tenant/acme resolved", res)
	}
}
