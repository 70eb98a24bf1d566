package etcdserver

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"golang.org/x/crypto/bcrypt"

	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/testkit/testenv/ports"
)

const testPassword = "etcd-pa55word-never-logged"

// startSecureEtcd runs a member that requires client certificates over
// TLS and, once started, a user and password (auth enabled).
func startSecureEtcd(t *testing.T) (endpoint string, clientFiles pki.Files) {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.NewCA("etcd test CA")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ca.WriteIdentity(dir, "etcd", "etcd", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	cli, err := ca.WriteIdentity(dir, "client", "strata", nil)
	if err != nil {
		t.Fatal(err)
	}
	cu, pu := url.URL{Scheme: "https", Host: ports.Addr(t)}, url.URL{Scheme: "http", Host: ports.Addr(t)}
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = "secure", filepath.Join(dir, "data")
	cfg.TickMs, cfg.ElectionMs = 10, 100
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = "secure=" + pu.String()
	cfg.ClientTLSInfo = transport.TLSInfo{CertFile: srv.Cert, KeyFile: srv.Key, TrustedCAFile: srv.CA, ClientCertAuth: true}
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.UnsafeNoFsync = true
	// etcd hashes (UserAdd) and checks (Authenticate) every password with
	// bcrypt at cost 10 by default: tens of milliseconds of CPU each,
	// seconds on a loaded machine, which the steps' deadlines below would
	// then measure. What is tested here is TLS and auth, not the hash.
	cfg.BcryptCost = uint(bcrypt.MinCost)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		t.Fatal("etcd not ready after 30s")
	}
	// Users: root (etcd's admin) and strata, read-write on everything.
	tlsCfg, err := (transport.TLSInfo{CertFile: cli.Cert, KeyFile: cli.Key, TrustedCAFile: cli.CA}).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := clientv3.New(clientv3.Config{Endpoints: []string{cu.String()}, TLS: tlsCfg, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	steps := []func() error{
		func() error { _, err := admin.UserAdd(ctx, "root", "root-password"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := admin.UserAdd(ctx, "strata", testPassword); return err },
		func() error { _, err := admin.RoleAdd(ctx, "strata"); return err },
		func() error {
			_, err := admin.RoleGrantPermission(ctx, "strata", "\x00", "\x00", clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := admin.UserGrantRole(ctx, "strata", "strata"); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("etcd auth setup step %d: %v", i, err)
		}
	}
	return cu.String(), cli
}

// TestSecurityEtcdTLSAndAuth connects through Open to an etcd that
// requires a client certificate and a password.
func TestSecurityEtcdTLSAndAuth(t *testing.T) {
	endpoint, f := startSecureEtcd(t)
	pwFile := filepath.Join(t.TempDir(), "etcd-password")
	if err := os.WriteFile(pwFile, []byte(testPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := config.Etcd{Endpoints: []string{endpoint}, Prefix: "/strata/test/", DialTimeout: time.Second}
	tlsOK := config.TLS{CA: f.CA, Cert: f.Cert, Key: f.Key}
	other, err := pki.NewCA("another CA")
	if err != nil {
		t.Fatal(err)
	}
	otherFiles, err := other.WriteIdentity(t.TempDir(), "client", "strata", nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		tune func(*config.Etcd)
		// why is what a refusal's error must say (empty: the case goes
		// through).
		why string
	}{
		{"TLS, user and password file", func(c *config.Etcd) { c.TLS, c.Username, c.PasswordFile = tlsOK, "strata", pwFile }, ""},
		{"TLS, user and password", func(c *config.Etcd) { c.TLS, c.Username, c.Password = tlsOK, "strata", testPassword }, ""},
		{"TLS, wrong password", func(c *config.Etcd) { c.TLS, c.Username, c.Password = tlsOK, "strata", "wrong-"+testPassword }, "authentication failed"},
		// With --client-cert-auth, etcd takes the user from the client
		// certificate's common name (strata here).
		{"TLS, user from the certificate", func(c *config.Etcd) { c.TLS = tlsOK }, ""},
		{"user, no client certificate", func(c *config.Etcd) {
			c.TLS, c.Username, c.Password = config.TLS{CA: f.CA}, "strata", testPassword
		}, "certificate required"},
		{"a CA that did not sign the server's certificate", func(c *config.Etcd) { c.TLS = config.TLS{CA: otherFiles.CA, Cert: f.Cert, Key: f.Key} }, "TLS handshake with"},
		{"plaintext", func(c *config.Etcd) {
			c.Endpoints = []string{strings.Replace(endpoint, "https://", "http://", 1)}
			c.Username, c.Password = "strata", testPassword
		}, "use an https:// endpoint"},
		{"nothing listening", func(c *config.Etcd) {
			c.TLS, c.Endpoints = tlsOK, []string{"https://" + ports.Addr(t)}
		}, "cannot connect to"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base
			tt.tune(&c)
			// A refusal without a certificate or over plaintext shows as
			// the dial timing out: those cases dial for a second. A case
			// that must go through dials as the tiers do by default, and
			// its deadline only guards against a hang: how fast a TLS dial
			// and a password check are is not what is tested here.
			budget := 2 * time.Second
			if tt.why == "" {
				c.DialTimeout, budget = config.DefaultGlobal().Etcd.DialTimeout, 30*time.Second
			}
			err := putGet(t, c, budget)
			if tt.why == "" && err != nil {
				t.Fatalf("got %v; want a put and get through", err)
			}
			if tt.why != "" && (err == nil || !strings.Contains(err.Error(), tt.why)) {
				t.Fatalf("got %v; want it refused with an error that says %q", err, tt.why)
			}
			if err != nil && strings.Contains(err.Error(), testPassword) {
				t.Fatalf("the error shows the password: %v", err)
			}
		})
	}
}

// putGet opens c and puts and gets a key, all within budget.
func putGet(t *testing.T, c config.Etcd, budget time.Duration) error {
	ctx, cancel := context.WithTimeout(t.Context(), budget)
	defer cancel()
	cli, closeFn, err := Open(ctx, "test", c)
	if err != nil {
		return err
	}
	defer closeFn()
	if err := Check(ctx, cli, c); err != nil {
		return err
	}
	if _, err := cli.Put(ctx, c.Prefix+"k", "v"); err != nil {
		return fmt.Errorf("put: %w", err)
	}
	resp, err := cli.Get(ctx, c.Prefix+"k")
	if err != nil {
		return fmt.Errorf("get: %w", err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		return fmt.Errorf("got %v; want k=v", resp.Kvs)
	}
	return nil
}
