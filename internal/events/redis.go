package events

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Stream entry fields. Short names because every event carries them; the
// Fields map goes in as "f:<key>" so it cannot collide with them.
const (
	fTime    = "time"
	fType    = "type"
	fReason  = "reason"
	fObject  = "object"
	fTenant  = "tenant"
	fRegion  = "region"
	fMessage = "msg"
	fExtra   = "f:"
	// rangeChunk is how many entries Range reads per round trip while it
	// filters client side.
	rangeChunk = 512
)

// Redis is a Store in one Redis stream per region.
type Redis struct {
	cli    redis.UniversalClient
	stream string
	maxLen int64
	cfg    config
}

var _ Store = (*Redis)(nil)

// NewRedis returns a store on stream (e.g. "strata:events:dev-1") capped at
// about maxLen entries (DefaultCapacity if <= 0). The cap is approximate
// (MAXLEN ~): Redis trims whole internal nodes, which keeps XADD O(1); the
// stream holds at least maxLen entries and at most a node (100 by default)
// more.
func NewRedis(cli redis.UniversalClient, stream string, maxLen int64, opts ...Option) *Redis {
	if maxLen <= 0 {
		maxLen = DefaultCapacity
	}
	return &Redis{cli: cli, stream: stream, maxLen: maxLen, cfg: newConfig(opts)}
}

// Append implements Store: one pipeline of XADDs.
func (r *Redis) Append(ctx context.Context, evs ...Event) ([]string, error) {
	values := make([][]any, len(evs))
	for i, ev := range evs {
		p, err := prepare(ev, r.cfg.now)
		if err != nil {
			return nil, err
		}
		values[i] = encode(p)
	}
	if len(values) == 0 {
		return nil, ctx.Err()
	}
	cmds := make([]*redis.StringCmd, len(values))
	_, err := r.cli.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, v := range values {
			cmds[i] = p.XAdd(ctx, &redis.XAddArgs{
				Stream: r.stream,
				MaxLen: r.maxLen,
				Approx: true,
				Values: v,
			})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("events: append %d to %s: %w", len(values), r.stream, err)
	}
	ids := make([]string, len(cmds))
	for i, c := range cmds {
		ids[i] = c.Val()
	}
	return ids, nil
}

// Range implements Store. Filters run client side, reading the stream in
// chunks; with neither filter a single XRANGE/XREVRANGE of Limit entries
// does it.
func (r *Redis) Range(ctx context.Context, q Query) ([]Event, error) {
	// The exclusive "(" form would accept IDs Memory rejects; parse first
	// so both stores agree on what a cursor is.
	lower := "-"
	if q.After != "" {
		if _, err := parseID(q.After); err != nil {
			return nil, err
		}
		lower = "(" + q.After
	}
	count := int64(rangeChunk)
	if !q.filters() && q.Limit > 0 {
		count = int64(q.Limit)
	}
	var out []Event
	upper := "+"
	for {
		var msgs []redis.XMessage
		var err error
		if q.Newest {
			msgs, err = r.cli.XRevRangeN(ctx, r.stream, upper, lower, count).Result()
		} else {
			msgs, err = r.cli.XRangeN(ctx, r.stream, lower, upper, count).Result()
		}
		if err != nil {
			return nil, fmt.Errorf("events: range %s: %w", r.stream, err)
		}
		for i := range msgs {
			ev := r.decode(ctx, &msgs[i])
			if !matches(&ev, &q) {
				continue
			}
			out = append(out, ev)
			if q.Limit > 0 && len(out) >= q.Limit {
				return r.order(out, q), nil
			}
		}
		if int64(len(msgs)) < count {
			return r.order(out, q), nil
		}
		next := "(" + msgs[len(msgs)-1].ID
		if q.Newest {
			upper = next
		} else {
			lower = next
		}
	}
}

func (r *Redis) order(evs []Event, q Query) []Event {
	if q.Newest {
		slices.Reverse(evs)
	}
	return evs
}

// Tail implements Store with XREAD BLOCK in a loop of short blocks.
func (r *Redis) Tail(ctx context.Context, after string, fn func([]Event) error) error {
	cur := after
	switch after {
	case "":
		cur = "0-0"
	case TailNew:
		// Resolve "$" once: passing "$" to every XREAD would lose events
		// appended between two reads.
		last, err := r.cli.XRevRangeN(ctx, r.stream, "+", "-", 1).Result()
		if err != nil {
			return fmt.Errorf("events: tail %s: %w", r.stream, err)
		}
		cur = "0-0"
		if len(last) > 0 {
			cur = last[0].ID
		}
	default:
		if _, err := parseID(after); err != nil {
			return err
		}
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		res, err := r.cli.XRead(ctx, &redis.XReadArgs{
			Streams: []string{r.stream, cur},
			Count:   tailBatch,
			Block:   r.cfg.block,
		}).Result()
		if errors.Is(err, redis.Nil) {
			continue // block timed out: check ctx, read again
		}
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return ctxErr
			}
			return fmt.Errorf("events: tail %s after %s: %w", r.stream, cur, err)
		}
		var batch []Event
		for _, s := range res {
			for i := range s.Messages {
				batch = append(batch, r.decode(ctx, &s.Messages[i]))
			}
		}
		if len(batch) == 0 {
			continue
		}
		cur = batch[len(batch)-1].ID
		if err := fn(batch); err != nil {
			return err
		}
	}
}

func encode(ev Event) []any {
	v := make([]any, 0, 14+2*len(ev.Fields))
	v = append(v,
		fTime, ev.Time.UTC().Format(time.RFC3339Nano),
		fType, ev.Type,
		fReason, ev.Reason,
		fObject, ev.Object,
		fTenant, ev.Tenant,
		fRegion, ev.Region,
		fMessage, ev.Message,
	)
	for k, val := range ev.Fields {
		v = append(v, fExtra+k, val)
	}
	return v
}

// decode is lenient: a stream entry written by someone else still shows
// up, with what could be read, rather than breaking every Range and Tail.
func (r *Redis) decode(ctx context.Context, m *redis.XMessage) Event {
	ev := Event{ID: m.ID}
	for k, raw := range m.Values {
		v, ok := raw.(string)
		if !ok {
			v = fmt.Sprint(raw)
		}
		switch k {
		case fTime:
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				r.cfg.logger.WarnContext(ctx, "events: bad time in stream entry", "stream", r.stream, "id", m.ID, "err", err)
			}
			ev.Time = t
		case fType:
			ev.Type = v
		case fReason:
			ev.Reason = v
		case fObject:
			ev.Object = v
		case fTenant:
			ev.Tenant = v
		case fRegion:
			ev.Region = v
		case fMessage:
			ev.Message = v
		default:
			if name, ok := strings.CutPrefix(k, fExtra); ok {
				if ev.Fields == nil {
					ev.Fields = make(map[string]string)
				}
				ev.Fields[name] = v
			}
		}
	}
	return ev
}
