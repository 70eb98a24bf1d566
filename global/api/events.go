package api

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/events"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
)

// Events are the regions' events, each region keeping its own stream,
// gathered with the global tier's own: the operators' actions on
// resources (scaled, rolled back, rollout paused, deletion requested),
// which happen here and in no region.
type Events struct {
	fan *regionFan
	own events.Store
	log *slog.Logger
}

// globalCursor is the global stream's key in a cursor: not a region
// name (those are DNS labels), so it cannot clash with one.
const globalCursor = "@global"

// recordTimeout bounds the write of an action's event: the action is
// done, and an event store in trouble must not hold its answer long.
const recordTimeout = 2 * time.Second

// record appends an operator's action on resource tenant/name to the
// global stream. The action has happened: a failure to record it is
// logged, not returned (events are for people, not a source of truth).
func (e *Events) record(ctx context.Context, tenant, name, reason, msg string) {
	fields := map[string]string{}
	if id, ok := IdentityFrom(ctx); ok {
		// The token's id, never its secret: it names who acted.
		fields["token"] = id.TokenID
		fields["role"] = string(id.Role)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	ev := events.Event{Reason: reason, Object: "resource/" + tenant + "/" + name, Message: msg, Fields: fields}
	if _, err := e.own.Append(ctx, ev); err != nil {
		e.log.Warn("cannot record an event", "reason", reason, "object", ev.Object, "err", err)
	}
}

// authorize checks that the caller may read the events q selects and
// returns the tenant whose events alone the caller sees ("" for every
// event): admin and infra tokens see every event, the nodes' and
// regions' included; a tenant's tokens see their tenant's resources' and
// replicas' events, and are refused another tenant's resource object.
func (e *Events) authorize(ctx context.Context, q EventQuery) (string, error) {
	id, err := authorize(ctx, readEvents)
	if err != nil {
		return "", err
	}
	if rest, ok := strings.CutPrefix(q.Object, "resource/"); ok {
		tenant, _, _ := strings.Cut(rest, "/")
		if tenant == "" {
			return "", api.Invalid("object", "%q names no tenant: want resource/TENANT/NAME", q.Object)
		}
		if id.may(seeEverything) {
			noteTenant(ctx, id, tenant)
			return "", nil
		}
		if _, err := tenantScope(ctx, readEvents, tenant); err != nil {
			return "", err
		}
	}
	if id.may(seeEverything) {
		return "", nil
	}
	return id.Tenant, nil
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
	Items  []api.Event `json:"items"`
	Cursor string      `json:"cursor,omitempty"`
	// Continue is Cursor when the page is full: more events may follow
	// at once (ask with continue=, or after=).
	Continue    string   `json:"continue,omitempty"`
	Unreachable []string `json:"unreachable,omitempty"`
}

// List gathers events from the regions. The cursor carries one position
// per region ("dev-1=1716-0,dev-2=1716-3"), so that following several
// regions misses nothing and repeats nothing. A tenant's token sees its
// tenant's events only (the regions filter them); admin and infra tokens
// see every event, the infrastructure's included.
func (e *Events) List(ctx context.Context, q EventQuery) (EventList, error) {
	tenant, err := e.authorize(ctx, q)
	if err != nil {
		return EventList{}, err
	}
	limit, err := api.PageSize(q.Limit)
	if err != nil {
		return EventList{}, err
	}
	if err := api.ValidateText("object", q.Object, 512); err != nil {
		return EventList{}, err
	}
	q.Limit = limit
	cursors, err := parseCursor(q.After, q.Region)
	if err != nil {
		return EventList{}, err
	}
	names, err := e.regions(ctx, q.Region)
	if err != nil {
		return EventList{}, err
	}
	type batch struct {
		region string
		items  []*resourcev1.Event
	}
	// Room for every region: no region's call waits on another's.
	results := make(chan batch, len(names))
	var out EventList
	out.Unreachable = e.fan.each(ctx, names, func(ctx context.Context, region string, c regionv1.RegionServiceClient) error {
		resp, err := c.ListEvents(ctx, &regionv1.ListEventsRequest{After: cursors[region], Limit: int32(q.Limit), Object: q.Object, Tenant: tenant})
		if err != nil {
			return err
		}
		results <- batch{region, resp.GetItems()}
		return nil
	})
	close(results)
	var got []streamEvent
	for b := range results {
		for _, p := range b.items {
			got = append(got, streamEvent{b.region, eventFromPB(b.region, p)})
		}
	}
	if q.Region == "" {
		own, err := e.ownEvents(ctx, cursors[globalCursor], q, tenant)
		if err != nil {
			return EventList{}, err
		}
		for _, ev := range own {
			got = append(got, streamEvent{globalCursor, ev})
		}
	}
	page, next := pageEvents(got, cursors, q)
	out.Items = make([]api.Event, len(page))
	for i, se := range page {
		out.Items[i] = se.ev
	}
	out.Cursor = formatCursor(next)
	if len(got) >= q.Limit {
		out.Continue = out.Cursor
	}
	return out, nil
}

// streamEvent is an event and the key of its stream in a cursor (its
// region, or globalCursor).
type streamEvent struct {
	stream string
	ev     api.Event
}

// pageEvents sorts the events gathered by time and keeps q.Limit of
// them: without a cursor the newest (the streams sent their newest),
// after one the oldest, so that the next page, from the cursor of what
// was kept, misses nothing. It returns them with the next cursor, which
// moves past what the page holds (a first page's also past the older
// events it leaves out, which the client did not ask for).
func pageEvents(got []streamEvent, cursors map[string]string, q EventQuery) ([]streamEvent, map[string]string) {
	slices.SortStableFunc(got, func(a, b streamEvent) int { return a.ev.Time.Compare(b.ev.Time) })
	page, seen := got, got
	if len(got) > q.Limit {
		if q.After == "" {
			page = got[len(got)-q.Limit:]
		} else {
			page, seen = got[:q.Limit], got[:q.Limit]
		}
	}
	next := maps.Clone(cursors)
	for _, se := range seen {
		next[se.stream] = se.ev.ID
	}
	return page, next
}

// ownEvents reads the global stream as a region reads its own: the
// newest Limit at first, then what comes after the cursor.
func (e *Events) ownEvents(ctx context.Context, after string, q EventQuery, tenant string) ([]api.Event, error) {
	evs, err := e.own.Range(ctx, events.Query{After: after, Limit: q.Limit, Object: q.Object, Tenant: tenant, Newest: after == ""})
	if err != nil {
		return nil, fmt.Errorf("global events: %w", err)
	}
	out := make([]api.Event, len(evs))
	for i, ev := range evs {
		out[i] = api.Event{ID: ev.ID, Time: ev.Time, Type: ev.Type, Reason: ev.Reason, Object: ev.Object, Tenant: ev.Tenant, Message: ev.Message, Fields: ev.Fields}
	}
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
	known, err := e.fan.dir.known(ctx)
	if err != nil {
		return nil, err
	}
	if !known(region) {
		return nil, api.NotFound("region", region)
	}
	return []string{region}, nil
}

func eventFromPB(region string, e *resourcev1.Event) api.Event {
	ev := api.Event{
		ID: e.GetId(), Type: e.GetType(), Reason: e.GetReason(), Object: e.GetObject(), Tenant: e.GetTenant(),
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

// parseCursor reads an after cursor: a composite one an answer returned
// ("dev-1=1716-0,dev-2=1716-3"), or one region's event id with region.
// Anything else is refused: taken for no cursor, it would replay every
// event from the oldest.
func parseCursor(after, region string) (map[string]string, error) {
	out := map[string]string{}
	if after == "" {
		return out, nil
	}
	bad := api.Invalid("after", "%q is not a cursor: send back the cursor an answer returned (region=id,...), or one event id with region", after)
	if !strings.Contains(after, "=") {
		if region == "" || events.ValidID(after) != nil {
			return nil, bad
		}
		out[region] = after
		return out, nil
	}
	for _, part := range strings.Split(after, ",") {
		k, v, _ := strings.Cut(part, "=")
		if (k != globalCursor && api.ValidateName("after", k) != nil) || events.ValidID(v) != nil || out[k] != "" {
			return nil, bad
		}
		out[k] = v
	}
	return out, nil
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
