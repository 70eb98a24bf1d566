package webconsole

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/stratahq/strata/internal/events"
)

// EventLog is what the stream needs of an event store: events.Store
// satisfies it.
type EventLog interface {
	Range(ctx context.Context, q events.Query) ([]events.Event, error)
}

// StreamOptions configure an EventStream.
type StreamOptions struct {
	// Region names the event log's owner: tickets are signed for it (a
	// ticket of another region is refused) and the ready message
	// carries it.
	Region string
	Logger *slog.Logger
	// Events is the event log the stream polls. Without it the stream
	// answers 503 and the pages poll the REST API.
	Events EventLog
	// Token is the REST token: the stream requires it, or a ticket
	// obtained with it. Without one the stream and the tickets are
	// refused to everyone.
	Token string
	// PollInterval is how often an open stream polls Events; default 1s.
	PollInterval time.Duration
	// Done, when closed, ends the open streams: pass the server's run
	// context's Done so that a graceful HTTP shutdown does not wait for
	// browsers to hang up.
	Done <-chan struct{}
}

// EventStream is the console's push channel, which the REST API lacks:
// Stream serves the event log as server-sent events, by polling it.
// EventSource cannot send an Authorization header, so a page first trades
// its token for a short-lived ticket (Ticket) and opens the stream with
// it.
type EventStream struct {
	o   StreamOptions
	log *slog.Logger
}

// NewEventStream returns the stream's handlers.
func NewEventStream(o StreamOptions) *EventStream {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.PollInterval <= 0 {
		o.PollInterval = time.Second
	}
	return &EventStream{o: o, log: o.Logger}
}

const (
	// ticketTTL is how long a stream ticket opens streams. A stream, once
	// open, lives on; a page reconnecting asks for a new ticket.
	ticketTTL = time.Minute
	// maxBacklog caps ?backlog=.
	maxBacklog = 1000
	// pollBatch is the most events one poll reads; a full batch is
	// followed by another poll at once.
	pollBatch = 500
	// keepAlive is how often an idle stream sends a comment, so that
	// proxies and the browser see a live connection.
	keepAlive = 15 * time.Second
)

// wireEvent is an event as the REST API (GET /v1/events) shows it.
type wireEvent struct {
	ID      string            `json:"id"`
	Time    time.Time         `json:"time"`
	Type    string            `json:"type"`
	Reason  string            `json:"reason"`
	Object  string            `json:"object,omitempty"`
	Tenant  string            `json:"tenant,omitempty"`
	Region  string            `json:"region,omitempty"`
	Message string            `json:"message,omitempty"`
	Fields  map[string]string `json:"fields,omitempty"`
}

// ticketResponse is the body of POST /console/events/ticket.
type ticketResponse struct {
	Ticket    string    `json:"ticket"`
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
}

// Ticket trades the bearer token for a stream ticket (POST). Tickets are signed,
// not stored (HMAC keyed by the token), so any replica of the region with
// the same token accepts them, and rotating the token voids them.
func (c *EventStream) Ticket(w http.ResponseWriter, r *http.Request) {
	if !c.bearerOK(r) {
		unauthorized(w, "a valid bearer token is required")
		return
	}
	exp := time.Now().Add(ticketTTL).Truncate(time.Second)
	writeJSON(w, http.StatusOK, ticketResponse{Ticket: c.signTicket(exp), ExpiresAt: exp.UTC()})
}

func (c *EventStream) signTicket(exp time.Time) string {
	e := strconv.FormatInt(exp.Unix(), 10)
	return e + "." + base64.RawURLEncoding.EncodeToString(c.ticketMAC(e))
}

func (c *EventStream) ticketMAC(exp string) []byte {
	m := hmac.New(sha256.New, []byte(c.o.Token))
	fmt.Fprintf(m, "strata-console-stream\x00%s\x00%s", c.o.Region, exp)
	return m.Sum(nil)
}

func (c *EventStream) ticketOK(t string, now time.Time) bool {
	e, sig, ok := strings.Cut(t, ".")
	if !ok || c.o.Token == "" { // a MAC keyed by "" proves nothing
		return false
	}
	unix, err := strconv.ParseInt(e, 10, 64)
	if err != nil || now.After(time.Unix(unix, 0)) {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	return err == nil && hmac.Equal(got, c.ticketMAC(e))
}

func (c *EventStream) bearerOK(r *http.Request) bool {
	if c.o.Token == "" {
		return false // no token, no way in
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(c.o.Token)) == 1
}

func unauthorized(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="strata-region"`)
	writeError(w, http.StatusUnauthorized, "Unauthenticated", msg)
}

// Stream serves the events as server-sent events (GET):
//
//	event: event   data: <wireEvent>, id: <event ID>      each event, oldest first
//	event: ready   data: {"region": ..., "cursor": ...}   once, after the backlog
//
// The cursor is Last-Event-ID (a browser reconnecting), else ?after=; with
// neither the stream starts at the newest event, after sending the newest
// ?backlog= events (at most 1000).
func (c *EventStream) Stream(w http.ResponseWriter, r *http.Request) {
	if c.o.Events == nil {
		writeError(w, http.StatusServiceUnavailable, "Unavailable", "this console has no event log to stream")
		return
	}
	if !c.ticketOK(r.URL.Query().Get("ticket"), time.Now()) && !c.bearerOK(r) {
		unauthorized(w, "a valid stream ticket (POST /console/events/ticket) or bearer token is required")
		return
	}
	after, backlog, msg := streamFrom(r)
	if msg != "" {
		writeError(w, http.StatusBadRequest, "InvalidArgument", msg)
		return
	}
	ctx := r.Context()
	var first []events.Event
	if after == "" {
		var err error
		if first, after, err = c.newest(ctx, backlog); err != nil {
			if ctx.Err() != nil {
				return // the browser went away
			}
			c.log.Warn("console: reading events failed", "err", err)
			writeError(w, http.StatusServiceUnavailable, "Unavailable", "the event log cannot be read: "+err.Error())
			return
		}
	}

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer
	w.WriteHeader(http.StatusOK)
	s := &sseWriter{w: w, rc: http.NewResponseController(w)}
	s.raw("retry: 3000\n\n")
	for _, ev := range first {
		s.sendEvent(ev)
	}
	s.send("ready", "", map[string]string{"region": c.o.Region, "cursor": after})
	if s.flush() != nil {
		return
	}
	c.follow(ctx, s, after)
}

// streamFrom reads where a stream starts: the cursor (Last-Event-ID, a
// browser reconnecting, else ?after=) and the backlog wanted; msg says
// what is wrong with them.
func streamFrom(r *http.Request) (after string, backlog int, msg string) {
	q := r.URL.Query()
	after = r.Header.Get("Last-Event-ID")
	if after == "" {
		after = q.Get("after")
	}
	if after != "" {
		if _, err := events.CompareID(after, after); err != nil {
			return "", 0, fmt.Sprintf("after: %q is not an event ID", after)
		}
	}
	if b := q.Get("backlog"); b != "" {
		n, err := strconv.Atoi(b)
		if err != nil || n < 0 {
			return "", 0, fmt.Sprintf("backlog: %q is not a count", b)
		}
		backlog = min(n, maxBacklog)
	}
	return after, backlog, ""
}

// newest reads the newest events: the backlog wanted (first), and in
// any case the cursor to follow from.
func (c *EventStream) newest(ctx context.Context, backlog int) (first []events.Event, cursor string, err error) {
	evs, err := c.o.Events.Range(ctx, events.Query{Limit: max(backlog, 1), Newest: true})
	if err != nil {
		return nil, "", err
	}
	if backlog > 0 {
		first = evs
	}
	if len(evs) > 0 {
		cursor = evs[len(evs)-1].ID
	}
	return first, cursor, nil
}

// follow polls the event log from after and sends what comes, with a
// keep-alive comment when quiet, until the browser leaves or the console
// stops.
func (c *EventStream) follow(ctx context.Context, s *sseWriter, after string) {
	tick := time.NewTicker(c.o.PollInterval)
	defer tick.Stop()
	lastWrite := time.Now()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.o.Done:
			return
		case <-tick.C:
		}
		sent, err := c.sendAfter(ctx, s, &after)
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil && !failing:
			c.log.Warn("console: polling events failed; retrying", "err", err)
		}
		failing = err != nil
		if sent {
			lastWrite = time.Now()
		}
		if time.Since(lastWrite) >= keepAlive {
			s.raw(": keep-alive\n\n")
			lastWrite = time.Now()
		}
		if s.flush() != nil {
			return // the browser left
		}
	}
}

// sendAfter sends the events after *after, in batches until none is
// left, moving *after; sent says whether there were any.
func (c *EventStream) sendAfter(ctx context.Context, s *sseWriter, after *string) (sent bool, err error) {
	for {
		evs, err := c.o.Events.Range(ctx, events.Query{After: *after, Limit: pollBatch})
		if err != nil {
			return sent, err
		}
		for _, ev := range evs {
			s.sendEvent(ev)
			*after = ev.ID
		}
		sent = sent || len(evs) > 0
		if len(evs) < pollBatch {
			return sent, nil
		}
	}
}

// sseWriter writes server-sent events and remembers the first error.
type sseWriter struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	err error
}

func (s *sseWriter) raw(text string) {
	if s.err == nil {
		_, s.err = s.w.Write([]byte(text))
	}
}

func (s *sseWriter) send(event, id string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		s.err = errors.Join(s.err, err)
		return
	}
	var sb strings.Builder
	if id != "" {
		sb.WriteString("id: " + id + "\n")
	}
	sb.WriteString("event: " + event + "\n")
	// JSON has no raw newlines, so one data line suffices.
	sb.WriteString("data: ")
	sb.Write(b)
	sb.WriteString("\n\n")
	s.raw(sb.String())
}

func (s *sseWriter) sendEvent(ev events.Event) {
	s.send("event", ev.ID, wireEvent(ev))
}

func (s *sseWriter) flush() error {
	if s.err != nil {
		return s.err
	}
	s.err = s.rc.Flush()
	return s.err
}
