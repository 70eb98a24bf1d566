package webconsole

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stratahq/strata/internal/events"
)

// testToken is the token of newServer's streams, which openStream
// presents.
const testToken = "test-region-token"

// newServer mounts a stream where the consoles mount it, with the shared
// static files and headers around it.
func newServer(t *testing.T, o StreamOptions) *httptest.Server {
	t.Helper()
	if o.Token == "" {
		o.Token = testToken
	}
	srv := httptest.NewServer(streamMux(o))
	t.Cleanup(srv.Close)
	return srv
}

func streamMux(o StreamOptions) http.Handler {
	s := NewEventStream(o)
	mux := http.NewServeMux()
	mux.Handle("GET /console/static/", http.StripPrefix("/console/static/", NewStaticServer(Static())))
	mux.HandleFunc("POST /console/events/ticket", s.Ticket)
	mux.HandleFunc("GET /console/events/stream", s.Stream)
	mux.HandleFunc("/console/", NotFound)
	return SecurityHeaders(mux)
}

func get(t *testing.T, url string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestStatic(t *testing.T) {
	srv := newServer(t, StreamOptions{Region: "r"})
	for path, ctype := range map[string]string{
		"console.css": "text/css", "common.js": "javascript", "logo.svg": "image/svg+xml", "favicon.svg": "image/svg+xml",
	} {
		resp, body := get(t, srv.URL+"/console/static/"+path)
		if resp.StatusCode != http.StatusOK || body == "" {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		if ct := resp.Header.Get("Content-Type"); !strings.Contains(ct, ctype) {
			t.Errorf("GET %s: Content-Type %q; want %s", path, ct, ctype)
		}
		etag := resp.Header.Get("ETag")
		if etag == "" {
			t.Fatalf("GET %s: no ETag", path)
		}
		if resp, _ := get(t, srv.URL+"/console/static/"+path, "If-None-Match", etag); resp.StatusCode != http.StatusNotModified {
			t.Errorf("GET %s with its ETag: %d; want 304", path, resp.StatusCode)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("GET %s: CSP %q", path, csp)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no nosniff", path)
		}
	}
	for _, path := range []string{"/console/nope", "/console/static/nope.js"} {
		if resp, _ := get(t, srv.URL+path); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d; want 404", path, resp.StatusCode)
		}
	}
}

// TestStaticLayers checks that a console's own file replaces a shared one
// of the same name and adds to the rest.
func TestStaticLayers(t *testing.T) {
	own := fstest.MapFS{"console.css": {Data: []byte("own")}, "page.js": {Data: []byte("page")}}
	srv := httptest.NewServer(http.StripPrefix("/s/", NewStaticServer(Static(), own)))
	t.Cleanup(srv.Close)
	for path, want := range map[string]string{"console.css": "own", "page.js": "page"} {
		if resp, body := get(t, srv.URL+"/s/"+path); resp.StatusCode != http.StatusOK || body != want {
			t.Errorf("GET %s: %d %q; want 200 %q", path, resp.StatusCode, body, want)
		}
	}
	if resp, body := get(t, srv.URL+"/s/common.js"); resp.StatusCode != http.StatusOK || body == "" {
		t.Errorf("GET common.js: %d; want the shared file", resp.StatusCode)
	}
}

// memLog is an event log for tests.
type memLog struct {
	mu  sync.Mutex
	evs []events.Event
	err error
}

func (m *memLog) add(reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := fmt.Sprintf("1700000000000-%d", len(m.evs))
	m.evs = append(m.evs, events.Event{ID: id, Time: time.Now().UTC(), Type: events.TypeNormal, Reason: reason, Object: "node/n1", Message: reason + " happened"})
}

func (m *memLog) Range(_ context.Context, q events.Query) ([]events.Event, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return nil, m.err
	}
	var out []events.Event
	for _, ev := range m.evs {
		if q.After != "" {
			if c, _ := events.CompareID(ev.ID, q.After); c <= 0 {
				continue
			}
		}
		out = append(out, ev)
	}
	if q.Limit > 0 && len(out) > q.Limit {
		if q.Newest {
			out = out[len(out)-q.Limit:]
		} else {
			out = out[:q.Limit]
		}
	}
	return out, nil
}

type sse struct {
	event, id, data string
}

// openStream opens the stream with testToken and returns its events as
// they come.
func openStream(t *testing.T, ctx context.Context, url string) (*http.Response, <-chan sse) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan sse, 100)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var cur sse
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if cur.event != "" {
					ch <- cur
				}
				cur = sse{}
			case strings.HasPrefix(line, "event: "):
				cur.event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "id: "):
				cur.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				cur.data = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return resp, ch
}

func next(t *testing.T, ch <-chan sse) sse {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("the stream ended")
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
	}
	return sse{}
}

func TestStream(t *testing.T) {
	log := &memLog{}
	for _, r := range []string{"A", "B", "C"} {
		log.add(r)
	}
	done := make(chan struct{})
	srv := newServer(t, StreamOptions{Region: "r", Events: log, PollInterval: 20 * time.Millisecond, Done: done})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	resp, ch := openStream(t, ctx, srv.URL+"/console/events/stream?backlog=2")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	// The backlog (the newest two), then ready, then what happens next.
	for _, want := range []string{"B", "C"} {
		ev := next(t, ch)
		var w wireEvent
		if err := json.Unmarshal([]byte(ev.data), &w); err != nil || ev.event != "event" || w.Reason != want || ev.id != w.ID {
			t.Fatalf("backlog: got %+v (%v); want event %s", ev, err, want)
		}
	}
	if ev := next(t, ch); ev.event != "ready" || !strings.Contains(ev.data, `"cursor":"1700000000000-2"`) {
		t.Fatalf("got %+v; want ready at the newest event", ev)
	}
	log.add("D")
	if ev := next(t, ch); !strings.Contains(ev.data, `"reason":"D"`) {
		t.Fatalf("got %+v; want D", ev)
	}

	// Resuming after a cursor (a browser's Last-Event-ID wins over ?after=).
	_, ch2 := openStream(t, ctx, srv.URL+"/console/events/stream?after=1700000000000-0&backlog=50")
	if ev := next(t, ch2); ev.event != "ready" || !strings.Contains(ev.data, `"cursor":"1700000000000-0"`) {
		t.Fatalf("after A: got %+v; want ready at A (no backlog with a cursor)", ev)
	}
	if ev := next(t, ch2); !strings.Contains(ev.data, `"reason":"B"`) {
		t.Fatalf("after A: got %+v; want B", ev)
	}

	// Done ends open streams.
	close(done)
	for range ch {
	}
}

func TestStreamErrors(t *testing.T) {
	srv := newServer(t, StreamOptions{Region: "r"})
	if resp, body := get(t, srv.URL+"/console/events/stream"); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, `"code":"Unavailable"`) {
		t.Errorf("without an event log: %d %s", resp.StatusCode, body)
	}
	srv = newServer(t, StreamOptions{Region: "r", Events: &memLog{}})
	for _, q := range []string{"after=nope", "backlog=-1", "backlog=x"} {
		if resp, body := get(t, srv.URL+"/console/events/stream?"+q, "Authorization", "Bearer "+testToken); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "InvalidArgument") {
			t.Errorf("?%s: %d %s; want 400", q, resp.StatusCode, body)
		}
	}
	srv = newServer(t, StreamOptions{Region: "r", Events: &memLog{err: fmt.Errorf("redis is down")}})
	if resp, _ := get(t, srv.URL+"/console/events/stream", "Authorization", "Bearer "+testToken); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a failing log: %d; want 503", resp.StatusCode)
	}
}

func TestTickets(t *testing.T) {
	log := &memLog{}
	srv := newServer(t, StreamOptions{Region: "r", Events: log, Token: "s3cret", PollInterval: 20 * time.Millisecond})
	post := func(auth string) (*http.Response, ticketResponse) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/console/events/ticket", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var tr ticketResponse
		_ = json.NewDecoder(resp.Body).Decode(&tr)
		return resp, tr
	}
	for _, auth := range []string{"", "Bearer wrong", "s3cret"} {
		if resp, _ := post(auth); resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("ticket with %q: %d; want 401", auth, resp.StatusCode)
		}
	}
	resp, tr := post("Bearer s3cret")
	if resp.StatusCode != http.StatusOK || tr.Ticket == "" || tr.ExpiresAt.Before(time.Now()) {
		t.Fatalf("ticket: %d %+v", resp.StatusCode, tr)
	}
	for _, q := range []string{"", "?ticket=nope", "?ticket=" + tr.Ticket + "x", "?ticket=99." + strings.SplitN(tr.Ticket, ".", 2)[1]} {
		if resp, _ := get(t, srv.URL+"/console/events/stream"+q); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("stream%s: %d; want 401", q, resp.StatusCode)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if resp, ch := openStream(t, ctx, srv.URL+"/console/events/stream?ticket="+tr.Ticket); resp.StatusCode != http.StatusOK {
		t.Errorf("stream with a ticket: %d", resp.StatusCode)
	} else if ev := next(t, ch); ev.event != "ready" {
		t.Errorf("got %+v; want ready", ev)
	}
	if resp, _ := openStream(t, ctx, srv.URL+"/console/events/stream"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("stream without a ticket: %d", resp.StatusCode)
	}

	// An expired ticket, and one signed for another region or token.
	c := NewEventStream(StreamOptions{Region: "r", Token: "s3cret"})
	if c.ticketOK(c.signTicket(time.Now().Add(-time.Second)), time.Now()) {
		t.Error("an expired ticket is accepted")
	}
	other := NewEventStream(StreamOptions{Region: "r2", Token: "s3cret"})
	if c.ticketOK(other.signTicket(time.Now().Add(time.Minute)), time.Now()) {
		t.Error("another region's ticket is accepted")
	}

	// A console without a token lets nobody in: no ticket, no stream,
	// not even with a ticket signed with the empty token.
	closed := httptest.NewServer(streamMux(StreamOptions{Region: "r", Events: log}))
	t.Cleanup(closed.Close)
	req, _ := http.NewRequest(http.MethodPost, closed.URL+"/console/events/ticket", nil)
	req.Header.Set("Authorization", "Bearer ")
	r2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r2.Body)
	r2.Body.Close()
	if r2.StatusCode != http.StatusUnauthorized {
		t.Errorf("ticket from a console without a token: %d %s; want 401", r2.StatusCode, b)
	}
	forged := NewEventStream(StreamOptions{Region: "r"}).signTicket(time.Now().Add(time.Minute))
	if resp, _ := get(t, closed.URL+"/console/events/stream?ticket="+forged, "Authorization", "Bearer "); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("stream of a console without a token: %d; want 401", resp.StatusCode)
	}
}

// TestNames: the name forms are package dns's, with placeholders.
func TestNames(t *testing.T) {
	want := DNSNames{
		Zone:        "strata.internal",
		Service:     "{resource}.{tenant}.strata.internal",
		Regional:    "{resource}.{tenant}.{region}.strata.internal",
		Replica:     "{replica}.{resource}.{tenant}.{region}.strata.internal",
		SRV:         "_{port}._{proto}.{resource}.{tenant}.strata.internal",
		RegionalSRV: "_{port}._{proto}.{resource}.{tenant}.{region}.strata.internal",
	}
	if got := Names(); got != want {
		t.Errorf("Names() = %+v; want %+v", got, want)
	}
}
