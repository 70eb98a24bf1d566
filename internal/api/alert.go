package api

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"time"
)

var alertReasonRE = regexp.MustCompile(alertReasonPattern)

// ReceiverType is the wire format an alert receiver speaks.
type ReceiverType string

// Receiver types.
const (
	// ReceiverWebhook posts Strata's own JSON, signed with HMAC-SHA256.
	ReceiverWebhook ReceiverType = "webhook"
	// ReceiverAlertmanager posts Alertmanager's webhook format (version
	// "4"), so that a receiver written for Alertmanager works unchanged.
	ReceiverAlertmanager ReceiverType = "alertmanager"
)

// Alert limits.
const (
	MaxAlertReasons    = 32
	MaxAlertSecretLen  = 256
	MinAlertGroupWait  = 0
	MaxAlertGroupWait  = time.Hour
	DefaultAlertGroup  = 10 * time.Second
	MaxAlertObjectLen  = 512
	MaxAlertSelector   = 1024
	minAlertSecretLen  = 16
	maxAlertReasonLen  = 64
	alertReasonPattern = `^[A-Z][A-Za-z0-9]*$`
)

// AlertRule sends the events and conditions it matches to a receiver.
// Rules are infrastructure: admins and infra tokens manage them.
type AlertRule struct {
	Name string `json:"name"`
	// Reasons are the event reasons that fire the rule: NodeDown,
	// NodeSuspect, AutoCordoned, AutoDrainStarted, RegionDown,
	// RegionSuspect, ... A condition's clearing event (NodeUp, RegionUp,
	// Uncordoned) resolves what it fired; it need not be listed.
	Reasons []string `json:"reasons"`
	// Region, Tenant and Object narrow the events matched; empty matches
	// all. Object is a prefix in path steps ("node/n1", "node/").
	Region string `json:"region,omitempty"`
	Tenant string `json:"tenant,omitempty"`
	Object string `json:"object,omitempty"`
	// Selector matches the labels of the alert an event raises (the
	// label selector text form: "severity=critical,region in (eu,us)"):
	// alertname, kind, region, tenant, node, resource, severity and the
	// labels of the resource the event is about (docs/api.md). Empty
	// matches all.
	Selector string `json:"selector,omitempty"`
	// Labels are added to every alert the rule sends (Alertmanager
	// routes on them).
	Labels map[string]string `json:"labels,omitempty"`
	// GroupWait is the grouping window: alerts of the rule are gathered
	// for this long before one notification carries them (default 10s).
	GroupWait *Duration     `json:"groupWait,omitempty"`
	Receiver  AlertReceiver `json:"receiver"`

	CreatedAt       time.Time `json:"createdAt,omitzero"`
	UpdatedAt       time.Time `json:"updatedAt,omitzero"`
	ResourceVersion int64     `json:"resourceVersion,omitempty"`
	// Status is the rule's delivery state (read only).
	Status *AlertDelivery `json:"status,omitempty"`
}

// AlertReceiver is where a rule's notifications go.
type AlertReceiver struct {
	Type ReceiverType `json:"type"`
	URL  string       `json:"url"`
	// Secret keys the HMAC-SHA256 signature of every post, over its
	// timestamp and body (X-Strata-Signature: v1=<hex>, docs/api.md).
	// Write only: reads show HasSecret instead.
	Secret    string `json:"secret,omitempty"`
	HasSecret bool   `json:"hasSecret,omitempty"`
}

// AlertDelivery is a rule's delivery state as the master last wrote it.
type AlertDelivery struct {
	// Active counts the conditions firing and not resolved yet.
	Active int `json:"active"`
	// Pending counts the alerts waiting to be sent (grouping or retry).
	Pending     int       `json:"pending"`
	Sent        int64     `json:"sent"`
	Dropped     int64     `json:"dropped"`
	Attempts    int       `json:"attempts,omitempty"`
	LastAttempt time.Time `json:"lastAttempt,omitzero"`
	LastSuccess time.Time `json:"lastSuccess,omitzero"`
	// LastError says coarsely how the last attempt failed: whether the
	// receiver answered, never why a connection failed (a rule's
	// readers must not learn which internal ports are open).
	LastError string `json:"lastError,omitempty"`
}

// GroupWaitOr is the rule's grouping window.
func (r *AlertRule) GroupWaitOr() time.Duration {
	if r.GroupWait == nil {
		return DefaultAlertGroup
	}
	return r.GroupWait.Duration
}

// Validate checks a rule as a client writes it. Every check runs, so
// that the client hears of every mistake at once.
func (r *AlertRule) Validate() error {
	var p problems
	p.add(ValidateName("name", r.Name))
	r.validateMatch(&p)
	p.add(ValidateLabels("labels", r.Labels))
	if g := r.GroupWait; g != nil && (g.Duration < MinAlertGroupWait || g.Duration > MaxAlertGroupWait) {
		p.add(Invalid("groupWait", "%s is outside [0s, %s]", g.Duration, MaxAlertGroupWait))
	}
	r.Receiver.validate(&p)
	return p.err()
}

func (r *AlertRule) validateMatch(p *problems) {
	switch {
	case len(r.Reasons) == 0:
		p.add(Invalid("reasons", "is required: name the event reasons that fire the rule (NodeDown, RegionDown, ...)"))
	case len(r.Reasons) > MaxAlertReasons:
		p.add(Invalid("reasons", "has %d entries; at most %d", len(r.Reasons), MaxAlertReasons))
	default:
		for i, reason := range r.Reasons {
			if len(reason) > maxAlertReasonLen || !alertReasonRE.MatchString(reason) {
				p.add(Invalid(fmt.Sprintf("reasons[%d]", i), "%q is not an event reason (CamelCase, like NodeDown)", reason))
			} else if slices.Contains(r.Reasons[:i], reason) {
				p.add(Invalid(fmt.Sprintf("reasons[%d]", i), "%q is listed twice", reason))
			}
		}
	}
	if r.Region != "" {
		p.add(ValidateName("region", r.Region))
	}
	if r.Tenant != "" {
		p.add(ValidateName("tenant", r.Tenant))
	}
	p.add(ValidateText("object", r.Object, MaxAlertObjectLen))
	p.add(validateAlertSelector(r.Selector))
}

// validateAlertSelector checks a rule's selector: it parses, and is not
// too long. Its errors name the field "selector".
func validateAlertSelector(s string) error {
	if len(s) > MaxAlertSelector {
		return Invalid("selector", "is longer than %d characters", MaxAlertSelector)
	}
	_, err := ParseSelector(s)
	return err
}

func (rc *AlertReceiver) validate(p *problems) {
	switch rc.Type {
	case ReceiverWebhook, ReceiverAlertmanager:
	default:
		p.add(Invalid("receiver.type", "%q is not a receiver type: want webhook or alertmanager", rc.Type))
	}
	p.add(validateReceiverURL(rc.URL))
	if rc.Secret != "" && (len(rc.Secret) < minAlertSecretLen || len(rc.Secret) > MaxAlertSecretLen) {
		p.add(Invalid("receiver.secret", "must be %d to %d characters long", minAlertSecretLen, MaxAlertSecretLen))
	}
}

func validateReceiverURL(s string) error {
	if s == "" {
		return Invalid("receiver.url", "is required")
	}
	if len(s) > MaxPathLen {
		return Invalid("receiver.url", "is longer than %d characters", MaxPathLen)
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Invalid("receiver.url", "is not an http(s) URL")
	}
	if u.User != nil {
		return Invalid("receiver.url", "must not carry credentials: use receiver.secret")
	}
	return nil
}
