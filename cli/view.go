package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/stratahq/strata/cli/manifest"
	"github.com/stratahq/strata/cli/printers"
	"github.com/stratahq/strata/internal/backoff"
)

// view is what get (and describe) show: a table, and the data behind it for
// -o json|yaml.
type view struct {
	table func(wide bool, now time.Time) printers.Table
	// text renders non-tabular output (describe); it replaces table.
	text func(w io.Writer, now time.Time) error
	data any
	// empty is said on stderr, instead of the table, when it has no rows;
	// without it an empty table still shows its header.
	empty string
	// warnings go to stderr: a partial list (regions that did not answer).
	warnings []string
}

// list is what -o json|yaml prints for several objects; apply takes it
// back.
type list struct {
	Kind  manifest.Kind `json:"kind"`
	Items []any         `json:"items"`
}

func listOf[T any](items []T, doc func(T) any) list {
	l := list{Kind: manifest.KindList, Items: make([]any, 0, len(items))}
	for _, it := range items {
		if doc != nil {
			l.Items = append(l.Items, doc(it))
		} else {
			l.Items = append(l.Items, it)
		}
	}
	return l
}

// render writes v in format f to w, and its warnings (and "no X found")
// to errw.
func (a *App) render(w, errw io.Writer, f printers.Format, v view, now time.Time) error {
	for _, warn := range v.warnings {
		fmt.Fprintln(errw, "warning:", warn)
	}
	if f.Structured() {
		return printers.Write(w, f, v.data)
	}
	if v.text != nil {
		return v.text(w, now)
	}
	t := v.table(f == printers.FormatWide, now)
	if len(t.Rows) == 0 && v.empty != "" {
		fmt.Fprintln(errw, v.empty)
		return nil
	}
	return t.Write(w)
}

// watch renders fetch's view every poll interval in which it changed,
// until ctx is done (Ctrl-C), which is a clean stop. Errors after the
// first render are reported and retried: a watch rides out a server
// restart.
func (a *App) watch(ctx context.Context, f printers.Format, fetch func(context.Context) (view, error)) error {
	// Changes are detected on the view rendered at one fixed time, so that
	// an AGE ticking over does not count as a change.
	ref := a.now()
	// NUL never renders, so the first view always shows.
	last, lastErr := "\x00", ""
	for first := true; ; first = false {
		v, err := fetch(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && first:
			return err
		case err != nil:
			if msg := err.Error(); msg != lastErr {
				fmt.Fprintf(a.io.Err, "warning: %v (retrying every %s)\n", err, a.pollInterval)
				lastErr = msg
			}
		default:
			lastErr = ""
			var key bytes.Buffer
			if err := a.render(&key, io.Discard, f, v, ref); err != nil {
				return err
			}
			if k := key.String(); k != last {
				if a.isTerminal(a.io.Out) {
					fmt.Fprint(a.io.Out, "\x1b[H\x1b[2J") // clear the screen, like watch(1)
				} else if !first {
					fmt.Fprintln(a.io.Out)
				}
				if f.Structured() {
					_, err = io.WriteString(a.io.Out, k)
				} else {
					err = a.render(a.io.Out, a.io.Err, f, v, a.now())
				}
				if err != nil {
					return err
				}
				last = k
			}
		}
		if backoff.Sleep(ctx, a.pollInterval) != nil {
			return nil
		}
	}
}

// indent prefixes every line of s.
func indent(s, prefix string) string {
	lines := strings.SplitAfter(s, "\n")
	var b strings.Builder
	for _, l := range lines {
		if l != "" {
			b.WriteString(prefix + l)
		}
	}
	return b.String()
}
