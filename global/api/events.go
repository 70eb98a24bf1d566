package api

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/stratahq/strata/internal/api"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
)

// Events are the regions' events: each region keeps its own stream, and
// the global tier gathers them.
type Events struct {
	fan *regionFan
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

// List gathers events from the regions. The cursor carries one position
// per region ("dev-1=1716-0,dev-2=1716-3"), so that following several
// regions misses nothing and repeats nothing.
func (e *Events) List(ctx context.Context, q EventQuery) (EventList, error) {
	if _, err := authorize(ctx, useNodes); err != nil {
		return EventList{}, err
	}
	if q.Limit <= 0 {
		q.Limit = 100
	}
	if q.Limit > 1000 {
		return EventList{}, api.Invalid("limit", "%d is more than 1000", q.Limit)
	}
	names, err := e.regions(ctx, q.Region)
	if err != nil {
		return EventList{}, err
	}
	cursors := parseCursor(q.After, q.Region)
	type batch struct {
		region string
		items  []*resourcev1.Event
	}
	// Room for every region: no region's call waits on another's.
	results := make(chan batch, len(names))
	var out EventList
	out.Unreachable = e.fan.each(ctx, names, func(ctx context.Context, region string, c regionv1.RegionServiceClient) error {
		resp, err := c.ListEvents(ctx, &regionv1.ListEventsRequest{After: cursors[region], Limit: int32(q.Limit), Object: q.Object})
		if err != nil {
			return err
		}
		results <- batch{region, resp.GetItems()}
		return nil
	})
	close(results)
	next := maps.Clone(cursors)
	for b := range results {
		for _, p := range b.items {
			ev := eventFromPB(b.region, p)
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

// regions are the regions to ask: region, or every region for "".
func (e *Events) regions(ctx context.Context, region string) ([]string, error) {
	if region == "" {
		return e.fan.dir.names(ctx)
	}
	if err := api.ValidateName("region", region); err != nil {
		return nil, err
	}
	return []string{region}, nil
}

func eventFromPB(region string, e *resourcev1.Event) api.Event {
	ev := api.Event{
		ID: e.GetId(), Type: e.GetType(), Reason: e.GetReason(), Object: e.GetObject(),
		Region: e.GetRegion(), Message: e.GetMessage(), Fields: e.GetFields(),
	}
	if e.GetTime() != nil {
		ev.Time = e.GetTime().AsTime()
	}
	if ev.Region == "" {
		ev.Region = region
	}
	return ev
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
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] != "" {
			parts = append(parts, k+"="+m[k])
		}
	}
	return strings.Join(parts, ",")
}
