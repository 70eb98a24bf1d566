package cli_test

import (
	"strings"
	"testing"
)

// TestNetworkPolicyCommands: get lists and shows network policies (the
// YAML is a manifest apply takes back), delete removes one.
func TestNetworkPolicyCommands(t *testing.T) {
	e := newEnv(t)
	e.must(policyDoc, "apply", "-f", "-")
	out := e.must("", "get", "netpol")
	for _, want := range []string{"NAME", "SELECTOR", "ENFORCED", "web-only", "app=web"} {
		if !strings.Contains(out, want) {
			t.Errorf("get netpol: no %q in\n%s", want, out)
		}
	}
	doc := e.must("", "get", "networkpolicy", "web-only", "-o", "yaml")
	if !strings.Contains(doc, "kind: NetworkPolicy") || !strings.Contains(doc, "matchLabels:") {
		t.Errorf("get -o yaml: got\n%s\nwant a NetworkPolicy manifest", doc)
	}
	if got := e.must(doc, "apply", "-f", "-"); got != "networkpolicy/web-only unchanged\n" {
		t.Errorf("apply of get's YAML: got %q; want unchanged", got)
	}
	if got := e.must("", "delete", "netpol", "web-only"); got != "networkpolicy/web-only deleted\n" {
		t.Errorf("delete: got %q", got)
	}
	if r := e.run("", "get", "netpol", "web-only"); r.code == 0 {
		t.Errorf("get after delete: exit 0; want not found")
	}
}
