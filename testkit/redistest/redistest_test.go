package redistest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stratahq/strata/testkit/redistest"
)

func TestStartSetGet(t *testing.T) {
	s := redistest.Start(t)
	cli := s.Client(t)
	ctx := context.Background()
	if err := cli.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("set: %v", err)
	}
	got, err := cli.Get(ctx, "k").Result()
	if err != nil || got != "v" {
		t.Fatalf("get = %q, %v; want %q, nil", got, err, "v")
	}
	// No persistence: a restart must not bring keys back.
	cfg, err := cli.ConfigGet(ctx, "save").Result()
	if err != nil {
		t.Fatalf("config get save: %v", err)
	}
	if cfg["save"] != "" {
		t.Fatalf("save = %q; want empty", cfg["save"])
	}
}

func TestRestartLosesDataAndClientReconnects(t *testing.T) {
	s := redistest.Start(t)
	cli := s.Client(t)
	ctx := context.Background()
	if err := cli.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("set: %v", err)
	}
	addr := s.Addr()
	s.Restart(t)
	if s.Addr() != addr {
		t.Fatalf("addr after restart = %s; want %s", s.Addr(), addr)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := cli.Get(ctx, "k").Result()
		if errors.Is(err, redis.Nil) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("get after restart: err = %v; want redis.Nil", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestKillStopsServer(t *testing.T) {
	s := redistest.Start(t)
	cli := s.Client(t)
	s.Kill()
	s.Kill() // idempotent
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := cli.Ping(ctx).Err(); err == nil {
		t.Fatalf("ping after kill: err = nil; want an error")
	}
}
