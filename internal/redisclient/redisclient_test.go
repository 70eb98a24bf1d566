package redisclient

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/testkit/redistest"
	"github.com/stratahq/strata/testkit/testenv"
	"github.com/stratahq/strata/testkit/testenv/ports"
)

func TestOptionsPerMode(t *testing.T) {
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("from-file\nignored\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		cfg  config.Redis
		want redis.UniversalOptions
	}{
		{"single", config.Redis{Addr: "a:1", Username: "u", Password: "p", DB: 3},
			redis.UniversalOptions{Addrs: []string{"a:1"}, Username: "u", Password: "p", DB: 3}},
		{"password file", config.Redis{Addr: "a:1", Username: "u", PasswordFile: pwFile},
			redis.UniversalOptions{Addrs: []string{"a:1"}, Username: "u", Password: "from-file"}},
		{"sentinel", config.Redis{Mode: "sentinel", Username: "u", Password: "p",
			Sentinel: config.RedisSentinel{MasterName: "m", Addrs: []string{"s1:1", "s2:1"}, Username: "su", Password: "sp"}},
			redis.UniversalOptions{Addrs: []string{"s1:1", "s2:1"}, MasterName: "m", Username: "u", Password: "p", SentinelUsername: "su", SentinelPassword: "sp"}},
		{"cluster of one seed", config.Redis{Mode: "cluster", Cluster: config.RedisCluster{Addrs: []string{"c:1"}}},
			redis.UniversalOptions{Addrs: []string{"c:1"}, IsClusterMode: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := options(c.cfg)
			if err != nil {
				t.Fatal(err)
			}
			w := c.want
			if strings.Join(got.Addrs, ",") != strings.Join(w.Addrs, ",") || got.MasterName != w.MasterName ||
				got.Username != w.Username || got.Password != w.Password || got.DB != w.DB ||
				got.SentinelUsername != w.SentinelUsername || got.SentinelPassword != w.SentinelPassword ||
				got.IsClusterMode != w.IsClusterMode {
				t.Errorf("got addrs=%v master=%q user=%q pw=%q db=%d suser=%q spw=%q cluster=%v; want addrs=%v master=%q user=%q pw=%q db=%d suser=%q spw=%q cluster=%v",
					got.Addrs, got.MasterName, got.Username, got.Password, got.DB, got.SentinelUsername, got.SentinelPassword, got.IsClusterMode,
					w.Addrs, w.MasterName, w.Username, w.Password, w.DB, w.SentinelUsername, w.SentinelPassword, w.IsClusterMode)
			}
			if !got.DisableIdentity || got.MaintNotificationsConfig == nil {
				t.Errorf("identity/maintnotifications left on: the ACL user would need CLIENT SETINFO and CLIENT MAINT_NOTIFICATIONS")
			}
		})
	}
}

func TestNewRejects(t *testing.T) {
	cases := []struct {
		name    string
		cfg     config.Redis
		wantKey string
	}{
		{"nothing configured", config.Redis{}, "redis.addr"},
		{"unreadable password file", config.Redis{Addr: "a:1", Username: "u", PasswordFile: "/nonexistent/pw"}, "redis.passwordFile"},
		{"unreadable sentinel password file", config.Redis{Mode: "sentinel", Sentinel: config.RedisSentinel{MasterName: "m", Addrs: []string{"s:1"}, PasswordFile: "/nonexistent/pw"}}, "redis.sentinel.passwordFile"},
		{"CA that is no certificate", config.Redis{Addr: "a:1", TLS: config.RedisTLS{CA: writeTemp(t, "not a pem")}}, "redis.tls.ca"},
		{"key pair that is none", config.Redis{Addr: "a:1", TLS: config.RedisTLS{Cert: writeTemp(t, "x"), Key: writeTemp(t, "y")}}, "redis.tls.cert"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cli, err := New(c.cfg)
			if err == nil {
				cli.Close()
				t.Fatalf("New: got a client; want an error naming %s", c.wantKey)
			}
			if !strings.Contains(err.Error(), c.wantKey) {
				t.Errorf("New: got %q; want it to name %s", err, c.wantKey)
			}
		})
	}
}

func writeTemp(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A wrong password, and the client's log lines, never show the password.
func TestPasswordNeverEchoed(t *testing.T) {
	const secret = "s3cret-never-shown"
	s := redistest.Start(t, redistest.WithUser("strata", "right-password", ACLRules...))
	logs := captureRedisLog(t)
	cli, err := New(config.Redis{Addr: s.Addr(), Username: "strata", Password: secret})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	err = cli.Ping(t.Context()).Err()
	if err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Fatalf("ping with a wrong password: got %v; want WRONGPASS", err)
	}
	if strings.Contains(err.Error(), secret) {
		t.Errorf("error %q shows the password", err)
	}
	if strings.Contains(logs.String(), secret) {
		t.Errorf("log shows the password:\n%s", logs)
	}
}

// go-redis's own lines (here: dials failing while Redis is down) arrive
// as JSON records of the process's logger, not as plain text.
func TestSetLoggerStructures(t *testing.T) {
	logs := captureRedisLog(t)
	addr := ports.Addr(t) // reserved, nothing listens
	cli, err := New(config.Redis{Addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := cli.Ping(ctx).Err(); err == nil {
		t.Fatal("ping with no server: got nil; want an error")
	}
	var found bool
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		if rec["component"] == "redis" && rec["level"] == "WARN" && strings.Contains(rec["msg"].(string), "failed to dial") {
			found = true
		}
	}
	if !found {
		t.Errorf("no WARN record with component=redis about the failed dial in:\n%s", logs)
	}
}

func TestDocsGiveTheACL(t *testing.T) {
	root := testenv.RepoRoot()
	b, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	if want := ACLSetUser("strata"); !strings.Contains(string(b), want) {
		t.Errorf("docs/operations.md does not give the ACL the conformance suites run with:\n%s", want)
	}
}

// captureRedisLog points go-redis's process-wide logger at a buffer for
// the test, and back at a discarding logger after it.
func captureRedisLog(t *testing.T) *syncBuffer {
	t.Helper()
	buf := &syncBuffer{}
	SetLogger(slog.New(slog.NewJSONHandler(buf, nil)))
	t.Cleanup(func() { SetLogger(slog.New(slog.DiscardHandler)) })
	return buf
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
