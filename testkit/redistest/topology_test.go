package redistest_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stratahq/strata/testkit/redistest"
)

// A TLS server with ACL users: plaintext and unauthenticated clients are
// refused, a user can do what its rules allow and nothing else.
func TestTLSWithUsers(t *testing.T) {
	x := redistest.NewTLS(t)
	s := redistest.Start(t, redistest.WithTLS(x), redistest.WithUser("app", "app-secret", "~app:*", "+get", "+set"))
	ctx := t.Context()

	if err := s.Client(t).Set(ctx, "other", "v", 0).Err(); err != nil {
		t.Fatalf("admin over TLS: set: %v", err)
	}
	plain := redis.NewClient(&redis.Options{Addr: s.Addr(), Username: "app", Password: "app-secret", MaxRetries: -1})
	defer plain.Close()
	if err := plain.Ping(ctx).Err(); err == nil {
		t.Error("plaintext ping to a TLS-only server: got nil; want an error")
	}
	noClientCertificateIsRefused(t, s.Addr(), x.ClientConfig())
	for _, c := range []struct {
		name    string
		opts    *redis.Options
		wantErr string
	}{
		{"default user", &redis.Options{TLSConfig: x.ClientConfig()}, "NOAUTH"},
		{"wrong password", &redis.Options{Username: "app", Password: "nope", TLSConfig: x.ClientConfig()}, "WRONGPASS"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.opts.Addr, c.opts.MaxRetries = s.Addr(), -1
			cli := redis.NewClient(c.opts)
			defer cli.Close()
			err := cli.Set(ctx, "app:k", "v", 0).Err()
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("set: got %v; want an error with %q", err, c.wantErr)
			}
		})
	}
	app := redis.NewClient(&redis.Options{Addr: s.Addr(), Username: "app", Password: "app-secret", TLSConfig: x.ClientConfig(), MaxRetries: -1})
	defer app.Close()
	if err := app.Set(ctx, "app:k", "v", 0).Err(); err != nil {
		t.Fatalf("app: set app:k: %v", err)
	}
	if got, err := app.Get(ctx, "app:k").Result(); err != nil || got != "v" {
		t.Errorf("app: get app:k = %q, %v; want v", got, err)
	}
	if err := app.Get(ctx, "other").Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("app: get other: got %v; want NOPERM (key outside ~app:*)", err)
	}
	if err := app.Del(ctx, "app:k").Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("app: del: got %v; want NOPERM (command not allowed)", err)
	}
	// Restart keeps TLS and users.
	s.Restart(t)
	if err := s.Client(t).Ping(ctx).Err(); err != nil {
		t.Errorf("admin after restart: %v", err)
	}
}

// noClientCertificateIsRefused checks that a TLS client without a
// certificate is refused by the server's certificate check. TLS 1.3
// finishes the handshake on the client's side before the server checks
// the certificate, so the refusal is an alert read after it. Nothing is
// written first: a command the server never reads would make its close
// a reset, which can arrive before the alert and hide why.
func noClientCertificateIsRefused(t *testing.T, addr string, cfg *tls.Config) {
	t.Helper()
	cfg.Certificates = nil
	conn, err := tls.Dial("tcp", addr, cfg)
	if err == nil {
		defer conn.Close()
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err = conn.Read(make([]byte, 1))
	}
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("TLS without a client certificate: got %v; want the server's refusal, an error with \"certificate\"", err)
	}
}

// Killing the master promotes the replica; a Sentinel-aware client
// follows, and the data written before the failover is there.
func TestSentinelFailover(t *testing.T) {
	g := redistest.StartSentinel(t,
		redistest.WithSentinelPassword("sentinel-secret"),
		redistest.WithServerOptions(redistest.WithUser("app", "app-secret", "~*", "+@all")))
	ctx := t.Context()
	cli := g.Client(t)
	if err := cli.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("set: %v", err)
	}
	if err := cli.Wait(ctx, 1, time.Second).Err(); err != nil {
		t.Fatalf("wait for the replica: %v", err)
	}
	old, err := g.MasterAddr(ctx)
	if err != nil || old != g.Master.Addr() {
		t.Fatalf("master = %q, %v; want %s", old, err, g.Master.Addr())
	}
	g.Master.Kill()
	start := time.Now()
	promoted := g.WaitFailover(t, old, 30*time.Second)
	if promoted != g.Replica.Addr() {
		t.Fatalf("promoted %s; want the replica %s", promoted, g.Replica.Addr())
	}
	t.Logf("failover took %s", time.Since(start).Round(10*time.Millisecond))
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := cli.Get(ctx, "k").Result()
		if err == nil && got == "v" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("get after failover = %q, %v; want v", got, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A cluster serves keys of every slot, and multi-key operations within
// one hash tag.
func TestCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	ctx := t.Context()
	cli := c.Client(t)
	for i := range 100 {
		if err := cli.Set(ctx, fmt.Sprintf("k%d", i), i, 0).Err(); err != nil {
			t.Fatalf("set k%d: %v", i, err)
		}
	}
	// Keys spread over the masters: every node holds some.
	for _, n := range c.Nodes {
		if got := n.Client(t).DBSize(ctx).Val(); got == 0 {
			t.Errorf("node %s holds no key of 100; want a share", n.Addr())
		}
	}
	if _, err := cli.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "{t}:a", 1, 0)
		p.Set(ctx, "{t}:b", 2, 0)
		return nil
	}); err != nil {
		t.Errorf("MULTI over one hash tag: %v", err)
	}
	if err := cli.Do(ctx, "MSET", "a", 1, "b", 2).Err(); err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Errorf("MSET across slots: got %v; want CROSSSLOT", err)
	}
}

var _ = tls.VersionTLS13
var _ = context.Background
