package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stratahq/strata/internal/api"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
)

// LogOptions select a replica's output.
type LogOptions struct {
	// Replica is an assignment id; empty picks the resource's first
	// ready replica.
	Replica   string
	Follow    bool
	TailLines int
}

// Logs streams a replica's output to w: global → the replica's region →
// its node's agent → the provider. It returns when the output ends or,
// when following, when ctx is done.
func (s *Service) Logs(ctx context.Context, tenant, name string, o LogOptions, w io.Writer) error {
	reps, err := s.ListReplicas(ctx, tenant, name)
	if err != nil {
		return err
	}
	if len(reps.Items) == 0 {
		return fmt.Errorf("resource %q has no replicas to read logs from: %w", name, api.ErrNotFound)
	}
	var pick *api.Replica
	for i := range reps.Items {
		r := &reps.Items[i]
		switch {
		case o.Replica != "" && r.ID == o.Replica:
			pick = r
		case o.Replica == "" && pick == nil && r.Phase == api.PhaseReady:
			pick = r
		}
	}
	if pick == nil {
		if o.Replica != "" {
			return fmt.Errorf("resource %q has no replica %q: %w", name, o.Replica, api.ErrNotFound)
		}
		pick = &reps.Items[0]
	}
	c, err := s.regionClient(ctx, pick.Region)
	if err != nil {
		return err
	}
	if tenant == "" {
		tenant = pick.Tenant
	}
	stream, err := c.Logs(ctx, &resourcev1.LogsRequest{
		Tenant: tenant, Resource: name, Replica: pick.ID, Follow: o.Follow, TailLines: int32(o.TailLines),
	})
	if err != nil {
		return err
	}
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if _, err := w.Write(chunk.GetData()); err != nil {
			return nil // the client went away
		}
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
}

// EventQuery selects events.
type EventQuery struct {
	// Region limits the events to one region; empty means every region.
	Region string
	// After is a cursor: a region's event id (with Region), or the
	// composite cursor a previous answer returned.
	After  string
	Limit  int
	Object string
}

// EventList is a page of events, oldest first, and the cursor to ask for
// what comes after them.
type EventList struct {
	Items       []api.Event `json:"items"`
	Cursor      string      `json:"cursor,omitempty"`
	Unreachable []string    `json:"unreachable,omitempty"`
}

// ListEvents gathers events from the regions. Each region keeps its own
// stream; the cursor carries one position per region
// ("dev-1=1716-0,dev-2=1716-3"), so that following several regions
// misses nothing and repeats nothing.
func (s *Service) ListEvents(ctx context.Context, q EventQuery) (EventList, error) {
	if _, err := authorize(ctx, useNodes); err != nil {
		return EventList{}, err
	}
	if q.Limit <= 0 {
		q.Limit = 100
	}
	if q.Limit > 1000 {
		return EventList{}, api.Invalid("limit", "%d is more than 1000", q.Limit)
	}
	cursors := parseCursor(q.After, q.Region)
	var names []string
	if q.Region != "" {
		if err := api.ValidateName("region", q.Region); err != nil {
			return EventList{}, err
		}
		names = []string{q.Region}
	} else {
		regions, err := s.listRegions(ctx)
		if err != nil {
			return EventList{}, err
		}
		names = regionNames(regions)
	}
	var out EventList
	next := map[string]string{}
	for k, v := range cursors {
		next[k] = v
	}
	type batch struct {
		region string
		items  []*resourcev1.Event
	}
	results := make(chan batch, len(names))
	out.Unreachable = s.fanOut(ctx, names, func(ctx context.Context, region string, c regionv1.RegionServiceClient) error {
		resp, err := c.ListEvents(ctx, &regionv1.ListEventsRequest{After: cursors[region], Limit: int32(q.Limit), Object: q.Object})
		if err != nil {
			return err
		}
		results <- batch{region, resp.GetItems()}
		return nil
	})
	close(results)
	for b := range results {
		for _, e := range b.items {
			ev := api.Event{
				ID: e.GetId(), Type: e.GetType(), Reason: e.GetReason(), Object: e.GetObject(),
				Region: e.GetRegion(), Message: e.GetMessage(), Fields: e.GetFields(),
			}
			if e.GetTime() != nil {
				ev.Time = e.GetTime().AsTime()
			}
			if ev.Region == "" {
				ev.Region = b.region
			}
			out.Items = append(out.Items, ev)
			next[b.region] = ev.ID
		}
	}
	slices.SortStableFunc(out.Items, func(a, b api.Event) int { return a.Time.Compare(b.Time) })
	if len(out.Items) > q.Limit {
		out.Items = out.Items[len(out.Items)-q.Limit:]
	}
	if out.Items == nil {
		out.Items = []api.Event{}
	}
	out.Cursor = formatCursor(next)
	return out, nil
}

func parseCursor(after, region string) map[string]string {
	out := map[string]string{}
	if after == "" {
		return out
	}
	if !strings.Contains(after, "=") {
		out[region] = after
		return out
	}
	for _, part := range strings.Split(after, ",") {
		k, v, ok := strings.Cut(part, "=")
		if ok && k != "" {
			out[k] = v
		}
	}
	return out
}

func formatCursor(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		if m[k] != "" {
			parts = append(parts, k+"="+m[k])
		}
	}
	return strings.Join(parts, ",")
}

// ---- REST ----

// logs streams text/plain: GET /v1/resources/{name}/logs?replica=&follow=&tail=
func (h *rest) logs(w http.ResponseWriter, r *http.Request) {
	name, err := pathName(r, "name", "name")
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	o := LogOptions{Replica: q.Get("replica")}
	if o.Follow, err = boolParam(q.Get("follow"), "follow"); err != nil {
		h.writeError(w, r, err)
		return
	}
	if v := q.Get("tail"); v != "" {
		if o.TailLines, err = strconv.Atoi(v); err != nil || o.TailLines < 0 {
			h.writeError(w, r, api.Invalid("tail", "%q is not a number of lines", v))
			return
		}
	}
	lw := &lazyWriter{w: w}
	err = h.svc.Logs(r.Context(), q.Get("tenant"), name, o, lw)
	if err != nil && !lw.started {
		h.writeError(w, r, err)
		return
	}
	if err != nil {
		fmt.Fprintf(w, "\n[strata: log stream ended: %v]\n", err)
	}
}

// lazyWriter sends the streaming headers only with the first byte, so
// that an error before any output still becomes a JSON error.
type lazyWriter struct {
	w       http.ResponseWriter
	started bool
}

func (l *lazyWriter) Write(p []byte) (int, error) {
	if !l.started {
		l.started = true
		l.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		l.w.Header().Set("X-Content-Type-Options", "nosniff")
		l.w.WriteHeader(http.StatusOK)
	}
	return l.w.Write(p)
}

func (l *lazyWriter) Flush() {
	if f, ok := l.w.(http.Flusher); ok {
		f.Flush()
	}
}

// events answers GET /v1/events, or with watch=true streams server-sent
// events, polling the regions once a second.
func (h *rest) events(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	eq := EventQuery{Region: q.Get("region"), After: q.Get("after"), Object: q.Get("object")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			h.writeError(w, r, api.Invalid("limit", "%q is not a number", v))
			return
		}
		eq.Limit = n
	}
	watch, err := boolParam(q.Get("watch"), "watch")
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	page, err := h.svc.ListEvents(r.Context(), eq)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if !watch {
		writeJSON(w, http.StatusOK, page)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		h.writeError(w, r, fmt.Errorf("streaming is not supported here: %w", api.ErrUnavailable))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	send := func(p EventList) bool {
		for _, ev := range p.Items {
			b, _ := json.Marshal(ev)
			if _, err := fmt.Fprintf(w, "id: %s\ndata: %s\n\n", p.Cursor, b); err != nil {
				return false
			}
		}
		flusher.Flush()
		return true
	}
	if !send(page) {
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
		next, err := h.svc.ListEvents(r.Context(), eq)
		if err != nil {
			continue
		}
		if next.Cursor != "" {
			page.Cursor = next.Cursor
		}
		if len(next.Items) > 0 && !send(next) {
			return
		}
		// A comment line keeps proxies from closing an idle stream.
		if _, err := io.WriteString(w, ": keepalive\n\n"); err != nil {
			return
		}
		flusher.Flush()
	}
}

func boolParam(v, field string) (bool, error) {
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, api.Invalid(field, "%q is not true or false", v)
	}
	return b, nil
}
