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
	"strings"

	"github.com/stratahq/strata/internal/api"
)

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
		v.Set("limit", itoa(q.Limit))
	}
	return v
}

// ListEvents returns the events q selects, oldest first.
func (c *Client) ListEvents(ctx context.Context, q EventQuery) (EventList, error) {
	var l EventList
	err := c.do(ctx, request{method: http.MethodGet, path: "/v1/events", query: q.values()}, &l)
	return l, err
}

// WatchEvents streams the events after q.After as server-sent events and
// calls fn with each and the cursor that follows it, until ctx is done (it
// returns nil then), the server ends the stream (io.EOF) or fn fails.
func (c *Client) WatchEvents(ctx context.Context, q EventQuery, fn func(ev api.Event, cursor string) error) error {
	v := q.values()
	v.Set("watch", "true")
	resp, cancel, err := c.send(ctx, request{method: http.MethodGet, path: "/v1/events", query: v, stream: true, accept: "text/event-stream"})
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped (Ctrl-C) before the first byte
		}
		return err
	}
	defer cancel()
	defer resp.Body.Close()
	err = readSSE(resp.Body, func(id string, data []byte) error {
		var ev api.Event
		if err := json.Unmarshal(data, &ev); err != nil {
			return fmt.Errorf("decoding an event %q: %w", truncate(data), err)
		}
		return fn(ev, id)
	})
	if ctx.Err() != nil {
		return nil
	}
	if err == nil {
		return io.EOF
	}
	return err
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

// LogQuery selects a resource's log lines.
type LogQuery struct {
	// Replica narrows to one replica (default: the server's choice).
	Replica string
	// Follow keeps the stream open for new lines.
	Follow bool
	// Tail starts with the last Tail lines; 0 means the server's default.
	Tail int
}

// Logs copies a resource's logs (text/plain) to w until the stream ends or,
// when following, ctx is done (it returns nil then).
func (c *Client) Logs(ctx context.Context, name string, q LogQuery, w io.Writer) error {
	v := c.tenantQuery()
	if q.Replica != "" {
		v.Set("replica", q.Replica)
	}
	if q.Follow {
		v.Set("follow", "true")
	}
	if q.Tail > 0 {
		v.Set("tail", itoa(q.Tail))
	}
	resp, cancel, err := c.send(ctx, request{
		method: http.MethodGet, path: "/v1/resources/" + escape(name) + "/logs", query: v,
		stream: true, accept: "text/plain",
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped (Ctrl-C) before the first byte
		}
		return err
	}
	defer cancel()
	defer resp.Body.Close()
	_, err = io.Copy(flushWriter{w}, resp.Body)
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return c.transportErr(ctx, err)
	}
	return nil
}

// flushWriter flushes after every write when w can, so that followed logs
// show up line by line through a buffered stdout.
type flushWriter struct{ w io.Writer }

func (f flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if fl, ok := f.w.(interface{ Flush() error }); ok && err == nil {
		err = fl.Flush()
	}
	return n, err
}

func truncate(b []byte) string {
	if len(b) > 120 {
		return string(b[:120]) + "..."
	}
	return string(b)
}
