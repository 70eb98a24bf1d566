package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/stratahq/strata/internal/api"
)

// Events is the client of the regions' events: a page of them, or a
// stream of those to come.
type Events struct{ c *conn }

// EventList is a page of events, oldest first, and the cursor that
// continues after them (one position per region).
type EventList struct {
	Items       []api.Event `json:"items"`
	Cursor      string      `json:"cursor,omitempty"`
	Unreachable []string    `json:"unreachable,omitempty"`
}

// EventQuery selects events.
type EventQuery struct {
	Region string
	// After is an exclusive cursor: a previous answer's Cursor (or, with
	// Region, an event ID of that region).
	After string
	// Object keeps events about this object or below it ("node/n1",
	// "resource/default/web").
	Object string
	Limit  int
}

func (q EventQuery) values() url.Values {
	v := url.Values{}
	if q.Region != "" {
		v.Set("region", q.Region)
	}
	if q.After != "" {
		v.Set("after", q.After)
	}
	if q.Object != "" {
		v.Set("object", q.Object)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

// List returns the events q selects, oldest first.
func (e Events) List(ctx context.Context, q EventQuery) (EventList, error) {
	var l EventList
	err := e.c.do(ctx, request{method: http.MethodGet, path: "/v1/events", query: q.values()}, &l)
	return l, err
}

// Watch streams the events after q.After as server-sent events and
// calls fn with each and the cursor that follows it, until ctx is done (it
// returns nil then), the server ends the stream (io.EOF) or fn fails.
func (e Events) Watch(ctx context.Context, q EventQuery, fn func(ev api.Event, cursor string) error) error {
	v := q.values()
	v.Set("watch", "true")
	r := request{method: http.MethodGet, path: "/v1/events", query: v, stream: true, accept: "text/event-stream"}
	return e.c.stream(ctx, r, func(body io.Reader) error {
		err := readSSE(body, func(id string, data []byte) error {
			var ev api.Event
			if err := json.Unmarshal(data, &ev); err != nil {
				return fmt.Errorf("decoding an event %q: %w", truncate(data), err)
			}
			return fn(ev, id)
		})
		if err == nil {
			return io.EOF
		}
		return err
	})
}

// readSSE calls fn with the last id and the data of every event of a
// text/event-stream: "data:" lines joined by newlines, ended by a blank
// line. The id, as in the SSE spec, carries over to later events until
// another "id:" line. Comments (keep-alives) and other fields are skipped.
func readSSE(r io.Reader, fn func(id string, data []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var data bytes.Buffer
	id := ""
	field := func(line, name string) (string, bool) {
		v, ok := strings.CutPrefix(line, name+":")
		return strings.TrimPrefix(v, " "), ok
	}
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if data.Len() > 0 {
				if err := fn(id, data.Bytes()); err != nil {
					return err
				}
				data.Reset()
			}
			continue
		}
		if v, ok := field(line, "data"); ok {
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(v)
		} else if v, ok := field(line, "id"); ok {
			id = v
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	// A last event without its blank line still counts.
	if data.Len() > 0 {
		return fn(id, data.Bytes())
	}
	return nil
}

func truncate(b []byte) string {
	if len(b) > 120 {
		return string(b[:120]) + "..."
	}
	return string(b)
}
