package clitest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/stratahq/strata/internal/api"
)

// eventRoutes serves the events: a page, or a stream (GET /v1/events is
// registered as a plain handler).
type eventRoutes struct{ *Server }

// matching returns the events q selects: after the cursor (an event ID),
// of the region, about the object or below it.
func (s eventRoutes) matching(r *http.Request) []api.Event {
	q := r.URL.Query()
	after, _ := strconv.Atoi(q.Get("after"))
	var out []api.Event
	for _, e := range s.Events {
		id, _ := strconv.Atoi(e.ID)
		obj := q.Get("object")
		if id > after && (q.Get("region") == "" || e.Region == q.Get("region")) &&
			(obj == "" || e.Object == obj || strings.HasPrefix(e.Object, strings.TrimSuffix(obj, "/")+"/")) {
			out = append(out, e)
		}
	}
	if limit, _ := strconv.Atoi(q.Get("limit")); limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out
}

func (s eventRoutes) events(w http.ResponseWriter, r *http.Request) {
	s.Mu.Lock()
	items := s.matching(r)
	wake := s.newEvts
	s.Mu.Unlock()
	cursor := r.URL.Query().Get("after")
	if len(items) > 0 {
		cursor = items[len(items)-1].ID
	}
	if r.URL.Query().Get("watch") == "true" && s.noStreaming() {
		writeError(w, fmt.Errorf("streaming is not supported here: %w", api.ErrUnavailable))
		return
	}
	if r.URL.Query().Get("watch") != "true" {
		writeJSON(w, http.StatusOK, map[string]any{"items": append([]api.Event{}, items...), "cursor": cursor})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for {
		for _, e := range items {
			b, _ := json.Marshal(e)
			fmt.Fprintf(w, "id: %s\ndata: %s\n\n", e.ID, b)
		}
		fmt.Fprint(w, ": keepalive\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			return
		case <-wake:
		}
		if len(items) > 0 {
			cursor = items[len(items)-1].ID
		}
		s.Mu.Lock()
		q := r.URL.Query()
		q.Set("after", cursor)
		r.URL.RawQuery = q.Encode()
		items = s.matching(r)
		wake = s.newEvts
		s.Mu.Unlock()
	}
}

func (s eventRoutes) noStreaming() bool {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	return s.NoStreaming
}
