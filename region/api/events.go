package api

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/events"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
)

// Emitter records events without blocking (events.Emitter).
type Emitter interface {
	Emit(ev events.Event)
}

// EventLog reads the region's event stream (events.Store).
type EventLog interface {
	Range(ctx context.Context, q events.Query) ([]events.Event, error)
}

// Events is what the API needs of the region's event stream: Emit for hot
// paths and Range for ListEvents. JoinEvents makes one from an
// events.Emitter and the events.Store it writes to.
type Events interface {
	Emitter
	EventLog
}

// JoinEvents pairs an emitter with the log operators read from.
func JoinEvents(e Emitter, l EventLog) Events {
	return struct {
		Emitter
		EventLog
	}{e, l}
}

// listEvents returns events after a cursor, oldest first; without a cursor
// the newest limit events (what an operator looking at a region wants).
// limit is as a list's (api.PageSize).
func listEvents(ctx context.Context, log EventLog, after string, limit int, object, tenant string) ([]events.Event, error) {
	limit, err := api.PageSize(limit)
	if err != nil {
		return nil, err
	}
	evs, err := log.Range(ctx, events.Query{
		After:  after,
		Limit:  limit,
		Object: object,
		Tenant: tenant,
		Newest: after == "",
	})
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	return evs, nil
}

func eventToPB(ev *events.Event) *resourcev1.Event {
	pb := &resourcev1.Event{
		Id:      ev.ID,
		Type:    ev.Type,
		Reason:  ev.Reason,
		Object:  ev.Object,
		Tenant:  ev.Tenant,
		Region:  ev.Region,
		Message: ev.Message,
		Fields:  ev.Fields,
	}
	if !ev.Time.IsZero() {
		pb.Time = timestamppb.New(ev.Time)
	}
	return pb
}
