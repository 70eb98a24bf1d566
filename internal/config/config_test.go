package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/stratahq/strata/internal/store"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "strata.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRegionPrecedence(t *testing.T) {
	file := writeFile(t, `
name: from-file
api:
  token: 0123456789abcdef
listen:
  http: 127.0.0.1:7001
nodes:
  downAfter: 20s
network:
  subnet: 10.99.0.0/16
  gateway: 10.99.0.1
`)
	t.Setenv("STRATA_LISTEN_HTTP", "127.0.0.1:7002")
	t.Setenv("STRATA_ETCD_ENDPOINTS", "http://a:2379,http://b:2379")
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.String("name", "", "")
	fs.String("listen-grpc", "", "")
	if err := fs.Parse([]string{"--name", "from-flag"}); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultRegion()
	err := Load(cfg, Source{File: file, Flags: fs, FlagKeys: map[string]string{"name": "name", "listen-grpc": "listen.grpc"}})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	checks := []struct {
		what      string
		got, want any
	}{
		{"flag beats file", cfg.Name, "from-flag"},
		{"env beats file", cfg.Listen.HTTP, "127.0.0.1:7002"},
		{"unset flag keeps default", cfg.Listen.GRPC, "127.0.0.1:9091"},
		{"file beats default", cfg.Nodes.DownAfter, 20 * time.Second},
		{"default kept", cfg.Nodes.SuspectAfter, 6 * time.Second},
		{"env list", strings.Join(cfg.Etcd.Endpoints, " "), "http://a:2379 http://b:2379"},
		{"advertise defaults to listen", cfg.Advertise.HTTP, "127.0.0.1:7002"},
		{"file network", cfg.Network.Subnet, "10.99.0.0/16"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v; want %v", c.what, c.got, c.want)
		}
	}
}

func TestBadConfigNamesKey(t *testing.T) {
	cases := []struct {
		name    string
		file    string
		wantKey string
	}{
		{"unknown key", "name: r\nlistne:\n  http: x\n", "listne"},
		{"bad duration", "name: r\nnodes:\n  downAfter: soon\n", "nodes.downAfter"},
		{"down before suspect", "name: r\nnodes:\n  downAfter: 1s\n", "nodes.downAfter"},
		{"missing name", "listen:\n  http: 127.0.0.1:1\n", "name"},
		{"bad listen", "name: r\nlisten:\n  http: nope\n", "listen.http"},
		{"bad subnet", "name: r\nnetwork:\n  subnet: 300.1.0.0/16\n", "network.subnet"},
		{"gateway outside", "name: r\nnetwork:\n  gateway: 10.1.0.1\n", "network.gateway"},
		{"bad log level", "name: r\nlog:\n  level: loud\n", "log.level"},
		{"txn limit too small", "name: r\netcd:\n  maxTxnOps: 8\n", "etcd.maxTxnOps"},
		{"tls half set", "name: r\ntls:\n  ca: /nonexistent\n", "tls."},
		{"no region token", "name: r\n", "api.token"},
		{"short region token", "name: r\napi: {token: abc}\n", "api.token"},
		{"authDisabled is gone", "name: r\napi: {token: 0123456789abcdef, authDisabled: true}\n", "authdisabled"},
		{"allowed host with a port", "name: r\napi: {token: 0123456789abcdef, allowedHosts: [\"a.example:8081\"]}\n", "api.allowedHosts[0]"},
		{"api tls half set", "name: r\napi: {token: 0123456789abcdef, tls: {cert: /nonexistent}}\n", "api.tls."},
		{"etcd cert without ca", "name: r\napi: {token: 0123456789abcdef}\netcd: {tls: {cert: /x, key: /y}}\n", "etcd.tls.ca"},
		{"etcd password without user", "name: r\napi: {token: 0123456789abcdef}\netcd: {password: p}\n", "etcd.username"},
		{"etcd password twice", "name: r\napi: {token: 0123456789abcdef}\netcd: {username: u, password: p, passwordFile: /f}\n", "etcd.password"},
		{"etcd password file missing", "name: r\napi: {token: 0123456789abcdef}\netcd: {username: u, passwordFile: /nonexistent}\n", "etcd.passwordFile"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Load(DefaultRegion(), Source{File: writeFile(t, c.file)})
			if err == nil {
				t.Fatalf("Load: got nil error; want one naming %q", c.wantKey)
			}
			if !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(c.wantKey)) {
				t.Errorf("Load: got %q; want it to name %q", err, c.wantKey)
			}
		})
	}
}

func TestAgentProviders(t *testing.T) {
	file := writeFile(t, `
node:
  name: n1
  labels: {disk: ssd}
providers:
  - name: fake
    options:
      applyLatency: 10ms
  - name: libvirt
    plugin: /usr/bin/strata-provider-libvirt
`)
	cfg := DefaultAgent()
	if err := Load(cfg, Source{File: file}); err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got := len(cfg.Providers); got != 2 {
		t.Fatalf("providers: got %d; want 2", got)
	}
	// Viper folds keys to lower case; providers decode options with
	// mapstructure, which matches field names case-insensitively.
	if got := cfg.Providers[0].Options["applylatency"]; got != "10ms" {
		t.Errorf("fake options: got %v; want 10ms", got)
	}
	if got := cfg.Node.Labels["disk"]; got != "ssd" {
		t.Errorf("labels: got %q; want ssd", got)
	}
	dup := writeFile(t, "node:\n  name: n1\nproviders:\n  - name: fake\n  - name: fake\n")
	if err := Load(DefaultAgent(), Source{File: dup}); err == nil || !strings.Contains(err.Error(), "providers[1].name") {
		t.Errorf("duplicate provider: got %v; want an error naming providers[1].name", err)
	}
}

// TestAgentDNSConfig: the name server is on by default under
// strata.internal with a 5 s TTL; a zone that is not a domain name and a
// TTL outside 1s-1h are refused, naming the key.
func TestAgentDNSConfig(t *testing.T) {
	cfg := DefaultAgent()
	if err := Load(cfg, Source{File: writeFile(t, "node: {name: n1}\nnetwork: {dns: {zone: Corp.Example, ttl: 30s}}\n")}); err != nil {
		t.Fatal(err)
	}
	if d := cfg.Network.DNS; !d.Enabled || d.Zone != "Corp.Example" || d.TTL != 30*time.Second {
		t.Errorf("dns: got %+v; want enabled, Corp.Example, 30s", d)
	}
	for _, c := range []struct{ yaml, key string }{
		{"network: {dns: {zone: \"a..b\"}}", "network.dns.zone"},
		{"network: {dns: {zone: \"-a.b\"}}", "network.dns.zone"},
		{"network: {dns: {zone: \"\"}}", "network.dns.zone"},
		{"network: {dns: {ttl: 0s}}", "network.dns.ttl"},
		{"network: {dns: {ttl: 2h}}", "network.dns.ttl"},
	} {
		err := Load(DefaultAgent(), Source{File: writeFile(t, "node: {name: n1}\n"+c.yaml+"\n")})
		if err == nil || !strings.Contains(err.Error(), c.key) {
			t.Errorf("%s: got %v; want an error naming %s", c.yaml, err, c.key)
		}
	}
}

func TestGlobalDefaultsValid(t *testing.T) {
	if err := Load(DefaultGlobal(), Source{}); err != nil {
		t.Fatalf("defaults: %v", err)
	}
}

// TestMaxTxnOpsDefault keeps the tiers' default transaction limit equal to
// the store's (stock etcd's --max-txn-ops).
// TestAlertReceiverNetworks: the global tier reads the receivers'
// allowed networks from the file and the environment, and refuses one
// that is not a CIDR, naming the key.
func TestAlertReceiverNetworks(t *testing.T) {
	g := DefaultGlobal()
	if err := Load(g, Source{File: writeFile(t, "alerts: {receiverNetworks: [10.0.7.0/24, \"fd00:7::/64\"]}\n")}); err != nil {
		t.Fatal(err)
	}
	n := g.Alerts.Networks()
	if err := n.CheckHost("10.0.7.9"); err != nil {
		t.Errorf("10.0.7.9 in an allowed network: %v", err)
	}
	if err := n.CheckHost("127.0.0.1"); err == nil {
		t.Error("127.0.0.1, not allowed: got nil; want refused")
	}
	t.Setenv("STRATA_ALERTS_RECEIVERNETWORKS", "127.0.0.0/8,::1/128")
	g = DefaultGlobal()
	if err := Load(g, Source{}); err != nil || len(g.Alerts.ReceiverNetworks) != 2 {
		t.Fatalf("from the environment: got %q, %v; want two networks", g.Alerts.ReceiverNetworks, err)
	}
	t.Setenv("STRATA_ALERTS_RECEIVERNETWORKS", "")
	err := Load(DefaultGlobal(), Source{File: writeFile(t, "alerts: {receiverNetworks: [10.0.7.0/24, 10.0.0.1]}\n")})
	if err == nil || !strings.Contains(err.Error(), "alerts.receiverNetworks[1]") {
		t.Fatalf("a bad network: got %v; want an error naming alerts.receiverNetworks[1]", err)
	}
}

func TestMaxTxnOpsDefault(t *testing.T) {
	for name, got := range map[string]int{"global": DefaultGlobal().Etcd.MaxTxnOps, "region": DefaultRegion().Etcd.MaxTxnOps} {
		if got != store.DefaultMaxTxnOps {
			t.Errorf("%s etcd.maxTxnOps default: got %d; want store.DefaultMaxTxnOps %d", name, got, store.DefaultMaxTxnOps)
		}
	}
	t.Setenv("STRATA_ETCD_MAXTXNOPS", "64")
	t.Setenv("STRATA_API_TOKEN", "0123456789abcdef")
	cfg := DefaultRegion()
	cfg.Name = "r"
	if err := Load(cfg, Source{}); err != nil || cfg.Etcd.MaxTxnOps != 64 {
		t.Errorf("etcd.maxTxnOps from the environment: got %d, %v; want 64", cfg.Etcd.MaxTxnOps, err)
	}
}

// TestEtcdJSONValues: binary values by default, JSON when etcd.jsonValues
// is set (a rolling upgrade from a release that reads only JSON).
func TestEtcdJSONValues(t *testing.T) {
	if DefaultRegion().Etcd.JSONValues || DefaultGlobal().Etcd.JSONValues {
		t.Error("etcd.jsonValues is set by default")
	}
	t.Setenv("STRATA_ETCD_JSONVALUES", "true")
	t.Setenv("STRATA_API_TOKEN", "0123456789abcdef")
	cfg := DefaultRegion()
	cfg.Name = "r"
	if err := Load(cfg, Source{}); err != nil || !cfg.Etcd.JSONValues {
		t.Errorf("etcd.jsonValues from the environment: got %v, %v; want true", cfg.Etcd.JSONValues, err)
	}
}

func TestEtcdPasswordFile(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("s3cret\nignored\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := Etcd{Username: "strata", PasswordFile: pw}
	got, err := e.EtcdPassword()
	if err != nil || got != "s3cret" {
		t.Fatalf("got %q, %v; want the file's first line", got, err)
	}
}

func TestWeaknesses(t *testing.T) {
	tests := []struct {
		name string
		mod  func(s *Server)
		want []string
	}{
		{"a plain remote etcd without a user, no audit", func(s *Server) { s.Etcd.Endpoints = []string{"http://10.0.0.5:2379"} },
			[]string{"etcd endpoint http://10.0.0.5:2379 is plaintext", "etcd: no user and no client certificate", "no audit log"}},
		{"loopback etcd with a user, audited", func(s *Server) {
			s.Etcd.Endpoints, s.Etcd.Username, s.Audit.Path = []string{"http://127.0.0.1:2379"}, "strata", "/var/log/a"
		}, nil},
		{"remote plaintext redis", func(s *Server) {
			s.Etcd.Endpoints, s.Etcd.Username, s.Audit.Path, s.Redis.Addr = []string{"https://e:2379"}, "strata", "/a", "10.0.0.9:6379"
		}, []string{"redis is plaintext to another machine"}},
		{"embedded etcd", func(s *Server) {
			s.Etcd.Embedded, s.Etcd.AllowEmbedded, s.Etcd.DataDir, s.Audit.Path = true, true, "/var/lib/strata/etcd", "/a"
		}, []string{"etcd is embedded: one member inside this process"}},
		{"redis over TLS", func(s *Server) {
			s.Etcd.Endpoints, s.Etcd.Username, s.Audit.Path, s.Redis.Addr, s.Redis.TLS.Enabled = []string{"https://e:2379"}, "strata", "/a", "10.0.0.9:6379", true
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := defaultServer("127.0.0.1:1", "127.0.0.1:2", "/p/")
			s.Etcd.Endpoints = nil
			tt.mod(&s)
			got := s.Weaknesses()
			if len(got) != len(tt.want) {
				t.Fatalf("got %q; want %d lines starting %q", got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("line %d: got %q; want it to start %q", i, got[i], w)
				}
			}
		})
	}
}

// A tier's configuration that asks for an embedded etcd is refused unless
// etcd.allowEmbedded asks for it too, with a message naming that key.
func TestEmbeddedEtcdNeedsAllowEmbedded(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, yaml string
		refused    bool
	}{
		{"embedded", "etcd:\n  embedded: true\n  dataDir: " + dir + "\n", true},
		{"embedded and allowed", "etcd:\n  embedded: true\n  allowEmbedded: true\n  dataDir: " + dir + "\n", false},
		{"an etcd cluster", "etcd:\n  endpoints: [https://10.0.0.1:2379]\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for tier, cfg := range map[string]Config{"global": DefaultGlobal(), "region": regionForTest()} {
				err := Load(cfg, Source{File: writeFile(t, tc.yaml)})
				if !tc.refused {
					if err != nil {
						t.Errorf("%s: got %v; want it accepted", tier, err)
					}
					continue
				}
				if err == nil || !strings.Contains(err.Error(), "etcd.embedded: ") || !strings.Contains(err.Error(), "etcd.allowEmbedded: true") {
					t.Errorf("%s: got %v; want an etcd.embedded error that names etcd.allowEmbedded", tier, err)
				}
			}
		})
	}
}

func regionForTest() *Region {
	r := DefaultRegion()
	r.Name, r.API.Token = "eu-west-1", "0123456789abcdef"
	return r
}
