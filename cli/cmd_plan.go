package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratahq/strata/cli/client"
	"github.com/stratahq/strata/cli/manifest"
	"github.com/stratahq/strata/cli/printers"
	"github.com/stratahq/strata/internal/api"
)

func (a *App) planCommand() *cobra.Command {
	var lose, scales, files []string
	var req client.PlanWrite
	cmd := a.command(&cobra.Command{
		Use:   "plan [--lose-region REGION]... [--scale RESOURCE=N]... [-f FILE]...",
		Short: "Say what losing regions, scaling or applying manifests would do, and do nothing",
		Long: `Ask the global API what the actions would do, together, without doing
them: which replicas would move from which region to which, which would
find room in no region (the regions' headroom), what the resources'
status would say of their split and reserve, and which changes the API
would refuse for a quota (blocked). The master's own placement code
decides, on what the global tier knows now.

--lose-region takes regions as Down for longer than any failover.after
(it needs a role that reads regions). --scale and -f go through the
admission of a real write (validation, references, quota) and are not
committed; -f takes the resources of manifests (other kinds are ignored).`,
		Example: `  stratactl plan --lose-region dev-1
  stratactl plan --scale web=12
  stratactl plan -f web.yaml -o json`,
		Args: args(cobra.NoArgs),
	}, action{
		check: func(*cobra.Command, []string) error {
			req = client.PlanWrite{LoseRegions: lose}
			for _, s := range scales {
				name, n, ok := strings.Cut(s, "=")
				count, err := strconv.Atoi(n)
				if !ok || name == "" || err != nil {
					return usageErrorf("--scale %q is not RESOURCE=N", s)
				}
				if req.Scale == nil {
					req.Scale = map[string]int{}
				}
				req.Scale[name] = count
			}
			if len(files) > 0 {
				objs, err := a.readManifests(files)
				if err != nil {
					return err
				}
				for _, o := range objs {
					if o.Resource != nil {
						req.Apply = append(req.Apply, resourceWrite(o))
					}
				}
				if len(req.Apply) == 0 {
					return usageErrorf("no resources in %s", strings.Join(files, ", "))
				}
			}
			if len(req.LoseRegions)+len(req.Scale)+len(req.Apply) == 0 {
				return usageErrorf("plan needs an action: --lose-region, --scale or -f")
			}
			return nil
		},
		show: func(ctx context.Context, c *client.Client, _ []string) (view, error) {
			p, err := c.Resources.Plan(ctx, req)
			if err != nil {
				return view{}, err
			}
			return view{data: p, text: func(w io.Writer, _ time.Time) error { return writePlan(w, p) }}, nil
		},
	})
	cmd.Flags().StringArrayVar(&lose, "lose-region", nil, "a region taken as Down (repeatable)")
	cmd.Flags().StringArrayVar(&scales, "scale", nil, "RESOURCE=N: a resource scaled to N replicas (repeatable)")
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "manifest file, directory or - for stdin, whose resources are applied (repeatable)")
	return cmd
}

// resourceWrite is a manifest's resource as a client writes it.
func resourceWrite(o manifest.Object) client.ResourceWrite {
	w := client.ResourceWrite{Resource: *o.Resource}
	if o.ReplicasSet {
		n := o.Resource.Replicas
		w.Replicas = &n
	}
	return w
}

// writePlan prints a plan: a table of the resources it changes, then
// their notes and the totals.
func writePlan(w io.Writer, p api.Plan) error {
	t := printers.Table{Header: []string{"RESOURCE", "BEFORE", "AFTER", "MOVES", "UNFIT"}}
	var notes []string
	for _, r := range p.Resources {
		ref := r.Tenant + "/" + r.Name
		t.Rows = append(t.Rows, []string{ref, shares(r.Before), shares(r.After), movesText(r.Moves), strconv.Itoa(r.Unfit)})
		for _, n := range []struct{ what, text string }{
			{"blocked", r.Blocked}, {"reason", r.Reason}, {"split", r.Split},
		} {
			if n.text != "" {
				notes = append(notes, fmt.Sprintf("%s %s: %s", ref, n.what, n.text))
			}
		}
		if rs := r.Reserve; rs != nil {
			verdict := "short"
			if rs.Holds {
				verdict = "holds"
			}
			notes = append(notes, fmt.Sprintf("%s reserve %s: %s", ref, verdict, rs.Message))
		}
	}
	if len(t.Rows) == 0 {
		fmt.Fprintln(w, "No resource would change.")
	} else if err := t.Write(w); err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintln(w, printers.Cell(n))
	}
	_, err := fmt.Fprintf(w, "%d replicas would move, %d would find no room, %d changes blocked. Nothing was changed.\n", p.Moved, p.Unfit, p.Blocked)
	return err
}

// shares is replicas per region, by name: "dev-1:3 dev-2:1", or "-".
func shares(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, fmt.Sprintf("%s:%d", k, m[k]))
	}
	return strings.Join(out, " ")
}

// movesText is a plan's moves: "dev-1→dev-2 2, +dev-3 1, -dev-4 1".
func movesText(ms []api.ReplicaMove) string {
	if len(ms) == 0 {
		return "-"
	}
	var out []string
	for _, m := range ms {
		switch {
		case m.From == "":
			out = append(out, fmt.Sprintf("+%s %d", m.To, m.Replicas))
		case m.To == "":
			out = append(out, fmt.Sprintf("-%s %d", m.From, m.Replicas))
		default:
			out = append(out, fmt.Sprintf("%s→%s %d", m.From, m.To, m.Replicas))
		}
	}
	return strings.Join(out, ", ")
}
