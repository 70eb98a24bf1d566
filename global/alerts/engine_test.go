package alerts

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func nodeRule() *api.AlertRule {
	g := api.D(10 * time.Second)
	return &api.AlertRule{
		Name: "nodes", Reasons: []string{"NodeDown", "NodeSuspect", "AutoDrainStarted"}, GroupWait: &g,
		Receiver: api.AlertReceiver{Type: api.ReceiverWebhook, URL: "http://127.0.0.1:1/hook"},
	}
}

func ev(id, reason, object string, at time.Time) *Event {
	return &Event{ID: id, Reason: reason, Object: object, Region: "r1", Time: at, Message: reason + " " + object}
}

func TestApplyFiresOnceAndResolves(t *testing.T) {
	rule := nodeRule()
	s := &RuleState{Since: t0}
	now := t0
	if !s.Apply(rule, ev("1-0", "NodeDown", "node/n1", now), now) {
		t.Fatal("NodeDown did not fire")
	}
	// The same condition again, within the window or after: a repeat.
	for i, d := range []time.Duration{time.Second, time.Minute} {
		if s.Apply(rule, ev("2-0", "NodeDown", "node/n1", now.Add(d)), now.Add(d)) {
			t.Fatalf("repeat %d changed the state", i)
		}
	}
	if got := s.Ready(10*time.Second, now.Add(5*time.Second)); got != nil {
		t.Fatalf("ready before the window: got %d alerts; want none", len(got))
	}
	batch := s.Ready(10*time.Second, now.Add(10*time.Second))
	if len(batch) != 1 || batch[0].Status != StatusFiring {
		t.Fatalf("ready after the window: got %+v; want one firing alert", batch)
	}
	s.Sent(batch, now.Add(11*time.Second))
	if v := s.View(); v.Active != 1 || v.Pending != 0 || v.Sent != 1 {
		t.Fatalf("after send: got %+v; want active 1, pending 0, sent 1", v)
	}
	// NodeUp is not listed in the rule, yet resolves what NodeDown fired.
	if !s.Apply(rule, ev("3-0", "NodeUp", "node/n1", now.Add(time.Minute)), now.Add(time.Minute)) {
		t.Fatal("NodeUp did not resolve")
	}
	batch = s.Ready(10*time.Second, now.Add(2*time.Minute))
	if len(batch) != 1 || batch[0].Status != StatusResolved || !batch[0].EndsAt.Equal(now.Add(time.Minute)) {
		t.Fatalf("resolved: got %+v; want one resolved alert ending at NodeUp", batch)
	}
	if v := s.View(); v.Active != 0 {
		t.Fatalf("active after resolve: got %d; want 0", v.Active)
	}
}

func TestApplyWithdrawsAlertResolvedBeforeSent(t *testing.T) {
	rule := nodeRule()
	s := &RuleState{Since: t0}
	s.Apply(rule, ev("1-0", "NodeSuspect", "node/n1", t0), t0)
	s.Apply(rule, ev("2-0", "NodeUp", "node/n1", t0.Add(time.Second)), t0.Add(time.Second))
	if v := s.View(); v.Active != 0 || v.Pending != 0 {
		t.Fatalf("got %+v; want nothing active or pending (a blip within the window)", v)
	}
}

func TestApplySuspectThenDown(t *testing.T) {
	rule := nodeRule()
	s := &RuleState{Since: t0}
	s.Apply(rule, ev("1-0", "NodeSuspect", "node/n1", t0), t0)
	s.Sent(s.Ready(0, t0), t0)
	s.Apply(rule, ev("2-0", "NodeDown", "node/n1", t0.Add(time.Second)), t0.Add(time.Second))
	batch := s.Ready(0, t0.Add(time.Second))
	if len(batch) != 2 || batch[0].Name != "NodeSuspect" || batch[0].Status != StatusResolved || batch[1].Name != "NodeDown" || batch[1].Status != StatusFiring {
		t.Fatalf("got %+v; want NodeSuspect resolved then NodeDown firing", batch)
	}
}

func TestApplyOneOffDedupedWithinWindow(t *testing.T) {
	rule := nodeRule()
	s := &RuleState{Since: t0}
	s.Apply(rule, ev("1-0", "AutoDrainStarted", "node/n1", t0), t0)
	if s.Apply(rule, ev("2-0", "AutoDrainStarted", "node/n1", t0.Add(time.Second)), t0.Add(time.Second)) {
		t.Fatal("the same one-off event within the window was queued twice")
	}
	s.Sent(s.Ready(0, t0.Add(time.Second)), t0.Add(time.Second))
	if !s.Apply(rule, ev("3-0", "AutoDrainStarted", "node/n1", t0.Add(time.Hour)), t0.Add(time.Hour)) {
		t.Fatal("a later one-off event was not queued")
	}
	if v := s.View(); v.Active != 0 || v.Pending != 1 {
		t.Fatalf("got %+v; want 0 active (one-off events hold no condition), 1 pending", v)
	}
}

func TestApplyFilters(t *testing.T) {
	rule := nodeRule()
	rule.Region, rule.Object = "r2", "node/n1"
	s := &RuleState{Since: t0}
	for _, e := range []*Event{
		ev("1-0", "NodeDown", "node/n1", t0),                                                         // region r1
		{ID: "2-0", Reason: "NodeDown", Object: "node/n10", Region: "r2", Time: t0},                  // node/n10 is not under node/n1
		{ID: "3-0", Reason: "Scheduled", Object: "node/n1", Region: "r2", Time: t0},                  // not a listed reason
		{ID: "4-0", Reason: "NodeDown", Object: "node/n1", Region: "r2", Time: t0.Add(-time.Second)}, // before the rule
	} {
		if s.Apply(rule, e, t0) {
			t.Fatalf("event %s fired the rule", e.ID)
		}
	}
	if !s.Apply(rule, &Event{ID: "5-0", Reason: "NodeDown", Object: "node/n1", Region: "r2", Time: t0}, t0) {
		t.Fatal("the matching event did not fire")
	}
}

func TestFailedGivesUp(t *testing.T) {
	rule := nodeRule()
	s := &RuleState{Since: t0}
	s.Apply(rule, ev("1-0", "NodeDown", "node/n1", t0), t0)
	batch := s.Ready(0, t0)
	s.Failed(batch, t0, "receiver answered 500", false)
	if v := s.View(); v.Pending != 1 || v.Attempts != 1 || v.LastError == "" {
		t.Fatalf("after a failure: got %+v; want still pending, 1 attempt, an error", v)
	}
	s.Failed(batch, t0, "receiver answered 500", true)
	if v := s.View(); v.Pending != 0 || v.Dropped != 1 {
		t.Fatalf("after giving up: got %+v; want none pending, 1 dropped", v)
	}
}

func TestDedupeKeyStable(t *testing.T) {
	a := []Alert{
		{Name: "NodeDown", Object: "node/n1", Status: StatusFiring, StartsAt: t0},
		{Name: "NodeDown", Object: "node/n2", Status: StatusFiring, StartsAt: t0},
	}
	b := []Alert{a[1], a[0]}
	b[0].QueuedAt = t0.Add(time.Hour) // not part of the notice
	if DedupeKey("r", a) != DedupeKey("r", b) {
		t.Fatal("the same alerts in another order give another key")
	}
	a[0].Status = StatusResolved
	if DedupeKey("r", a) == DedupeKey("r", b) {
		t.Fatal("a resolution has the firing notification's key")
	}
}

func TestBodyFormats(t *testing.T) {
	rule := nodeRule()
	rule.Labels = map[string]string{"team": "infra"}
	batch := []Alert{
		{Name: "NodeDown", Object: "node/n1", Region: "r1", Message: "gone", Status: StatusFiring, StartsAt: t0,
			Labels: map[string]string{"node": "n1", "severity": "critical", "team": "overridden"}},
		{Name: "NodeDown", Object: "node/n2", Region: "r1", Status: StatusResolved, StartsAt: t0, EndsAt: t0.Add(time.Minute)},
	}
	t.Run("webhook", func(t *testing.T) {
		b, err := Body(rule, batch, "k")
		if err != nil {
			t.Fatal(err)
		}
		var n Notification
		if err := json.Unmarshal(b, &n); err != nil {
			t.Fatal(err)
		}
		if n.Rule != "nodes" || n.DedupeKey != "k" || n.Status != StatusFiring || len(n.Alerts) != 2 || n.Labels["team"] != "infra" {
			t.Fatalf("got %+v", n)
		}
	})
	t.Run("alertmanager", func(t *testing.T) {
		rule.Receiver.Type = api.ReceiverAlertmanager
		b, err := Body(rule, batch, "k")
		if err != nil {
			t.Fatal(err)
		}
		var m amMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if m.Version != "4" || m.Status != StatusFiring || m.GroupKey != `{}:{rule="nodes"}` || len(m.Alerts) != 2 {
			t.Fatalf("got %+v", m)
		}
		a := m.Alerts[0]
		if a.Labels["alertname"] != "NodeDown" || a.Labels["object"] != "node/n1" || a.Labels["team"] != "infra" ||
			a.Labels["node"] != "n1" || a.Labels["severity"] != "critical" || a.Annotations["message"] != "gone" {
			t.Fatalf("alert 0: got %+v", a)
		}
		if m.CommonLabels["alertname"] != "NodeDown" || m.CommonLabels["region"] != "r1" || m.CommonLabels["object"] != "" {
			t.Fatalf("common labels: got %v; want alertname and region, not object", m.CommonLabels)
		}
		if !m.Alerts[1].EndsAt.Equal(t0.Add(time.Minute)) || m.Alerts[1].Status != StatusResolved {
			t.Fatalf("alert 1: got %+v; want resolved with endsAt", m.Alerts[1])
		}
	})
}

func TestOutboxBounded(t *testing.T) {
	rule := nodeRule()
	s := &RuleState{Since: t0}
	for i := range MaxOutbox + 5 {
		s.Apply(rule, ev(fmt.Sprintf("%d-0", i+1), "NodeDown", fmt.Sprintf("node/n%d", i), t0), t0)
	}
	if v := s.View(); v.Pending != MaxOutbox || v.Dropped != 5 {
		t.Fatalf("got %+v; want %d pending, 5 dropped", v, MaxOutbox)
	}
	if s.Outbox[0].Object != "node/n5" {
		t.Fatalf("oldest kept: got %s; want node/n5 (the oldest dropped)", s.Outbox[0].Object)
	}
	batch := s.Ready(0, t0)
	if len(batch) != MaxBatch {
		t.Fatalf("batch: got %d alerts; want %d", len(batch), MaxBatch)
	}
	s.Sent(batch, t0)
	if v := s.View(); v.Pending != MaxOutbox-MaxBatch {
		t.Fatalf("after one batch: got %d pending; want %d", v.Pending, MaxOutbox-MaxBatch)
	}
}

// TestRetryCarriesTheSameAlerts: alerts queued after a failed attempt
// wait for the next notification, so the retry has the same dedupe key;
// a condition that clears after an attempt is resolved, not withdrawn
// (the receiver may have seen it).
func TestRetryCarriesTheSameAlerts(t *testing.T) {
	rule := nodeRule()
	s := &RuleState{Since: t0}
	s.Apply(rule, ev("1-0", "NodeDown", "node/n1", t0), t0)
	first := s.Ready(0, t0)
	s.Failed(first, t0, "receiver answered 500", false)
	s.Apply(rule, ev("2-0", "NodeDown", "node/n2", t0.Add(time.Second)), t0.Add(time.Second))
	retry := s.Ready(0, t0.Add(2*time.Second))
	if DedupeKey("nodes", retry) != DedupeKey("nodes", first) || len(retry) != 1 {
		t.Fatalf("retry: got %+v; want the failed batch again", retry)
	}
	s.Apply(rule, ev("3-0", "NodeUp", "node/n1", t0.Add(3*time.Second)), t0.Add(3*time.Second))
	if v := s.View(); v.Pending != 3 {
		t.Fatalf("after NodeUp: got %d pending; want 3 (n1 firing, n2 firing, n1 resolved)", v.Pending)
	}
	s.Sent(s.Ready(0, t0.Add(4*time.Second)), t0.Add(4*time.Second))
	next := s.Ready(0, t0.Add(5*time.Second))
	if len(next) != 2 || next[0].Object != "node/n2" || next[1].Status != StatusResolved {
		t.Fatalf("after the retry: got %+v; want n2 firing and n1 resolved", next)
	}
}
