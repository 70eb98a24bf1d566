package events_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/events"
	"github.com/stratahq/strata/internal/redisclient"
	"github.com/stratahq/strata/testkit/eventstest"
	"github.com/stratahq/strata/testkit/redistest"
)

func TestRedisConformance(t *testing.T) {
	srv := redistest.Start(t)
	cli := srv.Client(t)
	var n atomic.Int64
	eventstest.Run(t, func(t *testing.T, capacity int) events.Store {
		// One server for the suite; a stream per store keeps subtests apart.
		stream := fmt.Sprintf("events:t%d:%s", n.Add(1), strings.ReplaceAll(t.Name(), "/", "."))
		return events.NewRedis(cli, stream, int64(capacity))
	})
}

// TestRedisEntryLayout pins what an event looks like in the stream, for
// operators reading it with redis-cli and for the XADD cap.
func TestRedisEntryLayout(t *testing.T) {
	srv := redistest.Start(t)
	cli := srv.Client(t)
	ctx := t.Context()
	s := events.NewRedis(cli, "strata:events:dev-1", 0)
	ids, err := s.Append(ctx, events.Event{
		Reason: "NodeDown", Object: "node/n1", Region: "dev-1", Type: events.TypeWarning,
		Message: "no heartbeat for 30s", Fields: map[string]string{"last_seq": "41"},
	})
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	msgs, err := cli.XRange(ctx, "strata:events:dev-1", "-", "+").Result()
	if err != nil || len(msgs) != 1 {
		t.Fatalf("XRANGE = %v, %v; want one entry", msgs, err)
	}
	if msgs[0].ID != ids[0] {
		t.Errorf("entry id = %s; want %s", msgs[0].ID, ids[0])
	}
	v := msgs[0].Values
	for k, want := range map[string]string{
		"type": "Warning", "reason": "NodeDown", "object": "node/n1", "region": "dev-1",
		"msg": "no heartbeat for 30s", "f:last_seq": "41",
	} {
		if v[k] != want {
			t.Errorf("field %s = %v; want %q", k, v[k], want)
		}
	}
	if _, ok := v["time"]; !ok {
		t.Errorf("entry has no time field: %v", v)
	}
}

// TestRedisTailServerGone: when Redis dies under a blocked Tail, Tail
// returns an error (not ctx's) in bounded time, so the caller can resume
// from its last ID instead of hanging.
func TestRedisTailServerGone(t *testing.T) {
	srv := redistest.Start(t)
	cli := srv.Client(t)
	s := events.NewRedis(cli, "gone", 0)
	done := make(chan error, 1)
	go func() { done <- s.Tail(t.Context(), events.TailNew, func([]events.Event) error { return nil }) }()
	time.Sleep(100 * time.Millisecond) // let it block in XREAD
	srv.Kill()
	select {
	case err := <-done:
		if err == nil || errors.Is(err, context.Canceled) {
			t.Fatalf("Tail after server death = %v; want a store error", err)
		}
		t.Logf("Tail returned: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("Tail still blocked 20s after the server died")
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
			eventstest.Run(t, func(t *testing.T, capacity int) events.Store {
				return events.NewRedis(cli, fmt.Sprintf("strata:t%d:events", n.Add(1)), int64(capacity))
			})
		})
	}
}

// TestEmitterCountsWhatAStalledRedisCostsIt: while Redis holds every
// write (CLIENT PAUSE WRITE, as a Redis stuck on a slow disk or failing
// over does), the emitter neither blocks its callers nor loses an event
// silently: a resource's replica events are counted into a summary, and
// the node events beyond its buffer are dropped and counted, each in one
// place: what is in the stream afterwards plus what was counted dropped
// is what was emitted.
func TestEmitterCountsWhatAStalledRedisCostsIt(t *testing.T) {
	srv := redistest.Start(t)
	cli := srv.Client(t)
	ctx := t.Context()
	s := events.NewRedis(cli, "strata:events:stalled", 0)
	var logs lockedBuffer
	e := events.NewEmitter(s, "dev-1", slog.New(slog.NewTextHandler(&logs, nil)),
		events.WithBuffer(100), events.WithBatchSize(10), events.WithFlushInterval(time.Millisecond))
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { e.Run(runCtx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	const pause = 2 * time.Second // under the emitter's flush timeout
	if err := cli.Do(ctx, "CLIENT", "PAUSE", pause.Milliseconds(), "WRITE").Err(); err != nil {
		t.Fatalf("CLIENT PAUSE: %v", err)
	}
	const n = 1000
	start := time.Now()
	for i := range n {
		e.Emit(events.Event{Reason: "NodeUp", Object: fmt.Sprintf("node/n%04d", i)})
		e.Emit(events.Event{Reason: "Scheduled", Object: fmt.Sprintf("replica/web-%04d", i), Tenant: "t1",
			Fields: map[string]string{"resource": "t1/web"}})
	}
	if d := time.Since(start); d > pause/2 {
		t.Errorf("%d Emits took %v while Redis was paused; want them not to wait for it", 2*n, d)
	}

	var nodes, replicas int
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := s.Range(ctx, events.Query{})
		if err != nil {
			t.Fatalf("Range: %v", err)
		}
		nodes, replicas = 0, 0
		for _, g := range got {
			switch g.Reason {
			case "NodeUp":
				nodes++
			case "Scheduled":
				c := 1
				if v, ok := g.Fields["count"]; ok {
					c, _ = strconv.Atoi(v)
				}
				replicas += c
			}
		}
		dropped := e.DroppedBy()
		if uint64(nodes)+dropped[events.DropBufferFull] == n && replicas == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the pause: %d node events in the stream, %v dropped; %d replica events in it; want %d of each accounted for",
				nodes, dropped, replicas, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	dropped := e.DroppedBy()
	// At most a buffer waits and a buffer is in flight.
	if dropped[events.DropBufferFull] < n-200 || dropped[events.DropAppendFailed] != 0 || dropped[events.DropInvalid] != 0 {
		t.Errorf("dropped %v; want %d or more for a full buffer, none else", dropped, n-200)
	}
	if w := strings.Count(logs.String(), "events: dropping events"); w != 1 {
		t.Errorf("%d drop warnings; want 1 (at most one per interval)\n%s", w, logs.String())
	}
	if !strings.Contains(logs.String(), "buffer_full=") {
		t.Errorf("the warning does not say why events were dropped:\n%s", logs.String())
	}
}
