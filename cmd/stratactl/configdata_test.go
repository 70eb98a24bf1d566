package main

import (
	"context"
	"io"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratahq/strata/cli"
	globalapi "github.com/stratahq/strata/global/api"
	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/rest"
	"github.com/stratahq/strata/internal/secretbox"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/testkit/etcdtest"
)

// TestConfigsAndSecretsCLI drives stratactl in process against the real
// global API on an embedded etcd: apply of a Config and a Secret
// manifest (and again, unchanged), get as a table and as YAML (values of
// a secret only with --reveal, never in the table), and delete -f.
func TestConfigsAndSecretsCLI(t *testing.T) {
	eps := etcdtest.Embedded(t)
	st := state.New(store.New(etcdtest.Client(t, eps), "/strata/global/"))
	key, err := secretbox.GenerateKey(filepath.Join(t.TempDir(), "k"))
	if err != nil {
		t.Fatal(err)
	}
	ring, _ := secretbox.NewKeyring(key)
	svc, err := globalapi.New(globalapi.Options{State: st, ID: "g", Version: "test", Secrets: ring})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = svc.Run(ctx) })
	srv := httptest.NewServer(rest.Guard(svc.Handler(), rest.GuardOptions{}))
	t.Cleanup(func() { srv.Close(); cancel(); wg.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for svc.Ready(ctx) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the API is not ready after 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	member, _, err := svc.Tokens().New(ctx, "team-a", api.RoleMember, "cli")
	if err != nil {
		t.Fatal(err)
	}
	viewer, _, err := svc.Tokens().New(ctx, "team-a", api.RoleViewer, "cli")
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	ctl := func(token, stdin string, args ...string) (int, string, string) {
		var out, errb strings.Builder
		env := map[string]string{"HOME": home, "XDG_CONFIG_HOME": filepath.Join(home, "xdg"), "STRATA_URL": srv.URL, "STRATA_TOKEN": token}
		code := cli.Main(ctx, args, cli.IO{In: strings.NewReader(stdin), Out: &out, Err: &errb},
			cli.WithEnv(func(k string) string { return env[k] }),
			cli.WithTerminal(func(io.Writer) bool { return false }))
		return code, out.String(), errb.String()
	}
	must := func(token, stdin string, args ...string) string {
		t.Helper()
		code, out, errs := ctl(token, stdin, args...)
		if code != 0 {
			t.Fatalf("stratactl %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
		}
		return out
	}
	const value = "cli-Canary-5150"
	manifests := `kind: Config
name: web-conf
labels: {app: web}
data:
  app.conf: |
    listen 8080
---
kind: Secret
name: db
data:
  password: ` + value + `
`
	if out := must(member, manifests, "apply", "-f", "-"); !strings.Contains(out, "config/web-conf created") || !strings.Contains(out, "secret/db created") {
		t.Fatalf("apply: %s", out)
	}
	if out := must(member, manifests, "apply", "-f", "-"); !strings.Contains(out, "config/web-conf unchanged") || !strings.Contains(out, "secret/db unchanged") {
		t.Fatalf("apply again: %s", out)
	}
	if out := must(member, "", "get", "configs", "-l", "app=web"); !strings.Contains(out, "web-conf") || !strings.Contains(out, "1 (app.conf)") {
		t.Fatalf("get configs: %s", out)
	}
	if out := must(member, "", "get", "config", "web-conf", "-o", "yaml"); !strings.Contains(out, "kind: Config") || !strings.Contains(out, "listen 8080") {
		t.Fatalf("get config -o yaml: %s", out)
	}
	for _, args := range [][]string{{"get", "secrets"}, {"get", "secrets", "-o", "yaml"}, {"get", "secret", "db", "--reveal", "-o", "wide"}} {
		if out := must(member, "", args...); strings.Contains(out, value) || !strings.Contains(out, "password") {
			t.Fatalf("stratactl %s: %s; want the key, not the value", strings.Join(args, " "), out)
		}
	}
	if out := must(member, "", "get", "secret", "db", "--reveal", "-o", "yaml"); !strings.Contains(out, value) || !strings.Contains(out, "kind: Secret") {
		t.Fatalf("get secret --reveal -o yaml: %s", out)
	}
	if code, out, errs := ctl(viewer, "", "get", "secret", "db", "--reveal", "-o", "json"); code == 0 || strings.Contains(out+errs, value) || !strings.Contains(errs, "may not") {
		t.Fatalf("a viewer's --reveal: exit %d %s%s; want refused", code, out, errs)
	}
	if code, _, errs := ctl(member, "", "get", "configs", "--reveal"); code == 0 || !strings.Contains(errs, "--reveal applies to secrets") {
		t.Fatalf("get configs --reveal: exit %d %s; want a usage error", code, errs)
	}
	if out := must(member, manifests, "delete", "-f", "-"); !strings.Contains(out, "config/web-conf deleted") || !strings.Contains(out, "secret/db deleted") {
		t.Fatalf("delete -f: %s", out)
	}
	if code, out, errs := ctl(member, "", "get", "secrets"); code != 0 || !strings.Contains(out+errs, "no secrets found") {
		t.Fatalf("get secrets after delete: exit %d %q %q", code, out, errs)
	}
}
