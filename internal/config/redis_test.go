package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRedisModes(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		yaml     string
		wantMode string
		wantOn   bool
	}{
		{"nothing is memory", "", RedisModeSingle, false},
		{"single", "redis: {addr: 10.0.0.1:6379}", RedisModeSingle, true},
		{"sentinel", "redis: {mode: sentinel, sentinel: {masterName: m, addrs: [a:26379, b:26379], password: s}}", RedisModeSentinel, true},
		{"cluster", "redis: {mode: cluster, cluster: {addrs: [a:6379]}}", RedisModeCluster, true},
		{"acl user with a password file", "redis: {addr: a:6379, username: strata, passwordFile: " + pw + "}", RedisModeSingle, true},
		{"tls with the system's roots", "redis: {addr: a:6380, tls: {enabled: true}}", RedisModeSingle, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultRegion()
			if err := Load(cfg, Source{File: writeFile(t, "name: r\napi: {token: 0123456789abcdef}\n"+c.yaml+"\n")}); err != nil {
				t.Fatalf("Load: %v", err)
			}
			if got := cfg.Redis.ModeOrDefault(); got != c.wantMode {
				t.Errorf("mode: got %q; want %q", got, c.wantMode)
			}
			if got := cfg.Redis.Configured(); got != c.wantOn {
				t.Errorf("Configured: got %v; want %v", got, c.wantOn)
			}
		})
	}
}

func TestRedisEnvironment(t *testing.T) {
	t.Setenv("STRATA_REDIS_MODE", "cluster")
	t.Setenv("STRATA_REDIS_CLUSTER_ADDRS", "a:6379,b:6379")
	t.Setenv("STRATA_REDIS_PASSWORD", "from-env")
	cfg := DefaultGlobal()
	if err := Load(cfg, Source{}); err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got := strings.Join(cfg.Redis.Cluster.Addrs, " "); got != "a:6379 b:6379" {
		t.Errorf("cluster addrs: got %q; want %q", got, "a:6379 b:6379")
	}
	if got, err := cfg.Redis.RedisPassword(); err != nil || got != "from-env" {
		t.Errorf("password: got %q, %v; want from-env", got, err)
	}
}

func TestBadRedisNamesKey(t *testing.T) {
	const secret = "hunter2-do-not-echo"
	cases := []struct {
		name    string
		yaml    string
		wantKey string
	}{
		{"unknown mode", "redis: {mode: ring, addr: a:1}", "redis.mode"},
		{"bad addr", "redis: {addr: nope}", "redis.addr"},
		{"sentinel without master name", "redis: {mode: sentinel, sentinel: {addrs: [a:26379]}}", "redis.sentinel.masterName"},
		{"sentinel without sentinels", "redis: {mode: sentinel, sentinel: {masterName: m}}", "redis.sentinel.addrs"},
		{"sentinel with addr", "redis: {mode: sentinel, addr: a:6379, sentinel: {masterName: m, addrs: [a:26379]}}", "redis.addr"},
		{"bad sentinel addr", "redis: {mode: sentinel, sentinel: {masterName: m, addrs: [a:1, x]}}", "redis.sentinel.addrs[1]"},
		{"sentinel settings in single mode", "redis: {addr: a:1, sentinel: {masterName: m}}", "redis.sentinel"},
		{"sentinel password twice", "redis: {mode: sentinel, sentinel: {masterName: m, addrs: [a:1], password: " + secret + ", passwordFile: /x}}", "redis.sentinel.password"},
		{"cluster without seeds", "redis: {mode: cluster}", "redis.cluster.addrs"},
		{"cluster with a database", "redis: {mode: cluster, db: 2, cluster: {addrs: [a:1]}}", "redis.db"},
		{"cluster seeds in single mode", "redis: {addr: a:1, cluster: {addrs: [b:1]}}", "redis.cluster.addrs"},
		{"password twice", "redis: {addr: a:1, password: " + secret + ", passwordFile: /x}", "redis.password"},
		{"username without password", "redis: {addr: a:1, username: strata}", "redis.password"},
		{"password file missing", "redis: {addr: a:1, username: strata, passwordFile: /nonexistent}", "redis.passwordFile"},
		{"credentials without a server", "redis: {password: " + secret + "}", "redis.addr"},
		{"cert without key", "redis: {addr: a:1, tls: {cert: /x}}", "redis.tls.cert"},
		{"ca missing", "redis: {addr: a:1, tls: {ca: /nonexistent}}", "redis.tls.ca"},
		{"negative db", "redis: {addr: a:1, db: -1}", "redis.db"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tiers := []struct {
				tier, head string
				cfg        Config
			}{{"global", "", DefaultGlobal()}, {"region", "name: r\napi: {token: 0123456789abcdef}\n", DefaultRegion()}}
			for _, tc := range tiers {
				tier := tc.tier
				err := Load(tc.cfg, Source{File: writeFile(t, tc.head+c.yaml+"\n")})
				if err == nil {
					t.Fatalf("%s: Load: got nil error; want one naming %q", tier, c.wantKey)
				}
				if !strings.Contains(err.Error(), c.wantKey+":") && !strings.Contains(err.Error(), c.wantKey+" ") {
					t.Errorf("%s: Load: got %q; want it to name %q", tier, err, c.wantKey)
				}
				if strings.Contains(err.Error(), secret) {
					t.Errorf("%s: Load: the error %q echoes the password", tier, err)
				}
			}
		})
	}
}
