package controller

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/heartbeat"
	"github.com/stratahq/strata/internal/liveness"
	"github.com/stratahq/strata/internal/metrics"
	"github.com/stratahq/strata/internal/store"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
	"github.com/stratahq/strata/testkit/etcdtest"
)

// unreachable is a Regions whose every region fails its probe, counting
// the connections dropped.
type unreachable struct {
	mu        sync.Mutex
	forgotten map[string]int
}

type failingRegion struct{ regionv1.RegionServiceClient }

func (failingRegion) Status(context.Context, *regionv1.StatusRequest, ...grpc.CallOption) (*resourcev1.RegionStatus, error) {
	return nil, errors.New("probe timed out")
}

func (u *unreachable) Client(context.Context, string) (regionv1.RegionServiceClient, error) {
	return failingRegion{}, nil
}

func (u *unreachable) Forget(region string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.forgotten[region]++
}

type monitorEnv struct {
	st      *state.State
	caches  *state.Caches
	beats   *heartbeat.Memory
	regions *unreachable
	c       *Controller
	g       testGuard
	now     time.Time
}

func newMonitorEnv(t *testing.T, names ...string) *monitorEnv {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cli := etcdtest.Client(t, etcdtest.Embedded(t))
	e := &monitorEnv{
		st: state.New(store.New(cli, "/strata/global/")), beats: heartbeat.NewMemory(),
		regions: &unreachable{forgotten: map[string]int{}}, now: time.Now(),
	}
	e.caches = state.NewCaches(e.st)
	done := make(chan struct{})
	go func() { _ = e.caches.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	resp, err := cli.Put(ctx, "/test/master", "me")
	if err != nil {
		t.Fatal(err)
	}
	e.g = testGuard{key: "/test/master", rev: resp.Header.Revision}
	registered := e.now.Add(-20 * time.Minute)
	var rev int64
	for _, n := range names {
		if _, err := e.st.Regions.Put(ctx, n, &api.Region{Name: n, Endpoint: n + ":9091", RegisteredAt: registered}); err != nil {
			t.Fatal(err)
		}
		if rev, err = e.st.RegionStatus.Put(ctx, n, &api.RegionStatus{Health: api.HealthUp, Since: registered}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.caches.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []interface {
		WaitForRev(context.Context, int64) error
	}{e.caches.Regions, e.caches.RegionStatus} {
		if err := c.WaitForRev(ctx, rev); err != nil {
			t.Fatal(err)
		}
	}
	e.c = New(Options{
		State: e.st, Caches: e.caches, Regions: e.regions, Heartbeats: e.beats,
		HeartbeatInterval: 2 * time.Second, SuspectAfter: 6 * time.Second, DownAfter: 10 * time.Second,
		Clock: func() time.Time { return e.now },
	})
	return e
}

func (e *monitorEnv) beat(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := e.beats.Record(context.Background(), heartbeat.Beat{ID: n, At: e.now}); err != nil {
			t.Fatal(err)
		}
	}
}

// check moves the clock on by d, the master looking at the heartbeats on
// time meanwhile (moving it without looks is the master's own blind time,
// which stall does), and runs a pass.
func (e *monitorEnv) check(t *testing.T, tr *liveness.Tracker, d time.Duration) {
	t.Helper()
	every := e.c.lookEvery()
	th := liveness.Thresholds{SuspectAfter: e.c.o.SuspectAfter, DownAfter: e.c.o.DownAfter}
	for end := e.now.Add(d); e.now.Before(end); {
		e.now = e.now.Add(min(every, end.Sub(e.now)))
		tr.Look(e.now, every, th)
	}
	e.pass(t, tr)
}

// stall moves the clock on by d without a look, and runs a pass.
func (e *monitorEnv) stall(t *testing.T, tr *liveness.Tracker, d time.Duration) {
	t.Helper()
	e.now = e.now.Add(d)
	e.pass(t, tr)
}

func (e *monitorEnv) pass(t *testing.T, tr *liveness.Tracker) {
	t.Helper()
	if err := e.c.checkRegions(context.Background(), e.g, tr); err != nil {
		t.Fatal(err)
	}
}

func (e *monitorEnv) health(t *testing.T, region string) api.Health {
	t.Helper()
	it, err := e.st.RegionStatus.Get(context.Background(), region)
	if err != nil {
		t.Fatal(err)
	}
	// The next pass decides on the cache: let it catch up.
	if err := e.caches.RegionStatus.WaitForRev(context.Background(), it.ModRevision); err != nil {
		t.Fatal(err)
	}
	return it.Value.Health
}

// TestRegionMonitorRedisFlush: the global heartbeat store loses every
// region's beat while probes fail. The regions stay Up through the grace,
// are Suspect before Down, and Down only DownAfter after the loss, not at
// once from a registration twenty minutes old; a failed probe drops the
// connection to the region.
func TestRegionMonitorRedisFlush(t *testing.T) {
	e := newMonitorEnv(t, "eu", "us")
	tr := liveness.NewTracker()
	e.beat(t, "eu", "us")
	e.check(t, tr, 0)
	for _, id := range []string{"eu", "us"} {
		if err := e.beats.Forget(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		after time.Duration
		want  api.Health
	}{
		{time.Second, api.HealthUp},     // the loss is seen: missing since now
		{5 * time.Second, api.HealthUp}, // 5 s quiet: grace
		{time.Second, api.HealthSuspect},
		{3 * time.Second, api.HealthSuspect},
		{time.Second, api.HealthDown}, // 10 s since the loss was seen
	}
	for i, s := range steps {
		e.check(t, tr, s.after)
		for _, r := range []string{"eu", "us"} {
			if got := e.health(t, r); got != s.want {
				t.Fatalf("step %d: %s is %s; want %s", i, r, got, s.want)
			}
		}
	}
	if n := e.regions.forgotten["eu"]; n != 3 {
		t.Errorf("connections to eu dropped after failed probes: got %d; want 3", n)
	}
}

// TestRegionMonitorNewMaster: a master that starts while the heartbeat
// store holds no beat judges nobody at once.
func TestRegionMonitorNewMaster(t *testing.T) {
	e := newMonitorEnv(t, "eu")
	tr := liveness.NewTracker()
	e.check(t, tr, 0)
	if got := e.health(t, "eu"); got != api.HealthUp {
		t.Fatalf("new master, no beat in the store: eu is %s; want Up", got)
	}
	e.now = e.now.Add(5 * time.Second)
	e.beat(t, "eu")
	e.check(t, tr, 0)
	if got := e.health(t, "eu"); got != api.HealthUp {
		t.Fatalf("beating again: eu is %s; want Up", got)
	}
	e.check(t, tr, 7*time.Second)
	if got := e.health(t, "eu"); got != api.HealthSuspect {
		t.Errorf("quiet 7 s since its beat, probe failing: eu is %s; want Suspect", got)
	}
}

// TestRegionMonitorOwnStall: a master whose process stalls past
// suspectAfter (its API could stamp no region's beat meanwhile) counts
// that time against no region; a region quiet while it looks on time is
// Suspect as before.
func TestRegionMonitorOwnStall(t *testing.T) {
	e := newMonitorEnv(t, "eu")
	reg := metrics.New("global")
	e.c.o.MonitorMetrics = reg.Monitor()
	tr := liveness.NewTracker()
	e.beat(t, "eu")
	e.pass(t, tr)
	e.stall(t, tr, 7*time.Second)
	if got := e.health(t, "eu"); got != api.HealthUp {
		t.Fatalf("after the master's 7 s stall: eu is %s; want Up", got)
	}
	rec := httptest.NewRecorder()
	reg.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{`strata_monitor_late_looks_total{tier="global"} 1`, `strata_monitor_blind_seconds_total{tier="global"} 6`} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("metrics lack %s (a look 6 s past due)", want)
		}
	}
	e.check(t, tr, 6*time.Second) // 13 s quiet, 5 s of it blind (the cap)
	if got := e.health(t, "eu"); got != api.HealthSuspect {
		t.Errorf("quiet 8 s while the master looked: eu is %s; want Suspect", got)
	}
}
