package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratahq/strata/cli/client"
	"github.com/stratahq/strata/cli/printers"
)

// resolveTypes are the record types resolve asks for.
var resolveTypes = []string{"A", "AAAA", "SRV"}

func (a *App) resolveCommand() *cobra.Command {
	var q client.ResolveQuery
	cmd := a.command(&cobra.Command{
		Use:   "resolve NAME",
		Short: "Show what a replica's name server answers for a name",
		Long: `resolve shows what the name server of a node answers a replica of your
tenant (or --tenant's) for NAME, without a shell in the replica: from the
replicas the regions hold now, the ready ones only.

Names, under the zone strata.internal:

  <resource>.<tenant>.<region>.strata.internal            the resource's ready replicas in a region
  <replica>.<resource>.<tenant>.<region>.strata.internal  one replica, while it is ready
  <resource>.<tenant>.strata.internal                     the resource in the node's region, else
                                                          the first other region with ready replicas
  _<port>._<proto>.<resource>.<tenant>[.<region>].strata.internal
                                                          SRV: the resource's named port

A name outside the zone, such as a bare "db", is completed as a replica's
search path would: <name>.<tenant>.<region>.strata.internal with --region,
else <name>.<tenant>.strata.internal. --region is the region of the node
that answers (default: the name's, else the resource's first scheduled
region).

The answer is printed even when it is no record: NXDOMAIN (no such name,
or another tenant's) and NOERROR without records exit 0.`,
		Example: `  stratactl resolve db
  stratactl resolve db --region eu-west
  stratactl resolve web-1.web.acme.eu-west.strata.internal
  stratactl resolve _http._tcp.web --type SRV -o json`,
		Args: args(cobra.ExactArgs(1)),
	}, action{
		formats: []string{"table", "json", "yaml"},
		check: func(_ *cobra.Command, _ []string) error {
			q.Type = strings.ToUpper(q.Type)
			if !slices.Contains(resolveTypes, q.Type) {
				return usageErrorf("--type %q: want one of %s", q.Type, strings.Join(resolveTypes, ", "))
			}
			return nil
		},
		show: func(ctx context.Context, c *client.Client, argv []string) (view, error) {
			q := q
			q.Name = argv[0]
			res, err := c.Resolve(ctx, q)
			if err != nil {
				return view{}, err
			}
			return view{
				text:     func(w io.Writer, _ time.Time) error { return writeResolution(w, res) },
				data:     res,
				warnings: unreachable(res.Unreachable),
			}, nil
		},
	})
	f := cmd.Flags()
	f.StringVar(&q.Type, "type", "A", "record type: A, AAAA or SRV")
	f.StringVar(&q.Region, "region", "", "region of the node that answers (default: the name's, else the resource's first)")
	_ = cmd.RegisterFlagCompletionFunc("type", cobra.FixedCompletions(resolveTypes, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// writeResolution prints an answer: its records (answers, then the
// additional ones) as a table, else what the answer says.
func writeResolution(w io.Writer, res client.Resolution) error {
	if res.Rcode != "NOERROR" {
		_, err := fmt.Fprintf(w, "%s %s: %s\n", res.Name, res.Type, res.Rcode)
		return err
	}
	if len(res.Answers) == 0 {
		_, err := fmt.Fprintf(w, "%s %s: no records (NOERROR)\n", res.Name, res.Type)
		return err
	}
	t := printers.Table{Header: []string{"NAME", "TYPE", "TTL", "DATA"}}
	for _, r := range append(slices.Clone(res.Answers), res.Additional...) {
		t.Rows = append(t.Rows, []string{r.Name, r.Type, strconv.FormatUint(uint64(r.TTL), 10), r.Data})
	}
	return t.Write(w)
}
