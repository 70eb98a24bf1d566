package alerts

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// Headers every notification carries.
const (
	// HeaderTimestamp is when the post was made, in Unix seconds
	// ("1718000000"): each attempt has its own.
	HeaderTimestamp = "X-Strata-Timestamp"
	// HeaderSignature is "v1=<hex HMAC-SHA256 of timestamp.body>" keyed by
	// the receiver's secret (absent without a secret): see Sign.
	HeaderSignature = "X-Strata-Signature"
	// HeaderDedupeKey names the notification: a receiver that sees a key
	// twice (a retry whose answer was lost, a failover) drops the copy.
	HeaderDedupeKey = "X-Strata-Dedupe-Key"
)

// SignatureTolerance is how far from its own clock a receiver should
// accept a post's timestamp: wide enough for clock skew and a slow post
// (each is bounded by 10 s), narrow enough that a captured post replayed
// later is refused. Within it, a replay carries a dedupe key the receiver
// has seen.
const SignatureTolerance = 5 * time.Minute

// Signature errors of Verify.
var (
	ErrBadSignature   = errors.New("the signature does not match the timestamp and body")
	ErrStaleTimestamp = errors.New("the timestamp is outside the tolerance")
)

// Sign is the signature header's value of a post of body whose
// timestamp header is timestamp: "v1=" and the hex HMAC-SHA256, keyed by
// secret, of the timestamp, a ".", and the body, as they are sent.
func Sign(secret []byte, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1=" + hex.EncodeToString(m.Sum(nil))
}

// Verify checks a post as a receiver should: the signature against the
// timestamp and the raw body, in constant time, then the timestamp
// against now, within tolerance either way.
func Verify(secret []byte, timestamp, signature string, body []byte, now time.Time, tolerance time.Duration) error {
	if !hmac.Equal([]byte(signature), []byte(Sign(secret, timestamp, body))) {
		return ErrBadSignature
	}
	sec, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %q is not Unix seconds", ErrStaleTimestamp, timestamp)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: %s from now, more than %s", ErrStaleTimestamp, d.Round(time.Second), tolerance)
	}
	return nil
}

// VerifyRequest is Verify of a post's headers, at the current time and
// with SignatureTolerance.
func VerifyRequest(secret []byte, h http.Header, body []byte) error {
	return Verify(secret, h.Get(HeaderTimestamp), h.Get(HeaderSignature), body, time.Now(), SignatureTolerance)
}

// Notification is the generic webhook body.
type Notification struct {
	Version   string            `json:"version"`
	Rule      string            `json:"rule"`
	DedupeKey string            `json:"dedupeKey"`
	Status    string            `json:"status"`
	Labels    map[string]string `json:"labels,omitempty"`
	Alerts    []Alert           `json:"alerts"`
}

// amMessage is Alertmanager's webhook body (version 4).
type amMessage struct {
	Version           string            `json:"version"`
	GroupKey          string            `json:"groupKey"`
	TruncatedAlerts   int               `json:"truncatedAlerts"`
	Status            string            `json:"status"`
	Receiver          string            `json:"receiver"`
	GroupLabels       map[string]string `json:"groupLabels"`
	CommonLabels      map[string]string `json:"commonLabels"`
	CommonAnnotations map[string]string `json:"commonAnnotations"`
	ExternalURL       string            `json:"externalURL"`
	Alerts            []amAlert         `json:"alerts"`
}

type amAlert struct {
	Status       string            `json:"status"`
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	Fingerprint  string            `json:"fingerprint"`
}

// groupStatus is firing while any alert of the batch fires.
func groupStatus(batch []Alert) string {
	if slices.ContainsFunc(batch, func(a Alert) bool { return a.Status == StatusFiring }) {
		return StatusFiring
	}
	return StatusResolved
}

// Body encodes a notification in the rule's receiver format.
func Body(rule *api.AlertRule, batch []Alert, dedupe string) ([]byte, error) {
	if rule.Receiver.Type == api.ReceiverAlertmanager {
		return json.Marshal(alertmanagerBody(rule, batch))
	}
	return json.Marshal(Notification{
		Version: "1", Rule: rule.Name, DedupeKey: dedupe, Status: groupStatus(batch), Labels: rule.Labels, Alerts: batch,
	})
}

func alertmanagerBody(rule *api.AlertRule, batch []Alert) amMessage {
	m := amMessage{
		Version:           "4",
		GroupKey:          fmt.Sprintf("{}:{rule=%q}", rule.Name),
		Status:            groupStatus(batch),
		Receiver:          rule.Name,
		GroupLabels:       map[string]string{"rule": rule.Name},
		CommonAnnotations: map[string]string{},
	}
	var common map[string]string
	for _, a := range batch {
		labels := amLabels(rule, &a)
		if common == nil {
			common = maps.Clone(labels)
		} else {
			maps.DeleteFunc(common, func(k, v string) bool { return labels[k] != v })
		}
		m.Alerts = append(m.Alerts, amAlert{
			Status: a.Status, Labels: labels, Annotations: map[string]string{"message": a.Message},
			StartsAt: a.StartsAt, EndsAt: a.EndsAt, Fingerprint: DedupeKey(rule.Name, []Alert{{Name: a.Name, Object: a.Object}}),
		})
	}
	m.CommonLabels = common
	return m
}

// amLabels are an alert's labels as Alertmanager sees them: the alert's
// own (Labels), then the rule's (an operator's routing labels win), then
// alertname, rule, object, region and tenant.
func amLabels(rule *api.AlertRule, a *Alert) map[string]string {
	l := maps.Clone(a.Labels)
	if l == nil {
		l = map[string]string{}
	}
	maps.Copy(l, rule.Labels)
	l["alertname"], l["rule"], l["object"] = a.Name, rule.Name, a.Object
	if a.Region != "" {
		l["region"] = a.Region
	}
	if a.Tenant != "" {
		l["tenant"] = a.Tenant
	}
	return l
}

// Sender posts notifications.
type Sender struct {
	Client *http.Client
	// Clock stamps each post (default time.Now).
	Clock func() time.Time
}

// Unreachable is what a rule's status says of a post that got no answer,
// whatever the cause: refused, timed out, reset, not HTTP, not resolved,
// or an address the receivers' networks do not allow. Whoever reads the
// rule cannot tell an open port from a closed one; the master's log
// says why.
const Unreachable = "delivery failed: receiver unreachable"

// deliveryError is a failed delivery: err says why, for the master's
// log; shown is what the rule's status may say.
type deliveryError struct {
	shown string
	err   error
}

func (e *deliveryError) Error() string { return e.err.Error() }
func (e *deliveryError) Unwrap() error { return e.err }

func failed(shown string, err error) error { return &deliveryError{shown: shown, err: err} }

// Shown is what a rule's status says of a failed delivery: whether the
// receiver answered (and its HTTP status), never why a connection
// failed.
func Shown(err error) string {
	var de *deliveryError
	if errors.As(err, &de) {
		return de.shown
	}
	return "delivery failed"
}

// Send posts one notification and returns nil when the receiver took it
// (2xx). Errors name neither the URL (it may hold a token) nor the
// secret; Shown is what a rule's readers may see of them.
func (s Sender) Send(ctx context.Context, rule *api.AlertRule, batch []Alert) error {
	dedupe := DedupeKey(rule.Name, batch)
	body, err := Body(rule, batch, dedupe)
	if err != nil {
		return failed("delivery failed: the notification cannot be encoded", fmt.Errorf("encode: %w", err))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rule.Receiver.URL, bytes.NewReader(body))
	if err != nil {
		return failed("delivery failed: bad receiver url", errors.New("bad receiver url"))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderDedupeKey, dedupe)
	req.Header.Set("User-Agent", "strata-alerts")
	clock := s.Clock
	if clock == nil {
		clock = time.Now
	}
	ts := strconv.FormatInt(clock().Unix(), 10)
	req.Header.Set(HeaderTimestamp, ts)
	if rule.Receiver.Secret != "" {
		req.Header.Set(HeaderSignature, Sign([]byte(rule.Receiver.Secret), ts, body))
	}
	resp, err := s.Client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return failed(Unreachable, fmt.Errorf("post: %w", err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode/100 != 2 {
		// The code and its standard text: the reason phrase is the
		// receiver's to choose.
		answer := fmt.Sprintf("receiver answered %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
		return failed("delivery failed: "+strings.TrimSpace(answer), errors.New(strings.TrimSpace(answer)))
	}
	return nil
}
