package alerts

import (
	"maps"
	"testing"

	"github.com/stratahq/strata/internal/events"
)

// TestLabels: the labels of an alert, for each kind of object, with the
// resource's labels under the built-in ones.
func TestLabels(t *testing.T) {
	tests := []struct {
		name string
		ev   Event
		want map[string]string
	}{
		{"node down", Event{Type: events.TypeWarning, Reason: "NodeDown", Object: "node/n1", Region: "eu"},
			map[string]string{"alertname": "NodeDown", "kind": "node", "node": "n1", "region": "eu", "severity": "critical"}},
		{"node suspect", Event{Type: events.TypeWarning, Reason: "NodeSuspect", Object: "node/n1", Region: "eu"},
			map[string]string{"alertname": "NodeSuspect", "kind": "node", "node": "n1", "region": "eu", "severity": "warning"}},
		{"region", Event{Type: events.TypeWarning, Reason: "RegionDown", Object: "region/eu", Region: "eu"},
			map[string]string{"alertname": "RegionDown", "kind": "region", "region": "eu", "severity": "critical"}},
		{"resource with labels", Event{
			Type: events.TypeWarning, Reason: "CrashLoop", Object: "resource/team-a/web", Region: "eu", Tenant: "team-a",
			ResourceLabels: map[string]string{"app": "web", "tier": "front", "severity": "page", "region": "mars"},
		}, map[string]string{
			"alertname": "CrashLoop", "kind": "resource", "resource": "web", "region": "eu", "tenant": "team-a",
			"severity": "warning", "app": "web", "tier": "front",
		}},
		{"replica with fields", Event{
			Reason: "Started", Object: "replica/abc", Region: "eu", Tenant: "team-a",
			Fields: map[string]string{"node": "n2", "resource": "team-a/api"}, ResourceLabels: map[string]string{"app": "api"},
		}, map[string]string{
			"alertname": "Started", "kind": "replica", "node": "n2", "resource": "api", "region": "eu", "tenant": "team-a",
			"severity": "info", "app": "api",
		}},
		{"a resource label the built-ins leave out stays out", Event{
			Reason: "X", Object: "job", ResourceLabels: map[string]string{"node": "n9"},
		}, map[string]string{"alertname": "X", "kind": "job", "severity": "info"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Labels(&tt.ev); !maps.Equal(got, tt.want) {
				t.Fatalf("Labels = %v; want %v", got, tt.want)
			}
		})
	}
}

// TestApplySelector: a rule's selector narrows what fires it, on the
// built-in labels and the resource's; the alert carries its labels.
func TestApplySelector(t *testing.T) {
	down := func(node, region string) *Event {
		return &Event{ID: "1-0", Type: events.TypeWarning, Reason: "NodeDown", Object: "node/" + node, Region: region, Time: t0}
	}
	crash := func(app string) *Event {
		return &Event{ID: "2-0", Type: events.TypeWarning, Reason: "CrashLoop", Object: "resource/team-a/web", Region: "eu",
			Tenant: "team-a", Time: t0, ResourceLabels: map[string]string{"app": app}}
	}
	tests := []struct {
		selector string
		ev       *Event
		fires    bool
	}{
		{"", down("n1", "eu"), true},
		{"severity=critical", down("n1", "eu"), true},
		{"severity=warning", down("n1", "eu"), false},
		{"region in (eu,us),node!=n2", down("n1", "eu"), true},
		{"region in (eu,us),node!=n2", down("n2", "eu"), false},
		{"region notin (eu)", down("n1", "eu"), false},
		{"!resource", down("n1", "eu"), true},
		{"app=web,tenant=team-a", crash("web"), true},
		{"app=web", crash("api"), false},
		{"resource=web,kind=resource", crash("web"), true},
		{"app", down("n1", "eu"), false},
	}
	for _, tt := range tests {
		rule := nodeRule()
		rule.Reasons = []string{"NodeDown", "CrashLoop"}
		rule.Selector = tt.selector
		s := &RuleState{Since: t0}
		if got := s.Apply(rule, tt.ev, t0); got != tt.fires {
			t.Errorf("selector %q on %s %s: fired %v; want %v", tt.selector, tt.ev.Reason, tt.ev.Object, got, tt.fires)
			continue
		}
		if tt.fires && !maps.Equal(s.Outbox[0].Labels, Labels(tt.ev)) {
			t.Errorf("selector %q: the alert carries %v; want %v", tt.selector, s.Outbox[0].Labels, Labels(tt.ev))
		}
	}
}
