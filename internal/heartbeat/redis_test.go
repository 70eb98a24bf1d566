package heartbeat_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/heartbeat"
	"github.com/stratahq/strata/internal/redisclient"
	"github.com/stratahq/strata/testkit/heartbeattest"
	"github.com/stratahq/strata/testkit/redistest"
)

var _ heartbeat.Store = (*heartbeat.Redis)(nil)

func TestRedisConformance(t *testing.T) {
	srv := redistest.Start(t)
	cli := srv.Client(t)
	var n atomic.Int64
	heartbeattest.Run(t, func(t *testing.T) heartbeat.Store {
		// One server for the whole suite; a namespace per store keeps the
		// subtests apart.
		ns := fmt.Sprintf("t%d-%s", n.Add(1), strings.ReplaceAll(t.Name(), "/", "."))
		return heartbeat.NewRedis(cli, ns)
	})
}

// TestRedisKeyLayout pins the layout: a hash tag so one namespace lives in
// one cluster slot, and a TTL on the per-ID hash only.
func TestRedisKeyLayout(t *testing.T) {
	srv := redistest.Start(t)
	cli := srv.Client(t)
	ctx := t.Context()
	s := heartbeat.NewRedis(cli, "dev-1", heartbeat.WithTTL(time.Minute))
	at := time.UnixMicro(1_700_000_000_123_456)
	if err := s.Record(ctx, heartbeat.Beat{ID: "n1", At: at, Seq: 7, Metrics: map[string]float64{"cpu_used": 2}}); err != nil {
		t.Fatalf("Record: %v", err)
	}
	score, err := cli.ZScore(ctx, "{dev-1}:hb", "n1").Result()
	if err != nil || score != 1_700_000_000_123_456 {
		t.Errorf("ZSCORE {dev-1}:hb n1 = %v, %v; want 1700000000123456", score, err)
	}
	h, err := cli.HGetAll(ctx, "{dev-1}:hb:n1").Result()
	if err != nil {
		t.Fatalf("HGETALL: %v", err)
	}
	want := map[string]string{"at": "1700000000123456", "seq": "7", "m:cpu_used": "2"}
	if fmt.Sprint(h) != fmt.Sprint(want) {
		t.Errorf("HGETALL {dev-1}:hb:n1 = %v; want %v", h, want)
	}
	if ttl := cli.PTTL(ctx, "{dev-1}:hb:n1").Val(); ttl <= 0 || ttl > time.Minute {
		t.Errorf("PTTL hash = %v; want in (0, 1m]", ttl)
	}
	if ttl := cli.PTTL(ctx, "{dev-1}:hb").Val(); ttl != -1 {
		t.Errorf("PTTL zset = %v; want -1 (no expiry)", ttl)
	}
}

// TestRedisExpiredMetricsStillStale: when a node stops beating, its metrics
// hash expires but the node must still be reported by Stale (and Get, List)
// until Forget.
func TestRedisExpiredMetricsStillStale(t *testing.T) {
	srv := redistest.Start(t)
	cli := srv.Client(t)
	ctx := t.Context()
	s := heartbeat.NewRedis(cli, "exp", heartbeat.WithTTL(100*time.Millisecond))
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := s.Record(ctx, heartbeat.Beat{ID: "n1", At: at, Seq: 3, Metrics: map[string]float64{"x": 1}}); err != nil {
		t.Fatalf("Record: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for cli.Exists(ctx, "{exp}:hb:n1").Val() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("hash did not expire within 5s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	got, err := s.Get(ctx, "n1")
	if err != nil {
		t.Fatalf("Get after expiry: %v", err)
	}
	if got.ID != "n1" || !got.At.Equal(at) || got.Seq != 0 || got.Metrics != nil {
		t.Errorf("Get after expiry = %+v; want ID n1, At %v, no Seq or Metrics", got, at)
	}
	stale, err := s.Stale(ctx, at.Add(time.Minute))
	if err != nil || len(stale) != 1 || stale[0].ID != "n1" {
		t.Errorf("Stale after expiry = %+v, %v; want [n1]", stale, err)
	}
	// An older, late beat still loses against the score that outlived the hash.
	if err := s.Record(ctx, heartbeat.Beat{ID: "n1", At: at.Add(-time.Second), Seq: 2}); err != nil {
		t.Fatalf("Record(older): %v", err)
	}
	if got, _ := s.Get(ctx, "n1"); !got.At.Equal(at) {
		t.Errorf("At after older beat = %v; want %v", got.At, at)
	}
	if err := s.Forget(ctx, "n1"); err != nil {
		t.Fatalf("Forget: %v", err)
	}
	if stale, _ := s.Stale(ctx, at.Add(time.Minute)); len(stale) != 0 {
		t.Errorf("Stale after Forget = %+v; want none", stale)
	}
}

// TestRedisRestart: a Redis restart loses every beat. The store must then
// report an empty store (not an error forever), and recording must work
// again, which needs the record script to be reloaded.
func TestRedisRestart(t *testing.T) {
	srv := redistest.Start(t)
	cli := srv.Client(t)
	ctx := t.Context()
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	s := heartbeat.NewRedis(cli, "dev-1", heartbeat.WithLogger(logger))
	if err := s.Record(ctx, heartbeat.Beat{ID: "n1", Seq: 1}); err != nil {
		t.Fatalf("Record: %v", err)
	}
	srv.Restart(t)

	eventually(t, "Get reports ErrNotFound", func() error {
		_, err := s.Get(ctx, "n1")
		if errors.Is(err, heartbeat.ErrNotFound) {
			return nil
		}
		return fmt.Errorf("err = %v", err)
	})
	list, err := s.List(ctx)
	if err != nil || len(list) != 0 {
		t.Fatalf("List after restart = %+v, %v; want [], nil", list, err)
	}
	if err := s.Record(ctx, heartbeat.Beat{ID: "n1", Seq: 2}); err != nil {
		t.Fatalf("Record after restart: %v", err)
	}
	got, err := s.Get(ctx, "n1")
	if err != nil || got.Seq != 2 {
		t.Fatalf("Get after restart = %+v, %v; want Seq 2", got, err)
	}
	if err := s.RecordBatch(ctx, []heartbeat.Beat{{ID: "n2"}, {ID: "n3"}}); err != nil {
		t.Fatalf("RecordBatch after restart: %v", err)
	}
	// The restart emptied the script cache: the reload path must have run.
	if got := strings.Count(logs.String(), "loading record script"); got < 2 {
		t.Errorf("script loads logged = %d; want >= 2 (first use, after restart)\n%s", got, logs.String())
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// eventually polls fn until it returns nil or 10 s pass.
func eventually(t *testing.T, what string, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after 10s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRedisCanceledDuringBlockedServer(t *testing.T) {
	// A deadline must bound calls even when the server stops answering.
	srv := redistest.Start(t)
	cli := srv.Client(t)
	s := heartbeat.NewRedis(cli, "dead")
	srv.Kill()
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := s.List(ctx)
	if err == nil {
		t.Fatalf("List against a dead server: err = nil; want an error")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("List against a dead server took %v; want it bounded", d)
	}
}

// TestRedisModesConformance runs the suite against every deployment a tier
// can be configured for (single over TLS, Sentinel, Cluster), through the
// client the tiers build from their configuration, as an ACL user with
// exactly the rules docs/operations.md gives.
func TestRedisModesConformance(t *testing.T) {
	for _, m := range redistest.Modes() {
		t.Run(m.Name, func(t *testing.T) {
			cfg := m.Start(t, "strata", "strata-secret", redisclient.ACLRules...)
			cli, err := redisclient.New(cfg)
			if err != nil {
				t.Fatalf("redisclient.New: %v", err)
			}
			t.Cleanup(func() { _ = cli.Close() })
			var n atomic.Int64
			heartbeattest.Run(t, func(t *testing.T) heartbeat.Store {
				return heartbeat.NewRedis(cli, fmt.Sprintf("strata:t%d", n.Add(1)))
			})
		})
	}
}
