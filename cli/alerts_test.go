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

const alertRuleDoc = `kind: AlertRule
name: critical
reasons: [NodeDown, RegionDown]
selector: "severity=critical,region in (eu,us)"
groupWait: 30s
labels: {team: infra}
receiver: {type: alertmanager, url: "https://am.example.com/api/v2/alerts"}
`

// TestApplyAlertRule: apply -f creates an alert rule, finds it unchanged
// the second time, updates it when the file changes (keeping the
// receiver's secret), writes a secret the manifest carries on every
// apply, and delete -f removes it.
func TestApplyAlertRule(t *testing.T) {
	e := newEnv(t)
	if got := e.must(alertRuleDoc, "apply", "-f", "-"); got != "alertrule/critical created\n" {
		t.Fatalf("first apply: got %q", got)
	}
	e.srv.Mu.Lock()
	got := e.srv.AlertRules["critical"]
	e.srv.Mu.Unlock()
	if got.Selector != "severity=critical,region in (eu,us)" || got.GroupWaitOr() != 30*time.Second || got.Labels["team"] != "infra" ||
		got.Receiver.Type != api.ReceiverAlertmanager {
		t.Fatalf("created %+v; want the manifest's fields", got)
	}
	if got := e.must(alertRuleDoc, "apply", "-f", "-"); got != "alertrule/critical unchanged\n" {
		t.Fatalf("second apply: got %q; want unchanged", got)
	}
	changed := strings.Replace(alertRuleDoc, "region in (eu,us)", "region=eu", 1)
	if got := e.must(changed, "apply", "-f", "-"); got != "alertrule/critical configured\n" {
		t.Fatalf("changed apply: got %q; want configured", got)
	}
	withSecret := strings.Replace(changed, `url: "https://am.example.com/api/v2/alerts"}`, `url: "https://am.example.com/api/v2/alerts", secret: "a-long-enough-secret-0123"}`, 1)
	for range 2 {
		if got := e.must(withSecret, "apply", "-f", "-"); got != "alertrule/critical configured\n" {
			t.Fatalf("apply with a secret: got %q; want configured (a secret cannot be compared)", got)
		}
	}
	e.srv.Mu.Lock()
	got, secret := e.srv.AlertRules["critical"], e.srv.AlertSecrets["critical"]
	e.srv.Mu.Unlock()
	if got.Selector != "severity=critical,region=eu" || secret != "a-long-enough-secret-0123" || !got.Receiver.HasSecret {
		t.Fatalf("after the updates: %+v, secret %q", got, secret)
	}
	if r := e.run(strings.Replace(alertRuleDoc, "severity=critical", "severity=", 1)+"bogus: 1\n", "apply", "-f", "-"); r.code == 0 || !strings.Contains(r.stderr, "bogus") {
		t.Errorf("a bad manifest: exit %d, %s; want it refused naming the field", r.code, r.stderr)
	}
	if got := e.must(alertRuleDoc, "delete", "-f", "-"); got != "alertrule/critical deleted\n" {
		t.Fatalf("delete -f: got %q", got)
	}
}
