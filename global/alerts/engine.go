// Package alerts sends the events and conditions AlertRules match to
// webhook receivers. It runs on the global master only, under its leader
// context: it reads every region's event stream (and the regions' own
// health) from a cursor kept in etcd, turns what a rule matches into
// alerts (firing, then resolved when the condition clears), groups them
// for the rule's window and delivers them with bounded, backed-off
// retries. Every state change is written to etcd fenced by the master's
// leadership, before the notification it queues is sent, so a failover
// neither loses nor repeats what was delivered: delivery is at least
// once, and every notification carries a dedupe key that stays the same
// across retries and masters.
package alerts

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// Alert statuses.
const (
	StatusFiring   = "firing"
	StatusResolved = "resolved"
)

// Alert is one condition of one object as a rule sees it.
type Alert struct {
	// Name is the reason that fired it (NodeDown) and Object what it is
	// about (node/n1); together they name the alert within its rule.
	Name    string `json:"name"`
	Object  string `json:"object"`
	Region  string `json:"region,omitempty"`
	Tenant  string `json:"tenant,omitempty"`
	Message string `json:"message,omitempty"`
	// Labels are the alert's labels (Labels): what the rule's selector
	// matched.
	Labels   map[string]string `json:"labels,omitempty"`
	Status   string            `json:"status"`
	StartsAt time.Time         `json:"startsAt"`
	EndsAt   time.Time         `json:"endsAt,omitzero"`
	// EventID is the event that fired or resolved it.
	EventID string `json:"eventId,omitempty"`
	// QueuedAt is when it joined the outbox.
	QueuedAt time.Time `json:"queuedAt"`
}

// Key names the alert within its rule.
func (a *Alert) Key() string { return a.Name + "|" + a.Object }

// RuleState is what the master keeps of one rule in etcd: its firing
// alerts, its outbox and its delivery state.
type RuleState struct {
	Active map[string]Alert `json:"active,omitempty"`
	Outbox []Alert          `json:"outbox,omitempty"`
	// Attempted is how many alerts at the head of the outbox a failed
	// attempt carried: the retry carries the same ones (the same dedupe
	// key), and the receiver may have seen them.
	Attempted int               `json:"attempted,omitempty"`
	Delivery  api.AlertDelivery `json:"delivery"`
	// Since is when the rule started seeing events: older ones do not
	// fire it (a new rule does not page for last week).
	Since time.Time `json:"since"`
}

// Event is what the engine needs of an event.
type Event struct {
	ID, Type, Reason, Object, Region, Tenant, Message string
	Time                                              time.Time
	Fields                                            map[string]string
	// ResourceLabels are the labels of the resource the event is about
	// (ResourceOf), as the source knows them; nil for none.
	ResourceLabels map[string]string
}

// families: reasons that are states of one condition of an object. An
// event of a family ends the object's other states of that family (a
// node Down is no longer Suspect); the clearing reason only resolves.
var families = map[string]struct {
	family   string
	clearing bool
}{
	"NodeUp":        {"node-health", true},
	"NodeSuspect":   {"node-health", false},
	"NodeDown":      {"node-health", false},
	"RegionUp":      {"region-health", true},
	"RegionSuspect": {"region-health", false},
	"RegionDown":    {"region-health", false},
	"Uncordoned":    {"cordon", true},
	"AutoCordoned":  {"cordon", false},
	"Cordoned":      {"cordon", false},
	"QuotaOK":       {"quota", true},
	"QuotaNearFull": {"quota", false},
	"ReserveHeld":   {"reserve", true},
	"ReserveShort":  {"reserve", false},
}

// Matches reports whether rule fires on ev.
func Matches(rule *api.AlertRule, ev *Event) bool {
	if !slices.Contains(rule.Reasons, ev.Reason) {
		return false
	}
	if rule.Region != "" && ev.Region != rule.Region {
		return false
	}
	if rule.Tenant != "" && ev.Tenant != rule.Tenant {
		return false
	}
	if !matchObject(ev.Object, rule.Object) {
		return false
	}
	return rule.Selector == "" || selects(rule.Selector, Labels(ev))
}

// selects reports whether the selector text matches labels; one that
// does not parse (the API refuses it) matches nothing.
func selects(selector string, labels map[string]string) bool {
	sel, err := api.ParseSelector(selector)
	return err == nil && sel.Matches(labels)
}

func matchObject(obj, filter string) bool {
	if filter == "" || obj == filter {
		return true
	}
	if !strings.HasPrefix(obj, filter) {
		return false
	}
	return strings.HasSuffix(filter, "/") || obj[len(filter)] == '/'
}

// Apply feeds one event to a rule's state and reports whether the state
// changed. A firing alert already active is a repeat and changes
// nothing (dedupe); an alert still waiting in the outbox that resolves
// before it was sent is withdrawn with its resolution (nothing to say).
func (s *RuleState) Apply(rule *api.AlertRule, ev *Event, now time.Time) bool {
	if ev.Time.Before(s.Since) {
		return false
	}
	changed := s.resolveFamily(ev, now)
	if !Matches(rule, ev) {
		return changed
	}
	if f, ok := families[ev.Reason]; ok && f.clearing {
		return changed // a clearing reason listed in a rule fires nothing
	}
	a := Alert{
		Name: ev.Reason, Object: ev.Object, Region: ev.Region, Tenant: ev.Tenant, Message: ev.Message, Labels: Labels(ev),
		Status: StatusFiring, StartsAt: ev.Time, EventID: ev.ID, QueuedAt: now,
	}
	if _, conditional := families[ev.Reason]; conditional {
		if _, active := s.Active[a.Key()]; active {
			return changed
		}
		if s.Active == nil {
			s.Active = map[string]Alert{}
		}
		s.Active[a.Key()] = a
	} else if s.queued(a.Key(), StatusFiring) {
		return changed // the same one-off event again within the window
	}
	s.queue(a)
	return true
}

// Bounds of a rule's state, which is one etcd value.
const (
	// MaxOutbox is the most alerts a rule keeps waiting; past it the
	// oldest are dropped and counted (a receiver down during a storm).
	MaxOutbox = 1000
	// MaxBatch is the most alerts one notification carries.
	MaxBatch = 200
)

func (s *RuleState) queue(a Alert) {
	s.Outbox = append(s.Outbox, a)
	if over := len(s.Outbox) - MaxOutbox; over > 0 {
		s.Outbox = slices.Delete(s.Outbox, 0, over)
		s.Delivery.Dropped += int64(over)
		s.Attempted = max(s.Attempted-over, 0)
	}
}

// resolveFamily resolves the object's active alerts of ev's family that
// ev ends: every other state of the family.
func (s *RuleState) resolveFamily(ev *Event, now time.Time) bool {
	f, ok := families[ev.Reason]
	if !ok {
		return false
	}
	changed := false
	for key, a := range s.Active {
		if a.Object != ev.Object || a.Name == ev.Reason || families[a.Name].family != f.family {
			continue
		}
		delete(s.Active, key)
		changed = true
		if i := s.outboxIndex(key, StatusFiring); i >= s.Attempted {
			// Never sent: the receiver need not hear of it at all.
			s.Outbox = slices.Delete(s.Outbox, i, i+1)
			continue
		}
		a.Status, a.EndsAt, a.EventID, a.QueuedAt = StatusResolved, ev.Time, ev.ID, now
		s.queue(a)
	}
	return changed
}

func (s *RuleState) queued(key, status string) bool { return s.outboxIndex(key, status) >= 0 }

func (s *RuleState) outboxIndex(key, status string) int {
	return slices.IndexFunc(s.Outbox, func(a Alert) bool { return a.Key() == key && a.Status == status })
}

// Ready returns the alerts to send now: the ones a failed attempt
// carried, to retry; else the outbox (its oldest MaxBatch) once its
// oldest alert has waited the grouping window; else nil.
func (s *RuleState) Ready(window time.Duration, now time.Time) []Alert {
	if n := min(s.Attempted, len(s.Outbox)); n > 0 {
		return slices.Clone(s.Outbox[:n])
	}
	if len(s.Outbox) == 0 || now.Sub(s.Outbox[0].QueuedAt) < window {
		return nil
	}
	return slices.Clone(s.Outbox[:min(len(s.Outbox), MaxBatch)])
}

// Sent removes what a notification carried from the outbox (alerts
// queued since stay) and counts it.
func (s *RuleState) Sent(batch []Alert, at time.Time) {
	s.remove(batch)
	s.Delivery.Sent++
	s.Delivery.Attempts = 0
	s.Delivery.LastAttempt, s.Delivery.LastSuccess, s.Delivery.LastError = at, at, ""
}

// Failed records a failed attempt; give up drops the batch.
func (s *RuleState) Failed(batch []Alert, at time.Time, why string, giveUp bool) {
	s.Delivery.Attempts++
	s.Delivery.LastAttempt, s.Delivery.LastError = at, why
	s.Attempted = len(batch)
	if giveUp {
		s.remove(batch)
		s.Delivery.Dropped += int64(len(batch))
		s.Delivery.Attempts = 0
	}
}

func (s *RuleState) remove(batch []Alert) {
	s.Outbox = slices.DeleteFunc(s.Outbox, func(a Alert) bool {
		return slices.ContainsFunc(batch, func(b Alert) bool { return sameNotice(&a, &b) })
	})
	s.Attempted = 0
}

func sameNotice(a, b *Alert) bool {
	return a.Key() == b.Key() && a.Status == b.Status && a.StartsAt.Equal(b.StartsAt)
}

// View is the delivery state as the API shows it.
func (s *RuleState) View() api.AlertDelivery {
	d := s.Delivery
	d.Active, d.Pending = len(s.Active), len(s.Outbox)
	return d
}

// DedupeKey names a notification: the same alerts in the same states
// give the same key, on a retry and on another master.
func DedupeKey(rule string, batch []Alert) string {
	parts := make([]string, len(batch))
	for i, a := range batch {
		parts[i] = a.Key() + "|" + a.Status + "|" + a.StartsAt.UTC().Format(time.RFC3339Nano)
	}
	slices.Sort(parts)
	h := sha256.Sum256([]byte(rule + "\n" + strings.Join(parts, "\n")))
	return hex.EncodeToString(h[:16])
}
