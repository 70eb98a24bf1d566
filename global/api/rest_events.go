package api

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/rest"
)

// eventHandlers serve the regions' and the global tier's events (Events)
// over REST, as a list or a stream of server-sent events.
type eventHandlers struct {
	events *Events
	// stream reports the error of a streaming handler (rest.API.Error).
	stream func(w http.ResponseWriter, r *http.Request, err error)
}

// serve answers GET /v1/events, or with watch=true streams server-sent
// events, polling the regions once a second.
func (h *eventHandlers) serve(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	eq := EventQuery{Region: q.Get("region"), After: q.Get("after"), Object: q.Get("object")}
	if c := q.Get("continue"); c != "" {
		if eq.After != "" && eq.After != c {
			h.stream(w, r, api.Invalid("continue", "is another cursor than after; send one"))
			return
		}
		eq.After = c
	}
	var err error
	if eq.Limit, err = rest.QueryInt(r, "limit"); err != nil {
		h.stream(w, r, err)
		return
	}
	watch, err := rest.QueryBool(r, "watch")
	if err != nil {
		h.stream(w, r, err)
		return
	}
	page, err := h.events.List(r.Context(), eq)
	if err != nil {
		h.stream(w, r, err)
		return
	}
	if !watch {
		rest.WriteJSON(w, http.StatusOK, page)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		h.stream(w, r, fmt.Errorf("streaming is not supported here: %w", api.ErrUnavailable))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	h.watchEvents(r, eq, page, &sse{w: w, flusher: flusher})
}

// watchEvents sends page, then what comes after it, until the client
// leaves.
func (h *eventHandlers) watchEvents(r *http.Request, eq EventQuery, page EventList, out *sse) {
	if !out.send(page) {
		return
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
		eq.After = page.Cursor
		next, err := h.events.List(r.Context(), eq)
		if err != nil {
			continue
		}
		if next.Cursor != "" {
			page.Cursor = next.Cursor
		}
		if len(next.Items) > 0 && !out.send(next) {
			return
		}
		if !out.keepalive() {
			return
		}
	}
}

// sse writes server-sent events.
type sse struct {
	w       io.Writer
	flusher http.Flusher
}

// send writes the events of p, each with p's cursor as its id; false
// when the client is gone.
func (s *sse) send(p EventList) bool {
	for _, ev := range p.Items {
		b, _ := json.Marshal(ev)
		if _, err := fmt.Fprintf(s.w, "id: %s\ndata: %s\n\n", p.Cursor, b); err != nil {
			return false
		}
	}
	s.flusher.Flush()
	return true
}

// keepalive writes a comment line, which keeps proxies from closing an
// idle stream; false when the client is gone.
func (s *sse) keepalive() bool {
	if _, err := io.WriteString(s.w, ": keepalive\n\n"); err != nil {
		return false
	}
	s.flusher.Flush()
	return true
}
