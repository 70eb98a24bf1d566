package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratahq/strata/cli/client"
	"github.com/stratahq/strata/cli/printers"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/backoff"
)

// eventCommands is the events command: a page of events, or following them
// with -w.
type eventCommands struct{ *App }

type eventsOptions struct {
	region string
	about  string
	watch  bool
	limit  int
}

// maxEventsLimit is the most events the API returns in one answer.
const maxEventsLimit = 1000

func (a eventCommands) eventsCommand() *cobra.Command {
	var o eventsOptions
	cmd := a.command(&cobra.Command{
		Use:   "events [--region R] [--for OBJECT] [-w]",
		Short: "Show what happened: scheduling, transitions, node and operator actions",
		Long: `Show the events the regions recorded, oldest first: scheduling decisions,
state transitions, node transitions, operator actions. -w keeps printing new
ones until Ctrl-C.

--for narrows to one object and what is below it:
  resource/NAME         a resource of your tenant (or --tenant's)
  node/REGION/NODE      a node (also node/NODE)
  replica/ID, region/NAME`,
		Example: `  stratactl events --region dev-1
  stratactl events --for resource/web -w
  stratactl events --for node/dev-1/dev-1-a`,
		Args: args(cobra.NoArgs),
	}, action{
		check: func(*cobra.Command, []string) error {
			if o.limit < 1 || o.limit > maxEventsLimit {
				return usageErrorf("--limit must be between 1 and %d", maxEventsLimit)
			}
			return nil
		},
		stream: func(ctx context.Context, c *client.Client, _ []string, format printers.Format) error {
			q, err := a.eventQuery(ctx, c, o)
			if err != nil {
				return err
			}
			return a.runEvents(ctx, c, q, format, o.watch)
		},
	})
	f := cmd.Flags()
	f.StringVar(&o.region, "region", "", "only this region's events")
	f.StringVar(&o.about, "for", "", "only events about this object: resource/NAME, node/REGION/NODE, replica/ID")
	f.BoolVarP(&o.watch, "watch", "w", false, "keep printing new events until Ctrl-C")
	f.IntVar(&o.limit, "limit", 100, "how many of the latest events to start with")
	return cmd
}

// eventQuery turns the flags into the API's query. Regions name a
// resource's events "resource/<tenant>/<name>", so --for resource/NAME
// needs the tenant: --tenant, else the resource's own, else "default"
// (a resource that is gone).
func (a eventCommands) eventQuery(ctx context.Context, c *client.Client, o eventsOptions) (client.EventQuery, error) {
	q := client.EventQuery{Region: o.region, Limit: o.limit}
	if o.about == "" {
		return q, nil
	}
	kind, rest, ok := strings.Cut(o.about, "/")
	if !ok || rest == "" {
		return q, usageErrorf("--for %q: want TYPE/NAME, e.g. resource/web or node/dev-1/dev-1-a", o.about)
	}
	switch kind {
	case "resource", "res":
		q.Object = "resource/" + rest
		if !strings.Contains(rest, "/") {
			tenant, err := a.resourceTenant(ctx, c, rest)
			if err != nil {
				return q, err
			}
			q.Object = "resource/" + tenant + "/" + rest
		}
	case "node", "no":
		if region, node, ok := splitRef(rest); ok {
			if q.Region != "" && q.Region != region {
				return q, usageErrorf("--for %s is in region %s, not --region %s", o.about, region, q.Region)
			}
			q.Region, rest = region, node
		}
		q.Object = "node/" + rest
	default:
		q.Object = o.about
	}
	return q, nil
}

// resourceTenant returns the tenant of a resource for event objects.
func (a eventCommands) resourceTenant(ctx context.Context, c *client.Client, name string) (string, error) {
	if c.Tenant() != "" {
		return c.Tenant(), nil
	}
	r, err := c.Resources.Get(ctx, name)
	switch {
	case client.IsNotFound(err):
		return "default", nil
	case err != nil:
		return "", err
	}
	return r.Tenant, nil
}

func (a eventCommands) runEvents(ctx context.Context, c *client.Client, q client.EventQuery, format printers.Format, watch bool) error {
	page, err := c.Events.List(ctx, q)
	if err != nil {
		return err
	}
	for _, w := range unreachable(page.Unreachable) {
		fmt.Fprintln(a.io.Err, "warning:", w)
	}
	wide := format == printers.FormatWide
	if !watch {
		if format.Structured() {
			return printers.Write(a.io.Out, format, listOf(page.Items, nil))
		}
		if len(page.Items) == 0 {
			fmt.Fprintln(a.io.Err, "no events found")
			return nil
		}
		return printers.Events(page.Items, wide, a.now()).Write(a.io.Out)
	}

	// Watching: every event as it comes, a row (or a JSON line, or a YAML
	// document) at a time.
	var emit func(api.Event) error
	if format.Structured() {
		emit = func(e api.Event) error { return a.writeEvent(a.io.Out, format, e) }
		for _, e := range page.Items {
			if err := emit(e); err != nil {
				return err
			}
		}
	} else {
		var rows [][]string
		for _, e := range page.Items {
			rows = append(rows, printers.EventRow(e, wide, a.now()))
		}
		// Room for the usual widths, so that later rows line up.
		t, err := printers.NewStreamTable(a.io.Out, printers.EventHeader(wide), rows, 9, 7, 16, 20, 6)
		if err != nil {
			return err
		}
		emit = func(e api.Event) error { return t.Row(printers.EventRow(e, wide, a.now())) }
	}
	q.After = page.Cursor
	return a.followEvents(ctx, c, q, emit)
}

// followEvents streams events after q.After to emit until ctx is done,
// reconnecting from the last cursor when the stream breaks (a server
// restart), so that nothing is missed or repeated. A server that answers
// but cannot stream is polled instead, once per poll interval, with the
// same cursor.
func (a eventCommands) followEvents(ctx context.Context, c *client.Client, q client.EventQuery, emit func(api.Event) error) error {
	// Reconnecting a stream backs off (up to 10s); polling waits the
	// poll interval.
	f := &follower{a: a.App, c: c, q: q, emit: emit,
		retry: backoff.Backoff{Min: a.pollInterval, Max: max(a.pollInterval, 10*time.Second)}}
	for {
		err := f.pass(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err := f.next(err); err != nil {
			return err
		}
		pause := a.pollInterval
		if !f.polling {
			pause = f.retry.Next()
		}
		if backoff.Sleep(ctx, pause) != nil {
			return nil
		}
	}
}

// follower is followEvents' state: the cursor (in q), whether the server
// is polled instead of streamed, and the last warning, not repeated.
type follower struct {
	a       *App
	c       *client.Client
	q       client.EventQuery
	emit    func(api.Event) error
	retry   backoff.Backoff
	polling bool
	lastErr string
}

// pass streams events (or polls once) from the cursor, moving it.
func (f *follower) pass(ctx context.Context) error {
	if !f.polling {
		return f.c.Events.Watch(ctx, f.q, func(e api.Event, cursor string) error {
			if cursor != "" {
				f.q.After = cursor
			}
			f.retry.Reset()
			f.lastErr = ""
			return f.emit(e)
		})
	}
	page, err := f.c.Events.List(ctx, f.q)
	if err != nil {
		return err
	}
	f.lastErr = ""
	for _, e := range page.Items {
		if err := f.emit(e); err != nil {
			return err
		}
	}
	if page.Cursor != "" {
		f.q.After = page.Cursor
	}
	return nil
}

// next decides what follows a pass that ended with err: go on (nil), with
// a warning, polling from now on for a server that cannot stream, or stop
// (the error).
func (f *follower) next(err error) error {
	var conn *client.ConnError
	switch {
	case f.polling && err == nil:
		// Polled: ask again after the poll interval.
	case err == nil, errors.Is(err, io.EOF):
		// The server ended the stream: resume from the cursor.
	case errors.As(err, &conn), client.StatusOf(err) >= 500 && f.polling:
		f.warn(err, "events (retrying)")
	case client.StatusOf(err) >= 500:
		f.warn(err, fmt.Sprintf("the server cannot stream events; asking every %s instead", f.a.pollInterval))
		f.polling = true
	default:
		return err
	}
	return nil
}

func (f *follower) warn(err error, what string) {
	if msg := err.Error(); msg != f.lastErr {
		fmt.Fprintf(f.a.io.Err, "warning: %s: %v\n", what, err)
		f.lastErr = msg
	}
}

func (a eventCommands) writeEvent(w io.Writer, f printers.Format, e api.Event) error {
	if f == printers.FormatYAML {
		if _, err := io.WriteString(w, "---\n"); err != nil {
			return err
		}
		return printers.WriteYAML(w, e)
	}
	// One compact line per event, for jq and friends.
	return printers.WriteJSONLine(w, e)
}
