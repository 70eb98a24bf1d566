package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// TestAlerts: create takes the secret from a file (never argv) and the
// listing shows each rule's delivery state, never the secret.
func TestAlerts(t *testing.T) {
	e := newEnv(t)
	secretFile := filepath.Join(t.TempDir(), "hook.secret")
	const secret = "0123456789abcdef-secret"
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := e.run("", "alerts", "create", "nodes", "--reason", "NodeDown", "--reason", "RegionDown",
		"--url", "https://hooks.example.com/strata", "--secret-file", secretFile, "--group-wait", "30s", "--label", "severity=page",
		"--selector", "severity=critical,region in (eu,us)")
	if r.code != 0 {
		t.Fatalf("create: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	e.srv.Mu.Lock()
	got, stored := e.srv.AlertRules["nodes"], e.srv.AlertSecrets["nodes"]
	rule := got
	rule.Status = &api.AlertDelivery{Active: 1, Pending: 2, Sent: 7, LastSuccess: clock().Add(-time.Minute), LastError: "receiver answered 500 Internal Server Error"}
	e.srv.AlertRules["nodes"] = rule
	e.srv.Mu.Unlock()
	if stored != secret || got.GroupWaitOr() != 30*time.Second || got.Labels["severity"] != "page" || len(got.Reasons) != 2 ||
		got.Selector != "severity=critical,region in (eu,us)" {
		t.Fatalf("created %+v with secret %q; want the flags and the file's secret", got, stored)
	}
	for _, args := range [][]string{{"alerts"}, {"alerts", "-o", "wide"}, {"alerts", "get", "nodes", "-o", "json"}} {
		r := e.run("", args...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d: %s", args, r.code, r.stderr)
		}
		if strings.Contains(r.stdout, secret) {
			t.Fatalf("%v shows the secret", args)
		}
		for _, w := range []string{"nodes", "NodeDown"} {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("%v: got\n%s\nwant %q", args, r.stdout, w)
			}
		}
	}
	if out := e.run("", "alerts").stdout; !strings.Contains(out, "PENDING") || !strings.Contains(out, "60s ago") || !strings.Contains(out, "receiver answered 500") {
		t.Errorf("alerts: got\n%s\nwant the delivery state", out)
	}
	if r := e.run("", "alerts", "create", "bad", "--reason", "NodeDown", "--url", "ftp://x"); r.code == 0 || !strings.Contains(r.stderr, "receiver.url") {
		t.Errorf("bad url: got exit %d, %s; want it refused naming receiver.url", r.code, r.stderr)
	}
	if r := e.run("", "alerts", "delete", "nodes"); r.code != 0 {
		t.Fatalf("delete: exit %d: %s", r.code, r.stderr)
	}
	if r := e.run("", "alerts"); !strings.Contains(r.stderr, "no alert rules") {
		t.Errorf("after delete: got %q %q; want no alert rules", r.stdout, r.stderr)
	}
}
