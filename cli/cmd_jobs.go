package cli

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratahq/strata/cli/client"
	"github.com/stratahq/strata/cli/printers"
	"github.com/stratahq/strata/internal/api"
)

// jobsCommand lists Jobs, or one Job's runs and attempts. Jobs are
// created, changed and deleted as every resource is (apply, delete).
func (a resourceCommands) jobsCommand() *cobra.Command {
	var selector string
	cmd := a.command(&cobra.Command{
		Use:   "jobs [NAME]",
		Short: "List Jobs with their completions, or one Job's attempts (node, exit code, times)",
		Long: `Without NAME: every Job of the tenant, with the state of its newest run.
With NAME: the Job's kept runs and their attempts; an attempt's output is
read with "stratactl logs NAME --replica ATTEMPT" until its TTL passes.`,
		Example: `  stratactl apply -f backup-job.yaml
  stratactl jobs
  stratactl jobs backup
  stratactl logs backup --replica backup-x1y2z3w4
  stratactl delete resource backup`,
		Args: args(cobra.MaximumNArgs(1)),
	}, action{show: func(ctx context.Context, c *client.Client, names []string) (view, error) {
		if len(names) == 1 {
			r, err := c.Resources.Get(ctx, names[0])
			if err != nil {
				return view{}, err
			}
			if r.Kind != api.KindJob {
				return view{}, usageErrorf("%s is a %s, not a Job", r.Name, r.Kind)
			}
			return view{table: func(_ bool, now time.Time) printers.Table { return printers.JobAttempts(r, now) }, data: r}, nil
		}
		items, err := c.Resources.List(ctx, client.ResourceQuery{Selector: selector, Kind: string(api.KindJob)})
		return view{table: func(_ bool, now time.Time) printers.Table { return printers.Jobs(items, now) }, data: items}, err
	}})
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "label selector: k=v, k!=v, k in (a,b), k, !k; comma-separated")
	return cmd
}
